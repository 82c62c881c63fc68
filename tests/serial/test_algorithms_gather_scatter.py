"""Tier-1 tests of gather, scatter and allgatherv, beyond the sweep.

``tests/serial/test_schedules.py`` runs every registered algorithm over the whole
size × count × root grid (in place, uneven allgatherv counts). This file
keeps what that sweep cannot see: who posts what in which round, scratch
sizes, which copies remain, the subtree windows of the binomial trees
(wrapped subtrees included), and that allgather and allgatherv build the
same schedules from the same blocks.
"""

from __future__ import annotations

import numpy as np
import pytest

from mpicoll.coll import lookup
from mpicoll.coll.scatter import Window, subtree_window
from mpicoll.schedule.core import Copy, ScheduleBuilder, Span
from mpicoll.sim.data import simulate
from mpicoll.topo import binomial_children

SIZES = (1, 2, 3, 5, 8, 12)


def schedules(collective, name, size, count, root=0):
    alg = lookup(collective, name)
    return [alg.schedule(r, size, count, root=root) for r in range(size)]


def comm_rounds(schedule):
    return [rnd for rnd in schedule.rounds if rnd.sends or rnd.recvs]


def copies(schedule):
    return [st for rnd in schedule.rounds for st in rnd.local
            if isinstance(st, Copy)]


def block(buf, r, count):
    return Span(buf, r * count, (r + 1) * count)


def subtree_blocks(vrank, size):
    """Size of a virtual rank's binomial subtree (the whole tree at 0)."""
    return min(vrank & -vrank, size - vrank) if vrank else size


