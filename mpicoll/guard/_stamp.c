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
 * member descriptors do; its ``begun`` and ``ended`` (arrays of doubles)
 * are written through their buffers, held for the stamp's life. A
 * ``run`` that is a functools.partial of positional arguments (what mpicoll.engine.engine keeps of a library call), of a
 * bound method or not, is called as its function with its arguments
 * (the instance first), as the partial and the method would call it.
 *
 * Cost: one vectorcall into C, two clock reads, one new int, one list
 * store and two double stores.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <string.h>
#include <structmember.h>
#include <time.h>

/* TWIN_VERSION: mpicoll.guard.twins's, passed by setup.py */

#define MAX_ARGS 8  /* a partial's arguments and the call's, at most */

typedef struct {
    PyObject_HEAD
    PyObject *run;
    PyObject *note;
    PyObject *recorder;
    PyObject *notes;            /* the recorder's list of notes */
    Py_buffer begun, ended;     /* its arrays of times */
    PyObject *function, *bound; /* run unwrapped: function(*bound, ...) */
    Py_ssize_t slots;
    Py_ssize_t seq_at, blocked_at;  /* where the recorder holds them */
    vectorcallfunc vectorcall;
} Stamped;

static PyObject *str_seq, *str_blocked, *str_slots, *str_notes, *str_begun,
                *str_ended, *str_func, *str_args, *str_keywords, *zero,
                *partial_type;

static double
clock_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* run(*args): as function(*bound, *args) where both fit MAX_ARGS */
static PyObject *
call_run(Stamped *s, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    Py_ssize_t nbound = PyTuple_GET_SIZE(s->bound);
    if (nbound + n + nkw > MAX_ARGS)
        return PyObject_Vectorcall(s->run, args, nargsf, kwnames);
    PyObject *stack[MAX_ARGS + 1];  /* one free slot first */
    for (Py_ssize_t i = 0; i < nbound; i++)
        stack[1 + i] = PyTuple_GET_ITEM(s->bound, i);
    for (Py_ssize_t i = 0; i < n + nkw; i++)
        stack[1 + nbound + i] = args[i];
    return PyObject_Vectorcall(s->function, stack + 1,
                               (nbound + n) | PY_VECTORCALL_ARGUMENTS_OFFSET,
                               kwnames);
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
    PyObject *number = PyLong_FromSsize_t(++seq);
    if (number == NULL)
        return NULL;
    Py_INCREF(number);
    Py_XSETREF(*seq_slot, number);
    Py_XSETREF(*blocked_slot, number);
    Py_ssize_t i = seq % s->slots;
    PyObject *old = PyList_GET_ITEM(s->notes, i);
    Py_INCREF(s->note);
    PyList_SET_ITEM(s->notes, i, s->note);
    Py_XDECREF(old);
    ((double *)s->begun.buf)[i] = clock_now();
    PyObject *ran = call_run(s, args, nargsf, kwnames);
    /* finally: the end stamp, whether run returned or raised */
    ((double *)s->ended.buf)[i] = clock_now();
    Py_INCREF(zero);
    Py_XSETREF(*blocked_slot, zero);
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

/* view: the buffer of the recorder's array attribute ``name``, writable
 * doubles, one per slot: 0, or -1 with an error set (view left empty) */
static int
slot_times(PyObject *rec, PyObject *name, Py_ssize_t slots, Py_buffer *view)
{
    PyObject *times = PyObject_GetAttr(rec, name);
    if (times == NULL)
        return -1;
    int got = PyObject_GetBuffer(times, view, PyBUF_WRITABLE | PyBUF_FORMAT);
    Py_DECREF(times);
    if (got < 0)
        return -1;
    if (view->format == NULL || strcmp(view->format, "d") != 0 ||
            view->len != slots * (Py_ssize_t)sizeof(double)) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "the recorder's %U is not an array "
                     "of doubles, one per slot", name);
        return -1;
    }
    return 0;
}

/* function and bound: run as a function and its leading arguments (a
 * partial's, without keywords, and a bound method's instance); 0, or -1
 * with an error set */
