"""Alltoall and alltoallv: rank ``i``'s block ``j`` lands in rank ``j``'s block ``i``.

Buffers: ``send`` holds ``p`` blocks of ``count`` elements, block ``j``
(at ``j * count``) bound for rank ``j``; ``recv`` holds ``p`` blocks, block
``i`` from rank ``i``. Alltoallv takes ``count`` as the ``p`` × ``p``
matrix, ``count[i][j]`` the elements rank ``i`` sends rank ``j``: rank
``r``'s ``send`` packs row ``r`` in order, its ``recv`` column ``r``. They
never alias: an in-place call is staged through a copy by the layer above
(see :mod:`mpicoll.schedule.layout`). Alltoall is alltoallv with the
constant matrix: linear and pairwise are one builder each on the matrix,
registered for both (the registry widens alltoall's ``count``,
:mod:`mpicoll.coll.registry`); Bruck's is alltoall's alone.
"""

from __future__ import annotations

from mpicoll.coll.registry import register
from mpicoll.schedule.core import Schedule, ScheduleBuilder, Span
from mpicoll.topo import block_bounds, floor_pow2


def _block(buf: str, j: int, bounds) -> Span:
    """Block ``j`` (mod the number of blocks) of ``buf``, packed at ``bounds``."""
    j %= len(bounds) - 1
    return Span(buf, bounds[j], bounds[j + 1])


def _layouts(rank: int, matrix):
    """Bounds of ``rank``'s ``send`` blocks (its row of the matrix) and
    ``recv`` blocks (its column)."""
    return block_bounds(matrix[rank]), block_bounds(row[rank] for row in matrix)


@register(("alltoall", "alltoallv"), "linear")
def linear(rank, size, count) -> Schedule:
    """All ``p-1`` sends and receives posted at once, then the own block copied.

    ``count`` is the matrix (alltoall's ``count`` arrives as the constant
    one); an empty block travels as no message at all. Sends go to ``r+1,
    r+2, ...`` and receives come from ``r-1, r-2, ...`` so that no rank is
    everyone's first target. Any p and matrix, zeros too. A rank reads
    only its row (its send counts) and its column (its receive counts),
    just what MPI's alltoallv gives it; every rank passes the same whole
    matrix, which the MPI layer assembles. Lets MPI overlap everything, at
    the price of ``2(p-1)`` outstanding requests per rank (and congestion
    on large p).

    Rounds: 1.
    Bytes sent: ``n (p-1)/p`` per rank with equal blocks (``n`` the whole
    send buffer); its row ``count[r]`` but the diagonal by rank ``r``;
    every block straight from ``send`` into its place in ``recv``, in
    ``p-1`` messages.
    Temp memory: none.
    Reference: Thakur, Rabenseifner & Gropp 2005; MPICH
    ``alltoall_intra_scattered`` and ``alltoallv_intra_scattered``
    (unbatched); Open MPI ``basic_linear`` alltoall and alltoallv.

    Trace, p=4, rank 1: posts sends of blocks 2, 3, 0 to ranks 2, 3, 0 and
    receives from ranks 0, 3, 2 into blocks 0, 3, 2 (at offsets the prefix
    sums of its row and of column 1); then copies its block 1.
    """
    out, into = _layouts(rank, count)
    b = ScheduleBuilder()
    b.exchange(
        sends=[((rank + i) % size, _block("send", rank + i, out))
               for i in range(1, size)],
        recvs=[((rank - i) % size, _block("recv", rank - i, into))
               for i in range(1, size)])
    b.copy(_block("send", rank, out), _block("recv", rank, into))
    return b.build()


@register(("alltoall", "alltoallv"), "pairwise")
def pairwise(rank, size, count) -> Schedule:
    """Pairwise exchange: in step ``i`` send to ``r+i``, receive from ``r-i``.

    ``count`` is the matrix, as for :func:`linear`. Any p and matrix,
    zeros too; shifts for every p (MPICH pairs ``r`` with ``r XOR i`` for
    powers of two, which costs the same here). One message in flight each
    way per rank: the choice for long messages. Each step lasts as long as
    its largest block.

    Rounds: ``p-1`` (the own block is copied during the last); at most,
    a step in which both blocks are empty dropping out.
    Bytes sent: ``n (p-1)/p`` per rank with equal blocks (``n`` the whole
    send buffer); its row ``count[r]`` but the diagonal by rank ``r``; one
    block per step straight from ``send`` into its place in ``recv``.
    Temp memory: none.
    Reference: Thakur, Rabenseifner & Gropp 2005; MPICH
    ``alltoall_intra_pairwise``; Open MPI
    ``ompi_coll_base_alltoallv_intra_pairwise``.

    Trace, p=4, rank 1: step 1: block 2 to rank 2, block 0 from rank 0;
    step 2: block 3 to 3, block 3 from 3; step 3: block 0 to 0, block 2
    from 2. With ``count[1][2] == count[0][1] == 0`` step 1 drops out.
    """
    return pairwise_blocks(rank, size, *_layouts(rank, count))


