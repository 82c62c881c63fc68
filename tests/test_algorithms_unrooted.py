"""Tier-1 tests of allreduce, allgather and reduce-scatter, and their components.

Every schedule set runs in the one-process simulator (deadlock, message
lengths, receive overlaps, reduction aliasing), in place where the layout
aliases. Integer data ``(i << 40) + (1 << rank)`` makes every correct sum
exact and tells a lost or doubled contribution; ``STR_CONCAT`` on object
arrays (scratch starts as ``None``) checks the exact fold order of the
algorithms that promise rank order.
"""

from __future__ import annotations

import numpy as np
import pytest

from mpicoll.algorithms import allgather, lookup, reduce_scatter
from mpicoll.ops import builtin_op
from mpicoll.schedule.core import Copy, ScheduleBuilder, Span
from mpicoll.schedule.plan import bind
from mpicoll.schedule.simulate import run_plans
from mpicoll.simulate import STR_CONCAT, garbage, simulate
from mpicoll.topo import block_partition

SIZES = [*range(1, 18), 24, 32, 33]
SUM = builtin_op("sum")

ALLREDUCES = ["recursive_doubling", "ring", "rabenseifner", "reduce_bcast"]
ALLGATHERS = ["ring", "recursive_doubling", "bruck"]
REDUCE_SCATTERS = ["ring", "recursive_halving", "pairwise"]
ORDER_KEEPING = [("allreduce", "recursive_doubling"), ("allreduce", "reduce_bcast"),
                 ("reduce_scatter", "pairwise"), ("reduce_scatter_block", "pairwise")]


def counts_for(size):
    return sorted({0, 1, size - 1, size, size + 1, 1000})


def bits(rank, n):
    """Rank r's bit plus the index far above it: each sum names its terms."""
    return (np.arange(n, dtype=np.int64) << 40) + (1 << rank)


def bits_sum(size, n):
    return (np.arange(n, dtype=np.int64) << 40) * size + (1 << size) - 1


def words(rank, n):
    return np.array([f"{rank}.{i}," for i in range(n)], dtype=object)


def words_fold(size, n):
    return ["".join(f"{r}.{i}," for r in range(size)) for i in range(n)]


