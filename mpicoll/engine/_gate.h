/* What mpicoll.engine._gate's sources share: the replay gate (_gate.c),
 * its miss path by likeness (_alike.c) and the face method that calls it
 * without a Python frame (_face.c). */

#ifndef MPICOLL_GATE_H
#define MPICOLL_GATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* TWIN_VERSION: mpicoll.guard.twins's, passed by setup.py */

typedef struct {
    PyObject_HEAD
    PyObject *entry;     /* a tuple of ENTRY_LEN items */
    PyObject *fallback;  /* fallback(name, algorithm, buf, a, b, c) */
    PyObject *declined;  /* the exception that answers False */
    /* of the engine's Likeness (all NULL without one): its replay table,
     * its table of calls kept by likeness, its key and the key's fits(),
     * its alike() and the exceptions by which mpi4py refuses arguments */
    PyObject *replays, *kinds, *key, *fits, *alike, *refused;
    /* the key and kept call the miss path made last (NULL: none yet) */
    PyObject *last_key, *last_kept;
    int pass_once;       /* answer the next call False, unchecked */
    vectorcallfunc vectorcall;
} Gate;

extern PyTypeObject GateType;

/* what trying a kept call did */
enum { RAN, MISSED, DECLINED, FAILED };

/* What a call that returned ``result`` (NULL: it raised) did: RAN,
 * DECLINED (it raised ``declined``: cleared) or FAILED (_gate.c) */
int outcome(PyObject *result, PyObject *declined);

/* The gate's answer for RAN (Py_True), DECLINED (Py_False) or FAILED
 * (NULL: the error set) */
PyObject *answer(int done);

/* The gate's answer to a call that missed its entry (_alike.c), and that
 * file's setup: 0, or -1 */
PyObject *missed(Gate *g, PyObject *name, PyObject *algorithm,
                 PyObject *const *objects);
int alike_ready(void);

/* Face ready and added to the module (with REQUIRED): 0, or -1 */
int face_ready(PyObject *module);

/* The gate's answer to a memo (name, algorithm, objects: buf, a, b, c):
 * Py_True (the call ran), Py_False (it must take the full path), or NULL
 * (it raised). A new reference. */
PyObject *gate_answer(Gate *g, PyObject *name, PyObject *algorithm,
                      PyObject *const *objects);

#endif
