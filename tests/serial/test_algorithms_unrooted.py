"""Tier-1 tests of allreduce, allgather and reduce-scatter, beyond the sweep.

``tests/serial/test_schedules.py`` runs every registered algorithm over the whole
size × count grid (integer SUM, rank order, in place, uneven reduce_scatter
counts). This file keeps what that sweep cannot see:

- a bitmask sum for every reducing algorithm here: integer data
  ``(i << 40) + (1 << rank)`` makes every correct sum exact and names a lost
  or doubled contribution that a plain integer sum could hide;
- round counts, scratch sizes, no copies, the commutativity declarations;
- the components other collectives build on, called directly with uneven,
  empty blocks: the allgather components (also with ``fold=False``) and the
  reduce-scatter components in every layout a caller uses (``result`` in
  ``src``, ``work`` aliasing ``src``, ``fresh_result``, ``unfold=False``).

Schedules run in the one-process simulator (deadlock, message lengths,
receive overlaps, reduction aliasing). Sizes and counts are a small
representative set; the full grid is test_schedules.py's.
"""

from __future__ import annotations

import numpy as np
import pytest

from mpicoll.coll import algorithms, allgather, lookup, reduce_scatter
from mpicoll.collectives import COLLECTIVES
from mpicoll.schedule.ops import builtin_op
from mpicoll.schedule.core import Copy, ScheduleBuilder, Span
from mpicoll.schedule.bind import bind
from mpicoll.sim.matching import run_bound
from mpicoll.sim.data import garbage, simulate
from mpicoll.topo import block_partition, floor_pow2, fold_rank

SIZES = (1, 2, 3, 4, 5, 7, 8, 12, 17)
SUM = builtin_op("sum")

ORDER_KEEPING = [("allreduce", "recursive_doubling"), ("allreduce", "reduce_bcast"),
                 ("reduce_scatter", "pairwise"), ("reduce_scatter_block", "pairwise")]


def counts_for(size):
    return sorted({0, 1, size - 1, size + 1, 37})


def bits(rank, n):
    """Rank r's bit plus the index far above it: each sum names its terms."""
    return (np.arange(n, dtype=np.int64) << 40) + (1 << rank)


def bits_sum(size, n):
    return (np.arange(n, dtype=np.int64) << 40) * size + (1 << size) - 1


def words(rank, n):
    return np.array([f"{rank}.{i}," for i in range(n)], dtype=object)


