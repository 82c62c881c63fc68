/* The replay gate in C: mpicoll.engine.gate.Gate's accelerated twin.
 *
 * A face method asks the gate whether its call (name, algorithm= and up
 * to four argument objects) is the very call last kept or replayed
 * (the gate's ``entry``, a 13-tuple set by mpicoll.engine.replay); if so
 * the gate runs the entry's kept run and answers True, with nothing
 * made in Python between the face method and mpi4py's own call; else it
 * hands the call to its ``fallback`` (the table lookups, in Python).
 *
 * The checks are those of the Python twin, item for item (identity of
 * the objects, name and algorithm; each kept array's dtype; what each
 * message spec holds, as spec_holds); an exception the run raises
 * propagates, except the engine's ``Declined`` (another rank's counts
 * changed), which answers False.
 *
 * Cost: one vectorcall into C, a dozen pointer comparisons, a dtype read
 * per kept array and a list comparison per spec, and the run's own
 * call.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

/* the entry's items, as mpicoll.engine.replay lays them out */
enum { BUF, A, B, C, NAME, ALG, FIRST, DTYPE1, SECOND, DTYPE2, HELD, SPECS,
       RUN, ENTRY_LEN };

typedef struct {
    PyObject_HEAD
    PyObject *entry;     /* a tuple of ENTRY_LEN items */
    PyObject *fallback;  /* fallback(name, algorithm, buf, a, b, c) */
    PyObject *declined;  /* the exception that answers False */
    vectorcallfunc vectorcall;
} Gate;

static PyObject *str_dtype;

enum { RAN, MISSED, DECLINED, FAILED };  /* what gate_try did */

/* 1: the attribute dtype of obj is kept (a kept None: obj is no array,
 * whose dtype is always None); 0: not, or it raised (cleared) */
static int
same_dtype(PyObject *obj, PyObject *kept)
{
    if (kept == Py_None)
        return 1;
    PyObject *dtype = PyObject_GetAttr(obj, str_dtype);
    if (dtype == NULL) {
        PyErr_Clear();
        return 0;
    }
    int same = dtype == kept;
    Py_DECREF(dtype);
    return same;
}

/* spec_holds of mpicoll.engine.gate: 1 if the message spec (a list or
 * tuple) holds what the kept one held (first: its first item, None if it
 * was empty; copy: its items; dtype: its first item's, or None); 0 if
 * not, or if a comparison raised (cleared) */
static int
spec_holds(PyObject *spec, PyObject *first, PyObject *copy, PyObject *dtype)
{
    Py_ssize_t n = PySequence_Size(spec);
    if (n < 0) {
        PyErr_Clear();
        return 0;
    }
    if (n == 0) {
        int empty = PyObject_Not(copy);
        if (empty < 0)
            PyErr_Clear();
        return empty == 1;
    }
    PyObject *item = PyList_CheckExact(spec) ? PyList_GET_ITEM(spec, 0) :
        PyTuple_CheckExact(spec) ? PyTuple_GET_ITEM(spec, 0) : NULL;
    if (item != first)
        return 0;
    int same = PyObject_RichCompareBool(spec, copy, Py_EQ);
    if (same != 1) {
        if (same < 0)
            PyErr_Clear();
        return 0;
    }
    return same_dtype(item, dtype);
}

/* 1: each message spec among the call's objects holds what the entry
 * kept (held: a tuple of (position, first, copy, dtype)); 0: not */
static int
specs_hold(PyObject *held, PyObject *const *objects)
{
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(held); k++) {
        PyObject *const *h = &PyTuple_GET_ITEM(PyTuple_GET_ITEM(held, k), 0);
        Py_ssize_t i = PyLong_AsSsize_t(h[0]);
        if (i < 0 || i > 3) {
            PyErr_Clear();
            return 0;
        }
        if (!spec_holds(objects[i], h[1], h[2], h[3]))
            return 0;
    }
    return 1;
}

/* Run the gate's entry if the call (name, algorithm, objects: buf, a,
 * b, c) is the very call it kept: RAN, MISSED (not that call: nothing
 * ran), DECLINED (its run raised the gate's ``declined``: the call takes
 * the full path) or FAILED (the run raised anything else) */
