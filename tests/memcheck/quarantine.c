/* A NumPy data allocator that holds freed blocks in quarantine.
 *
 * Every freed block of up to SMALL bytes is filled with PATTERN and kept
 * (not returned to malloc) in a ring of RING blocks, with the Python
 * frames that freed it. A block is checked when it leaves the ring and
 * by sweep(): a byte that is no longer PATTERN means something wrote
 * into the memory after NumPy freed it -- typically an MPI request that
 * outlived the buffers it was given. Each such block is reported once,
 * with its bytes and where it was freed, to the file named by
 * MPICOLL_MEMCHECK_LOG (".<pid>" appended, made at the first report;
 * stderr without it).
 *
 * install() makes it the allocator of arrays created afterwards in the
 * calling context; sweep() returns (blocks held, reports so far).
 * Built and run by scripts/memcheck.sh; a testing tool, not part of
 * mpicoll.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SMALL 256
#define RING 60000
#define DEPTH 8
#define PATTERN 0xA5

typedef struct {
    unsigned char *p;
    size_t n;
    PyObject *code[DEPTH];
    int line[DEPTH];
} Held;

static Held ring[RING];
static long next = 0, held = 0, reports = 0;
static FILE *out = NULL;
static char path[4096] = "";

static void report(Held *h)
{
    if (out == NULL && path[0])
        out = fopen(path, "a");
    FILE *f = out ? out : stderr;
    reports++;
    fprintf(f, "memcheck: %zu-byte block written after NumPy freed it:",
            h->n);
    for (size_t i = 0; i < h->n && i < 64; i++)
        fprintf(f, "%s%02x", i % 8 ? "" : " ", h->p[i]);
    fprintf(f, "\n  freed at (innermost first):\n");
    for (int k = 0; k < DEPTH && h->code[k]; k++) {
        PyCodeObject *c = (PyCodeObject *)h->code[k];
        fprintf(f, "    %s:%d in %s\n", PyUnicode_AsUTF8(c->co_filename),
                h->line[k], PyUnicode_AsUTF8(c->co_name));
    }
    fflush(f);
}

/* Report a written block once: its pattern is restored afterwards. */
static void check(Held *h)
{
    for (size_t i = 0; i < h->n; i++) {
        if (h->p[i] != PATTERN) {
            report(h);
            memset(h->p, PATTERN, h->n);
            return;
        }
    }
}

static void release(Held *h)
{
    check(h);
    free(h->p);
    for (int k = 0; k < DEPTH; k++)
        Py_CLEAR(h->code[k]);
}

static void *q_malloc(void *ctx, size_t n) { return malloc(n ? n : 1); }

static void *q_calloc(void *ctx, size_t count, size_t size)
{
    return calloc(count ? count : 1, size ? size : 1);
}

static void *q_realloc(void *ctx, void *p, size_t n)
{
    return realloc(p, n ? n : 1);
}

static void q_free(void *ctx, void *p, size_t n)
{
    if (p == NULL)
        return;
    if (n == 0 || n > SMALL || !PyGILState_Check()) {
        free(p);
        return;
    }
    Held *h = &ring[next];
    if (held == RING)
        release(h);
    else
        held++;
    next = (next + 1) % RING;
    memset(p, PATTERN, n);
    h->p = p;
    h->n = n;
    PyFrameObject *frame = PyEval_GetFrame();
    Py_XINCREF(frame);
    int k = 0;
    for (; frame != NULL && k < DEPTH; k++) {
        h->code[k] = (PyObject *)PyFrame_GetCode(frame);
        h->line[k] = PyFrame_GetLineNumber(frame);
        PyFrameObject *back = PyFrame_GetBack(frame);
        Py_DECREF(frame);
        frame = back;
    }
    Py_XDECREF(frame);
    for (; k < DEPTH; k++)
        h->code[k] = NULL;
}

static PyDataMem_Handler handler = {
    "mpicoll-memcheck", 1, {NULL, q_malloc, q_calloc, q_realloc, q_free}};

static PyObject *install(PyObject *self, PyObject *unused)
{
    const char *log = getenv("MPICOLL_MEMCHECK_LOG");
    if (log != NULL)
        snprintf(path, sizeof path, "%s.%ld", log, (long)getpid());
    PyObject *capsule = PyCapsule_New(&handler, "mem_handler", NULL);
    if (capsule == NULL)
        return NULL;
    PyObject *old = PyDataMem_SetHandler(capsule);
    Py_DECREF(capsule);
    if (old == NULL)
        return NULL;
    Py_DECREF(old);
    Py_RETURN_NONE;
}

static PyObject *sweep(PyObject *self, PyObject *unused)
{
    for (long i = 0; i < held; i++)
        check(&ring[i]);
    return Py_BuildValue("ll", held, reports);
}

static PyMethodDef methods[] = {
    {"install", install, METH_NOARGS, "Use the quarantine allocator."},
    {"sweep", sweep, METH_NOARGS, "Check every held block."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "quarantine", NULL, -1, methods};

PyMODINIT_FUNC PyInit_quarantine(void)
{
    import_array();
    return PyModule_Create(&module);
}