def uneven_counts(size):
    """Per-rank counts with empty blocks, skewed both ways."""
    rng = np.random.default_rng(size)
    yield tuple((r * 7) % 4 for r in range(size))
    yield (0,) * (size - 1) + (5,)
    yield tuple(1000 if r == size // 2 else r % 2 for r in range(size))
    yield tuple(int(c) for c in rng.integers(0, 3, size))


# -- allreduce -----------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("algorithm", ALLREDUCES)
def test_allreduce(algorithm, size):
    for n in counts_for(size):
        for inplace in (False, True):
            xs = [bits(r, n) for r in range(size)]
            out = simulate("allreduce", algorithm, xs, inplace=inplace)
            for o in out:
                np.testing.assert_array_equal(o, bits_sum(size, n),
                                              err_msg=f"{n=} {inplace=}")


# -- allgather -----------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("algorithm", ALLGATHERS)
def test_allgather(algorithm, size):
    for n in counts_for(size):
        for inplace in (False, True):
            xs = [bits(r, n) for r in range(size)]
            out = simulate("allgather", algorithm, xs, inplace=inplace)
            for o in out:
                np.testing.assert_array_equal(o, np.concatenate(xs),
                                              err_msg=f"{n=} {inplace=}")


# -- reduce-scatter --------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("algorithm", REDUCE_SCATTERS)
def test_reduce_scatter_block(algorithm, size):
    for n in counts_for(size):
        xs = [bits(r, n * size) for r in range(size)]
        out = simulate("reduce_scatter_block", algorithm, xs)
        want = bits_sum(size, n * size)
        for r, o in enumerate(out):
            np.testing.assert_array_equal(o, want[r * n:(r + 1) * n],
                                          err_msg=f"{n=} {r=}")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("algorithm", REDUCE_SCATTERS)
def test_reduce_scatter_uneven(algorithm, size):
    for counts in uneven_counts(size):
        xs = [bits(r, sum(counts)) for r in range(size)]
        out = simulate("reduce_scatter", algorithm, xs, count=counts)
        want = bits_sum(size, sum(counts))
        starts = np.cumsum((0, *counts))
        for r, o in enumerate(out):
            np.testing.assert_array_equal(o, want[starts[r]:starts[r + 1]],
                                          err_msg=f"{counts=} {r=}")


# -- rank order (non-commutative) ------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("collective,algorithm", ORDER_KEEPING)
def test_rank_order(collective, algorithm, size):
    if collective == "allreduce":
        for n in sorted({0, 1, size - 1, size + 1, 17}):
            for inplace in (False, True):
                xs = [words(r, n) for r in range(size)]
                out = simulate(collective, algorithm, xs, op=STR_CONCAT,
                               inplace=inplace)
                assert all(list(o) == words_fold(size, n) for o in out), n
        return
    all_counts = ([(n,) * size for n in (0, 1, 3)] if collective.endswith("block")
                  else list(uneven_counts(size))[:2])
    for counts in all_counts:
        total = sum(counts)
        xs = [words(r, total) for r in range(size)]
        count = counts[0] if collective.endswith("block") else counts
        out = simulate(collective, algorithm, xs, op=STR_CONCAT, count=count)
        want = words_fold(size, total)
        starts = np.cumsum((0, *counts))
        for r, o in enumerate(out):
            assert list(o) == want[starts[r]:starts[r + 1]], (counts, r)


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
    yield from uneven_counts(size)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("steps", [allgather.ring_steps,
                                   allgather.recursive_doubling_steps])
def test_allgather_components(steps, size):
    """Uneven, empty blocks, as van de Geijn's bcast and others call them."""
    for counts in component_counts(size):
        full = words(-1, sum(counts))
        starts = np.cumsum((0, *counts))
        plans, datas = [], []
        for rank in range(size):
            b = ScheduleBuilder()
            steps(b, rank, size, counts, Span("recv", 0, len(full)))
            schedule = b.build()
            assert schedule.tmp == 0
            data = garbage(len(full), object)
            data[starts[rank]:starts[rank + 1]] = full[starts[rank]:starts[rank + 1]]
            plans.append(bind(schedule, {"recv": data}, None))
            datas.append(data)
        run_plans(plans)
        assert all(list(d) == list(full) for d in datas), counts


# How a caller lays out the reduce-scatter components' spans: (src buffer,
# result buffer, work) with "same" for recv being the memory of send.
RS_LAYOUTS = {
    "separate": ("recv", None),  # the reduce_scatter collective
    "result_aliases_src": ("same", None),  # reduce's in-place root
    "work": ("recv", "recv"),  # out-of-place allreduce
    "work_aliases_src": ("same", "recv"),  # in-place allreduce
}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("layout", RS_LAYOUTS)
@pytest.mark.parametrize("steps", [reduce_scatter.ring_steps,
                                   reduce_scatter.recursive_halving_steps])
def test_reduce_scatter_components(steps, layout, size):
    recv_kind, work_buf = RS_LAYOUTS[layout]
    for counts in component_counts(size):
        total = sum(counts)
        starts = np.cumsum((0, *counts))
        plans, outs = [], []
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
            b = ScheduleBuilder()
            steps(b, rank, size, counts, Span("send", 0, total), result, work)
            schedule = b.build()
            arrays = {"send": send, "recv": recv,
                      "tmp": garbage(schedule.tmp, np.int64)}
            plans.append(bind(schedule, arrays, SUM))
            outs.append(recv[result.start:result.stop])
        run_plans(plans)
        want = bits_sum(size, total)
        for r, o in enumerate(outs):
            np.testing.assert_array_equal(o, want[starts[r]:starts[r + 1]],
                                          err_msg=f"{counts=} {r=}")


# -- cost properties: rounds, scratch, no copies --------------------------------

def schedules(collective, name, size, count, **kw):
    alg = lookup(collective, name)
    return [alg.schedule(r, size, count, **kw) for r in range(size)]


def test_round_counts():
    """Rounds on the busiest rank: folding costs two rounds off powers of two."""
    for size in SIZES[1:]:
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
        assert all(s.tmp == 10 * min(size - 1, 2) for s in ring)
    pw = schedules("reduce_scatter_block", "pairwise", 2, 10)
    assert [s.tmp for s in pw] == [0, 0]
    pw = schedules("reduce_scatter_block", "pairwise", 5, 10, commutative=False)
    assert [s.tmp for s in pw] == [10, 20, 20, 10, 10]
    assert [s.tmp for s in schedules("allgather", "ring", 5, 10)] == [0] * 5
    assert [s.tmp for s in schedules("allgather", "recursive_doubling", 5, 10)
            ] == [0] * 5