static int
gate_try(Gate *g, PyObject *name, PyObject *algorithm,
         PyObject *const *objects)
{
    PyObject *entry = g->entry;
    PyObject *const *e = &PyTuple_GET_ITEM(entry, 0);
    if (e[BUF] != objects[0] || e[A] != objects[1] || e[B] != objects[2] ||
            e[C] != objects[3] || e[NAME] != name || e[ALG] != algorithm)
        return MISSED;
    Py_INCREF(entry);  /* the run may replace the gate's entry */
    int ran = MISSED;
    if (same_dtype(e[FIRST], e[DTYPE1]) && same_dtype(e[SECOND], e[DTYPE2])
            && (e[HELD] == Py_None || specs_hold(e[HELD], objects))) {
        PyObject *result = PyObject_CallNoArgs(e[RUN]);
        if (result != NULL) {
            Py_DECREF(result);
            ran = RAN;
        } else if (PyErr_ExceptionMatches(g->declined)) {
            PyErr_Clear();
            ran = DECLINED;
        } else {
            ran = FAILED;
        }
    }
    Py_DECREF(entry);
    return ran;
}

static PyObject *
gate_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                PyObject *kwnames)
{
    Gate *g = (Gate *)self;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if ((kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) || n < 3 ||
            n > 6) {
        PyErr_Format(PyExc_TypeError, "a gate takes 3 to 6 positional "
                     "arguments (name, algorithm, buf, a, b, c)");
        return NULL;
    }
    PyObject *objects[4] = {args[2], n > 3 ? args[3] : Py_None,
                            n > 4 ? args[4] : Py_None,
                            n > 5 ? args[5] : Py_None};
    switch (gate_try(g, args[0], args[1], objects)) {
    case RAN:
        Py_RETURN_TRUE;
    case DECLINED:
        Py_RETURN_FALSE;
    case FAILED:
        return NULL;
    }
    PyObject *full[] = {args[0], args[1], objects[0], objects[1], objects[2],
                        objects[3]};
    return PyObject_Vectorcall(g->fallback, full, 6, NULL);
}

static int
check_entry(PyObject *entry)
{
    if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != ENTRY_LEN) {
        PyErr_Format(PyExc_TypeError, "a gate's entry is a tuple of %d items",
                     ENTRY_LEN);
        return -1;
    }
    return 0;
}

static int
gate_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    Gate *g = (Gate *)self;
    static char *names[] = {"fallback", "declined", "entry", NULL};
    PyObject *fallback, *declined, *entry;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO", names, &fallback,
                                     &declined, &entry))
        return -1;
    if (check_entry(entry) < 0)
        return -1;
    Py_INCREF(fallback);
    Py_INCREF(declined);
    Py_INCREF(entry);
    Py_XSETREF(g->fallback, fallback);
    Py_XSETREF(g->declined, declined);
    Py_XSETREF(g->entry, entry);
    g->vectorcall = gate_vectorcall;
    return 0;
}

static PyObject *
gate_get_entry(PyObject *self, void *closure)
{
    PyObject *entry = ((Gate *)self)->entry;
    Py_INCREF(entry);
    return entry;
}

static int
gate_set_entry(PyObject *self, PyObject *value, void *closure)
{
    if (value == NULL || check_entry(value) < 0) {
        if (value == NULL)
            PyErr_SetString(PyExc_AttributeError, "entry cannot be deleted");
        return -1;
    }
    Py_INCREF(value);
    Py_SETREF(((Gate *)self)->entry, value);
    return 0;
}

static int
gate_traverse(PyObject *self, visitproc visit, void *arg)
{
    Gate *g = (Gate *)self;
    Py_VISIT(g->entry);
    Py_VISIT(g->fallback);
    Py_VISIT(g->declined);
    return 0;
}

static int
gate_clear(PyObject *self)
{
    Gate *g = (Gate *)self;
    Py_CLEAR(g->entry);
    Py_CLEAR(g->fallback);
    Py_CLEAR(g->declined);
    return 0;
}

static void
gate_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    gate_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyGetSetDef gate_getset[] = {
    {"entry", gate_get_entry, gate_set_entry,
     "the call last kept or replayed (a 13-tuple)", NULL},
    {NULL},
};

static PyTypeObject GateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mpicoll.engine._gate.Gate",
    .tp_doc = "Gate(fallback, declined, entry): the replay gate "
              "(mpicoll.engine.gate.Gate) in C.",
    .tp_basicsize = sizeof(Gate),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = PyType_GenericNew,
    .tp_init = gate_init,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Gate, vectorcall),
    .tp_traverse = gate_traverse,
    .tp_clear = gate_clear,
    .tp_dealloc = gate_dealloc,
    .tp_getset = gate_getset,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_gate",
    "The replay gate in C (see mpicoll.engine.gate).", -1, NULL,
};

PyMODINIT_FUNC
PyInit__gate(void)
{
    str_dtype = PyUnicode_InternFromString("dtype");
    if (str_dtype == NULL || PyType_Ready(&GateType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&GateType);
    if (PyModule_AddObject(m, "Gate", (PyObject *)&GateType) < 0) {
        Py_DECREF(&GateType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
