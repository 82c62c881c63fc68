"""Hierarchical algorithms: a stage inside each node, a stage across nodes.

They run on the flat communicator like every other schedule, ranks as
integers; what they add is the node map ``nodes``, the node of every rank
(``(0, 0, 1, 1, 2)``: five ranks in nodes of two), which the registry
passes to builders registered with ``topology=True``: the MPI layer gives
:attr:`mpicoll.engine.context.Context.nodes`, and ``mpicoll.sim.data.simulate(...,
nodes=...)`` any map, to study machines one does not have. Without a map
every rank is on one node. ``auto`` never picks these: they are reached by
name (``algorithm=``, ``MPICOLL_<COLLECTIVE>_ALGORITHM``, a rules file).

Each stage is an existing component run by a group of ranks through a
:class:`~mpicoll.schedule.group.Subgroup`: the ring reduce-scatter and
allgather, the pairwise reduce-scatter, the Rabenseifner and
recursive-doubling allreduces, the binomial reduce and broadcast. Nothing
here is a new ring or tree.

Uneven nodes: each node cuts the vector into as many blocks as it has
ranks, so nodes of different sizes cut it differently. Cutting at every
node's block boundaries gives pieces that lie in one block of each node
(:func:`~mpicoll.topo.shared_segments`); each piece is reduced across
nodes by the ranks holding it, one per node, a rank of a smaller node
taking part once per piece of its block, pieces in vector order (the same
order on every rank, so nobody waits on a piece its peer has not reached).

Non-commutative ops: reducing inside a node first combines ranks that are
neighbours in rank order only when the node is a run of consecutive ranks.
So the reductions here group ranks by :func:`~mpicoll.topo.reduction_groups`:
the nodes for a commutative op; for any other op the maximal runs of
consecutive ranks on one node (the nodes themselves when placement is by
blocks, as ``mpiexec`` does by default). The result is then exactly
``x0 op x1 op ... op x{p-1}`` for any placement, and no constraint is
declared: a round-robin placement (``(0, 1, 0, 1)``) just turns every
rank into its own group, and the algorithm into its flat cross-node stage.
"""

from __future__ import annotations

from mpicoll.coll import allgather, allreduce, bcast, reduce, reduce_scatter
from mpicoll.coll.registry import register
from mpicoll.schedule.core import Schedule, ScheduleBuilder, Span
from mpicoll.schedule.group import Subgroup
from mpicoll.topo import (
    block_bounds,
    block_partition,
    locate,
    node_groups,
    reduction_groups,
    shared_segments,
)


def two_level_allreduce(rank: int, count: int, groups,
                        commutative: bool) -> Schedule:
    """Reduce-scatter inside each group, allreduce across, allgather inside.

    ``groups`` partitions the ranks (for a non-commutative op: runs of
    consecutive ranks, in rank order). Group ``g`` of ``L`` members cuts the
    vector into ``L`` near-equal blocks; member ``l`` ends the reduce-scatter
    with block ``l`` reduced over its group (ring, in ``recv``; pairwise for
    a non-commutative op, into scratch; a group of one keeps its ``send``).
    Each piece of :func:`~mpicoll.topo.shared_segments` is then allreduced
    across groups by the members holding it, in group order (Rabenseifner,
    or recursive doubling for a non-commutative op), into its place in
    ``recv``; a ring allgather inside the group completes every member's
    vector. In place, ``send`` is ``recv``: the ring reduce-scatter keeps
    its partial sums there (as the ring allreduce does), the pairwise one
    reads all of ``send`` before anything writes ``recv``.
    """
    g, local = locate(rank, groups)
    members = groups[g]
    counts = block_partition(count, len(members))
    first, stop = block_bounds(counts)[local:local + 2]  # this rank's block
    src, whole = Span("send", 0, count), Span("recv", 0, count)
    b = ScheduleBuilder()
    group = Subgroup(b, members)
    if len(members) == 1:
        reduced = src
    elif commutative:
        reduced = whole.sub(first, stop)
        reduce_scatter.ring_steps(group, local, len(members), counts, src,
                                  reduced, whole)
    else:
        reduced = b.alloc(counts[local])
        group.embed(reduce_scatter.pairwise(local, len(members), counts,
                                            commutative=False),
                    send=src, recv=reduced)
    across = (allreduce.rabenseifner if commutative
              else allreduce.recursive_doubling)
    for lo, hi, owners in shared_segments(count, map(len, groups)):
        if owners[g] != local:
            continue
        holders = Subgroup(b, [h[o] for h, o in zip(groups, owners)])
        holders.embed(across(g, len(groups), hi - lo, commutative=commutative),
                      send=reduced.sub(lo - first, hi - first),
                      recv=whole.sub(lo, hi))
    allgather.ring_steps(group, local, len(members), counts, whole)
    return b.build()


