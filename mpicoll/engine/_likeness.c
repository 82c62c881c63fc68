/* The likeness of a call in C: mpicoll.engine.likeness.Keys's
 * accelerated twin.
 *
 * Keys(other)(name, algorithm, buf, a, b, c) is the key under which a
 * call is kept by its likeness: (name, algorithm) and the likeness of
 * each argument, or None where one has none. An argument's likeness is
 * that of mpicoll.engine.likeness.likeness, item for item: an int or str
 * itself; a plain object (MPI.Op, MPI.Datatype, MPI.IN_PLACE, MPI.BOTTOM,
 * None) its id; a list or tuple its type and its items' likenesses (a
 * buffer only as its first item); a NumPy array (type, dtype, shape); a
 * bytearray, bytes or mmap (type, length); a memoryview (type, format,
 * nbytes; None once released); an array.array (type, typecode, length);
 * anything else, where a buffer may stand, what ``other(obj)`` answers
 * (a host DLPack exporter's likeness, in Python), else None.
 *
 * Cost: one vectorcall into C, a type test per argument and a tuple or
 * two per buffer (their dtype, shape and lengths read as attributes).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

/* TWIN_VERSION: mpicoll.guard.twins's, passed by setup.py */

typedef struct {
    PyObject_HEAD
    PyObject *other;  /* other(obj): the likeness of an unknown buffer */
    vectorcallfunc vectorcall;
} Keys;

/* the types known here, looked up once at import */
static PyObject *ndarray, *array_type, *mmap_type, *plain;
static PyObject *str_dtype, *str_shape, *str_format, *str_nbytes,
                *str_typecode;

/* (type(obj), obj.x, obj.y) as a new tuple, or NULL */
static PyObject *
type_and(PyObject *obj, PyObject *x, PyObject *y)
{
    PyObject *first = PyObject_GetAttr(obj, x);
    if (first == NULL)
        return NULL;
    PyObject *second = y != NULL ? PyObject_GetAttr(obj, y) :
        PyLong_FromSsize_t(PyObject_Size(obj));
    if (second == NULL || PyErr_Occurred()) {
        Py_DECREF(first);
        Py_XDECREF(second);
        return NULL;
    }
    PyObject *t = PyTuple_Pack(3, (PyObject *)Py_TYPE(obj), first, second);
    Py_DECREF(first);
    Py_DECREF(second);
    return t;
}

/* likeness(obj, buffer) as a new reference (Py_None: none), or NULL with
 * an error set (one the Python twin raises too) */
static PyObject *
likeness(Keys *k, PyObject *obj, int buffer)
{
    PyTypeObject *t = Py_TYPE(obj);
    if (t == &PyLong_Type || t == &PyUnicode_Type) {
        Py_INCREF(obj);
        return obj;
    }
    int is_plain = PySet_Contains(plain, (PyObject *)t);
    if (is_plain < 0)
        return NULL;
    if (is_plain)
        return PyLong_FromVoidPtr(obj);
    if (t == &PyList_Type || t == &PyTuple_Type) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        PyObject *parts = PyTuple_New(n + 1);
        if (parts == NULL)
            return NULL;
        Py_INCREF(t);
        PyTuple_SET_ITEM(parts, 0, (PyObject *)t);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *part = likeness(k, PySequence_Fast_GET_ITEM(obj, i),
                                      buffer && i == 0);
            if (part == NULL || part == Py_None) {
                Py_DECREF(parts);
                return part;
            }
            PyTuple_SET_ITEM(parts, i + 1, part);
        }
        return parts;
    }
    if (!buffer)
        Py_RETURN_NONE;
    if ((PyObject *)t == ndarray)
        return type_and(obj, str_dtype, str_shape);
    if (t == &PyByteArray_Type || t == &PyBytes_Type ||
            (PyObject *)t == mmap_type) {
        Py_ssize_t n = PyObject_Size(obj);
        if (n < 0)
            return NULL;
        return Py_BuildValue("(On)", (PyObject *)t, n);
    }
    if (t == &PyMemoryView_Type) {
        PyObject *parts = type_and(obj, str_format, str_nbytes);
        if (parts == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) {
            PyErr_Clear();  /* released */
            Py_RETURN_NONE;
        }
        return parts;
    }
    if ((PyObject *)t == array_type)
        return type_and(obj, str_typecode, NULL);
    return PyObject_CallOneArg(k->other, obj);
}