# -- linear ------------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
def test_linear_one_round_straight_into_place(size):
    """The root posts all p-1 messages in one round, block r to/from rank r."""
    count = 4
    for root in sorted({0, size // 2, size - 1}):
        g = schedules("gather", "linear", size, count, root)
        s = schedules("scatter", "linear", size, count, root)
        for r in range(size):
            assert g[r].tmp == s[r].tmp == 0
            assert len(g[r].rounds) == len(s[r].rounds) == 1
            if r == root:
                others = sorted(set(range(size)) - {root})
                (gr,), (sr,) = g[r].rounds, s[r].rounds
                assert sorted(gr.recvs) == [(p, block("recv", p, count))
                                            for p in others]
                assert sorted(sr.sends) == [(p, block("send", p, count))
                                            for p in others]
                assert gr.local == (Copy(Span("send", 0, count),
                                         block("recv", root, count)),)
                assert sr.local == (Copy(block("send", root, count),
                                         Span("recv", 0, count)),)
            else:
                assert g[r].rounds[0].sends == ((root, Span("send", 0, count)),)
                assert s[r].rounds[0].recvs == ((root, Span("recv", 0, count)),)


# -- binomial ----------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
def test_binomial_scratch_rounds_and_copies(size):
    """Root and leaves: one round, no scratch; inner ranks: their subtree.

    The root reads or writes its vector in place (one copy: its own block);
    a leaf sends from ``send`` or receives into ``recv`` with no copy; an
    inner rank copies its block into (gather) or out of (scatter) scratch.
    """
    count = 3
    for root in range(size):
        g = schedules("gather", "binomial", size, count, root)
        s = schedules("scatter", "binomial", size, count, root)
        for r in range(size):
            v = (r - root) % size
            n = subtree_blocks(v, size)
            children = len(binomial_children(v, size))
            where = (root, r)
            if v == 0:
                assert g[r].tmp == s[r].tmp == 0, where
                # the gather receives all subtrees at once, the scatter
                # sends one child's per round
                assert len(g[r].rounds) == 1, where
                assert len(s[r].rounds) == max(1, children), where
                assert copies(g[r]) == [Copy(Span("send", 0, count),
                                             block("recv", r, count))], where
                assert copies(s[r]) == [Copy(block("send", r, count),
                                             Span("recv", 0, count))], where
            elif n == 1:  # leaf
                assert g[r].tmp == s[r].tmp == 0, where
                assert len(g[r].rounds) == len(s[r].rounds) == 1, where
                assert not copies(g[r]) and not copies(s[r]), where
            else:
                assert g[r].tmp == s[r].tmp == n * count, where
                assert len(comm_rounds(g[r])) == 2, where
                assert len(s[r].rounds) == 1 + children, where
                assert len(g[r].rounds) == 3, where  # the copy comes first
                assert copies(g[r]) == [Copy(Span("send", 0, count),
                                             Span("tmp", 0, count))], where
                assert copies(s[r]) == [Copy(Span("tmp", 0, count),
                                             Span("recv", 0, count))], where


def test_binomial_wrapped_subtree_travels_as_two_messages():
    """p=8, root 5: rank 7's subtree is ranks 7, 0 (virtual 2, 3).

    The root keeps rank order, so it moves blocks 7 and 0 as two messages;
    rank 7 keeps them side by side in 2 blocks of scratch.
    """
    count = 10
    g = schedules("gather", "binomial", 8, count, root=5)
    s = schedules("scatter", "binomial", 8, count, root=5)
    both = [Span("tmp", 0, count), Span("tmp", count, 2 * count)]
    assert g[7].tmp == s[7].tmp == 2 * count
    assert [x.span for x in g[7].rounds[-1].sends] == both
    assert [x.span for x in s[7].rounds[0].recvs] == both
    root_recvs = [x for x in g[5].rounds[0].recvs if x.peer == 7]
    root_sends = [x for rnd in s[5].rounds for x in rnd.sends if x.peer == 7]
    assert [x.span for x in root_recvs] == [block("recv", 7, count),
                                            block("recv", 0, count)]
    assert [x.span for x in root_sends] == [block("send", 7, count),
                                            block("send", 0, count)]
    xs = [np.array([f"{r}.{i}" for i in range(count)], dtype=object)
          for r in range(8)]
    whole = simulate("gather", "binomial", xs, root=5)[5]
    assert list(whole) == [x for blk in xs for x in blk]
    back = simulate("scatter", "binomial",
                    [whole if r == 5 else whole[:0] for r in range(8)], root=5)
    assert [list(x) for x in back] == [list(x) for x in xs]


def test_window_maps_the_subtree_in_virtual_order():
    """Blocks of 10, p=8, rank 6 with a 4-block subtree: ranks 6, 7, 0, 1."""
    b = ScheduleBuilder()
    w = subtree_window(b, 6, 8, 2, (10,) * 8, Span("send", 0, 10))
    assert w == Window(Span("tmp", 0, 40), 60, 80)
    assert w.sub(60, 80) == Span("tmp", 0, 20)  # ranks 6, 7
    assert w.sub(0, 20) == Span("tmp", 20, 40)  # ranks 0, 1, after the wrap
    assert w.sub(10, 20) == Span("tmp", 30, 40)
    # A leaf's window is the span it was given.
    leaf = subtree_window(b, 7, 8, 2, (10,) * 8, Span("recv", 0, 10))
    assert leaf.sub(70, 80) == Span("recv", 0, 10)
    assert b.build().tmp == 40


# -- allgatherv --------------------------------------------------------------

@pytest.mark.parametrize("name", ["ring", "recursive_doubling"])
def test_allgatherv_shares_the_allgather_schedules(name):
    """Even counts: allgatherv builds exactly allgather's schedules."""
    for size in SIZES:
        for count in (0, 1, 7):
            assert (schedules("allgatherv", name, size, (count,) * size)
                    == schedules("allgather", name, size, count)), (size, count)


def test_allgatherv_empty_blocks_send_nothing():
    """Only non-empty blocks travel; all empty: no rounds at all."""
    for size in (3, 5, 8):
        one = tuple(7 if r == 1 else 0 for r in range(size))
        ring = schedules("allgatherv", "ring", size, one)
        assert sum(s.messages for s in ring) == size - 1  # one block, p-1 hops
        assert all(s.tmp == 0 for s in ring)
        for name in ("ring", "recursive_doubling"):
            none = schedules("allgatherv", name, size, (0,) * size)
            assert all(s.rounds == () for s in none), name
        ragged = tuple(range(1, size + 1))
        ring = schedules("allgatherv", "ring", size, ragged)
        assert max(len(s.rounds) for s in ring) == size  # the copy, p-1 steps
        for r, s in enumerate(ring):  # every block but rank r+1's
            assert sum(len(x.span) for rnd in s.rounds for x in rnd.sends) == (
                sum(ragged) - ragged[(r + 1) % size])
