"""Generalized requests with no callbacks, for
:mod:`mpicoll.engine.requests`: :func:`start` gives the handle of a new one
and the callable that completes it; :func:`put` writes a handle into an
``MPI.Request`` object (mpicoll's request classes hold the generalized
request's handle in their own); :func:`usable` says whether the engine
makes them.

They need the progress thread, which completes them while the caller may
be waiting in mpi4py's functions (:mod:`mpicoll.engine.progress`), and
are not made on Open MPI: completed from that thread while the caller
waits, they crashed the Open MPI leg of the test suite intermittently
(Open MPI 5.0.11: its ``MPI_Grequest_complete`` reads, after waking the
waiter, whether the request was freed, and calls the free function a
second time if so; and a crash remained with no free function). There,
as without the thread, the engine returns a
:class:`~mpicoll.engine.work.Work` instead.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

from mpi4py import MPI

from mpicoll.engine import progress

#: an MPI_Request as ctypes sees it: an int (MPICH) or a pointer (Open MPI)
HANDLE = {ctypes.sizeof(t): t for t in (ctypes.c_int, ctypes.c_void_p)}[
    MPI._sizeof(MPI.Request)]

_OPEN_MPI = MPI.get_vendor()[0] == "Open MPI"


def usable() -> bool:
    """Whether a call launched now may return a generalized request."""
    return not _OPEN_MPI and progress.enabled()


def put(request: MPI.Request, handle: int) -> None:
    """Make ``request`` (an object of mpi4py's) hold ``handle``."""
    HANDLE.from_address(MPI._addressof(request)).value = handle


def start() -> tuple[int, Callable[[], None]]:
    """``(handle, complete)``: a new generalized request."""
    request = MPI.Grequest.Start(None, None, None)
    return MPI._handleof(request), request.Complete