static int
unwrap(PyObject *run, PyObject **function, PyObject **bound)
{
    PyObject *args = PyTuple_New(0);
    Py_INCREF(run);
    if (args == NULL)
        goto fail;
    if (Py_IS_TYPE(run, (PyTypeObject *)partial_type)) {
        PyObject *keywords = PyObject_GetAttr(run, str_keywords);
        if (keywords == NULL)
            goto fail;
        int none = PyObject_Not(keywords);
        Py_DECREF(keywords);
        if (none < 0)
            goto fail;
        if (none) {
            PyObject *func = PyObject_GetAttr(run, str_func);
            PyObject *partial_args = PyObject_GetAttr(run, str_args);
            if (func == NULL || partial_args == NULL ||
                    !PyTuple_CheckExact(partial_args)) {
                Py_XDECREF(func);
                Py_XDECREF(partial_args);
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "a partial's args "
                                    "are a tuple");
                goto fail;
            }
            Py_SETREF(run, func);
            Py_SETREF(args, partial_args);
        }
    }
    if (PyMethod_Check(run)) {
        PyObject *self = PyMethod_GET_SELF(run);
        PyObject *func = PyMethod_GET_FUNCTION(run);
        Py_ssize_t n = PyTuple_GET_SIZE(args);
        PyObject *with_self = PyTuple_New(n + 1);
        if (with_self == NULL)
            goto fail;
        Py_INCREF(self);
        PyTuple_SET_ITEM(with_self, 0, self);
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_INCREF(PyTuple_GET_ITEM(args, i));
            PyTuple_SET_ITEM(with_self, i + 1, PyTuple_GET_ITEM(args, i));
        }
        Py_INCREF(func);
        Py_SETREF(run, func);
        Py_SETREF(args, with_self);
    }
    *function = run;
    *bound = args;
    return 0;
fail:
    Py_DECREF(run);
    Py_XDECREF(args);
    return -1;
}

static int
stamped_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    Stamped *s = (Stamped *)self;
    static char *names[] = {"run", "note", "recorder", NULL};
    PyObject *run, *note, *rec;
    if (s->run != NULL) {
        PyErr_SetString(PyExc_TypeError, "a stamp is made once");
        return -1;
    }
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
    if (notes == NULL)
        return -1;
    PyObject *function, *bound;
    if (unwrap(run, &function, &bound) < 0) {
        Py_DECREF(notes);
        return -1;
    }
    Py_buffer *views[] = {&s->begun, &s->ended};
    int made = slot_times(rec, str_begun, slots, views[0]) < 0 ? 0 :
        slot_times(rec, str_ended, slots, views[1]) < 0 ? 1 : 2;
    if (made < 2) {
        for (int v = 0; v < made; v++)
            PyBuffer_Release(views[v]);
        Py_DECREF(notes);
        Py_DECREF(function);
        Py_DECREF(bound);
        return -1;
    }
    Py_INCREF(run);
    Py_INCREF(note);
    Py_INCREF(rec);
    s->run = run;
    s->note = note;
    s->recorder = rec;
    s->notes = notes;
    s->function = function;
    s->bound = bound;
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
    Py_VISIT(s->begun.obj);
    Py_VISIT(s->ended.obj);
    Py_VISIT(s->function);
    Py_VISIT(s->bound);
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
    if (s->begun.obj != NULL)
        PyBuffer_Release(&s->begun);
    if (s->ended.obj != NULL)
        PyBuffer_Release(&s->ended);
    Py_CLEAR(s->function);
    Py_CLEAR(s->bound);
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
    zero = PyLong_FromLong(0);
    str_slots = PyUnicode_InternFromString("slots");
    str_notes = PyUnicode_InternFromString("notes");
    str_begun = PyUnicode_InternFromString("begun");
    str_ended = PyUnicode_InternFromString("ended");
    str_func = PyUnicode_InternFromString("func");
    str_args = PyUnicode_InternFromString("args");
    str_keywords = PyUnicode_InternFromString("keywords");
    PyObject *functools = PyImport_ImportModule("functools");
    if (functools == NULL)
        return NULL;
    partial_type = PyObject_GetAttrString(functools, "partial");
    Py_DECREF(functools);
    if (str_seq == NULL || str_blocked == NULL || zero == NULL ||
            str_slots == NULL || str_notes == NULL || str_begun == NULL ||
            str_ended == NULL || str_func == NULL || str_args == NULL ||
            str_keywords == NULL || partial_type == NULL ||
            PyType_Ready(&StampedType) < 0)
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
