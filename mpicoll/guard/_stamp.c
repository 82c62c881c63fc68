/* The flight recorder's stamp in C: mpicoll.guard.recorder.Stamped's
 * accelerated twin.
 *
 * Stamped(run, note, recorder) is a callable that numbers and stamps a
 * kept blocking call each time it runs, as the recorder's begin and end
 * do: the recorder's ``seq`` and ``blocked`` set to the next number,
 * ``notes``, ``begun`` and ``ended`` written at that number's slot (the
 * clock: seconds since the epoch, as time.time), ``blocked`` set back to
 * 0 once ``run`` returns or raises. It passes its arguments on to
 * ``run`` and returns what ``run`` returns.
 *
 * The recorder's ``seq`` and ``blocked`` are slots of its class (its
 * ``__slots__``), read and written where the class keeps them, as its
 * member descriptors do.
 *
 * Cost: one vectorcall into C, two clock reads, one new int and three
 * list stores.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

/* TWIN_VERSION: mpicoll.guard.twins's, passed by setup.py */
#include <structmember.h>
#include <time.h>

typedef struct {
    PyObject_HEAD
    PyObject *run;
    PyObject *note;
    PyObject *recorder;
    PyObject *notes, *begun, *ended;  /* the recorder's lists */
    Py_ssize_t slots;
    Py_ssize_t seq_at, blocked_at;  /* where the recorder holds them */
    vectorcallfunc vectorcall;
} Stamped;

static PyObject *str_seq, *str_blocked, *str_slots, *str_notes, *str_begun,
                *str_ended, *zero;

static PyObject *
clock_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return PyFloat_FromDouble((double)ts.tv_sec + ts.tv_nsec * 1e-9);
}

/* list[i] = value; value a new reference (NULL: an error is set) */
static int
store(PyObject *list, Py_ssize_t i, PyObject *value)
{
    if (value == NULL)
        return -1;
    return PyList_SetItem(list, i, value);  /* steals value */
}

static PyObject *
stamped_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                   PyObject *kwnames)
{
    Stamped *s = (Stamped *)self;
    PyObject **seq_slot = (PyObject **)((char *)s->recorder + s->seq_at);
    PyObject **blocked_slot =
        (PyObject **)((char *)s->recorder + s->blocked_at);
    if (*seq_slot == NULL) {
        PyErr_SetString(PyExc_AttributeError, "the recorder has no seq");
        return NULL;
    }
    Py_ssize_t seq = PyLong_AsSsize_t(*seq_slot);
    if (seq == -1 && PyErr_Occurred())
        return NULL;
    seq += 1;
    PyObject *number = PyLong_FromSsize_t(seq);
    if (number == NULL)
        return NULL;
    Py_INCREF(number);
    Py_XSETREF(*seq_slot, number);
    Py_XSETREF(*blocked_slot, number);
    Py_ssize_t i = seq % s->slots;
    Py_INCREF(s->note);
    if (store(s->notes, i, s->note) < 0 ||
            store(s->begun, i, clock_now()) < 0)
        return NULL;
    PyObject *ran = PyObject_Vectorcall(s->run, args, nargsf, kwnames);
    /* finally: the end stamp, whether run returned or raised */
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (store(s->ended, i, clock_now()) < 0) {
        Py_XDECREF(ran);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
        return NULL;
    }
    Py_INCREF(zero);
    Py_XSETREF(*blocked_slot, zero);
    PyErr_Restore(type, value, traceback);
    return ran;
}

/* the offset at which instances of rec's class keep the slot ``name``
 * (an object slot of its __slots__), or -1 with an error set */
static Py_ssize_t
slot_offset(PyObject *rec, PyObject *name)
{
    PyObject *descr = PyObject_GetAttr((PyObject *)Py_TYPE(rec), name);
    if (descr == NULL)
        return -1;
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type) &&
            ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX)
        offset = ((PyMemberDescrObject *)descr)->d_member->offset;
    else
        PyErr_Format(PyExc_TypeError, "the recorder's %U is not a slot of "
                     "its class", name);
    Py_DECREF(descr);
    return offset;
}

