"""Tier-1 tests of alltoall, scan and exscan, beyond the registry-wide sweep.

``tests/serial/test_schedules.py`` runs every registered algorithm over the whole
size × count grid (integer SUM, rank order with STR_CONCAT, in place). This
file checks what the docstrings promise and that sweep cannot see: rounds,
messages, bytes sent, scratch, copies, Bruck's routing, and that exscan
leaves rank 0's ``recv`` alone.
"""

from __future__ import annotations

import numpy as np
import pytest

from mpicoll.coll import lookup
from mpicoll.schedule.core import Copy
from mpicoll.sim.data import garbage, simulate
from mpicoll.topo import floor_pow2

SIZES = (1, 2, 3, 4, 5, 7, 8, 12, 16, 17, 33)
ALGORITHMS = [("alltoall", n) for n in ("linear", "pairwise", "bruck")] + [
    (c, n) for c in ("scan", "exscan") for n in ("linear", "recursive_doubling")]


def schedules(collective, name, size, count):
    alg = lookup(collective, name)
    return [alg.schedule(r, size, count, commutative=False) for r in range(size)]


def ceil_log2(p):
    return (p - 1).bit_length()


def copies(schedule):
    return [s for rnd in schedule.rounds for s in rnd.local if isinstance(s, Copy)]


def sent(schedule):
    """Elements this rank sends."""
    return sum(len(s.span) for rnd in schedule.rounds for s in rnd.sends)


def test_registered_and_order_keeping():
    for collective, name in ALGORITHMS:
        alg = lookup(collective, name)
        assert alg is not None and not alg.commutative_only, (collective, name)


@pytest.mark.parametrize("size", SIZES)
def test_alltoall_costs(size):
    count = block = 3
    for name in ("linear", "pairwise", "bruck"):
        for rank, s in enumerate(schedules("alltoall", name, size, count)):
            where = (name, size, rank)
            assert [c.dst for c in copies(s)][-1:] == [
                ("recv", rank * block, (rank + 1) * block)], where
            if name == "bruck":
                continue
            # Every block straight from send into its place in recv.
            assert len(copies(s)) == 1 and s.tmp == 0, where
            assert sent(s) == (size - 1) * count, where
            for rnd in s.rounds:
                for snd in rnd.sends:
                    assert snd.span.buf == "send", where
                    assert snd.span.start == snd.peer * block, where
                for rcv in rnd.recvs:
                    assert rcv.span.buf == "recv", where
                    assert rcv.span.start == rcv.peer * block, where
            want = 1 if name == "linear" else max(size - 1, 1)
            assert len(s.rounds) == want, where


@pytest.mark.parametrize("size", SIZES)
def test_bruck_rounds_messages_bytes_scratch(size):
    count = 3
    scheds = schedules("alltoall", "bruck", size, count)
    top = floor_pow2(size - 1) if size > 1 else 0
    bits = sum(bin(i).count("1") for i in range(1, size))
    for rank, s in enumerate(scheds):
        where = (size, rank)
        assert len(s.rounds) == max(ceil_log2(size), 1), where
        assert sent(s) == count * bits, where
        # Distances largest first, one message a round, but two in the
        # first on the ranks whose first-round blocks wrap past the end.
        for k, rnd in enumerate(s.rounds[:ceil_log2(size)]):
            d = top >> k
            assert {x.peer for x in rnd.sends} == {(rank + d) % size}, where
            assert {x.peer for x in rnd.recvs} == {(rank - d) % size}, where
            wraps = k == 0 and 1 <= rank <= size - 1 - top
            assert len(rnd.sends) == 1 + wraps, where
            if k == 0:
                assert all(x.span.buf == "send" for x in rnd.sends), where
        if size <= 3:
            assert s.tmp == 0 and len(copies(s)) == 1, where
        else:
            assert s.tmp <= 2 * (size // 2) * count, where
    if size > 3:
        assert max(s.tmp for s in scheds) == 2 * (size // 2) * count


def test_bruck_trace_p4():
    """The docstring's trace for rank 0 of 4."""
    s = schedules("alltoall", "bruck", 4, 1)[0]
    first, second = s.rounds
    assert [(x.peer, x.span) for x in first.sends] == [(2, ("send", 2, 4))]
    assert [x.peer for x in first.recvs] == [2]
    assert [c.dst for c in first.local] == [("recv", 2, 3), ("tmp", 2, 3),
                                            ("tmp", 3, 4)]
    assert [c.src for c in first.local][1] == ("send", 1, 2)
    assert [c.dst for c in second.local] == [("recv", 3, 4), ("recv", 1, 2),
                                             ("recv", 0, 1)]


def doubling_sends(rank, size):
    """Rounds in which recursive doubling's rank sends: distances ``d`` with
    ``rank + d < size``."""
    return sum(1 for k in range(ceil_log2(size)) if rank + (1 << k) < size)


# (collective, algorithm) -> rank, size -> (rounds, scratch in counts, copies,
# messages sent); rounds None where only the bound ceil(log2 p) is promised.
SCAN_COSTS = {
    ("scan", "linear"): lambda r, p: (
        2 if 0 < r < p - 1 else 1, r > 0, r == 0, r < p - 1),
    ("exscan", "linear"): lambda r, p: (
        2 if 0 < r < p - 1 else int(p > 1), 0 < r < p - 1, 0 < r < p - 1,
        r < p - 1),
    ("scan", "recursive_doubling"): lambda r, p: (
        max(ceil_log2(p), 1) if r == 0 else None, r > 0, r == 0,
        doubling_sends(r, p)),
    ("exscan", "recursive_doubling"): lambda r, p: (
        ceil_log2(p) if r == 0 else None,
        0 if r == 0 or p == 2 else 2 if r < p - 2 else 1,
        r == 1 and p > 2, doubling_sends(r, p)),
}


@pytest.mark.parametrize("collective,name", SCAN_COSTS,
                         ids=[f"{c}-{n}" for c, n in SCAN_COSTS])
def test_scan_costs(collective, name):
    count = 5
    for size in SIZES:
        for rank, s in enumerate(schedules(collective, name, size, count)):
            where = (size, rank)
            rounds, tmp, n_copies, messages = SCAN_COSTS[collective, name](
                rank, size)
            if rounds is None:
                assert len(s.rounds) <= ceil_log2(size), where
            else:
                assert len(s.rounds) == rounds, where
            assert s.tmp == tmp * count, where
            assert len(copies(s)) == n_copies, where
            assert s.messages == messages, where
            assert sent(s) == messages * count, where


@pytest.mark.parametrize("name", ["linear", "recursive_doubling"])
def test_exscan_leaves_rank0_recv_alone(name):
    for size in (1, 2, 3, 6, 9):
        for inplace in (False, True):
            xs = [np.arange(4) + 10 * r for r in range(size)]
            outs = simulate("exscan", name, xs, inplace=inplace)
            want = xs[0] if inplace else garbage(4, xs[0].dtype)
            np.testing.assert_array_equal(outs[0], want)
        for rnd in schedules("exscan", name, size, 4)[0].rounds:
            assert not rnd.recvs and not rnd.local
