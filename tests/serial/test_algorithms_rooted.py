"""Tier-1 tests of reduce, bcast and the binomial scatter/gather, beyond the sweep.

``tests/serial/test_schedules.py`` runs every registered reduce, bcast and barrier
over the whole size × count × root grid (integer SUM, rank order, in place,
"no rank leaves early"). This file keeps what that sweep cannot see:

- a bitmask sum for every reduce (rank r adds ``1 << r``), which names a
  lost or doubled contribution that a plain integer sum could hide;
- declared scratch sizes, pipeline round counts, parameter checks;
- the components other algorithms build on, called directly:
  :func:`mpicoll.coll.reduce.binomial_steps` with an accumulator on every
  rank, in place or not, any op; :func:`mpicoll.coll.bcast.binomial_steps`
  on a span inside a larger buffer; the binomial scatter and gather with
  uneven, empty blocks, the gather also among a subset of the ranks
  (``ranks=``).

Schedules run in the one-process simulator (deadlock, message lengths,
aliasing) on object arrays, where scratch starts as ``None`` so a schedule
that reads a value before writing it fails loudly. Sizes and counts are a
small representative set; the full grid is test_schedules.py's.
"""

from __future__ import annotations

import numpy as np
import pytest

from mpicoll.coll import algorithms, bcast, lookup, reduce
from mpicoll.coll.gather import binomial_gather_steps
from mpicoll.coll.scatter import binomial_scatter_steps
from mpicoll.schedule.ops import Op
from mpicoll.schedule.core import ScheduleBuilder, Span
from mpicoll.schedule.bind import bind
from mpicoll.sim.matching import run_bound
from mpicoll.sim.data import STR_CONCAT, garbage, simulate
from mpicoll.topo import block_partition, floor_pow2, unfold_rank

SIZES = (1, 2, 3, 4, 5, 7, 8, 12, 17)
REDUCES = [name for name in algorithms("reduce") if name != "native"]

#: Commutative addition on object arrays of Python ints: ``None`` (unwritten
#: scratch) makes it raise.
OBJ_SUM = Op("obj_sum", lambda a, b, dst: np.add(a, b, out=dst), commutative=True)


def counts_for(size):
    return sorted({0, 1, size - 1, size + 1, 37})


