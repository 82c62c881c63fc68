"""CUDA device arrays: the runtime seam, CUDA-awareness, location.

Everything mpicoll does to a device array goes through a *runtime*: a small
object with the handful of CUDA operations the library needs (allocate on a
device or in pinned host memory, create streams and events, copy
asynchronously, run kernels on a stream). :class:`CupyRuntime` is the one
shipped, and it is used for CuPy arrays and for any object with
``__cuda_array_interface__`` (a PyTorch CUDA tensor, a Numba array), which
it views without copying. :func:`register_runtime` maps another array type
to another runtime; the test suite uses it to run the device path against
a host-memory model of streams and events on machines without a GPU.

A runtime provides:

``xp``
    the array module (``empty``, ``copyto``, ``divide`` and the ufuncs
    ``add``, ``multiply``, ``maximum``, ... that built-in ops name);
``as_array(obj)``, ``device_of(x)``
    a device array viewing ``obj``; its device number;
``empty(n, dtype, device)``, ``pinned_empty(n, dtype)``
    a device array; a NumPy array in page-locked host memory;
``new_stream(device)``, ``current_stream(device)``, ``new_event(device)``
    streams (``wait_event(e)``, ``synchronize()``) and events
    (``record(stream)``, ``done``, ``synchronize()``);
``use(device, stream)``
    a context manager making ``stream`` current, so that kernels launched
    inside it run there;
``copy_async(dst, src, stream)``
    a copy between device memory and pinned host memory, enqueued on
    ``stream``.

Nothing here imports CuPy until a device array is seen.
"""

from __future__ import annotations

import contextlib
import ctypes
import os

import numpy as np
from mpi4py import MPI

_RUNTIMES: dict[type, object] = {}  # array type -> runtime
_cupy_runtime = None
_library_aware: bool | None = None  # the probe's verdict, once per process

CUDA_MEMCPY_DEFAULT = 4  # cudaMemcpyDefault: direction from the pointers


class CupyRuntime:
    """CuPy as mpicoll uses it (CuPy 12 or newer)."""

    name = "cupy"

    def __init__(self) -> None:
        import cupy
        import cupyx

        self.xp = cupy
        self._cuda = cupy.cuda
        self._empty_pinned = cupyx.empty_pinned

    def as_array(self, obj):
        return self.xp.asarray(obj)  # zero-copy for __cuda_array_interface__

    def device_of(self, x) -> int:
        return x.device.id

    def empty(self, n: int, dtype, device: int):
        with self._cuda.Device(device):
            return self.xp.empty(n, dtype)

    def pinned_empty(self, n: int, dtype) -> np.ndarray:
        return self._empty_pinned((n,), dtype)

    def new_stream(self, device: int):
        with self._cuda.Device(device):
            return self._cuda.Stream(non_blocking=True)

    def current_stream(self, device: int):
        with self._cuda.Device(device):
            return self._cuda.get_current_stream()

    def new_event(self, device: int):
        with self._cuda.Device(device):
            return self._cuda.Event(disable_timing=True)

    @contextlib.contextmanager
    def use(self, device: int, stream):
        with self._cuda.Device(device), stream:
            yield

    def copy_async(self, dst, src, stream) -> None:
        def pointer(x):
            return x.ctypes.data if isinstance(x, np.ndarray) else x.data.ptr

        self._cuda.runtime.memcpyAsync(pointer(dst), pointer(src), src.nbytes,
                                       CUDA_MEMCPY_DEFAULT, stream.ptr)


def register_runtime(array_type: type, runtime) -> None:
    """Treat arrays of ``array_type`` as device arrays run by ``runtime``
    (an object with :class:`CupyRuntime`'s interface); ``None`` removes
    the mapping."""
    if runtime is None:
        _RUNTIMES.pop(array_type, None)
    else:
        _RUNTIMES[array_type] = runtime


def runtime_of(x):
    """The runtime of device array ``x``; None for host memory."""
    kind = type(x)
    if kind is np.ndarray:
        return None
    runtime = _RUNTIMES.get(kind)
    if runtime is None and (kind.__module__.split(".")[0] == "cupy"
                            or hasattr(x, "__cuda_array_interface__")):
        runtime = cupy_runtime()
    return runtime


def cupy_runtime() -> CupyRuntime:
    """The shared :class:`CupyRuntime` (imports CuPy)."""
    global _cupy_runtime
    if _cupy_runtime is None:
        _cupy_runtime = CupyRuntime()
    return _cupy_runtime


def location(x):
    """``(runtime, device)`` of a parsed buffer, or None on the host."""
    runtime = runtime_of(x)
    return None if runtime is None else (runtime, runtime.device_of(x))


def empty_like(x, n: int, dtype=None):
    """An uninitialised 1-D array of ``n`` elements where ``x`` lives."""
    dtype = x.dtype if dtype is None else dtype
    where = location(x)
    if where is None:
        return np.empty(n, dtype)
    runtime, device = where
    return runtime.empty(n, dtype, device)


def copyto(dst, src) -> None:
    """``dst[...] = src`` with ``dst``'s array module: for device arrays a
    copy kernel on the current stream (ordered after whatever that stream
    waits on), for host arrays a NumPy copy."""
    runtime = runtime_of(dst)
    (np if runtime is None else runtime.xp).copyto(dst, src)


def cuda_aware() -> bool:
    """Whether the MPI library can read and write device memory.

    ``MPICOLL_CUDA_AWARE=1`` or ``0`` decides (read at every call).
    Otherwise the library is asked (Open MPI's and MPICH's
    ``MPIX_Query_cuda_support``, or MPICH's ``MPIX_GPU_query_support``)
    and a yes is confirmed by a real round trip of a small CuPy array
    through ``MPI.COMM_SELF``; the verdict is kept for the process. A
    library that says no, or has no query, is taken at its word without
    a probe: handing it a device pointer could crash the process.
    Without CUDA-awareness mpicoll stages device data through pinned host
    memory (:mod:`mpicoll.device.steps`).
    """
    setting = os.environ.get("MPICOLL_CUDA_AWARE", "")
    if setting in ("0", "1"):
        return setting == "1"
    if setting:
        raise ValueError(f"MPICOLL_CUDA_AWARE={setting!r}: expected 0 or 1")
    global _library_aware
    if _library_aware is None:
        _library_aware = bool(library_says_cuda_aware()) and _round_trip()
    return _library_aware


def library_says_cuda_aware() -> bool | None:
    """The MPI library's own answer; None when it has no query."""
    try:
        lib = ctypes.CDLL(MPI.__file__)  # dlsym searches its libmpi too
    except OSError:
        return None
    if hasattr(lib, "MPIX_Query_cuda_support"):
        return bool(lib.MPIX_Query_cuda_support())
    if hasattr(lib, "MPIX_GPU_query_support"):
        supported = ctypes.c_int(0)
        lib.MPIX_GPU_query_support(0, ctypes.byref(supported))  # 0: CUDA
        return bool(supported.value)
    return None


def _round_trip() -> bool:
    """Send a small device array to this process and compare."""
    try:
        cupy = cupy_runtime().xp
        sent = cupy.arange(8, dtype=np.float64) + 1
        got = cupy.zeros_like(sent)
        cupy.cuda.get_current_stream().synchronize()
        MPI.COMM_SELF.Sendrecv(sent, 0, 0, got, 0, 0)
        return bool((got == sent).all())
    except Exception:  # a library that refuses device memory
        return False
