/* What mpicoll.engine._gate's two sources share: the replay gate (_gate.c)
 * and the face method that calls it without a Python frame (_face.c). */

#ifndef MPICOLL_GATE_H
#define MPICOLL_GATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    PyObject_HEAD
    PyObject *entry;     /* a tuple of ENTRY_LEN items */
    PyObject *fallback;  /* fallback(name, algorithm, buf, a, b, c) */
    PyObject *declined;  /* the exception that answers False */
    /* of the engine's Likeness (all NULL without one): its replay table,
     * its table of calls kept by likeness, its key, its alike() and the
     * exceptions by which mpi4py refuses arguments */
    PyObject *replays, *kinds, *key, *alike, *refused;
    int pass_once;       /* answer the next call False, unchecked */
    vectorcallfunc vectorcall;
} Gate;

extern PyTypeObject GateType;

/* Face ready and added to the module (with REQUIRED): 0, or -1 */
int face_ready(PyObject *module);

/* The gate's answer to a memo (name, algorithm, objects: buf, a, b, c):
 * Py_True (the call ran), Py_False (it must take the full path), or NULL
 * (it raised). A new reference. */
PyObject *gate_answer(Gate *g, PyObject *name, PyObject *algorithm,
                      PyObject *const *objects);

#endif
