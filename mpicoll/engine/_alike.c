/* The replay gate's miss path in C: calls on new objects kept by their
 * likeness (mpicoll.engine.likeness), made from the gate itself.
 *
 * On a miss of the gate's entry, a call whose objects (or, for message
 * specs, their items) are not in the replay table is looked up by its
 * likeness key (Likeness._key, in C too: _likeness.c) in the table of
 * calls kept by likeness. A kept library call without a count agreement
 * whose send and receive buffers are apart (their buffer protocol
 * extents) is made here, stamped, with the caller's new objects, as
 * _Alike.made does; mpi4py refusing them undoes the stamp and answers
 * False (the full path says why). Other kept calls go to Likeness.alike,
 * and calls found in the replay table to the gate's fallback.
 *
 * Cost: a tuple of two ids and one dict lookup (two for message specs),
 * the key and its lookup, five attribute reads of the kept call, and the
 * stamped call.
 */

#include "_gate.h"

static PyObject *str_agreement, *str_flat, *str_slots, *str_pair,
                *str_stamped, *str_undo;

/* 1: the buffers x and y (each exporting one contiguous buffer) do not
 * overlap; 0: they do, or either exports none (error cleared) */
static int
apart(PyObject *x, PyObject *y)
{
    Py_buffer bx, by;
    if (PyObject_GetBuffer(x, &bx, PyBUF_ANY_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (PyObject_GetBuffer(y, &by, PyBUF_ANY_CONTIGUOUS) < 0) {
        PyErr_Clear();
        PyBuffer_Release(&bx);
        return 0;
    }
    char *lo = bx.buf, *hi = by.buf;
    int overlap = lo < hi + by.len && hi < lo + bx.len;
    PyBuffer_Release(&bx);
    PyBuffer_Release(&by);
    return !overlap;
}

/* attribute ``name`` of obj is None (1), is not (0), or raised (-1) */
static int
is_none(PyObject *obj, PyObject *name)
{
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL)
        return -1;
    Py_DECREF(value);
    return value == Py_None;
}

/* Make ``kept`` (an _Alike of mpicoll.engine.likeness) on the call's
 * objects as its made() does, where it is a library call without a count
 * agreement whose send and receive buffers (if it has both) are apart:
 * RAN, DECLINED (mpi4py refused the arguments: undone), FAILED, or
 * MISSED (not such a call: Likeness.alike decides) */
static int
made(Gate *g, PyObject *kept, PyObject *const *objects)
{
    int simple = is_none(kept, str_agreement);
    if (simple == 1) {
        PyObject *flat = PyObject_GetAttr(kept, str_flat);
        simple = flat == NULL ? -1 : flat == Py_False;
        Py_XDECREF(flat);
    }
    if (simple != 1)
        return simple < 0 ? FAILED : MISSED;
    PyObject *pair = PyObject_GetAttr(kept, str_pair);
    PyObject *slots = PyObject_GetAttr(kept, str_slots);
    PyObject *stamped = PyObject_GetAttr(kept, str_stamped);
    int done = FAILED;
    if (pair == NULL || slots == NULL || stamped == NULL)
        goto out;
    done = MISSED;
    if (!PyTuple_CheckExact(slots) || PyTuple_GET_SIZE(slots) > 4 ||
            (pair != Py_None && (!PyTuple_CheckExact(pair) ||
                                 PyTuple_GET_SIZE(pair) != 2)))
        goto out;
    PyObject *args[4];
    Py_ssize_t n = PyTuple_GET_SIZE(slots);
    for (Py_ssize_t k = 0; k < n + (pair != Py_None ? 2 : 0); k++) {
        PyObject *at = k < n ? PyTuple_GET_ITEM(slots, k) :
            PyTuple_GET_ITEM(pair, k - n);
        Py_ssize_t i = PyLong_Check(at) ? PyLong_AsSsize_t(at) : -1;
        if (i < 0 || i > 3) {
            PyErr_Clear();
            goto out;
        }
        if (k < n)
            args[k] = objects[i];
    }
    if (pair != Py_None &&
            !apart(objects[PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 0))],
                   objects[PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 1))]))
        goto out;  /* overlapping, or not plain buffers: alike() says */
    done = outcome(PyObject_Vectorcall(stamped, args, n, NULL), g->refused);
    if (done == DECLINED) {
        PyObject *undo = PyObject_GetAttr(kept, str_undo);
        if (undo == NULL) {
            done = FAILED;
        } else {
            if (undo != Py_None) {
                PyObject *r = PyObject_CallNoArgs(undo);
                if (r == NULL)
                    done = FAILED;
                Py_XDECREF(r);
            }
            Py_DECREF(undo);
        }
    }
