"""Hierarchical all-to-all: gather to a node leader, leaders exchange, leaders scatter.

What mixture-of-experts layers run across nodes: every rank has a block
for every other, and a flat all-to-all sends ``p-1`` messages per rank,
``L(p-L)`` per node of ``L`` ranks, across the network. Here each node's
leader (its lowest rank) collects its members' whole send buffers, packs
what the node sends each other node into one message, exchanges those
with the other leaders (a pairwise alltoallv among leaders, one message
per pair of nodes), unpacks what arrived into each member's receive
layout and sends each member its buffer: ``m-1`` messages per node across
the network on ``m`` nodes, each ``L²`` blocks long (uneven nodes: ``L_g
L_h`` blocks from node ``g`` to ``h``).

The node map is the registry's ``nodes=`` (:mod:`mpicoll.coll.hierarchical`
says where it comes from); nodes may be uneven and need not be runs of
consecutive ranks. One node is a gather and a scatter through its leader;
one rank per node is the pairwise exchange itself (with no copies when
nodes are numbered in rank order, as they then always are).
"""

from __future__ import annotations

from typing import NamedTuple

from mpicoll.coll import alltoall
from mpicoll.coll.registry import register
from mpicoll.schedule.core import Schedule, ScheduleBuilder, Span
from mpicoll.schedule.group import Subgroup
from mpicoll.topo import block_bounds, locate, node_groups


def _pairs(sources, dests):
    """``(s, d)`` for every source then every destination: the order of
    the blocks in a packed message between two nodes."""
    return [(s, d) for s in sources for d in dests]


def _copies(b: ScheduleBuilder, moves) -> None:
    """Copy each ``(src, dst)`` pair, a pair joining the one before it when
    both spans continue it (one copy per run)."""
    run = None
    for src, dst in moves:
        if not len(src):
            continue
        if run and run[0].buf == src.buf and run[0].stop == src.start \
                and run[1].buf == dst.buf and run[1].stop == dst.start:
            run = (Span(src.buf, run[0].start, src.stop),
                   Span(dst.buf, run[1].start, dst.stop))
            continue
        if run:
            b.copy(*run)
        run = (src, dst)
    if run:
        b.copy(*run)


def _node_bounds(matrix, groups, members) -> tuple[tuple, tuple]:
    """The leaders' alltoallv as the leader of ``members`` sees it: the
    block bounds of its packed outgoing and incoming messages, one block
    per node of ``groups``. Node ``g`` sends node ``h`` its members'
    blocks for ``h``'s members, source member then destination member; a
    leader needs only its node's row and column of the nodes' matrix
    (O(p L), where the whole of it would be O(p²))."""
    def node_to_node(src, dst) -> int:
        return sum(matrix[s][d] for s, d in _pairs(src, dst))

    return (block_bounds(node_to_node(members, h) for h in groups),
            block_bounds(node_to_node(h, members) for h in groups))


def _packing(matrix, groups, members, packed: Span, row_of, rows):
    """``(src, dst)`` copies that fill the leader's outgoing message
    ``packed``: node after node of ``groups``, each member's blocks for
    that node's members, taken from the member's send buffer
    (``row_of[s]``, laid out by ``rows[s]``)."""
    at = 0
    for other in groups:
        for s, d in _pairs(members, other):
            n = matrix[s][d]
            yield row_of[s].sub(rows[s][d], rows[s][d] + n), packed.sub(at, at + n)
            at += n


def _unpacking(matrix, groups, members, arrived: Span, col_of, cols):
    """``(src, dst)`` copies that empty the leader's incoming message
    ``arrived`` (laid out as :func:`_packing` lays out the other node's)
    into each member's receive buffer (``col_of[d]``, laid out by
    ``cols[d]``: blocks in source-rank order)."""
    at = 0
    for other in groups:
        for s, d in _pairs(other, members):
            n = matrix[s][d]
            yield arrived.sub(at, at + n), col_of[d].sub(cols[d][s], cols[d][s] + n)
            at += n


