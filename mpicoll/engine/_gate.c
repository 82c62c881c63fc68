/* The replay gate in C: mpicoll.engine.gate.Gate's accelerated twin.
 *
 * A face method (or its C Face, _face.c) asks the gate whether its call
 * (name, algorithm= and up to four argument objects) is the very call
 * last kept or replayed (the gate's ``entry``, a 13-tuple set by
 * mpicoll.engine.replay: the same objects, or message specs holding the
 * same items); if so the gate runs the entry's kept run and answers
 * True, with nothing made in Python on the way to mpi4py's own call. A
 * miss goes down the likeness path (_alike.c), or to ``fallback`` (the
 * replay table's lookups, in Python).
 *
 * The checks are those of the Python twin, item for item (identity of
 * the name, algorithm and objects other than message specs; each kept
 * array's dtype; what each message spec holds, as spec_holds); an
 * exception the run raises propagates, except the engine's ``Declined``
 * (another rank's counts changed), which answers False.
 *
 * Cost: one vectorcall into C, a dozen pointer comparisons, a dtype read
 * per kept array and a list comparison per spec, and the run's own
 * call.
 */

#include "_gate.h"
#include <stddef.h>

/* the entry's items, as mpicoll.engine.replay lays them out */
enum { BUF, A, B, C, NAME, ALG, FIRST, DTYPE1, SECOND, DTYPE2, HELD, SPECS,
       RUN, ENTRY_LEN };

static PyObject *str_dtype;


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

/* 1: the sequences spec and copy are equal (spec == copy); 0: not, or
 * the comparison raised (cleared). Lists and tuples of one type are
 * compared item by item, identical items equal, as list_richcompare
 * does; anything else by the rich comparison. */
static int
same_items(PyObject *spec, PyObject *copy)
{
    if (Py_TYPE(spec) == Py_TYPE(copy) &&
            (PyList_CheckExact(spec) || PyTuple_CheckExact(spec))) {
        Py_ssize_t n = Py_SIZE(spec);
        if (n != Py_SIZE(copy))
            return 0;
        PyObject **a = PyList_CheckExact(spec) ?
            ((PyListObject *)spec)->ob_item : ((PyTupleObject *)spec)->ob_item;
        PyObject **b = PyList_CheckExact(copy) ?
            ((PyListObject *)copy)->ob_item : ((PyTupleObject *)copy)->ob_item;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (a[i] == b[i])
                continue;
            PyObject *x = a[i], *y = b[i];
            Py_INCREF(x);  /* the comparison may change the lists */
            Py_INCREF(y);
            int same = PyObject_RichCompareBool(x, y, Py_EQ);
            Py_DECREF(x);
            Py_DECREF(y);
            if (same != 1 || n != Py_SIZE(spec) || n != Py_SIZE(copy)) {
                if (same < 0)
                    PyErr_Clear();
                return 0;
            }
        }
        return 1;
    }
    int same = PyObject_RichCompareBool(spec, copy, Py_EQ);
    if (same < 0)
        PyErr_Clear();
    return same == 1;
}

/* spec_holds of mpicoll.engine.gate: 1 if the message spec (a list or
 * tuple) holds what the kept one held (first: its first item, None if it
 * was empty; copy: its items; dtype: its first item's, or None); 0 if
 * not, or if a comparison raised (cleared) */
static int
spec_holds(PyObject *spec, PyObject *first, PyObject *copy, PyObject *dtype)
{
    Py_ssize_t n = PyList_CheckExact(spec) || PyTuple_CheckExact(spec) ?
        Py_SIZE(spec) : PySequence_Size(spec);
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
    if (item != first || !same_items(spec, copy))
        return 0;
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

/* 1: the entry kept a message spec at position i (held: None, or a
 * tuple of (position, first, copy, dtype)); 0: not */
static int
spec_at(PyObject *held, Py_ssize_t i)
{
    if (held == Py_None)
        return 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(held); k++) {
        PyObject *at = PyTuple_GET_ITEM(PyTuple_GET_ITEM(held, k), 0);
        if (PyLong_Check(at) && PyLong_AsSsize_t(at) == i)
            return 1;
    }
    return 0;
}

PyObject *
answer(int done)
{
    if (done == FAILED)
        return NULL;
    PyObject *answered = done == RAN ? Py_True : Py_False;
    Py_INCREF(answered);
    return answered;
}

/* What a call that returned ``result`` (NULL: it raised) did: RAN,
 * DECLINED (it raised ``declined``: cleared) or FAILED */
