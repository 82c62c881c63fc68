"""Hand-built algorithms as schedule builders, one module per collective.

Named after MPICH's ``src/mpi/coll`` (the design guide suggested
``mpicoll/algorithms``; that name is taken by the public function
``mpicoll.algorithms(collective)``, and a subpackage of the same name would
shadow it for ``import mpicoll.algorithms`` users).

The registry (:mod:`mpicoll.coll.registry`) imports the algorithm
modules, which registers them, the first time an algorithm other than
``native`` is looked up or the algorithms of a collective are listed.
Nothing here imports mpi4py or CuPy: schedules are plain data that the
executor runs on MPI and the simulator runs in one process.
"""

from mpicoll.coll.registry import Algorithm, algorithms, lookup, register

__all__ = ["Algorithm", "algorithms", "lookup", "register"]