@register("allreduce", "hierarchical", topology=True)
def hierarchical(rank, size, count, *, commutative, nodes) -> Schedule:
    """Reduce-scatter inside the node, allreduce across nodes, allgather inside.

    For long vectors on several nodes: each of a node's ``L`` ranks owns
    ``1/L`` of the vector after the node's ring reduce-scatter, and all of
    them allreduce their slices across nodes at once, each with its peers
    of the same local rank (Rabenseifner), before a ring allgather inside
    the node; only ``n/L`` per rank crosses nodes. See
    :func:`two_level_allreduce`; uneven nodes and non-commutative ops as in
    the module docstring (any op, any placement).

    Rounds: ``2(L-1) + 2 floor(log2 m)`` on ``m`` nodes of ``L``: ``2(L-1)``
    inside, ``2 floor(log2 m)`` across, ``+2`` if m is not a power of two
    (recursive doubling, ``floor(log2 m)``, ``+2`` likewise, for a
    non-commutative op); a rank of a smaller node runs one cross-node
    allreduce per piece of its block.
    Bytes sent per rank: ``2n (L-1)/L`` inside the node, ``2 (n/L)(m-1)/m``
    across (``(n/L) log2 m`` for a non-commutative op).
    Temp memory: one block (``n/L``) for the ring's landing, about half a
    block for the Rabenseifner stage; non-commutative: the reduced block,
    the pairwise landing blocks and a block for recursive doubling.
    Reference: Horovod's hierarchical allreduce (NCCL reduce-scatter, MPI
    allreduce across nodes, NCCL allgather; Sergeev & Del Balso 2018);
    Open MPI ``coll/han``.

    Trace, p=4 in nodes of 2 (``(0, 0, 1, 1)``), halves H0, H1: inside,
    0 and 1 swap halves and reduce (0 holds H0 of ``x0+x1``, 1 holds H1),
    2 and 3 likewise; across, 0 and 2 allreduce H0 while 1 and 3 allreduce
    H1 (Rabenseifner of two: swap quarters, reduce, swap back); inside,
    0 and 1 swap their reduced halves, 2 and 3 theirs.
    """
    return two_level_allreduce(rank, count,
                               reduction_groups(nodes, commutative),
                               commutative)


@register("allreduce", "hierarchical_reduce_bcast", topology=True)
def hierarchical_reduce_bcast(rank, size, count, *, commutative,
                              nodes) -> Schedule:
    """Reduce to each node's leader, allreduce among leaders, broadcast inside.

    For short vectors on several nodes: the fewest messages across nodes,
    one rank per node exchanging the whole vector. MPICH calls this
    ``smp``; it is registered as a second name rather than a parameter of
    :func:`hierarchical` because the two share no stage, and named like
    the flat ``reduce_bcast`` after what it composes. A node's leader is
    its lowest rank (for a non-commutative op, the lowest rank of each run
    of consecutive ranks, see the module docstring). Stages: binomial
    reduce inside the node (:func:`mpicoll.coll.reduce.binomial_steps`),
    recursive-doubling allreduce among the leaders, binomial broadcast
    inside the node. Any op, any placement.

    Rounds: ``2 ceil(log2 L) + floor(log2 m)`` on ``m`` nodes
    of ``L``: the reduce and the broadcast inside, recursive doubling
    across (``+2`` if m is not a power of two).
    Bytes sent: ``n`` per non-leader to its parent, ``n log2 m`` per leader
    across nodes, ``n`` per child in the broadcast.
    Temp memory: ``count`` on ranks with children in the reduction tree
    (where children's vectors land), and ``count`` more on the leaders of
    several nodes (recursive doubling).
    Reference: MPICH ``MPIR_Allreduce_intra_smp``; Open MPI ``coll/han``.

    Trace, p=4 in nodes of 2 (``(0, 0, 1, 1)``): 1 sends ``x1`` to 0, 3
    sends ``x3`` to 2; 0 and 2 swap ``x0+x1`` and ``x2+x3`` and reduce;
    0 sends the result to 1, 2 to 3.
    """
    groups = reduction_groups(nodes, commutative)
    g, local = locate(rank, groups)
    size_g = len(groups[g])
    data = Span("recv", 0, count)
    b = ScheduleBuilder()
    group = Subgroup(b, groups[g])
    reduce.binomial_steps(group, local, size_g, 0, Span("send", 0, count),
                          data, commutative)
    if local == 0:
        leaders = Subgroup(b, [members[0] for members in groups])
        leaders.embed(allreduce.recursive_doubling(g, len(groups), count,
                                                   commutative=commutative),
                      send=data, recv=data)
    bcast.binomial_steps(group, local, size_g, 0, data)
    return b.build()


