"""Hand-built algorithms as schedule builders, one module per collective.

Named after MPICH's ``src/mpi/coll`` (the design guide suggested
``mpicoll/algorithms``; that name is taken by the public function
``mpicoll.algorithms(collective)``, and a subpackage of the same name would
shadow it for ``import mpicoll.algorithms`` users).

Importing this package registers every algorithm; see
:mod:`mpicoll.coll.registry`. Nothing here imports mpi4py or CuPy:
schedules are plain data that the executor runs on MPI and the simulator
runs in one process.
"""

from mpicoll.coll import (  # noqa: F401  (imported to register)
    allgather,
    allreduce,
    alltoall,
    barrier,
    bcast,
    gather,
    hierarchical,
    hierarchical_alltoall,
    reduce,
    reduce_scatter,
    scan,
    scatter,
    torus,
)
from mpicoll.coll.registry import Algorithm, algorithms, lookup, register

__all__ = ["Algorithm", "algorithms", "lookup", "register"]
