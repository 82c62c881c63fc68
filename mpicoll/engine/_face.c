/* A face method that asks the replay gate itself: mpicoll.engine._gate.Face.
 *
 * Face(function, params, defaults, sources) stands in a class for the
 * Python face method ``function`` (mpicoll.api.faces puts it there), whose
 * body is ``if not self._replayed(*memo): <the full path>``. Called as a
 * method, it binds the call's arguments to ``function``'s positional
 * parameters ``params`` (their ``defaults``, the ``required`` marker where
 * there is none) and its keyword-only ``algorithm``, makes the memo from
 * them (``sources``: for each of the memo's six items, an index into the
 * bound values, algorithm last, or a 1-tuple holding a constant) and
 * offers it to the communicator's gate (its ``_replayed``, where that is
 * a C Gate). A hit returns None, as the method does; a miss calls
 * ``function``, whose own offer the gate then answers False unchecked
 * (its ``pass_once``), so that a call is offered once. Anything unusual
 * (another keyword, a missing argument, no gate yet, the Python gate)
 * calls ``function`` at once, which does as it always does.
 *
 * Cost: the binding (a few pointer stores; keywords compared by name)
 * and one dict lookup, instead of a Python frame.
 */

#include "_gate.h"
#include <stddef.h>

#define MAX_PARAMS 8

typedef struct {
    PyObject_HEAD
    PyObject *function;  /* the face method in Python */
    PyObject *params;    /* its positional parameters' names, self aside */
    PyObject *defaults;  /* their defaults (REQUIRED: none) */
    PyObject *algorithm; /* the default of its keyword algorithm */
    PyObject *sources;   /* where each of the memo's six items comes from */
    Py_ssize_t source_at[6];  /* sources read: an index, or -1 */
    PyObject *constant[6];    /* the constant where -1 (borrowed) */
    vectorcallfunc vectorcall;
} Face;

static PyObject *str_replayed, *str_algorithm, *required;

/* the value of the keyword ``name`` goes at values[i]: its index among
 * the parameters (nparams: algorithm), or -1 (not one of them) */
static Py_ssize_t
keyword_at(Face *f, PyObject *name)
{
    if (name == str_algorithm ||
            PyUnicode_Compare(name, str_algorithm) == 0)
        return PyTuple_GET_SIZE(f->params);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(f->params); i++) {
        PyObject *param = PyTuple_GET_ITEM(f->params, i);
        if (name == param || PyUnicode_Compare(name, param) == 0)
            return i;
    }
    PyErr_Clear();
    return -1;
}

/* the method's own call: function(self, *args, **kwargs) */
static PyObject *
full(Face *f, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return PyObject_Vectorcall(f->function, args, nargsf, kwnames);
}

static PyObject *
face_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                PyObject *kwnames)
{
    Face *f = (Face *)self;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nparams = PyTuple_GET_SIZE(f->params);
    if (n < 1 || n - 1 > nparams)
        return full(f, args, nargsf, kwnames);
    PyObject *values[MAX_PARAMS + 1];
    for (Py_ssize_t i = 0; i < nparams; i++)
        values[i] = i < n - 1 ? args[1 + i] :
            PyTuple_GET_ITEM(f->defaults, i);
    values[nparams] = f->algorithm;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; k++) {
        Py_ssize_t i = keyword_at(f, PyTuple_GET_ITEM(kwnames, k));
        if (i < n - 1)  /* unknown, or given twice: the method says */
            return full(f, args, nargsf, kwnames);
        values[i] = args[n + k];
    }
    for (Py_ssize_t i = 0; i < nparams; i++)
        if (values[i] == required)
            return full(f, args, nargsf, kwnames);
    PyObject *dict = PyObject_GenericGetDict(args[0], NULL);
    if (dict == NULL) {
        PyErr_Clear();
        return full(f, args, nargsf, kwnames);
    }
    PyObject *gate = PyDict_GetItemWithError(dict, str_replayed);
    Py_DECREF(dict);  /* the instance holds its dict, and it the gate */
    if (gate == NULL || !Py_IS_TYPE(gate, &GateType)) {
        if (PyErr_Occurred())
            return NULL;
        return full(f, args, nargsf, kwnames);
    }
    PyObject *memo[6];
    for (int j = 0; j < 6; j++)
        memo[j] = f->source_at[j] < 0 ? f->constant[j] :
            values[f->source_at[j]];
    Py_INCREF(gate);
    PyObject *answer = gate_answer((Gate *)gate, memo[0], memo[1], memo + 2);
    if (answer == Py_False)
        ((Gate *)gate)->pass_once = 1;  /* the method's offer: answered */
    Py_DECREF(gate);
    if (answer == NULL)
        return NULL;
    int ran = answer == Py_True;
    Py_DECREF(answer);
    if (ran)
        Py_RETURN_NONE;
    return full(f, args, nargsf, kwnames);
}