@register("bcast", "hierarchical", topology=True)
def hierarchical_bcast(rank, size, count, *, root, nodes) -> Schedule:
    """Binomial broadcast from the root to one rank per node, then inside each node.

    The root stands in for its own node's leader (no extra hop); every
    other node's leader is its lowest rank. Both stages are
    :func:`mpicoll.coll.bcast.binomial_steps`, so each byte crosses to a
    node once. Any root, nodes and placement.

    Rounds: ``ceil(log2 m) + ceil(log2 L)`` on ``m`` nodes of ``L``
    along the deepest path: across the nodes, then inside them (a
    binomial tree sends to one child per round).
    Bytes sent: ``n`` per child (the root ``n ceil(log2 m)`` across nodes
    plus its children inside).
    Temp memory: none.
    Reference: MPICH ``MPIR_Bcast_intra_smp``; Open MPI ``coll/han``.

    Trace, p=4 in nodes of 2 (``(0, 0, 1, 1)``), root 1: 1 sends to 2
    (node 1's leader); then 1 sends to 0 and 2 to 3.
    """
    groups = node_groups(nodes)
    g, local = locate(rank, groups)
    g_root, local_root = locate(root, groups)
    heads = [root if h == g_root else members[0]
             for h, members in enumerate(groups)]
    data = Span("recv", 0, count)
    b = ScheduleBuilder()
    if rank == heads[g]:
        bcast.binomial_steps(Subgroup(b, heads), g, len(groups), g_root, data)
    bcast.binomial_steps(Subgroup(b, groups[g]), local, len(groups[g]),
                         local_root if g == g_root else 0, data)
    return b.build()


def _class_layout(groups, g: int) -> list[list[list[int]]]:
    """Node ``g``'s allgather layout: for each member ``j``, the classes it
    holds (``j, j+L, j+2L ...`` below the widest node's size, ``L`` the
    node's size), each as its ranks in node order."""
    widest = max(map(len, groups))
    size_g = len(groups[g])
    return [[[members[c] for members in groups if c < len(members)]
             for c in range(j, widest, size_g)]
            for j in range(size_g)]


@register("allgather", "hierarchical", topology=True)
def hierarchical_allgather(rank, size, count, *, nodes) -> Schedule:
    """Allgather across nodes among same-local-rank peers, then inside each node.

    Class ``c`` is the ranks whose local rank is ``c``, one per node.
    First each class allgathers its blocks across nodes (ring), all
    classes at once; then each node allgathers its members' classes
    (ring). Every rank works across nodes on ``1/L`` of its node's data, so
    the composition with leaders (gather to a leader, allgather among
    leaders, broadcast inside: Open MPI ``han``) is not used: it sends the
    same bytes across nodes per node but through one rank, and its
    broadcast moves ``n log2 L`` per leader inside the node where this
    allgather moves ``n (L-1)/L`` per rank. On a node with fewer ranks than
    the widest, member ``c % L`` stands in for the missing local rank
    ``c``: it joins class ``c``'s allgather with an empty block of its own
    and brings that class home (a rank in several classes runs their
    allgathers in class order). The work vector is laid out member by
    member, so each member's classes are one contiguous block of the
    node's allgather; when that layout is not rank order (nodes of
    consecutive ranks, for instance) it lives in scratch and local copies
    put the blocks in place. Any nodes and placement.

    Rounds: ``(m-1) + (L-1)`` on ``m`` nodes of ``L``: ``m-1`` across,
    then ``L-1`` inside (a stand-in: ``m-1`` per class).
    Bytes sent per rank: ``(m-1)`` blocks across nodes, ``m (L-1)`` blocks
    inside, ``n (p-1)/p`` in all (``n`` the output) as for the flat ring.
    Temp memory: ``n`` elements and one pass of local copies, none where
    the layout is rank order (one node, one rank per node, round-robin
    placement).
    Reference: Sack & Gropp 2012 (allgather one dimension after the other);
    Thakur, Rabenseifner & Gropp 2005 (ring).

    Trace, p=4 in nodes of 2 (``(0, 0, 1, 1)``): across, 0 and 2 swap
    blocks B0, B2 while 1 and 3 swap B1, B3; inside, 0 and 1 swap
    ``[B0 B2]`` and ``[B1 B3]``, 2 and 3 likewise; copies reorder the
    work vector ``B0 B2 B1 B3`` into ``recv``.
    """
    groups = node_groups(nodes)
    g, local = locate(rank, groups)
    members = groups[g]
    layout = _class_layout(groups, g)
    order = [r for held in layout for ranks in held for r in ranks]
    place = {r: i for i, r in enumerate(order)}
    b = ScheduleBuilder()
    out = Span("recv", 0, size * count)
    work = out if order == list(range(size)) else b.alloc(size * count)

    def blocks(first: int, n: int) -> Span:
        """``n`` blocks of the work vector from block ``first`` on."""
        return work.sub(first * count, (first + n) * count)

    b.copy(Span("send", 0, count), blocks(place[rank], 1))
    for k, ranks in enumerate(layout[local]):
        c = local + k * len(members)  # the class
        peers = Subgroup(b, [h[c % len(h)] for h in groups])
        allgather.ring_steps(peers, g, len(groups),
                             [count if c < len(h) else 0 for h in groups],
                             blocks(place[ranks[0]], len(ranks)))
    allgather.ring_steps(Subgroup(b, members), local, len(members),
                         [count * sum(map(len, held)) for held in layout],
                         blocks(0, size))
    start = 0  # copy runs of consecutive ranks into place
    for i in range(1, size + 1):
        if i == size or order[i] != order[i - 1] + 1:
            b.copy(blocks(start, i - start),
                   out.sub(order[start] * count, (order[i - 1] + 1) * count))
            start = i
    return b.build()
