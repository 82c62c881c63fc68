"""Generalized requests with no callbacks, for
:mod:`mpicoll.engine.requests`: :func:`start` gives the handle of a new one
and the callable that completes it; :func:`put` writes a handle into an
``MPI.Request`` object (mpicoll's request classes hold the generalized
request's handle in their own); :func:`usable` says whether the engine
makes them.

Experimental, off unless ``MPICOLL_GREQUESTS=1`` (read at import): with
them, hand-built nonblocking and persistent calls return requests that
mpi4py's ``MPI.Request.Waitall`` and friends take, completed by the
progress thread while the caller may be waiting in those functions. Run
that way, the full test suite used to crash intermittently in its
multi-rank legs (Open MPI 5.0.11 at 2 and 3 ranks, MPICH 5.0.2 at 5),
most likely from the use of freed memory that native persistent requests
then made (their buffers were not kept alive; found with
``tests/memcheck``, fixed): since that fix the tier-2 legs of
``tests/run-all.sh`` (MPICH at 2, 3 and 5 ranks, Open MPI at 2 and 3)
pass with them on, twice each on a 2-vCPU VM. They stay off by default:
a request waited on only through mpi4py's functions completes when the
progress thread next looks at it (1 ms after launch, 10 ms for a call
of one short round), and a hand-built persistent request's handle is
null while inactive. Off, hand-built calls return a
:class:`~mpicoll.engine.work.Work` (and a
:class:`~mpicoll.engine.persistent.Persistent`), which mpi4py's functions
refuse with a ``TypeError``: never a hang.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

from mpi4py import MPI

from mpicoll.engine import progress

#: an MPI_Request as ctypes sees it: an int (MPICH) or a pointer (Open MPI)
HANDLE = {ctypes.sizeof(t): t for t in (ctypes.c_int, ctypes.c_void_p)}[
    MPI._sizeof(MPI.Request)]

_WANTED = os.environ.get("MPICOLL_GREQUESTS", "0").strip().lower() in (
    "1", "true", "yes", "on")


def usable() -> bool:
    """Whether a call launched now may return a generalized request: asked
    for, and the progress thread there to complete it."""
    return _WANTED and progress.enabled()


def put(request: MPI.Request, handle: int) -> None:
    """Make ``request`` (an object of mpi4py's) hold ``handle``."""
    HANDLE.from_address(MPI._addressof(request)).value = handle


def start() -> tuple[int, Callable[[], None]]:
    """``(handle, complete)``: a new generalized request."""
    request = MPI.Grequest.Start(None, None, None)
    return MPI._handleof(request), request.Complete
