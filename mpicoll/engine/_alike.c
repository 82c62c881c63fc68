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
 * The kind it made last is tried first, before the replay table: where
 * the call fits its key (Keys.fits: no key made, hashed or looked up),
 * that kept call is made, unless it left the table since (its ``direct``
 * then None). A call on objects the replay table also holds is then
 * made by likeness: the same library call on the same objects (a kept
 * call with a count agreement, or a hand-built one, is never made here;
 * in check mode nothing is kept by likeness).
 *
 * Cost: a tuple of two ids and one dict lookup (two for message specs),
 * the last kind's fit (else the key and its lookup), one attribute read
 * of the kept call, and the stamped call.
 */

#include "_gate.h"

static PyObject *str_direct;

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

/* Make ``kept`` (an _Alike of mpicoll.engine.likeness) on the call's
 * objects as its made() does, where it is a library call without a count
 * agreement (its ``direct``: stamped, slots, pair, undo) whose send and
 * receive buffers (if it has both) are apart: RAN, DECLINED (mpi4py
 * refused the arguments: undone), FAILED, or MISSED (not such a call:
 * Likeness.alike decides) */
static int
made(Gate *g, PyObject *kept, PyObject *const *objects)
{
    PyObject *direct = PyObject_GetAttr(kept, str_direct);
    if (direct == NULL)
        return FAILED;
    int done = MISSED;
    if (!PyTuple_CheckExact(direct) || PyTuple_GET_SIZE(direct) != 4)
        goto out;  /* None: Likeness.alike makes it */
    PyObject *stamped = PyTuple_GET_ITEM(direct, 0);
    PyObject *slots = PyTuple_GET_ITEM(direct, 1);
    PyObject *pair = PyTuple_GET_ITEM(direct, 2);
    PyObject *undo = PyTuple_GET_ITEM(direct, 3);
    if (!PyTuple_CheckExact(slots) || PyTuple_GET_SIZE(slots) > 4 ||
            (pair != Py_None && (!PyTuple_CheckExact(pair) ||
                                 PyTuple_GET_SIZE(pair) != 2)))
        goto out;
    PyObject *args[4];
    Py_ssize_t at[6];  /* the slots' positions, then the pair's */
    Py_ssize_t n = PyTuple_GET_SIZE(slots);
    Py_ssize_t m = n + (pair != Py_None ? 2 : 0);
    for (Py_ssize_t k = 0; k < m; k++) {
        PyObject *i = k < n ? PyTuple_GET_ITEM(slots, k) :
            PyTuple_GET_ITEM(pair, k - n);
        at[k] = PyLong_Check(i) ? PyLong_AsSsize_t(i) : -1;
        if (at[k] < 0 || at[k] > 3) {
            PyErr_Clear();
            goto out;
        }
        if (k < n)
            args[k] = objects[at[k]];
    }
    if (pair != Py_None && !apart(objects[at[n]], objects[at[n + 1]]))
        goto out;  /* overlapping, or not plain buffers: alike() says */
    done = outcome(PyObject_Vectorcall(stamped, args, n, NULL), g->refused);
    if (done == DECLINED && undo != Py_None) {
        PyObject *r = PyObject_CallNoArgs(undo);
        if (r == NULL)
            done = FAILED;
        Py_XDECREF(r);
    }
out:
    Py_DECREF(direct);  /* (it held what was read of it) */
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

/* made() of the kind the miss path ran last, where the call (full: its
 * memo) fits its key: RAN, DECLINED, FAILED, or MISSED (none kept, not
 * that kind, or one no longer made here: the key's lookup decides) */
static int
last_made(Gate *g, PyObject *const *full)
{
    if (g->last_key == NULL)
        return MISSED;
    PyObject *args[] = {g->last_key, full[0], full[1], full[2], full[3],
                        full[4], full[5]};
    PyObject *fits = PyObject_Vectorcall(g->fits, args, 7, NULL);
    if (fits == NULL)
        return FAILED;
    int same = fits == Py_True;
    Py_DECREF(fits);
    if (!same)
        return MISSED;
    PyObject *kept = g->last_kept;
    Py_INCREF(kept);  /* the call may replace it */
    int done = made(g, kept, full + 2);
    Py_DECREF(kept);
    return done;
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
    int done = last_made(g, full);  /* (the same call the table's would be) */
    if (done != MISSED)
        return answer(done);
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
    if (kept == NULL) {
        Py_DECREF(key);
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_FALSE;
    }
    Py_INCREF(kept);  /* the call may drop it from the table */
    done = made(g, kept, objects);
    if (done == RAN) {  /* the kind to try first next time */
        Py_XSETREF(g->last_key, key);
        Py_XSETREF(g->last_kept, kept);
    } else {
        Py_DECREF(key);
        Py_DECREF(kept);
    }
    if (done != MISSED)
        return answer(done);
    return PyObject_Vectorcall(g->alike, full, 6, NULL);
}

int
alike_ready(void)
{
    str_direct = PyUnicode_InternFromString("direct");
    return str_direct ? 0 : -1;
}
