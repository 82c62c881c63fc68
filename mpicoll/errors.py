"""Exceptions: each names the rank, the collective and the algorithm.

Everything a caller can get wrong locally is raised *before* any message
moves, so a bad call on one rank fails on that rank instead of hanging the
others inside a half-started collective (the other ranks then block in the
collective; run under ``python -m mpi4py`` so the exception aborts the job).

    MpicollError
    ├── InvalidArgumentError (also ValueError): bad buffer, count, root, op
    │   ├── BufferSpecError: a buffer that is too small, read-only,
    │   │   │                 non-contiguous or of an unusable type
    │   │   ├── BufferSpecTypeError (also TypeError)
    │   │   ├── BufferSpecKeyError (also KeyError): no MPI datatype for it
    │   │   ├── BufferSpecBufferError (also BufferError)
    │   │   ├── BufferSpecOverflowError (also OverflowError)
    │   │   └── BufferSpecMPIError (also MPIArgumentError)
    │   ├── OpTypeError (also TypeError): op not defined for the dtype
    │   │   └── MPIOpTypeError (also MPIArgumentError): MPI.ERR_OP
    │   ├── InvalidArgumentTypeError (also TypeError)
    │   ├── InvalidArgumentOverflowError (also OverflowError)
    │   ├── MPIArgumentError (also MPI.Exception): what MPI itself rejects
    │   │   └── RootError: MPI.ERR_ROOT
    │   └── CollectiveCheckError: check mode found the ranks' calls differ
    ├── AlgorithmError (also ValueError)
    │   ├── UnknownAlgorithmError: no such name for the collective
    │   └── ConstraintError: the algorithm cannot run these arguments
    └── CollectiveTimeoutError (also TimeoutError): a deadline ran out
"""

from __future__ import annotations

from mpi4py import MPI


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


class CollectiveCheckError(InvalidArgumentError):
    """Check mode (:mod:`mpicoll.guard.check_mode`): the ranks' fingerprints of one
    call differ, or another rank's local checks of it failed. Raised with
    the same text on every rank; ``seq`` is the call's sequence number on
    the communicator."""

    def __init__(self, what: str, *, seq: int, **where) -> None:
        self.seq = seq
        super().__init__(what, **where)


class CollectiveTimeoutError(MpicollError, TimeoutError):
    """A deadline expired: ``wait(timeout=...)`` or the communicator's
    (:mod:`mpicoll.guard.watchdog`). ``pending`` lists the peers not heard from
    (sends not yet matched or receives not yet arrived), ``missing`` the
    ranks that had not arrived at the call, ``seq`` its sequence number
    (None for an explicit ``wait(timeout=)``)."""

    def __init__(self, what: str, *, pending=(), missing=(),
                 seq: int | None = None, **where) -> None:
        self.pending = tuple(pending)
        self.missing = tuple(missing)
        self.seq = seq
        super().__init__(what, **where)


# -- dual-typed errors: each is also the exception mpi4py raises ------------
# A rejected argument raises an MpicollError (naming rank and call) that is
# also an instance of what mpi4py raises for the same argument, so code
# written against mpi4py's exceptions keeps working.


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong type (mpi4py: ``TypeError``)."""


class InvalidArgumentOverflowError(InvalidArgumentError, OverflowError):
    """An integer too large for MPI's C type (mpi4py: ``OverflowError``)."""


class MPIArgumentError(InvalidArgumentError, MPI.Exception):
    """An argument MPI itself rejects; also an ``MPI.Exception`` whose
    ``Get_error_class()`` is the class MPI raises for it (``MPI.ERR_ROOT``,
    ``MPI.ERR_COUNT``, ``MPI.ERR_TYPE``, ``MPI.ERR_OP``, ``MPI.ERR_BUFFER``
    ...). ``str()`` is mpicoll's message, not MPI's error string."""

    def __init__(self, what: str, *, error_class: int, **where) -> None:
        self.mpi_error_class = int(error_class)
        super().__init__(what, **where)

    def __int__(self) -> int:  # MPI.Exception reads its code through int()
        return self.mpi_error_class

    def __str__(self) -> str:
        return Exception.__str__(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


class RootError(MPIArgumentError):
    """The root is not a rank of the communicator (``MPI.ERR_ROOT``)."""


class MPIOpTypeError(OpTypeError, MPIArgumentError):
    """MPI does not define the predefined op on the datatype
    (``MPI.ERR_OP``)."""


class BufferSpecTypeError(BufferSpecError, InvalidArgumentTypeError):
    """Not a buffer or message specification (mpi4py: ``TypeError``)."""


class BufferSpecKeyError(BufferSpecError, KeyError):
    """A format or type code with no MPI datatype (mpi4py: ``KeyError``)."""

    def __str__(self) -> str:  # KeyError's own would quote the message
        return Exception.__str__(self)


class BufferSpecBufferError(BufferSpecError, BufferError):
    """Memory that cannot be used as asked: not contiguous, not writable,
    a dtype DLPack cannot export (mpi4py: ``BufferError``)."""


class BufferSpecOverflowError(BufferSpecError, InvalidArgumentOverflowError):
    """A count or displacement beyond MPI's C integers."""


class BufferSpecMPIError(BufferSpecError, MPIArgumentError):
    """A buffer argument MPI rejects: a null or uncommitted datatype
    (``MPI.ERR_TYPE``), a negative count (``MPI.ERR_COUNT``), the same
    buffer for sending and receiving (``MPI.ERR_BUFFER``)."""


class PendingMPIError(MPI.Exception):
    """What MPI would raise, found before the call: :func:`spec_error`
    makes it a :class:`BufferSpecMPIError` with mpicoll's message."""

    def __init__(self, error_class: int, what: str) -> None:
        super().__init__(error_class)
        self.what = what


_SPEC_ERRORS = ((KeyError, BufferSpecKeyError),
                (BufferError, BufferSpecBufferError),
                (OverflowError, BufferSpecOverflowError),
                (TypeError, BufferSpecTypeError), (ValueError, BufferSpecError))
_DYNAMIC: dict = {}


def spec_error(exc: BaseException, where: dict) -> MpicollError:
    """``exc``, raised parsing a buffer argument, as a
    :class:`BufferSpecError` naming ``where`` that is still an instance of
    ``exc``'s type (and of ``MPI.Exception``, with its error class)."""
    if isinstance(exc, MPI.Exception):
        what = getattr(exc, "what", None) or str(exc).splitlines()[0]
        return BufferSpecMPIError(what, error_class=exc.Get_error_class(),
                                  **where)
    what = str(exc.args[0]) if len(exc.args) == 1 else str(exc)
    for base, cls in _SPEC_ERRORS:
        if isinstance(exc, base):
            return cls(what, **where)
    kind = type(exc)
    if kind not in _DYNAMIC:
        try:
            _DYNAMIC[kind] = type(f"BufferSpec{kind.__name__}",
                                  (BufferSpecError, kind), {})
        except TypeError:  # an incompatible layout
            _DYNAMIC[kind] = BufferSpecError
    return _DYNAMIC[kind](what, **where)


def spans(ranks: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``0-2, 5``: rank lists in messages stay short
    at scale."""
    out, start = [], None
    for i, q in enumerate(ranks):
        if start is None:
            start = q
        if i + 1 == len(ranks) or ranks[i + 1] != q + 1:
            out.append(str(q) if q == start else f"{start}-{q}")
            start = None
    return ", ".join(out)