def pairwise_blocks(rank, size, out, into) -> Schedule:
    """:func:`pairwise` from ``rank``'s own block bounds: ``out`` of its
    ``send`` blocks (its row of the matrix), ``into`` of its ``recv``
    blocks (its column), as :func:`~mpicoll.topo.block_bounds` gives them.
    For a caller that knows only its row and column (the hierarchical
    all-to-all's leaders: the nodes' whole matrix is O(p²) to build)."""
    b = ScheduleBuilder()
    for i in range(1, size):
        b.exchange(sends=[((rank + i) % size, _block("send", rank + i, out))],
                   recvs=[((rank - i) % size, _block("recv", rank - i, into))])
    b.copy(_block("send", rank, out), _block("recv", rank, into))
    return b.build()


def _merge(rows):
    """Runs of rows of spans, a row joining the run above it when each of its
    spans continues the run's: ``[(run, rows in it)]``. One message or one
    copy then moves a whole run."""
    runs: list[tuple[tuple[Span, ...], int]] = []
    for row in rows:
        if runs and all(a.buf == s.buf and a.stop == s.start
                        for a, s in zip(runs[-1][0], row)):
            run, n = runs[-1]
            runs[-1] = (tuple(Span(a.buf, a.start, s.stop)
                              for a, s in zip(run, row)), n + 1)
        else:
            runs.append((tuple(row), 1))
    return runs


def _distances(size: int) -> list[int]:
    """Bruck's hop distances for ``size`` ranks: the powers of two below
    ``size``, largest first."""
    distances = []
    d = floor_pow2(size - 1) if size > 1 else 0
    while d:
        distances.append(d)
        d //= 2
    return distances


