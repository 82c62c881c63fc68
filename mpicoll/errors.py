"""Exceptions: each names the rank, the collective and the algorithm.

Everything a caller can get wrong locally is raised *before* any message
moves, so a bad call on one rank fails on that rank instead of hanging the
others inside a half-started collective (the other ranks then block in the
collective; run under ``python -m mpi4py`` so the exception aborts the job).

    MpicollError
    ├── InvalidArgumentError (also ValueError): bad buffer, count, root, op
    │   ├── BufferSpecError: a buffer that is too small, read-only,
    │   │                     non-contiguous or of an unusable type
    │   └── OpTypeError (also TypeError): op not defined for the dtype
    ├── AlgorithmError (also ValueError)
    │   ├── UnknownAlgorithmError: no such name for the collective
    │   └── ConstraintError: the algorithm cannot run these arguments
    └── CollectiveTimeoutError (also TimeoutError): ``wait(timeout=)`` ran out
"""

from __future__ import annotations


class MpicollError(Exception):
    """Base class; ``str()`` reads ``[rank R] collective (algorithm): what``."""

    def __init__(self, what: str, *, rank: int | None = None,
                 collective: str | None = None,
                 algorithm: str | None = None) -> None:
        self.what = what
        self.rank = rank
        self.collective = collective
        self.algorithm = algorithm
        super().__init__(self._format())

    def _format(self) -> str:
        where = f"[rank {self.rank}] " if self.rank is not None else ""
        call = self.collective or ""
        if self.algorithm:
            call += f" ({self.algorithm})"
        return f"{where}{call}: {self.what}" if call else f"{where}{self.what}"


class InvalidArgumentError(MpicollError, ValueError):
    """A local argument is wrong: count, root, op or buffer."""


class BufferSpecError(InvalidArgumentError):
    """A buffer is too small, read-only, non-contiguous or unusable."""


class OpTypeError(InvalidArgumentError, TypeError):
    """MPI does not define the operation for the buffer's type."""


class AlgorithmError(MpicollError, ValueError):
    """The requested algorithm cannot be used."""


class UnknownAlgorithmError(AlgorithmError):
    """No algorithm of that name is registered for the collective."""


class ConstraintError(AlgorithmError):
    """The algorithm's declared constraints rule out these arguments."""


class CollectiveTimeoutError(MpicollError, TimeoutError):
    """``wait(timeout=...)`` expired; ``pending`` lists the peers not heard
    from (sends not yet matched or receives not yet arrived)."""

    def __init__(self, what: str, *, pending=(), **where) -> None:
        self.pending = tuple(pending)
        super().__init__(what, **where)
