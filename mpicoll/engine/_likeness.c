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
 * Keys(other).fits(key, name, algorithm, buf, a, b, c) answers whether
 * the call's key is ``key`` without making the key: each argument
 * compared with its part of ``key`` as its likeness would be (what the
 * replay gate asks first of the kind it made last).
 *
 * Cost: one vectorcall into C, a type test per argument and a tuple or
 * two per buffer (their dtype, shape and lengths read as attributes);
 * fits makes no tuple but the attributes read.
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
static PyObject *ndarray, *array_type, *mmap_type;
#define PLAIN 5
static PyTypeObject *plain[PLAIN];

/* whether instances of t are plain */
static int
is_plain(PyTypeObject *t)
{
    for (int i = 0; i < PLAIN; i++)
        if (t == plain[i])
            return 1;
    return 0;
}
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
    if (is_plain(t))
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

/* 1: the tuple part is (t, value of obj's attribute x, y: obj's
 * attribute, or NULL: its length), as type_and makes it; 0: not; -1: an
 * error (one type_and raises too) */
static int
fits_type_and(PyObject *part, PyObject *obj, PyObject *x, PyObject *y)
{
    if (!PyTuple_CheckExact(part) || PyTuple_GET_SIZE(part) != 3 ||
            PyTuple_GET_ITEM(part, 0) != (PyObject *)Py_TYPE(obj))
        return 0;
    PyObject *first = PyObject_GetAttr(obj, x);
    if (first == NULL)
        return -1;
    int same = PyObject_RichCompareBool(first, PyTuple_GET_ITEM(part, 1),
                                        Py_EQ);
    Py_DECREF(first);
    if (same != 1)
        return same;
    if (y == NULL) {
        Py_ssize_t n = PyObject_Size(obj);
        PyObject *kept = PyTuple_GET_ITEM(part, 2);
        if (n < 0)
            return -1;
        return PyLong_CheckExact(kept) && PyLong_AsSsize_t(kept) == n;
    }
    PyObject *second = PyObject_GetAttr(obj, y);
    if (second == NULL)
        return -1;
    same = PyObject_RichCompareBool(second, PyTuple_GET_ITEM(part, 2),
                                    Py_EQ);
    Py_DECREF(second);
    return same;
}

/* likeness(obj, buffer) == part, without making the likeness where it
 * can: 1, 0, or -1 with an error set (one likeness raises too) */
static int
fits(Keys *k, PyObject *part, PyObject *obj, int buffer)
{
    PyTypeObject *t = Py_TYPE(obj);
    if (t == &PyLong_Type || t == &PyUnicode_Type)
        return PyObject_RichCompareBool(obj, part, Py_EQ);
    if ((PyObject *)t == ndarray)  /* (first: the commonest) */
        return buffer ? fits_type_and(part, obj, str_dtype, str_shape) : 0;
    if (is_plain(t)) {  /* its id, an int */
        if (!PyLong_CheckExact(part))
            return 0;
        void *id = PyLong_AsVoidPtr(part);
        if (id == NULL && PyErr_Occurred()) {
            PyErr_Clear();  /* an int no id can be */
            return 0;
        }
        return id == (void *)obj;
    }
    if (t == &PyList_Type || t == &PyTuple_Type) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        if (!PyTuple_CheckExact(part) || PyTuple_GET_SIZE(part) != n + 1 ||
                PyTuple_GET_ITEM(part, 0) != (PyObject *)t)
            return 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(obj, i);
            Py_INCREF(item);  /* the comparisons may change the list */
            int same = fits(k, PyTuple_GET_ITEM(part, i + 1), item,
                            buffer && i == 0);
            Py_DECREF(item);
            if (same != 1)
                return same;
            if (PySequence_Fast_GET_SIZE(obj) != n)
                return 0;
        }
        return 1;
    }
    if (!buffer)
        return 0;  /* no likeness: no key holds it */
    if ((PyObject *)t == ndarray)
        return fits_type_and(part, obj, str_dtype, str_shape);
    if (t == &PyByteArray_Type || t == &PyBytes_Type ||
            (PyObject *)t == mmap_type) {
        Py_ssize_t n = PyObject_Size(obj);
        if (n < 0)
            return -1;
        return PyTuple_CheckExact(part) && PyTuple_GET_SIZE(part) == 2 &&
            PyTuple_GET_ITEM(part, 0) == (PyObject *)t &&
            PyLong_CheckExact(PyTuple_GET_ITEM(part, 1)) &&
            PyLong_AsSsize_t(PyTuple_GET_ITEM(part, 1)) == n;
    }
    if (t == &PyMemoryView_Type) {
        int same = fits_type_and(part, obj, str_format, str_nbytes);
        if (same < 0 && PyErr_ExceptionMatches(PyExc_ValueError)) {
            PyErr_Clear();  /* released: no likeness */
            return 0;
        }
        return same;
    }
    if ((PyObject *)t == array_type)
        return fits_type_and(part, obj, str_typecode, NULL);
    PyObject *other = PyObject_CallOneArg(k->other, obj);
    if (other == NULL)
        return -1;
    int same = other != Py_None &&
        PyObject_RichCompareBool(other, part, Py_EQ);
    Py_DECREF(other);
    return same;
}