class _BruckRank:
    """One rank's Bruck all-to-all while :func:`bruck` builds it.

    Position ``i`` (``1 .. p-1``) holds the block bound for rank ``r+i``;
    ``at[i]`` is where that block is now: ``send`` block ``r+i`` at first,
    then wherever it landed. Scratch: two buffers of ``largest`` elements,
    ``"out"`` (packing) and ``"in"`` (landing), each allocated on first use.
    """

    def __init__(self, b: ScheduleBuilder, rank: int, size: int, count: int,
                 largest: int):
        self.b, self.rank, self.size, self.count = b, rank, size, count
        self.bounds = block_bounds((count,) * size)
        self.at = {i: self.block("send", rank + i) for i in range(1, size)}
        self.largest = largest
        self.scratch: dict[str, Span] = {}

    def block(self, buf: str, j: int) -> Span:
        """Block ``j`` (mod p) of ``buf``."""
        return _block(buf, j, self.bounds)

    def home(self, i: int) -> Span:
        """Position ``i``'s final place, ``recv`` block ``r-i``, where
        nothing but position ``i`` ever lands."""
        return self.block("recv", self.rank - i)

    def buffer(self, name: str) -> Span:
        """Scratch buffer ``name`` (``"out"`` or ``"in"``), allocated on
        first use."""
        if name not in self.scratch:
            self.scratch[name] = self.b.alloc(self.largest)
        return self.scratch[name]

    def outgoing(self, d: int, items: list[int],
                 first: bool) -> tuple[list[Span], list[int]]:
        """The spans this rank sends in the round of distance ``d`` (moving
        positions ``items``, ascending), and how many blocks each message
        it receives holds. The first round sends straight from ``send``, a
        message per run of blocks (two where they wrap past block
        ``p-1``), and receives as many from a sender whose blocks wrap
        alike; later rounds send one message, packed into ``"out"`` unless
        its blocks are one run of ``send``."""
        count = self.count
        out = [run for (run,), _ in _merge((self.at[i],) for i in items)]
        if first:
            sender = self.rank - d  # its positions are still its send blocks
            return out, [n for _, n in _merge((self.block("send", sender + i),)
                                              for i in items)]
        if len(out) > 1 or out[0].buf != "send":
            packed = self.buffer("out").sub(0, len(items) * count)
            for (src, dst), _ in _merge(
                    (self.at[i], packed.sub(j * count, (j + 1) * count))
                    for j, i in enumerate(items)):
                self.b.copy(src, dst)
            out = [packed]
        return out, [len(items)]

    def incoming(self, d: int, items: list[int], pieces: list[int]) -> list:
        """The receives of the round of distance ``d`` from rank ``r-d``, one
        per message of ``pieces`` blocks: straight into the blocks' homes
        where those form one run, else into ``"in"``; ``at`` follows."""
        count, recvs, done = self.count, [], 0
        for n in pieces:
            group = items[done:done + n]
            homes = _merge((self.home(i),) for i in group)
            if len(homes) == 1:
                target = homes[0][0][0]
                self.at.update((i, self.home(i)) for i in group)
            else:
                target = self.buffer("in").sub(done * count, (done + n) * count)
                self.at.update((i, target.sub(j * count, (j + 1) * count))
                               for j, i in enumerate(group))
            recvs.append(((self.rank - d) % self.size, target))
            done += n
        return recvs

    def land(self, d: int, items: list[int]) -> None:
        """After the round of distance ``d``: the blocks it left in scratch
        that skip the next round (bit ``d/2`` clear) copied home, where they
        wait or stay."""
        landing = [i for i in items
                   if self.at[i].buf == "tmp" and not i & (d // 2)]
        for (src, dst), _ in _merge((self.at[i], self.home(i)) for i in landing):
            self.b.copy(src, dst)
        self.at.update((i, self.home(i)) for i in landing)


@register("alltoall", "bruck")
def bruck(rank, size, count) -> Schedule:
    """Bruck: ``ceil(log2 p)`` rounds for any p, blocks hopping by powers of two.

    Position ``i`` (``1 .. p-1``) at rank ``r`` holds a block bound for rank
    ``r+i``; it travels ``i`` ranks up, one hop per set bit of ``i``, every
    rank moving its positions alike. In the round of distance ``d`` (powers
    of two, largest first; Bruck et al. allow any order) rank ``r`` sends
    the blocks of the positions with bit ``d`` set to ``r+d``, in one
    message in ascending position order, and receives the same positions
    from ``r-d``. Largest first, the first round's positions ``[d, p)`` sit
    in ``send`` as they are: they go out straight from there (two messages
    on ranks where they wrap past block ``p-1``), so nothing is rotated
    before. Later rounds pack their blocks into scratch (from ``send``,
    from the blocks just received, or from where a block waited) unless
    they form one run of ``send``. Position ``i``'s final place, ``recv``
    block ``r-i``, is where nothing but position ``i`` ever lands: a block
    that skips the next round waits there, and at its last hop lands there
    for good, so nothing is rotated after either; a message of one block is
    received straight into it. Any p.

    Rounds: ``ceil(log2 p)``; one message per round (two in the first on
    ranks whose blocks wrap).
    Bytes sent per rank: ``count`` times the number of set bits in
    ``1 .. p-1``, about ``n log2(p) / 2`` (``n`` the whole send buffer):
    latency-optimal for short blocks, wasteful for long ones.
    Temp memory: two buffers of the largest round (landing, packing), at
    most ``count * floor(p/2)`` elements each; none for ``p <= 3``.
    Reference: Bruck, Ho, Kipnis, Upfal & Weathersby 1997; Thakur,
    Rabenseifner & Gropp 2005; MPICH ``alltoall_intra_brucks`` (which
    rotates first, takes the smallest distance first, and rotates back).

    Trace, p=4, rank 0: round 1 (d=2): sends ``send`` blocks 2, 3 to rank 2
    and receives rank 2's blocks 0, 1 (positions 2, 3) in one message (rank
    3 gets rank 1's blocks 3, 0 as two); position 2 lands in ``recv`` block
    2. Round 2 (d=1): packs position 1 (``send`` block 1) and position 3
    (rank 2's block 1, just received), sends them to rank 1, receives rank
    3's positions 1, 3 and lands them in ``recv`` blocks 3 and 1; copies its
    own block 0.
    """
    b = ScheduleBuilder()
    distances = _distances(size)
    moving = {d: [i for i in range(1, size) if i & d] for d in distances}
    largest = max((len(m) for m in moving.values()), default=0) * count
    me = _BruckRank(b, rank, size, count, largest)
    for d in distances:
        items = moving[d]
        out, pieces = me.outgoing(d, items, first=d == distances[0])
        recvs = me.incoming(d, items, pieces)
        b.exchange(sends=[((rank + d) % size, s) for s in out], recvs=recvs)
        me.land(d, items)
    b.copy(me.block("send", rank), me.block("recv", rank))
    return b.build()