def _lead(b: ScheduleBuilder, size: int, matrix, groups, g: int) -> None:
    """The part of the leader of node ``g`` (its lowest rank): receive its
    members' send buffers, pack, exchange with the other leaders, unpack,
    send each member its receive buffer (:func:`hierarchical_alltoall`).
    With one rank per node, numbered in rank order, the packed layouts are
    ``send``'s and ``recv``'s own: nothing is copied."""
    members = groups[g]
    leader, others = members[0], members[1:]
    # the members' send (row) and receive (column) layouts
    rows = {s: block_bounds(matrix[s]) for s in members}
    cols = {d: block_bounds(row[d] for row in matrix) for d in members}
    out_bounds, in_bounds = _node_bounds(matrix, groups, members)
    direct = len(members) == 1 and sum(groups, ()) == tuple(range(size))
    if direct:
        packed, arrived = Span("send", 0, out_bounds[-1]), \
            Span("recv", 0, in_bounds[-1])
    else:
        packed, arrived = b.alloc(out_bounds[-1]), b.alloc(in_bounds[-1])
    row_of = {leader: Span("send", 0, rows[leader][size]),
              **{s: b.alloc(rows[s][size]) for s in others}}
    col_of = {leader: Span("recv", 0, cols[leader][size]),
              **{d: b.alloc(cols[d][size]) for d in others}}
    if others:
        b.exchange(recvs=[(s, row_of[s]) for s in others])
    if not direct:
        _copies(b, _packing(matrix, groups, members, packed, row_of, rows))
    Subgroup(b, [grp[0] for grp in groups]).embed(
        alltoall.pairwise_blocks(g, len(groups), out_bounds, in_bounds),
        send=packed, recv=arrived)
    if not direct:
        _copies(b, _unpacking(matrix, groups, members, arrived, col_of, cols))
    if others:
        b.exchange(sends=[(d, col_of[d]) for d in others])


@register(("alltoall", "alltoallv"), "hierarchical", topology=True)
def hierarchical_alltoall(rank, size, count, *, nodes) -> Schedule:
    """Gather to each node's leader, pairwise exchange among leaders, scatter inside.

    Stages (module docstring): each member sends its whole ``send`` to its
    node's leader (one message); the leader packs, per destination node
    ``h``, its members' blocks for ``h``'s members (source member, then
    destination member) with local copies; the leaders run the pairwise
    alltoallv (:func:`mpicoll.coll.alltoall.pairwise`) on those packed
    messages; each leader unpacks what came from node ``h`` into every
    member's receive layout (blocks in source-rank order) and sends each
    member its buffer (one message). ``count`` is the matrix (alltoall's
    ``count`` arrives as the constant one): alltoall and alltoallv alike.
    Any nodes, uneven too, and any placement.

    Rounds: ``m+1`` on ``m`` nodes of ``L >= 2`` ranks: a gather, ``m-1``
    pairwise steps among leaders, a scatter (``p-1`` with one rank per
    node).
    Bytes sent: ``n`` per member to its leader and ``n`` back (``n`` the
    send buffer: ``p count``); per leader across nodes ``L n (m-1)/m``
    (uneven: what its node sends the others) in ``m-1`` messages, and
    ``(L-1) n`` inside.
    Temp memory: on a leader ``(4L-2) n``: its members' send buffers,
    the packed outgoing and incoming messages, its members' receive
    buffers; none on the others, and none with one rank per node.
    Reference: Open MPI ``coll/han`` (gather, leaders' collective,
    scatter); Sack & Gropp 2012 (hierarchical all-to-all); DeepSpeed-MoE
    and Tutel's two-level all-to-all (Rajbhandari et al. 2022; Hwang et
    al. 2023).

    Trace, p=4 in nodes of 2 (``(0, 0, 1, 1)``), blocks ``b(s→d)``: 1
    sends its whole buffer to 0, 3 to 2; 0 packs ``b(0→2) b(0→3) b(1→2)
    b(1→3)`` for node 1 and swaps it with 2's pack for node 0; 0 unpacks
    into its ``recv`` and 1's receive layout, 2 likewise; 0 sends 1 its
    four blocks, 2 sends 3 its four.
    """
    groups = node_groups(nodes)
    g, _ = locate(rank, groups)
    leader = groups[g][0]
    b = ScheduleBuilder()
    if rank == leader:
        _lead(b, size, count, groups, g)
    else:  # its whole send buffer to the leader, its receive buffer back
        b.exchange(sends=[(leader, Span("send", 0, sum(count[rank])))])
        b.exchange(recvs=[(leader, Span("recv", 0,
                                        sum(row[rank] for row in count)))])
    return b.build()


