"""Who talks to whom: pure integer arithmetic on (rank, size, count, root).

Nothing here knows about buffers or MPI; algorithms combine these helpers
into schedules.
"""

from mpicoll.topo.blocks import block_bounds, block_partition, fold_bounds
from mpicoll.topo.trees import (
    binomial_children,
    binomial_parent,
    floor_pow2,
    fold_rank,
    unfold_rank,
)

__all__ = [
    "binomial_children",
    "binomial_parent",
    "block_bounds",
    "block_partition",
    "floor_pow2",
    "fold_bounds",
    "fold_rank",
    "unfold_rank",
]
