"""Run every rank's bound schedule in one process, without MPI.

The model is MPI's with no buffering at all: a send completes only when the
matching receive is posted, and messages between a pair of ranks match in
posting order (one tag per collective). A schedule set that finishes here
therefore cannot deadlock on a real MPI library, whatever its eager limit.

Checked on the way, each failure raising :class:`SimulationError` with the
rank and round:

- every message matches a receive of the same length (no unmatched or
  truncated messages, no deadlock);
- within a round, no receive view overlaps another receive or a send view
  (MPI forbids touching a buffer of a pending operation).

(:func:`mpicoll.schedule.bind.bind` checks reductions' aliasing for real
runs and simulated ones alike.)
"""

from __future__ import annotations

from collections import defaultdict, deque


from mpicoll.schedule.bind import BoundRound


class SimulationError(AssertionError):
    """A schedule set that would misbehave on a real MPI library."""


def _check_round(rank: int, index: int, rnd: BoundRound) -> None:
    """Sweep the round's views by address (n log n: a round of a linear
    algorithm, or of a chunked schedule, holds hundreds of messages). Sends
    may overlap each other; a receive may overlap nothing."""
    views = sorted(
        (v.__array_interface__["data"][0], v.nbytes, is_recv)
        for is_recv, pairs in ((False, rnd.sends), (True, rnd.recvs))
        for _, v in pairs if v.nbytes
    )
    recv_end = any_end = 0  # furthest byte reached by earlier views
    for start, nbytes, is_recv in views:
        if start < recv_end or (is_recv and start < any_end):
            raise SimulationError(
                f"rank {rank} round {index}: a receive overlaps another "
                "buffer of the same round"
            )
        any_end = max(any_end, start + nbytes)
        if is_recv:
            recv_end = max(recv_end, start + nbytes)


def run_bound(bound: list[list[BoundRound]]) -> None:
    """Run one bound schedule per rank to completion, or raise.

    Event-driven: only channels that got a new operation are matched, and
    only ranks whose round completed post their next one.
    """
    size = len(bound)
    cursor = [0] * size  # current round per rank
    pending = [0] * size  # unmatched operations of the current round
    sends: dict[tuple[int, int], deque] = defaultdict(deque)  # (src, dst)
    recvs: dict[tuple[int, int], deque] = defaultdict(deque)
    dirty: set[tuple[int, int]] = set()  # channels with new operations
    to_post = list(range(size))

    def finish_round(rank: int) -> None:
        for step in bound[rank][cursor[rank]].local:
            step()
        cursor[rank] += 1
        to_post.append(rank)

    while to_post or dirty:
        while to_post:
            rank = to_post.pop()
            if cursor[rank] == len(bound[rank]):
                continue
            rnd = bound[rank][cursor[rank]]
            _check_round(rank, cursor[rank], rnd)
            for peer, v in rnd.sends:
                _check_peer(rank, peer, size)
                sends[rank, peer].append((cursor[rank], v))
                dirty.add((rank, peer))
            for peer, v in rnd.recvs:
                _check_peer(rank, peer, size)
                recvs[peer, rank].append((cursor[rank], v))
                dirty.add((peer, rank))
            pending[rank] = len(rnd.sends) + len(rnd.recvs)
            if not pending[rank]:
                finish_round(rank)
        while dirty:
            src, dst = dirty.pop()
            sq, rq = sends[src, dst], recvs[src, dst]
            while sq and rq:
                (s_round, s_view), (r_round, r_view) = sq.popleft(), rq.popleft()
                if s_view.shape != r_view.shape:
                    raise SimulationError(
                        f"rank {src} round {s_round} sends {s_view.size} "
                        f"elements to rank {dst}, whose round {r_round} "
                        f"receives {r_view.size}"
                    )
                r_view[...] = s_view
                for rank in (src, dst):
                    pending[rank] -= 1
                    if pending[rank] == 0:
                        finish_round(rank)
    stuck = [f"rank {r} in round {cursor[r]}" for r in range(size)
             if cursor[r] < len(bound[r])]
    if stuck:
        raise SimulationError("deadlock: " + ", ".join(stuck))


def _check_peer(rank: int, peer: int, size: int) -> None:
    if not 0 <= peer < size or peer == rank:
        raise SimulationError(f"rank {rank} addresses invalid peer {peer}")