def _landing(b: ScheduleBuilder, spans: list[Span]) -> tuple[Span, list]:
    """One span for a message made of ``spans`` back to back: the spans
    themselves where they already are so (one buffer, each starting where
    the one before it stops), else scratch; and the ``(piece of it, span)``
    pairs that then move between the two (none in place)."""
    spans = [s for s in spans if len(s)]
    if not spans:
        return Span("tmp", 0, 0), []
    if all(a.buf == z.buf and a.stop == z.start for a, z in zip(spans, spans[1:])):
        return Span(spans[0].buf, spans[0].start, spans[-1].stop), []
    whole = b.alloc(sum(map(len, spans)))
    at, pairs = 0, []
    for s in spans:
        pairs.append((whole.sub(at, at + len(s)), s))
        at += len(s)
    return whole, pairs


def _packed(b: ScheduleBuilder, spans: list[Span]) -> Span:
    """``spans`` back to back in one span, copied into scratch if need be
    (:func:`_landing`)."""
    whole, pairs = _landing(b, spans)
    _copies(b, [(span, piece) for piece, span in pairs])
    return whole


class _Blocks(NamedTuple):
    """Where ``rank``'s blocks lie in its own buffers, ``matrix`` the
    alltoallv matrix."""

    rank: int
    matrix: tuple
    rows: tuple  # bounds of its send blocks (its row)
    cols: tuple  # bounds of its receive blocks (its column)

    @classmethod
    def of(cls, rank: int, matrix) -> _Blocks:
        return cls(rank, matrix, block_bounds(matrix[rank]),
                   block_bounds(row[rank] for row in matrix))

    def sent(self, d: int) -> Span:
        """Its block for rank ``d``, in ``send``."""
        return Span("send", self.rows[d], self.rows[d] + self.matrix[self.rank][d])

    def received(self, s: int) -> Span:
        """Its block from rank ``s``, in ``recv``."""
        return Span("recv", self.cols[s], self.cols[s] + self.matrix[s][self.rank])


def _regroup_in_node(b: ScheduleBuilder, mine: _Blocks, groups, g: int,
                     local: int) -> dict:
    """Round 1 of :func:`hierarchical_2d`, inside node ``g``: this rank
    (rank ``local`` of its node) sends each peer ``l'`` its blocks for rank
    ``l'`` of every node, in one message, and receives from each peer its
    blocks for rank ``local`` of every node into scratch. Returns where
    each of those is: ``(source peer, node h)`` -> the span holding the
    peer's block for rank ``local`` of node ``h`` (this rank's own in its
    ``send``)."""
    held = {}
    sends, recvs = [], []
    for other, q in enumerate(groups[g]):
        if q == mine.rank:
            continue
        sends.append((q, _packed(b, [mine.sent(grp[other]) for grp in groups])))
        sizes = [mine.matrix[q][grp[local]] for grp in groups]
        arrived = b.alloc(sum(sizes))
        at = 0
        for h, n in enumerate(sizes):
            held[q, h] = arrived.sub(at, at + n)
            at += n
        recvs.append((q, arrived))
    for h, grp in enumerate(groups):
        held[mine.rank, h] = mine.sent(grp[local])
    b.exchange(sends=sends, recvs=recvs)
    return held


