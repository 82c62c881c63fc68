"""Per-byte costs looked up by the ranks' footprint
(:attr:`mpicoll.model.Network.footprint_buffers`), computed by hand.

The network has two size ranges: up to 1,000 bytes every cost is 1 (α 1
s, β, γ and copy 1 s per byte), above it 100 and 10 per byte. Without
``footprint_buffers`` a message's or a round's own bytes pick the range;
with ``k`` the rank's send, receive and scratch buffers over ``k`` pick
it for the per-byte costs, and α stays with the message.
"""

from __future__ import annotations

import pytest

from mpicoll.calibration import POINT_BUFFERS, fit
from mpicoll.model import Network, SizeRange, predict

ITEMSIZE = 4
NET = Network(alpha=100, beta=10, gamma=10, copy=10,
              ranges=(SizeRange(1000, 1, 1, 1, 1),))


def by(k):
    return Network(**{**vars(NET), "footprint_buffers": k})


def test_a_broadcast_is_priced_at_its_one_buffer_over_k():
    """2 ranks, 300 float32: one message of 1,200 bytes, each rank holding
    one buffer of 1,200 bytes (a broadcast has no send buffer)."""
    n = 300 * ITEMSIZE
    assert predict("bcast", "binomial", 2, 300, ITEMSIZE, NET) == 100 + 10 * n
    assert predict("bcast", "binomial", 2, 300, ITEMSIZE, by(1)) \
        == 100 + 10 * n
    # 1,200 / 3 = 400 bytes: the small range's β, the large one's α
    assert predict("bcast", "binomial", 2, 300, ITEMSIZE, by(3)) \
        == 100 + 1 * n


def test_an_allreduce_is_priced_at_all_its_buffers_over_k():
    """Ring, 2 ranks, 120 float32: two rounds each swapping 240 bytes, the
    first reducing 240 bytes out of place; each rank holds send and
    receive buffers of 480 bytes and 240 of scratch (1,200 in all)."""
    half = 60 * ITEMSIZE
    small = 2 * (1 + half) + half
    assert predict("allreduce", "ring", 2, 120, ITEMSIZE, NET) == small
    assert predict("allreduce", "ring", 2, 120, ITEMSIZE, by(3)) == small
    # 1,200 / 1: the large range's per-byte costs, α still the message's
    assert predict("allreduce", "ring", 2, 120, ITEMSIZE, by(1)) \
        == 2 * (1 + 10 * half) + 10 * half


@pytest.mark.parametrize("collective,name", [
    ("allreduce", "ring"), ("allreduce", "recursive_doubling"),
    ("allgather", "bruck"), ("alltoall", "pairwise")])
def test_the_rank_zero_shortcut_keeps_the_footprint(collective, name):
    """Where every rank's schedule is rank 0's relabelled, walking rank 0
    alone prices as walking all of them."""
    count = 64 * 8 if collective == "allreduce" else 64
    walks = {predict(collective, name, 8, count, ITEMSIZE, by(3),
                     exhaustive=exhaustive) for exhaustive in (True, False)}
    assert len(walks) == 1


def test_a_message_takes_the_larger_footprint_of_its_two_ranks():
    """Linear gather, 3 ranks, 100 float32 each: the root holds 400 bytes
    to send and 1,200 to receive, the others 400. Its two messages of 400
    bytes arrive one after the other and it copies its own block, all
    priced at its 1,600 bytes: by 1, above 1,000; by 2, 800, below."""
    n = 100 * ITEMSIZE
    assert predict("gather", "linear", 3, 100, ITEMSIZE, by(1)) \
        == pytest.approx(2 * (1 + 10 * n) + 10 * n)
    assert predict("gather", "linear", 3, 100, ITEMSIZE, by(2)) \
        == pytest.approx(2 * (1 + n) + n)


def test_footprint_buffers_below_one_is_refused():
    with pytest.raises(ValueError, match="footprint_buffers"):
        by(0.5)


def test_a_calibration_prices_by_its_points_buffers():
    points = [(1 << i, 1e-6 * (1 + (1 << i) * 1e-3)) for i in range(3, 12)]
    cal = fit(points, points, {("sum", "float32"): points})
    assert cal.network("sum", "float32").footprint_buffers == POINT_BUFFERS