static PyObject *
keys_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if ((kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) || n < 3 ||
            n > 6) {
        PyErr_SetString(PyExc_TypeError, "a call's key takes 3 to 6 "
                        "positional arguments (name, algorithm, buf, a, b, "
                        "c)");
        return NULL;
    }
    PyObject *key = PyTuple_New(6);
    if (key == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < 6; i++) {
        PyObject *part;
        if (i < 2) {
            part = args[i];
            Py_INCREF(part);
        } else {
            part = likeness((Keys *)self, i < n ? args[i] : Py_None, 1);
            if (part == NULL || part == Py_None) {
                Py_DECREF(key);
                return part;
            }
        }
        PyTuple_SET_ITEM(key, i, part);
    }
    return key;
}

static int
keys_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"other", NULL};
    PyObject *other;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O", names, &other))
        return -1;
    Py_INCREF(other);
    Py_XSETREF(((Keys *)self)->other, other);
    ((Keys *)self)->vectorcall = keys_vectorcall;
    return 0;
}

static int
keys_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((Keys *)self)->other);
    return 0;
}

static int
keys_clear(PyObject *self)
{
    Py_CLEAR(((Keys *)self)->other);
    return 0;
}

static void
keys_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    keys_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject KeysType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mpicoll.engine._likeness.Keys",
    .tp_doc = "Keys(other): a call's likeness key "
              "(mpicoll.engine.likeness.Keys) in C.",
    .tp_basicsize = sizeof(Keys),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = PyType_GenericNew,
    .tp_init = keys_init,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Keys, vectorcall),
    .tp_traverse = keys_traverse,
    .tp_clear = keys_clear,
    .tp_dealloc = keys_dealloc,
};

/* module.name, a new reference, or NULL */
static PyObject *
imported(const char *module, const char *name)
{
    PyObject *m = PyImport_ImportModule(module);
    if (m == NULL)
        return NULL;
    PyObject *obj = PyObject_GetAttrString(m, name);
    Py_DECREF(m);
    return obj;
}

/* the types whose instances are plain (compared by identity) */
static PyObject *
plain_types(void)
{
    PyObject *op = imported("mpi4py.MPI", "Op");
    PyObject *datatype = imported("mpi4py.MPI", "Datatype");
    PyObject *in_place = imported("mpi4py.MPI", "IN_PLACE");
    PyObject *bottom = imported("mpi4py.MPI", "BOTTOM");
    PyObject *types = NULL;
    if (op && datatype && in_place && bottom) {
        types = PyFrozenSet_New(NULL);
        PyObject *each[] = {op, datatype, (PyObject *)Py_TYPE(in_place),
                            (PyObject *)Py_TYPE(bottom),
                            (PyObject *)Py_TYPE(Py_None)};
        for (int i = 0; types && i < 5; i++)
            if (PySet_Add(types, each[i]) < 0)
                Py_CLEAR(types);
    }
    Py_XDECREF(op);
    Py_XDECREF(datatype);
    Py_XDECREF(in_place);
    Py_XDECREF(bottom);
    return types;
}

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_likeness",
    "A call's likeness key in C (see mpicoll.engine.likeness).", -1, NULL,
};

PyMODINIT_FUNC
PyInit__likeness(void)
{
    str_dtype = PyUnicode_InternFromString("dtype");
    str_shape = PyUnicode_InternFromString("shape");
    str_format = PyUnicode_InternFromString("format");
    str_nbytes = PyUnicode_InternFromString("nbytes");
    str_typecode = PyUnicode_InternFromString("typecode");
    ndarray = imported("numpy", "ndarray");
    array_type = imported("array", "array");
    mmap_type = imported("mmap", "mmap");
    plain = plain_types();
    if (!str_dtype || !str_shape || !str_format || !str_nbytes ||
            !str_typecode || !ndarray || !array_type || !mmap_type ||
            !plain || PyType_Ready(&KeysType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "TWIN_VERSION", TWIN_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&KeysType);
    if (PyModule_AddObject(m, "Keys", (PyObject *)&KeysType) < 0) {
        Py_DECREF(&KeysType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