def _exchange_across(b: ScheduleBuilder, mine: _Blocks, groups, g: int,
                     local: int, held: dict) -> None:
    """Rounds 2..m of :func:`hierarchical_2d`: in round ``k+1`` this rank
    sends rank ``local`` of node ``g+k`` what its node holds for it
    (``held``, packed), and receives from rank ``local`` of node ``g-k``
    what that node holds for this rank, straight into ``recv`` where those
    blocks lie together there."""
    m, peers = len(groups), groups[g]
    outgoing = {h: _packed(b, [held[q, h] for q in peers])
                for h in range(m) if h != g}
    for k in range(1, m):
        to, frm = groups[(g + k) % m], groups[(g - k) % m]
        landing, places = _landing(b, [mine.received(s) for s in frm])
        b.exchange(sends=[(to[local], outgoing[(g + k) % m])],
                   recvs=[(frm[local], landing)])
        _copies(b, places)


@register(("alltoall", "alltoallv"), "hierarchical_2d", topology=True)
def hierarchical_2d(rank, size, count, *, nodes) -> Schedule:
    """Two-level all-to-all: regroup inside each node, then every rank exchanges across.

    Tutel's and DeepSpeed-MoE's 2-D hierarchical all-to-all, with every
    rank of a node taking part across the network (no leader): on ``m``
    nodes of ``L`` ranks, rank ``l`` of node ``g`` first sends each rank
    ``l'`` of its own node, in one message, its blocks for the ranks ``l'``
    of every node (the intra-node all-to-all, one round); then, in ``m-1``
    pairwise steps over the nodes, it sends rank ``l`` of node ``g+k`` the
    ``L`` blocks its node's ranks have for it, and receives from rank
    ``l`` of node ``g-k`` the ``L`` blocks for itself. Each rank sends
    ``m-1`` messages across the network, each ``L`` blocks long, where the
    pairwise exchange sends ``L(m-1)`` single blocks and the leader-based
    ``hierarchical`` all-to-all funnels the node's ``L²``-block messages
    through one rank. ``count`` is the matrix (alltoall's ``count``
    arrives as the constant one): alltoall and alltoallv alike. Nodes must
    all hold the same number of ranks;
    uneven nodes run the pairwise exchange instead
    (:func:`mpicoll.coll.alltoall.pairwise`).

    Rounds: ``m`` on ``m`` nodes of ``L >= 2`` ranks (one inside the node,
    ``m-1`` across), ``m-1`` with one rank per node.
    Bytes sent: per rank ``n (L-1)/L`` inside the node and ``n (m-1)/m``
    across (``n`` the send buffer: ``p count``) in ``L-1`` and ``m-1``
    messages.
    Temp memory: at most ``3n`` per rank: the packed intra-node messages
    and what arrives of them, the packed outgoing messages across, and
    what arrives across where a node's ranks are not consecutive.
    Reference: Tutel (Hwang et al. 2023, 2DH all-to-all); DeepSpeed-MoE
    (Rajbhandari et al. 2022, hierarchical all-to-all); Sack & Gropp 2012.

    Trace, p=4 in nodes of 2 (``(0, 0, 1, 1)``), blocks ``b(s→d)``: round
    1: 0 sends 1 ``b(0→1) b(0→3)``, 1 sends 0 ``b(1→0) b(1→2)``, 2 and 3
    likewise; round 2: 0 sends 2 ``b(0→2) b(1→2)`` and receives ``b(2→0)
    b(3→0)``, 1 and 3 swap the blocks for each other likewise.
    """
    groups = node_groups(nodes)
    if len({len(members) for members in groups}) != 1:
        return alltoall.pairwise(rank, size, count)
    g, local = locate(rank, groups)
    mine = _Blocks.of(rank, count)
    b = ScheduleBuilder()
    held = _regroup_in_node(b, mine, groups, g, local)
    _copies(b, [(held[q, g], mine.received(q)) for q in groups[g]])  # own node's
    _exchange_across(b, mine, groups, g, local, held)
    return b.build()