def roots_for(size):
    return sorted({0, 1 % size, size // 2, size - 1})


def words(rank, count):
    return np.array([f"{rank}.{i}," for i in range(count)], dtype=object)


def words_fold(size, count):
    return ["".join(f"{r}.{i}," for r in range(size)) for i in range(count)]


def bits(rank, count):
    """Rank r's bit plus the index far above it: each sum names its terms."""
    return np.array([(i << 64) + (1 << rank) for i in range(count)], dtype=object)


def bits_sum(size, count):
    return [(i << 64) * size + (1 << size) - 1 for i in range(count)]


# -- reduce ------------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("algorithm", REDUCES)
def test_reduce_bitmask(algorithm, size):
    """Every rank's bit exactly once at the root, every root, in place or not."""
    for count in counts_for(size):
        for root in roots_for(size):
            for inplace in (False, True):
                xs = [bits(r, count) for r in range(size)]
                out = simulate("reduce", algorithm, xs, op=OBJ_SUM, root=root,
                               inplace=inplace)
                assert list(out[root]) == bits_sum(size, count), (
                    count, root, inplace)


def test_reduce_needs_commutative_for_rabenseifner():
    assert lookup("reduce", "rabenseifner").unmet(commutative=False)
    assert lookup("reduce", "binomial").unmet(commutative=False) is None


def test_reduce_scratch():
    """Scratch: one vector at the linear root, none on binomial leaves."""
    lin, bino = lookup("reduce", "linear"), lookup("reduce", "binomial")
    assert lin.schedule(3, 8, 100, root=3).tmp == 100
    assert lin.schedule(2, 8, 100, root=3).tmp == 0
    assert [bino.schedule(r, 8, 100, root=0).tmp for r in range(8)] == [
        100, 0, 100, 0, 200, 0, 100, 0]
    # p=6 folds ranks 0..3: even ones only hand their vector on.
    rab = lookup("reduce", "rabenseifner")
    tmp = [rab.schedule(r, 6, 120, root=5).tmp for r in range(6)]
    assert tmp[0] == tmp[2] == 0 and tmp[5] < 120


# -- bcast -------------------------------------------------------------------

def test_bcast_pipelined_rounds():
    """k segments: the root and the last rank post theirs in one round."""
    alg = lookup("bcast", "pipelined")
    rounds = [len(alg.schedule(r, 4, 10, root=1, segment=3).rounds)
              for r in range(4)]
    assert rounds == [1, 1, 5, 5]
    xs = [words(r, 10) for r in range(4)]
    out = simulate("bcast", "pipelined", xs, root=1, segment=3)
    assert all(list(o) == list(xs[1]) for o in out)
    with pytest.raises(ValueError):
        alg.schedule(0, 4, 10, segment=0)
    with pytest.raises(ValueError):
        lookup("bcast", "scatter_allgather").schedule(0, 4, 10, allgather="bruck")


# -- components, called directly ---------------------------------------------

def run(schedules, arrays, op=None):
    """Bind each rank's schedule to its arrays (plus fresh scratch) and run."""
    plans = []
    for s, a in zip(schedules, arrays):
        plans.append(bind(s, {**a, "tmp": garbage(s.tmp, object)}, op))
    run_bound(plans)


def built(steps, *args, **kwargs):
    b = ScheduleBuilder()
    steps(b, *args, **kwargs)
    return b.build()


@pytest.mark.parametrize("size", SIZES)
def test_reduce_binomial_steps_acc_everywhere(size):
    """``acc`` on every rank (as allreduce passes it), aliasing ``src`` or not.

    Commutative ops: the bitmask sum; others: the exact rank order, also
    for a root other than 0 (the tree is then rooted at 0, which forwards).
    """
    for count in counts_for(size):
        for root in roots_for(size):
            for inplace in (False, True):
                for commutative in (True, False):
                    make, op = (bits, OBJ_SUM) if commutative else (words, STR_CONCAT)
                    acc = Span("send" if inplace else "recv", 0, count)
                    scheds = [built(reduce.binomial_steps, r, size, root,
                                    Span("send", 0, count), acc, commutative)
                              for r in range(size)]
                    arrays = [{"send": make(r, count), "recv": garbage(count, object)}
                              for r in range(size)]
                    run(scheds, arrays, op)
                    got = list(arrays[root][acc.buf])
                    want = (bits_sum(size, count) if commutative
                            else words_fold(size, count))
                    assert got == want, (count, root, inplace, commutative)


@pytest.mark.parametrize("size", SIZES)
def test_bcast_binomial_steps_inside_a_larger_buffer(size):
    """Only ``data`` is touched: the margins around it keep their garbage."""
    for count in counts_for(size):
        for root in roots_for(size):
            data = Span("recv", 3, 3 + count)
            scheds = [built(bcast.binomial_steps, r, size, root, data)
                      for r in range(size)]
            arrays = [{"recv": garbage(count + 5, object)} for _ in range(size)]
            arrays[root]["recv"][3:3 + count] = words(root, count)
            run(scheds, arrays)
            for r, a in enumerate(arrays):
                assert list(a["recv"][3:3 + count]) == list(words(root, count)), (
                    count, root, r)
                assert all(v is None for v in (*a["recv"][:3], *a["recv"][3 + count:]))


def component_counts(size):
    yield from (block_partition(c, size) for c in counts_for(size))
    yield tuple((r * 7) % 4 for r in range(size))  # uneven, with empty blocks
    yield (0,) * (size - 1) + (5,)  # all on the last rank


def scatter_gather(steps, size, root, counts, ranks=None, world=None):
    """Run ``steps`` on every rank's ``recv``, each starting as ``steps`` wants.

    The scatter starts with the whole vector at the root, the gather with
    block ``i`` at tree rank ``i``. With ``ranks`` the tree's rank ``i`` is
    world rank ``ranks[i]`` of ``world`` ranks; the others post nothing.
    Returns every world rank's vector and the whole one.
    """
    ranks = list(range(size)) if ranks is None else ranks
    world = size if world is None else world
    total = sum(counts)
    starts = np.cumsum((0, *counts))
    full = words(-1, total)
    kw = {} if ranks == list(range(size)) else {"ranks": ranks}
    scheds = [ScheduleBuilder().build()] * world
    datas = [garbage(total, object) for _ in range(world)]
    for t, w in enumerate(ranks):
        scheds[w] = built(steps, t, size, root, counts, Span("recv", 0, total), **kw)
        assert scheds[w].tmp == 0
        if steps is binomial_gather_steps:
            datas[w][starts[t]:starts[t + 1]] = full[starts[t]:starts[t + 1]]
        elif t == root:
            datas[w][:] = full
    run(scheds, [{"recv": d} for d in datas])
    return datas, list(full)


@pytest.mark.parametrize("size", SIZES)
def test_binomial_scatter_gather(size):
    for counts in component_counts(size):
        starts = np.cumsum((0, *counts))
        for root in roots_for(size):
            datas, full = scatter_gather(binomial_scatter_steps, size, root, counts)
            for d, lo, hi in zip(datas, starts, starts[1:]):
                assert list(d[lo:hi]) == full[lo:hi], (counts, root)
            datas, full = scatter_gather(binomial_gather_steps, size, root, counts)
            assert list(datas[root]) == full, (counts, root)


@pytest.mark.parametrize("world", SIZES)
def test_binomial_gather_among_some_ranks(world):
    """``ranks=``: the fold's power-of-two core (as Rabenseifner's reduce
    gathers), and every other rank counted down from the top."""
    subsets = {
        "core": [unfold_rank(c, world) for c in range(floor_pow2(world))],
        "odd_down": list(range(world - 1, -1, -2)),
    }
    for name, ranks in subsets.items():
        size = len(ranks)
        for counts in component_counts(size):
            for root in roots_for(size):
                datas, full = scatter_gather(binomial_gather_steps, size, root,
                                             counts, ranks=ranks, world=world)
                assert list(datas[ranks[root]]) == full, (name, counts, root)
