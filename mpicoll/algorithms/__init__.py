"""Hand-built algorithms as schedule builders, one module per collective.

Importing this package registers every algorithm; see
:mod:`mpicoll.algorithms.registry`. Nothing here imports mpi4py or CuPy:
schedules are plain data that the executor runs on MPI and the simulator
runs in one process.
"""

from mpicoll.algorithms import (  # noqa: F401  (imported to register)
    allgather,
    allreduce,
    barrier,
    bcast,
    reduce,
    reduce_scatter,
)
from mpicoll.algorithms.registry import Algorithm, algorithms, lookup, register

__all__ = ["Algorithm", "algorithms", "lookup", "register"]
