"""mpicoll: collective communication on MPI, native and hand-built.

    from mpi4py import MPI
    import mpicoll

    comm = mpicoll.Comm(MPI.COMM_WORLD)      # an MPI.Intracomm, same handle
    comm.Allreduce(MPI.IN_PLACE, x, MPI.SUM, algorithm="ring")   # mpi4py face
    pg = mpicoll.ProcessGroup(comm)
    pg.all_reduce(x, op=mpicoll.ReduceOp.SUM, algorithm="auto")  # torch face
    pg.all_reduce(cupy_x, async_op=True).wait()       # CuPy, stream-ordered
    mpicoll.algorithms("allreduce")   # ['native', 'recursive_doubling', ...]
"""

from mpicoll.bucketing import GradientBucketer
from mpicoll.coll.registry import algorithms
from mpicoll.comm import Comm
from mpicoll.cuda import cuda_aware
from mpicoll.choosing import set_explain
from mpicoll.errors import (
    AlgorithmError,
    BufferSpecError,
    CollectiveCheckError,
    CollectiveTimeoutError,
    ConstraintError,
    InvalidArgumentError,
    MpicollError,
    OpTypeError,
    UnknownAlgorithmError,
)
from mpicoll.ops import Op
from mpicoll.persistent import Persistent, startall
from mpicoll.process_group import P2POp, ProcessGroup, ReduceOp
from mpicoll.work import Work, testall, waitall

__version__ = "0.1.0"

__all__ = [
    "AlgorithmError",
    "BufferSpecError",
    "CollectiveCheckError",
    "CollectiveTimeoutError",
    "Comm",
    "ConstraintError",
    "GradientBucketer",
    "InvalidArgumentError",
    "Mesh",
    "MpicollError",
    "Op",
    "OpTypeError",
    "P2POp",
    "Persistent",
    "ProcessGroup",
    "ReduceOp",
    "UnknownAlgorithmError",
    "Work",
    "algorithms",
    "cuda_aware",
    "set_explain",
    "startall",
    "testall",
    "waitall",
]


def __getattr__(name):
    # Mesh loads on first use, so that ``python -m mpicoll.mesh`` runs the
    # module fresh (runpy warns about a module the package imported).
    if name == "Mesh":
        from mpicoll.mesh import Mesh

        return Mesh
    raise AttributeError(f"module 'mpicoll' has no attribute {name!r}")
