"""Tier-1 tests of reduce, bcast, barrier and the binomial scatter/gather.

Every schedule set runs in the one-process simulator (deadlock, message
lengths, aliasing) on object arrays, where scratch starts as ``None`` so a
schedule that reads a value before writing it fails loudly.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from mpicoll.algorithms import lookup
from mpicoll.algorithms.gather import binomial_gather_steps
from mpicoll.algorithms.scatter import binomial_scatter_steps
from mpicoll.ops import Op
from mpicoll.schedule.core import ScheduleBuilder, Span
from mpicoll.schedule.plan import bind
from mpicoll.schedule.simulate import run_plans
from mpicoll.simulate import STR_CONCAT, garbage, simulate
from mpicoll.topo import block_partition

SIZES = [*range(1, 18), 24, 32, 33]

#: Commutative addition on object arrays of Python ints: ``None`` (unwritten
#: scratch) makes it raise.
OBJ_SUM = Op("obj_sum", lambda a, b, dst: np.add(a, b, out=dst), commutative=True)


def counts_for(size):
    return sorted({0, 1, size - 1, size, size + 1, 1000})


def roots_for(size):
    return range(size) if size <= 8 else sorted({0, 1, size // 2, size - 1})


def cases(size):
    return [(c, r) for c in counts_for(size) for r in roots_for(size)]


def words(rank, count):
    return np.array([f"{rank}.{i}," for i in range(count)], dtype=object)


def bits(rank, count):
    """Rank r's bit plus the index far above it: each sum names its terms."""
    return np.array([(i << 64) + (1 << rank) for i in range(count)], dtype=object)


# -- reduce ------------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("algorithm", ["linear", "binomial", "rabenseifner"])
def test_reduce_commutative(algorithm, size):
    for count, root in cases(size):
        for inplace in (False, True):
            xs = [bits(r, count) for r in range(size)]
            out = simulate("reduce", algorithm, xs, op=OBJ_SUM, root=root,
                           inplace=inplace)
            want = [(i << 64) * size + (1 << size) - 1 for i in range(count)]
            assert list(out[root]) == want, (count, root, inplace)
            assert all(len(o) == 0 for r, o in enumerate(out) if r != root)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("algorithm", ["linear", "binomial"])
def test_reduce_rank_order(algorithm, size):
    for count, root in cases(size):
        for inplace in (False, True):
            xs = [words(r, count) for r in range(size)]
            out = simulate("reduce", algorithm, xs, op=STR_CONCAT, root=root,
                           inplace=inplace)
            want = ["".join(f"{r}.{i}," for r in range(size)) for i in range(count)]
            assert list(out[root]) == want, (count, root, inplace)


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

BCASTS = [("linear", {}), ("binomial", {}), ("scatter_allgather", {}),
          ("scatter_allgather", {"allgather": "recursive_doubling"}),
          ("pipelined", {}), ("pipelined", {"segment": 128})]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("algorithm,params", BCASTS,
                         ids=[f"{a}{p}" for a, p in BCASTS])
def test_bcast(algorithm, params, size):
    for count, root in cases(size):
        xs = [words(r, count) for r in range(size)]
        out = simulate("bcast", algorithm, xs, root=root, **params)
        for r in range(size):
            assert list(out[r]) == list(xs[root]), (count, root, r)


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


# -- barrier -----------------------------------------------------------------

def knowledge(algorithm, size):
    """Which ranks each rank knows to have entered when it leaves.

    A receive tells the receiver everything its sender knew on posting;
    messages between a pair match in posting order.
    """
    alg = lookup("barrier", algorithm)
    rounds = [alg.schedule(r, size, 0).rounds for r in range(size)]
    sent = defaultdict(list)  # (src, dst) -> src's round of each message
    for r, rs in enumerate(rounds):
        for j, rnd in enumerate(rs):
            for s in rnd.sends:
                sent[r, s.peer].append(j)
    know = [[{r}] * (len(rs) + 1) for r, rs in enumerate(rounds)]
    changed = True
    while changed:
        changed = False
        for r, rs in enumerate(rounds):
            seen, cur = defaultdict(int), {r}
            for j, rnd in enumerate(rs):
                for rv in rnd.recvs:
                    cur = cur | know[rv.peer][sent[rv.peer, r][seen[rv.peer]]]
                    seen[rv.peer] += 1
                if cur != know[r][j + 1]:
                    know[r][j + 1], changed = cur, True
    return [k[-1] for k in know]


@pytest.mark.parametrize("algorithm", ["dissemination", "binomial"])
def test_barrier(algorithm):
    for size in SIZES:
        simulate("barrier", algorithm, [np.empty(0)] * size)
        assert knowledge(algorithm, size) == [set(range(size))] * size, size


# -- binomial scatter / gather components -------------------------------------

def run_component(steps, size, root, counts):
    """Run ``steps`` on every rank's ``recv``, each starting as ``steps`` wants.

    The scatter starts with the whole vector at the root, the gather with
    block ``i`` at rank ``i``; returns every rank's vector and the whole one.
    """
    total = sum(counts)
    starts = np.cumsum((0, *counts))
    full = words(-1, total)
    datas, plans = [], []
    for rank in range(size):
        b = ScheduleBuilder()
        steps(b, rank, size, root, counts, Span("recv", 0, total))
        schedule = b.build()
        assert schedule.tmp == 0
        data = garbage(total, object)
        if steps is binomial_gather_steps:
            lo, hi = starts[rank], starts[rank + 1]
            data[lo:hi] = full[lo:hi]
        elif rank == root:
            data[:] = full
        plans.append(bind(schedule, {"recv": data}, None))
        datas.append(data)
    run_plans(plans)
    return datas, list(full)


def component_counts(size):
    yield from (block_partition(c, size) for c in counts_for(size))
    yield tuple((r * 7) % 4 for r in range(size))  # uneven, with empty blocks


@pytest.mark.parametrize("size", SIZES)
def test_binomial_scatter_gather(size):
    for counts in component_counts(size):
        starts = np.cumsum((0, *counts))
        for root in roots_for(size):
            datas, full = run_component(binomial_scatter_steps, size, root,
                                        counts)
            for d, lo, hi in zip(datas, starts, starts[1:]):
                assert list(d[lo:hi]) == full[lo:hi], (counts, root)
            datas, full = run_component(binomial_gather_steps, size, root,
                                        counts)
            assert list(datas[root]) == full, (counts, root)
