"""Generalized requests with no callbacks, for
:mod:`mpicoll.engine.requests`: :func:`start` gives the handle of a new one
and the callable that completes it; :func:`put` writes a handle into an
``MPI.Request`` object (mpicoll's request classes hold the generalized
request's handle in their own).

Completion comes from the progress thread while the caller may be blocked
in ``MPI_Wait`` on the same request (that is what generalized requests
are for), and Open MPI 5 has a race there: ``MPI_Grequest_complete`` reads
whether the waiter has already freed the request after waking it, and
when it has, calls the request's free function a second time. mpi4py's
``MPI.Grequest.Start`` always registers its own free function, which
releases a Python object, so a second call corrupts memory (a
segmentation fault at a later, unrelated call). On Open MPI the request
is therefore started through the library's C entry point with no
callbacks at all (which Open MPI accepts, and then has nothing to call
twice); MPICH refuses null callbacks and has no such race, and there
mpi4py's ``Grequest.Start`` is used.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable
from functools import partial

from mpi4py import MPI

#: an MPI_Request as ctypes sees it: an int (MPICH) or a pointer (Open MPI)
HANDLE = {ctypes.sizeof(t): t for t in (ctypes.c_int, ctypes.c_void_p)}[
    MPI._sizeof(MPI.Request)]


def put(request: MPI.Request, handle: int) -> None:
    """Make ``request`` (an object of mpi4py's) hold ``handle``."""
    HANDLE.from_address(MPI._addressof(request)).value = handle


def _library() -> ctypes.CDLL | None:
    """The Open MPI library this process has loaded, else None."""
    if MPI.get_vendor()[0] != "Open MPI":
        return None
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                found = re.search(r"(/\S*/libmpi\.so[.\d]*)$", line.strip())
                if found:
                    return ctypes.CDLL(found.group(1))
    except OSError:
        pass
    return None


_lib = _library()


def _start_mpi4py() -> tuple[int, Callable[[], None]]:
    request = MPI.Grequest.Start(None, None, None)
    return MPI._handleof(request), request.Complete


def _start_c() -> tuple[int, Callable[[], None]]:
    handle = HANDLE()
    code = _lib.MPI_Grequest_start(None, None, None, None,
                                   ctypes.byref(handle))
    if code != MPI.SUCCESS:
        raise MPI.Exception(code)
    return handle.value, partial(_complete_c, HANDLE(handle.value))


def _complete_c(handle) -> None:
    code = _lib.MPI_Grequest_complete(handle)
    if code != MPI.SUCCESS:
        raise MPI.Exception(code)


#: ``start() -> (handle, complete)``: a new generalized request
start = _start_mpi4py if _lib is None else _start_c