int
outcome(PyObject *result, PyObject *declined)
{
    if (result != NULL) {
        Py_DECREF(result);
        return RAN;
    }
    if (PyErr_ExceptionMatches(declined)) {
        PyErr_Clear();
        return DECLINED;
    }
    return FAILED;
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
    if (e[NAME] != name || e[ALG] != algorithm)
        return MISSED;
    for (int i = 0; i < 4; i++)
        if (e[BUF + i] != objects[i] && !spec_at(e[HELD], i))
            return MISSED;
    Py_INCREF(entry);  /* the run may replace the gate's entry */
    int ran = MISSED;
    if (same_dtype(e[FIRST], e[DTYPE1]) && same_dtype(e[SECOND], e[DTYPE2])
            && (e[HELD] == Py_None || specs_hold(e[HELD], objects))) {
        ran = outcome(PyObject_CallNoArgs(e[RUN]), g->declined);
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
    return gate_answer(g, args[0], args[1], objects);
}

PyObject *
gate_answer(Gate *g, PyObject *name, PyObject *algorithm,
            PyObject *const *objects)
{
    if (g->pass_once) {  /* a Face's miss: its method's own offer */
        g->pass_once = 0;
        Py_RETURN_FALSE;
    }
    int done = gate_try(g, name, algorithm, objects);
    if (done != MISSED)
        return answer(done);
    return missed(g, name, algorithm, objects);
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
    static char *names[] = {"fallback", "declined", "entry", "likeness",
                            NULL};
    PyObject *fallback, *declined, *entry, *likeness = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|O", names, &fallback,
                                     &declined, &entry, &likeness))
        return -1;
    if (check_entry(entry) < 0)
        return -1;
    if (likeness != Py_None) {
        PyObject *replays = PyObject_GetAttrString(likeness, "_replays");
        PyObject *kinds = PyObject_GetAttrString(likeness, "_kinds");
        PyObject *key = PyObject_GetAttrString(likeness, "_key");
        PyObject *fits = key == NULL ? NULL :
            PyObject_GetAttrString(key, "fits");
        PyObject *alike = PyObject_GetAttrString(likeness, "alike");
        PyObject *refused = PyObject_GetAttrString(likeness, "refused");
        if (replays == NULL || kinds == NULL || key == NULL ||
                fits == NULL || alike == NULL || refused == NULL ||
                !PyDict_CheckExact(replays) || !PyDict_CheckExact(kinds)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "a likeness's tables are "
                                "dicts");
            Py_XDECREF(replays);
            Py_XDECREF(kinds);
            Py_XDECREF(key);
            Py_XDECREF(fits);
            Py_XDECREF(alike);
            Py_XDECREF(refused);
            return -1;
        }
        Py_XSETREF(g->replays, replays);
        Py_XSETREF(g->kinds, kinds);
        Py_XSETREF(g->key, key);
        Py_XSETREF(g->fits, fits);
        Py_XSETREF(g->alike, alike);
        Py_XSETREF(g->refused, refused);
    }
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
    Py_VISIT(g->replays);
    Py_VISIT(g->kinds);
    Py_VISIT(g->key);
    Py_VISIT(g->fits);
    Py_VISIT(g->last_key);
    Py_VISIT(g->last_kept);
    Py_VISIT(g->alike);
    Py_VISIT(g->refused);
    return 0;
}

static int
gate_clear(PyObject *self)
{
    Gate *g = (Gate *)self;
    Py_CLEAR(g->entry);
    Py_CLEAR(g->fallback);
    Py_CLEAR(g->declined);
    Py_CLEAR(g->replays);
    Py_CLEAR(g->kinds);
    Py_CLEAR(g->key);
    Py_CLEAR(g->fits);
    Py_CLEAR(g->last_key);
    Py_CLEAR(g->last_kept);
    Py_CLEAR(g->alike);
    Py_CLEAR(g->refused);
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

PyTypeObject GateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mpicoll.engine._gate.Gate",
    .tp_doc = "Gate(fallback, declined, entry, likeness=None): the replay "
              "gate (mpicoll.engine.gate.Gate) in C.",
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
    if (!str_dtype || alike_ready() < 0 || PyType_Ready(&GateType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "TWIN_VERSION", TWIN_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&GateType);
    if (PyModule_AddObject(m, "Gate", (PyObject *)&GateType) < 0 ||
            face_ready(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
