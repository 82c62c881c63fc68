"""Who talks to whom: pure integer arithmetic on (rank, size, count, root)
and, for topology-aware algorithms, on the node map.

Nothing here knows about buffers or MPI; algorithms combine these helpers
into schedules.
"""

from mpicoll.topo.blocks import block_bounds, block_partition, fold_bounds
from mpicoll.topo.nodes import (
    canonical_nodes,
    contiguous_runs,
    locate,
    node_groups,
    reduction_groups,
    shared_segments,
    square_grid,
)
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
    "canonical_nodes",
    "contiguous_runs",
    "floor_pow2",
    "fold_bounds",
    "fold_rank",
    "locate",
    "node_groups",
    "reduction_groups",
    "shared_segments",
    "square_grid",
    "unfold_rank",
]