/* the recorder's list attribute ``name`` of ``slots`` items, or NULL */
static PyObject *
slot_list(PyObject *rec, PyObject *name, Py_ssize_t slots)
{
    PyObject *list = PyObject_GetAttr(rec, name);
    if (list != NULL && (!PyList_CheckExact(list) ||
                         PyList_GET_SIZE(list) != slots)) {
        PyErr_Format(PyExc_TypeError, "the recorder's %U is not a list of "
                     "its %zd slots", name, slots);
        Py_CLEAR(list);
    }
    return list;
}

static int
stamped_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    Stamped *s = (Stamped *)self;
    static char *names[] = {"run", "note", "recorder", NULL};
    PyObject *run, *note, *rec;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO", names, &run, &note,
                                     &rec))
        return -1;
    PyObject *n = PyObject_GetAttr(rec, str_slots);
    if (n == NULL)
        return -1;
    Py_ssize_t slots = PyLong_AsSsize_t(n);
    Py_DECREF(n);
    if (slots < 1) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "a recorder has slots");
        return -1;
    }
    Py_ssize_t seq_at = slot_offset(rec, str_seq);
    Py_ssize_t blocked_at = slot_offset(rec, str_blocked);
    if (seq_at < 0 || blocked_at < 0)
        return -1;
    PyObject *notes = slot_list(rec, str_notes, slots);
    PyObject *begun = slot_list(rec, str_begun, slots);
    PyObject *ended = slot_list(rec, str_ended, slots);
    if (notes == NULL || begun == NULL || ended == NULL) {
        Py_XDECREF(notes);
        Py_XDECREF(begun);
        Py_XDECREF(ended);
        return -1;
    }
    Py_INCREF(run);
    Py_INCREF(note);
    Py_INCREF(rec);
    Py_XSETREF(s->run, run);
    Py_XSETREF(s->note, note);
    Py_XSETREF(s->recorder, rec);
    Py_XSETREF(s->notes, notes);
    Py_XSETREF(s->begun, begun);
    Py_XSETREF(s->ended, ended);
    s->slots = slots;
    s->seq_at = seq_at;
    s->blocked_at = blocked_at;
    s->vectorcall = stamped_vectorcall;
    return 0;
}

static int
stamped_traverse(PyObject *self, visitproc visit, void *arg)
{
    Stamped *s = (Stamped *)self;
    Py_VISIT(s->run);
    Py_VISIT(s->note);
    Py_VISIT(s->recorder);
    Py_VISIT(s->notes);
    Py_VISIT(s->begun);
    Py_VISIT(s->ended);
    return 0;
}

static int
stamped_clear(PyObject *self)
{
    Stamped *s = (Stamped *)self;
    Py_CLEAR(s->run);
    Py_CLEAR(s->note);
    Py_CLEAR(s->recorder);
    Py_CLEAR(s->notes);
    Py_CLEAR(s->begun);
    Py_CLEAR(s->ended);
    return 0;
}

static void
stamped_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    stamped_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject StampedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mpicoll.guard._stamp.Stamped",
    .tp_doc = "Stamped(run, note, recorder): a kept call numbered and "
              "stamped in the flight recorder each time it runs "
              "(mpicoll.guard.recorder.Stamped) in C.",
    .tp_basicsize = sizeof(Stamped),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = PyType_GenericNew,
    .tp_init = stamped_init,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Stamped, vectorcall),
    .tp_traverse = stamped_traverse,
    .tp_clear = stamped_clear,
    .tp_dealloc = stamped_dealloc,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_stamp",
    "The flight recorder's stamp in C (see mpicoll.guard.recorder).", -1,
    NULL,
};

PyMODINIT_FUNC
PyInit__stamp(void)
{
    str_seq = PyUnicode_InternFromString("seq");
    str_blocked = PyUnicode_InternFromString("blocked");
    str_slots = PyUnicode_InternFromString("slots");
    str_notes = PyUnicode_InternFromString("notes");
    str_begun = PyUnicode_InternFromString("begun");
    str_ended = PyUnicode_InternFromString("ended");
    zero = PyLong_FromLong(0);
    if (str_seq == NULL || str_blocked == NULL || str_slots == NULL ||
            str_notes == NULL || str_begun == NULL || str_ended == NULL ||
            zero == NULL || PyType_Ready(&StampedType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "TWIN_VERSION", TWIN_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&StampedType);
    if (PyModule_AddObject(m, "Stamped", (PyObject *)&StampedType) < 0) {
        Py_DECREF(&StampedType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
