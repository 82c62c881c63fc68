"""Tier-1 tests of message chunking (:mod:`mpicoll.schedule.chunk`).

Real chunking only starts at 2 GiB messages; here a tiny element limit (1 to
3 elements) makes every algorithm's messages split, and the simulator checks
that the split schedules still match up (no truncation, deadlock or receive
overlap) and compute exactly what the unsplit ones do. Topology-aware
algorithms run on several node maps (:func:`node_maps`).
"""

from __future__ import annotations

import numpy as np
import pytest

from mpicoll.coll import algorithms, lookup
from mpicoll.schedule.chunk import (
    MAX_MESSAGE_BYTES,
    element_limit,
    split_messages,
)
from mpicoll.schedule.core import (
    SYNC,
    Copy,
    Recv,
    Reduce,
    Round,
    Schedule,
    Send,
    Span,
)
from mpicoll.schedule.layout import buffer_lengths
from mpicoll.device.memory import overlap
from mpicoll.schedule.bind import BoundRound
from mpicoll.sim.matching import SimulationError, _check_round
from mpicoll.sim.data import simulate

COLLECTIVES = ("allreduce", "bcast", "allgather", "reduce_scatter_block",
               "alltoall")
SIZES = (1, 2, 3, 5, 8)
COUNTS = (0, 1, 7, 33)
LIMITS = (1, 2, 3)