def uneven_counts(size):
    """Per-rank counts with empty blocks, skewed both ways."""
    rng = np.random.default_rng(size)
    yield tuple((r * 7) % 4 for r in range(size))
    yield (0,) * (size - 1) + (5,)
    yield tuple(37 if r == size // 2 else r % 2 for r in range(size))
    yield tuple(int(c) for c in rng.integers(0, 3, size))


# -- bitmask sums of the collectives -------------------------------------------

BITMASK = [(c, name) for c in ("allreduce", "reduce_scatter_block", "reduce_scatter")
           for name in algorithms(c) if name != "native"]


def per_rank_counts(collective, size):
    if collective == "reduce_scatter":
        return list(uneven_counts(size))
    if collective == "reduce_scatter_block":
        return [(n,) * size for n in counts_for(size)]
    return [(n,) for n in counts_for(size)]  # allreduce: the whole vector


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("collective,algorithm", BITMASK,
                         ids=[f"{c}-{n}" for c, n in BITMASK])
def test_bitmask_sum(collective, algorithm, size):
    """Every rank's bit exactly once in every element, in place where aliased."""
    aliased = COLLECTIVES[collective].inplace == "aliased"
    inplace_modes = (False, True) if aliased else (False,)
    for counts in per_rank_counts(collective, size):
        total = sum(counts)
        count = {"allreduce": total, "reduce_scatter_block": counts[0],
                 "reduce_scatter": counts}[collective]
        # Where each rank's share of the reduced vector starts and ends.
        bounds = ([(0, total)] * size if collective == "allreduce"
                  else list(zip(np.cumsum((0, *counts)), np.cumsum(counts))))
        for inplace in inplace_modes:
            xs = [bits(r, total) for r in range(size)]
            out = simulate(collective, algorithm, xs, count=count, inplace=inplace)
            want = bits_sum(size, total)
            for r, (o, (lo, hi)) in enumerate(zip(out, bounds)):
                np.testing.assert_array_equal(o, want[lo:hi],
                                              err_msg=f"{counts=} {inplace=} {r=}")


def test_commutative_declarations():
    for collective, name in [("allreduce", "ring"), ("allreduce", "rabenseifner"),
                             ("reduce_scatter", "ring"),
                             ("reduce_scatter_block", "recursive_halving")]:
        assert lookup(collective, name).unmet(commutative=False), name
    for collective, name in ORDER_KEEPING:
        assert lookup(collective, name).unmet(commutative=False) is None, name


# -- components with uneven blocks and aliasing ----------------------------------

def component_counts(size):
    yield block_partition(size + 1, size)
    yield block_partition(37, size)
    yield from uneven_counts(size)


def built(steps, *args, **kwargs):
    b = ScheduleBuilder()
    steps(b, *args, **kwargs)
    return b.build()


def run_allgather(steps, size, counts, **kw):
    """Every rank starts with its own block of ``recv``: returns them all
    and the whole vector. With ``fold=False`` the odd ranks the fold pairs
    up start with their even neighbour's block too."""
    full = words(-1, sum(counts))
    starts = np.cumsum((0, *counts))
    rem = size - floor_pow2(size)
    plans, datas = [], []
    for rank in range(size):
        schedule = built(steps, rank, size, counts, Span("recv", 0, len(full)), **kw)
        assert schedule.tmp == 0
        data = garbage(len(full), object)
        lo = starts[rank - 1] if kw.get("fold") is False and rank < 2 * rem and (
            rank % 2) else starts[rank]
        data[lo:starts[rank + 1]] = full[lo:starts[rank + 1]]
        plans.append(bind(schedule, {"recv": data}, None))
        datas.append(data)
    run_bound(plans)
    return datas, list(full)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("steps", [allgather.ring_steps,
                                   allgather.recursive_doubling_steps])
def test_allgather_components(steps, size):
    """Uneven, empty blocks, as van de Geijn's bcast and others call them."""
    for counts in component_counts(size):
        datas, full = run_allgather(steps, size, counts)
        assert all(list(d) == full for d in datas), counts


@pytest.mark.parametrize("size", [2, 4, 5, 8, 12, 16])
def test_rabenseifner_halves_nearest_partner_first(size):
    """MPICH's order: halving step k pairs core ranks at distance 2^k, and
    each step's message is at most the previous one's, so the largest
    pieces go to the nearest partners (the allgather mirrors it)."""
    count = 1000
    pof2 = floor_pow2(size)
    steps = pof2.bit_length() - 1
    for rank in range(size):
        core = fold_rank(rank, size)
        if core is None:
            continue
        rounds = lookup("allreduce", "rabenseifner").schedule(
            rank, size, count, commutative=True).rounds
        core_rounds = [r for r in rounds
                       if r.sends and r.recvs][:2 * steps]
        peers = [fold_rank(r.sends[0].peer, size) ^ core for r in core_rounds]
        assert peers == [1 << k for k in range(steps)] \
            + [1 << k for k in reversed(range(steps))], (rank, peers)
        sent = [len(r.sends[0].span) for r in core_rounds[:steps]]
        assert sent == sorted(sent, reverse=True) and \
            sent[0] >= count // 2 - pof2, (rank, sent)


# How a caller lays out the reduce-scatter components' spans: (where recv
# is, work's buffer or None, fresh_result), "same" meaning recv is the very
# memory of send.
RS_LAYOUTS = {
    "separate": ("recv", None, False),
    "separate_fresh": ("recv", None, True),  # the reduce_scatter collectives
    "result_aliases_src": ("same", None, False),  # reduce's in-place root
    "work": ("recv", "recv", False),  # out-of-place allreduce
    # fresh_result must be ignored here: result lies in work, where the
    # partial sum the last message is reduced with still lives.
    "work_fresh": ("recv", "recv", True),
    "work_aliases_src": ("same", "recv", False),  # in-place allreduce
}


def run_reduce_scatter(steps, size, counts, layout, **kw):
    """Returns every rank's ``result`` and ``recv``, and the reduced vector."""
    recv_kind, work_buf, fresh = RS_LAYOUTS[layout]
    total = sum(counts)
    starts = np.cumsum((0, *counts))
    plans, outs, recvs = [], [], []
    for rank in range(size):
        lo, hi = starts[rank], starts[rank + 1]
        send = bits(rank, total)
        if recv_kind == "same":
            recv, result = send, Span("recv", lo, hi)
        elif work_buf is None:
            recv, result = garbage(hi - lo, np.int64), Span("recv", 0, hi - lo)
        else:
            recv, result = garbage(total, np.int64), Span("recv", lo, hi)
        work = None if work_buf is None else Span(work_buf, 0, total)
        schedule = built(steps, rank, size, counts, Span("send", 0, total), result,
                         work, fresh_result=fresh, **kw)
        arrays = {"send": send, "recv": recv, "tmp": garbage(schedule.tmp, np.int64)}
        plans.append(bind(schedule, arrays, SUM))
        outs.append(recv[result.start:result.stop])
        recvs.append(recv)
    run_bound(plans)
    return outs, recvs, bits_sum(size, total)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("layout", RS_LAYOUTS)
@pytest.mark.parametrize("steps", [reduce_scatter.ring_steps,
                                   reduce_scatter.recursive_halving_steps])
def test_reduce_scatter_components(steps, layout, size):
    for counts in component_counts(size):
        outs, _, want = run_reduce_scatter(steps, size, counts, layout)
        starts = np.cumsum((0, *counts))
        for r, o in enumerate(outs):
            np.testing.assert_array_equal(o, want[starts[r]:starts[r + 1]],
                                          err_msg=f"{counts=} {r=}")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("layout", ["work", "work_aliases_src"])
def test_recursive_halving_without_unfold(layout, size):
    """``unfold=False`` (Rabenseifner): a folded even rank's block stays in the
    odd rank's ``work``, next to that rank's own; the even rank gets nothing."""
    rem = size - floor_pow2(size)
    for counts in component_counts(size):
        starts = np.cumsum((0, *counts))
        before = [bits(r, sum(counts)) for r in range(size)]
        _, recvs, want = run_reduce_scatter(
            reduce_scatter.recursive_halving_steps, size, counts, layout,
            unfold=False)
        for r, recv in enumerate(recvs):
            if r < 2 * rem and r % 2 == 0:
                if layout == "work_aliases_src":
                    np.testing.assert_array_equal(recv, before[r])
                else:
                    np.testing.assert_array_equal(recv, garbage(len(recv), np.int64))
                continue
            lo = starts[r - 1] if r < 2 * rem else starts[r]
            np.testing.assert_array_equal(recv[lo:starts[r + 1]],
                                          want[lo:starts[r + 1]],
                                          err_msg=f"{counts=} {r=}")


# -- cost properties: rounds, scratch, no copies --------------------------------

def schedules(collective, name, size, count, **kw):
    alg = lookup(collective, name)
    return [alg.schedule(r, size, count, **kw) for r in range(size)]


def test_round_counts():
    """Rounds on the busiest rank: folding costs two rounds off powers of two."""
    for size in (*SIZES[1:], 16, 33):
        lg = size.bit_length() - 1  # floor(log2 p)
        fold = 0 if size & (size - 1) == 0 else 2
        want = {
            ("allgather", "bruck"): lg + (fold > 0),  # ceil(log2 p)
            ("allgather", "ring"): 1 + size - 1,  # + the copy of send
            ("allgather", "recursive_doubling"): 1 + lg + fold,
            ("reduce_scatter_block", "ring"): size - 1,
            ("reduce_scatter_block", "pairwise"): size - 1,
            ("reduce_scatter_block", "recursive_halving"): lg + fold,
            ("allreduce", "recursive_doubling"): lg + fold,
            ("allreduce", "rabenseifner"): 2 * lg + fold,
            ("allreduce", "ring"): 2 * (size - 1),
        }
        for (collective, name), rounds in want.items():
            got = max(len(s.rounds) for s in schedules(collective, name, size, 100))
            assert got == rounds, (collective, name, size)


def test_no_copies_and_small_scratch():
    """Partial sums land where they end up; scratch is one block or a half."""
    n = 1000
    for size in (2, 3, 4, 5, 8):
        blocks = block_partition(n, size)
        for name in ("ring", "rabenseifner"):
            for rank, s in enumerate(schedules("allreduce", name, size, n)):
                steps = [st for rnd in s.rounds for st in rnd.local]
                assert not any(isinstance(st, Copy) for st in steps), (name, size)
                if name == "ring":  # every block but the one it sends first
                    assert s.tmp == max(c for j, c in enumerate(blocks)
                                        if j != (rank - 1) % size)
                elif size in (2, 4, 8):
                    assert s.tmp == n // 2, (name, size, rank)
        ring = schedules("reduce_scatter_block", "ring", size, 10)
        assert all(s.rounds[0].sends[0].span.buf == "send" for s in ring)
        assert all(s.tmp == (20 if size > 2 else 0) for s in ring)
        halving = schedules("reduce_scatter_block", "recursive_halving", size, 10)
        if size in (2, 4, 8):
            assert {s.tmp for s in halving} == {(0, 20, 60)[size // 4]}
    pw = schedules("reduce_scatter_block", "pairwise", 2, 10)
    assert [s.tmp for s in pw] == [0, 0]
    pw = schedules("reduce_scatter_block", "pairwise", 5, 10, commutative=False)
    assert [s.tmp for s in pw] == [10, 20, 20, 10, 10]
    assert [s.tmp for s in schedules("allgather", "ring", 5, 10)] == [0] * 5
    assert [s.tmp for s in schedules("allgather", "recursive_doubling", 5, 10)
            ] == [0] * 5