/* sources: six items, each an index in [0, nparams] or a 1-tuple */
static int
check_sources(PyObject *sources, Py_ssize_t nparams)
{
    if (!PyTuple_CheckExact(sources) || PyTuple_GET_SIZE(sources) != 6)
        goto bad;
    for (int j = 0; j < 6; j++) {
        PyObject *s = PyTuple_GET_ITEM(sources, j);
        if (PyLong_CheckExact(s)) {
            Py_ssize_t i = PyLong_AsSsize_t(s);
            if (i < 0 || i > nparams) {
                PyErr_Clear();
                goto bad;
            }
        } else if (!PyTuple_CheckExact(s) || PyTuple_GET_SIZE(s) != 1) {
            goto bad;
        }
    }
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "a face's sources are six indices "
                    "of its values or 1-tuples of constants");
    return -1;
}

static int
face_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    Face *f = (Face *)self;
    static char *names[] = {"function", "params", "defaults", "algorithm",
                            "sources", NULL};
    PyObject *function, *params, *defaults, *algorithm, *sources;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!O!OO", names,
                                     &function, &PyTuple_Type, &params,
                                     &PyTuple_Type, &defaults, &algorithm,
                                     &sources))
        return -1;
    Py_ssize_t nparams = PyTuple_GET_SIZE(params);
    if (nparams > MAX_PARAMS || PyTuple_GET_SIZE(defaults) != nparams) {
        PyErr_Format(PyExc_ValueError, "a face takes at most %d parameters, "
                     "a default (or REQUIRED) each", MAX_PARAMS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nparams; i++)
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(params, i))) {
            PyErr_SetString(PyExc_TypeError, "parameter names are str");
            return -1;
        }
    if (check_sources(sources, nparams) < 0)
        return -1;
    PyObject *items[] = {function, params, defaults, algorithm, sources};
    for (int i = 0; i < 5; i++)
        Py_INCREF(items[i]);
    Py_XSETREF(f->function, function);
    Py_XSETREF(f->params, params);
    Py_XSETREF(f->defaults, defaults);
    Py_XSETREF(f->algorithm, algorithm);
    Py_XSETREF(f->sources, sources);
    for (int j = 0; j < 6; j++) {  /* checked: an index, or a 1-tuple */
        PyObject *source = PyTuple_GET_ITEM(sources, j);
        f->source_at[j] = PyLong_CheckExact(source) ?
            PyLong_AsSsize_t(source) : -1;
        f->constant[j] = PyLong_CheckExact(source) ? NULL :
            PyTuple_GET_ITEM(source, 0);
    }
    f->vectorcall = face_vectorcall;
    return 0;
}

/* a method: bound to an instance, as a function is */
static PyObject *
face_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

/* __doc__, __name__, __qualname__, __module__, __wrapped__: the
 * function's (so help(), inspect.signature and docs see the method) */
static PyObject *
face_getattro(PyObject *self, PyObject *name)
{
    PyObject *found = PyObject_GenericGetAttr(self, name);
    if (found != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return found;
    PyErr_Clear();
    if (PyUnicode_CompareWithASCIIString(name, "__wrapped__") == 0) {
        Py_INCREF(((Face *)self)->function);
        return ((Face *)self)->function;
    }
    return PyObject_GetAttr(((Face *)self)->function, name);
}

static PyObject *
face_doc(PyObject *self, void *closure)
{
    return PyObject_GetAttrString(((Face *)self)->function, "__doc__");
}

static int
face_traverse(PyObject *self, visitproc visit, void *arg)
{
    Face *f = (Face *)self;
    Py_VISIT(f->function);
    Py_VISIT(f->params);
    Py_VISIT(f->defaults);
    Py_VISIT(f->algorithm);
    Py_VISIT(f->sources);
    return 0;
}

static int
face_clear(PyObject *self)
{
    Face *f = (Face *)self;
    Py_CLEAR(f->function);
    Py_CLEAR(f->params);
    Py_CLEAR(f->defaults);
    Py_CLEAR(f->algorithm);
    Py_CLEAR(f->sources);
    return 0;
}

static void
face_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    face_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyGetSetDef face_getset[] = {
    {"__doc__", face_doc, NULL, NULL, NULL},
    {NULL},
};

PyTypeObject FaceType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mpicoll.engine._gate.Face",
    .tp_basicsize = sizeof(Face),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_new = PyType_GenericNew,
    .tp_init = face_init,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Face, vectorcall),
    .tp_descr_get = face_get,
    .tp_getattro = face_getattro,
    .tp_traverse = face_traverse,
    .tp_clear = face_clear,
    .tp_dealloc = face_dealloc,
    .tp_getset = face_getset,
};

/* FaceType ready and in the module, with the ``REQUIRED`` marker (the
 * default of a parameter that has none) */
int
face_ready(PyObject *module)
{
    str_replayed = PyUnicode_InternFromString("_replayed");
    str_algorithm = PyUnicode_InternFromString("algorithm");
    required = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (!str_replayed || !str_algorithm || !required ||
            PyType_Ready(&FaceType) < 0)
        return -1;
    Py_INCREF(&FaceType);
    Py_INCREF(required);
    if (PyModule_AddObject(module, "Face", (PyObject *)&FaceType) < 0 ||
            PyModule_AddObject(module, "REQUIRED", required) < 0)
        return -1;
    return 0;
}