/* Keys.fits(key, name, algorithm, buf, a=None, b=None, c=None): whether
 * the call's key is ``key`` (a key a Keys made), found without making
 * the call's key where its arguments allow */
static PyObject *
keys_fits(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    if (n < 4 || n > 7) {
        PyErr_SetString(PyExc_TypeError, "fits takes a key and 3 to 6 "
                        "arguments (name, algorithm, buf, a, b, c)");
        return NULL;
    }
    PyObject *key = args[0];
    if (!PyTuple_CheckExact(key) || PyTuple_GET_SIZE(key) != 6)
        Py_RETURN_FALSE;  /* (None: a call without a key) */
    for (Py_ssize_t i = 0; i < 6; i++) {
        PyObject *part = PyTuple_GET_ITEM(key, i);
        PyObject *arg = i + 1 < n ? args[i + 1] : Py_None;
        int same = i < 2 ? PyObject_RichCompareBool(arg, part, Py_EQ) :
            fits((Keys *)self, part, arg, 1);
        if (same < 0)
            return NULL;
        if (!same)
            Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

static PyMethodDef keys_methods[] = {
    {"fits", (PyCFunction)(void (*)(void))keys_fits, METH_FASTCALL,
     "fits(key, name, algorithm, buf, a=None, b=None, c=None): whether "
     "the call's key is key."},
    {NULL},
};

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
    .tp_methods = keys_methods,
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

/* plain[]: the types whose instances are plain (compared by identity):
 * 0, or -1 with an error set */
static int
plain_types(void)
{
    PyObject *op = imported("mpi4py.MPI", "Op");
    PyObject *datatype = imported("mpi4py.MPI", "Datatype");
    PyObject *in_place = imported("mpi4py.MPI", "IN_PLACE");
    PyObject *bottom = imported("mpi4py.MPI", "BOTTOM");
    int ok = op && datatype && in_place && bottom;
    if (ok) {  /* (types live as long as the interpreter) */
        PyTypeObject *each[] = {(PyTypeObject *)op,
                                (PyTypeObject *)datatype, Py_TYPE(in_place),
                                Py_TYPE(bottom), Py_TYPE(Py_None)};
        for (int i = 0; i < PLAIN; i++) {
            Py_INCREF(each[i]);
            plain[i] = each[i];
        }
    }
    Py_XDECREF(op);
    Py_XDECREF(datatype);
    Py_XDECREF(in_place);
    Py_XDECREF(bottom);
    return ok ? 0 : -1;
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
    if (!str_dtype || !str_shape || !str_format || !str_nbytes ||
            !str_typecode || !ndarray || !array_type || !mmap_type ||
            plain_types() < 0 || PyType_Ready(&KeysType) < 0)
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