def node_maps(alg, p):
    """Node maps for a topology-aware algorithm (one node, nodes of two,
    uneven for odd p, and round-robin); None for the others."""
    if not alg.topology:
        return [None]
    return [(0,) * p, tuple(r // 2 for r in range(p)),
            tuple(r % 2 for r in range(p))]


def hand_built(collective):
    return [n for n in algorithms(collective) if not lookup(collective, n).native]


CASES = [(c, n) for c in COLLECTIVES for n in hand_built(c)]


def inputs(collective, p, count, rng):
    xs = []
    for r in range(p):
        n_send, n_recv = buffer_lengths(collective, r, p, count)
        n = n_recv if collective == "bcast" else n_send  # bcast: root's recv
        xs.append(rng.integers(-1000, 1000, n))
    return xs


@pytest.mark.parametrize(("collective", "name"), CASES,
                         ids=[f"{c}-{n}" for c, n in CASES])
def test_split_runs_match_unsplit(collective, name):
    rng = np.random.default_rng(1)
    alg = lookup(collective, name)
    for p in SIZES:
        for count in COUNTS:
            for nodes in node_maps(alg, p):
                check_split(collective, name, p, count, nodes,
                            inputs(collective, p, count, rng))


def check_split(collective, name, p, count, nodes, xs):
    alg = lookup(collective, name)
    want = simulate(collective, name, xs, count=count, nodes=nodes)
    for limit in LIMITS:
        case = (f"{collective}/{name} p={p} count={count} limit={limit} "
                f"nodes={nodes}")
        got = simulate(collective, name, xs, count=count, max_message=limit,
                       nodes=nodes)
        for r, (g, w) in enumerate(zip(got, want)):
            assert np.array_equal(g, w), f"{case}: rank {r}"
        for r in range(p):
            s = alg.schedule(r, p, count, nodes=nodes)
            split = split_messages(s, limit)
            spans = [m.span for rnd in split.rounds
                     for m in (*rnd.sends, *rnd.recvs)]
            assert all(len(sp) <= limit for sp in spans), case
            assert split.messages >= s.messages, case


def test_algorithms_present():
    """The sweep above covers something for every collective it names."""
    assert {c for c, _ in CASES} == set(COLLECTIVES)


def sched(*rounds, tmp=0):
    return Schedule(tuple(rounds), tmp)


def test_chunk_boundaries_and_order():
    s = sched(Round((Send(1, Span("send", 3, 10)), Send(2, Span("tmp", 0, 2))),
                    (Recv(1, Span("recv", 0, 7)),),
                    (Copy(Span("send", 0, 3), Span("recv", 7, 10)),)), tmp=2)
    out = split_messages(s, 3)
    (rnd,) = out.rounds
    assert rnd.sends == (Send(1, Span("send", 3, 6)), Send(1, Span("send", 6, 9)),
                         Send(1, Span("send", 9, 10)), Send(2, Span("tmp", 0, 2)))
    assert rnd.recvs == (Recv(1, Span("recv", 0, 3)), Recv(1, Span("recv", 3, 6)),
                         Recv(1, Span("recv", 6, 7)))
    assert rnd.local == s.rounds[0].local
    assert out.tmp == 2


def test_exact_multiple_and_rounds_kept():
    reduce = Reduce(Span("tmp", 0, 4), Span("recv", 0, 4), Span("recv", 0, 4))
    s = sched(Round((), (Recv(0, Span("tmp", 0, 4)),), (reduce,)),
              Round((Send(0, Span("recv", 0, 4)),), (), ()), tmp=4)
    out = split_messages(s, 2)
    assert len(out.rounds) == 2
    assert out.rounds[0].recvs == (Recv(0, Span("tmp", 0, 2)),
                                   Recv(0, Span("tmp", 2, 4)))
    assert out.rounds[0].local == (reduce,)
    assert out.rounds[1].sends == (Send(0, Span("recv", 0, 2)),
                                   Send(0, Span("recv", 2, 4)))


def test_sync_and_empty_untouched():
    s = sched(Round((Send(1, SYNC), Send(2, Span("send", 0, 5))),
                    (Recv(1, SYNC), Recv(3, Span("recv", 4, 4))), ()))
    out = split_messages(s, 2)
    assert out.rounds[0].sends[0] == Send(1, SYNC)
    assert out.rounds[0].sends[1:] == (Send(2, Span("send", 0, 2)),
                                      Send(2, Span("send", 2, 4)),
                                      Send(2, Span("send", 4, 5)))
    assert out.rounds[0].recvs == s.rounds[0].recvs


def test_identity_when_nothing_to_split():
    s = sched(Round((Send(1, Span("send", 0, 4)), Send(2, SYNC)),
                    (Recv(1, Span("recv", 0, 4)),), ()))
    assert split_messages(s, 4) is s
    assert split_messages(s, 1 << 40) is s
    empty = sched()
    assert split_messages(empty, 1) is empty


def test_limit_must_be_positive():
    with pytest.raises(ValueError):
        split_messages(sched(), 0)


@pytest.mark.parametrize("itemsize", [1, 2, 4, 8, 16, 3])
def test_element_limit(itemsize):
    assert MAX_MESSAGE_BYTES == 2**31 - 1
    n = element_limit(itemsize)
    assert n == (2**31 - 1) // itemsize
    assert n * itemsize <= MAX_MESSAGE_BYTES < (n + 1) * itemsize


def test_round_overlap_sweep_matches_pairwise_definition():
    """The simulator's receive-overlap check (an address sweep, so chunked
    rounds of hundreds of messages stay cheap) agrees with the pairwise rule:
    a receive may overlap no other view of its round; sends may share."""
    rng = np.random.default_rng(2)
    buf = np.zeros(24, np.int32)
    for _ in range(2000):
        views = []
        for _ in range(rng.integers(1, 5)):
            a, b = sorted(rng.integers(0, 25, 2))
            views.append((bool(rng.integers(2)), buf[a:b]))
        recvs = [v for is_recv, v in views if is_recv]
        sends = [v for is_recv, v in views if not is_recv]
        bad = any(overlap(r, o) for i, r in enumerate(recvs)
                  for o in recvs[i + 1:] + sends)
        rnd = BoundRound(tuple((1, v) for v in sends),
                         tuple((1, v) for v in recvs), ())
        if bad:
            with pytest.raises(SimulationError, match="overlaps"):
                _check_round(0, 0, rnd)
        else:
            _check_round(0, 0, rnd)