out:
    Py_XDECREF(pair);
    Py_XDECREF(slots);
    Py_XDECREF(stamped);
    return done;
}

static int
is_spec(PyObject *obj)
{
    return PyList_CheckExact(obj) || PyTuple_CheckExact(obj);
}

/* 1: the replay table holds an entry at the call's key (items: at its
 * second key, where buf or a is a message spec: the ids of their first
 * items, as mpicoll.engine.replay's _items_key); 0: not; -1: an error */
static int
in_table(PyObject *replays, PyObject *const *objects, int items)
{
    PyObject *key = PyTuple_New(items ? 3 : 2);
    if (key == NULL)
        return -1;
    for (int i = 0; i < 2; i++) {
        PyObject *obj = objects[i];
        if (items && is_spec(obj) && PySequence_Fast_GET_SIZE(obj) > 0)
            obj = PySequence_Fast_GET_ITEM(obj, 0);
        PyObject *id = PyLong_FromVoidPtr(obj);
        if (id == NULL) {
            Py_DECREF(key);
            return -1;
        }
        PyTuple_SET_ITEM(key, i, id);
    }
    if (items) {
        PyObject *kinds = PyTuple_Pack(2, (PyObject *)&PyList_Type,
                                       (PyObject *)&PyTuple_Type);
        if (kinds == NULL) {
            Py_DECREF(key);
            return -1;
        }
        PyTuple_SET_ITEM(key, 2, kinds);
    }
    int known = PyDict_Contains(replays, key);
    Py_DECREF(key);
    return known;
}

/* A miss: the call kept by likeness run at once where it is simple (see
 * made), else the answer of the Python twin's path: fallback (objects,
 * or a message spec's items, in the replay table) or Likeness.alike */
PyObject *
missed(Gate *g, PyObject *name, PyObject *algorithm,
       PyObject *const *objects)
{
    PyObject *full[] = {name, algorithm, objects[0], objects[1], objects[2],
                        objects[3]};
    if (g->kinds == NULL)
        return PyObject_Vectorcall(g->fallback, full, 6, NULL);
    int known = in_table(g->replays, objects, 0);
    if (known == 0 && (is_spec(objects[0]) || is_spec(objects[1])))
        known = in_table(g->replays, objects, 1);
    if (known < 0)
        return NULL;
    if (known)
        return PyObject_Vectorcall(g->fallback, full, 6, NULL);
    if (PyDict_GET_SIZE(g->kinds) == 0)
        Py_RETURN_FALSE;
    PyObject *key = PyObject_Vectorcall(g->key, full, 6, NULL);
    if (key == NULL)
        return NULL;
    PyObject *kept = PyDict_GetItemWithError(g->kinds, key);  /* borrowed */
    Py_DECREF(key);
    if (kept == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_FALSE;
    }
    Py_INCREF(kept);  /* the call may drop it from the table */
    int done = made(g, kept, objects);
    Py_DECREF(kept);
    if (done != MISSED)
        return answer(done);
    return PyObject_Vectorcall(g->alike, full, 6, NULL);
}

int
alike_ready(void)
{
    str_agreement = PyUnicode_InternFromString("agreement");
    str_flat = PyUnicode_InternFromString("flat");
    str_slots = PyUnicode_InternFromString("slots");
    str_pair = PyUnicode_InternFromString("pair");
    str_stamped = PyUnicode_InternFromString("stamped");
    str_undo = PyUnicode_InternFromString("undo");
    return str_agreement && str_flat && str_slots && str_pair &&
        str_stamped && str_undo ? 0 : -1;
}
