"""Run the bound plans of every rank in one process, without MPI.

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

(:func:`mpicoll.schedule.plan.bind` checks reductions' aliasing for real
runs and simulated ones alike.)
"""

from __future__ import annotations

from collections import defaultdict, deque


from mpicoll.schedule.plan import BoundRound, overlap


class SimulationError(AssertionError):
    """A schedule set that would misbehave on a real MPI library."""


def _check_round(rank: int, index: int, rnd: BoundRound) -> None:
    recvs = [v for _, v in rnd.recvs]
    for i, r in enumerate(recvs):
        for other in recvs[i + 1:] + [v for _, v in rnd.sends]:
            if overlap(r, other):
                raise SimulationError(
                    f"rank {rank} round {index}: a receive overlaps another "
                    "buffer of the same round"
                )


def run_plans(plans: list[list[BoundRound]]) -> None:
    """Execute one bound plan per rank to completion, or raise."""
    size = len(plans)
    cursor = [0] * size  # current round per rank
    posted = [False] * size
    pending = [0] * size  # unmatched operations of the current round
    sends: dict[tuple[int, int], deque] = defaultdict(deque)  # (src, dst)
    recvs: dict[tuple[int, int], deque] = defaultdict(deque)

    def post(rank: int) -> None:
        rnd = plans[rank][cursor[rank]]
        _check_round(rank, cursor[rank], rnd)
        for peer, v in rnd.sends:
            _check_peer(rank, peer, size)
            sends[rank, peer].append((cursor[rank], v))
        for peer, v in rnd.recvs:
            _check_peer(rank, peer, size)
            recvs[peer, rank].append((cursor[rank], v))
        pending[rank] = len(rnd.sends) + len(rnd.recvs)
        posted[rank] = True

    while True:
        progress = False
        for rank in range(size):
            while cursor[rank] < len(plans[rank]) and not posted[rank]:
                post(rank)
                if pending[rank]:
                    break
                _finish_round(plans, rank, cursor, posted)
        for (src, dst), sq in sends.items():
            rq = recvs[src, dst]
            while sq and rq:
                (s_round, s_view), (r_round, r_view) = sq.popleft(), rq.popleft()
                if s_view.shape != r_view.shape:
                    raise SimulationError(
                        f"rank {src} round {s_round} sends {s_view.size} "
                        f"elements to rank {dst}, whose round {r_round} "
                        f"receives {r_view.size}"
                    )
                r_view[...] = s_view
                pending[src] -= 1
                pending[dst] -= 1
                progress = True
        for rank in range(size):
            if posted[rank] and pending[rank] == 0:
                _finish_round(plans, rank, cursor, posted)
                progress = True
        if all(c == len(p) for c, p in zip(cursor, plans)):
            return
        if not progress:
            stuck = [
                f"rank {r} in round {cursor[r]}"
                for r in range(size)
                if cursor[r] < len(plans[r])
            ]
            raise SimulationError("deadlock: " + ", ".join(stuck))


def _finish_round(plans, rank, cursor, posted) -> None:
    for step in plans[rank][cursor[rank]].local:
        step()
    cursor[rank] += 1
    posted[rank] = False


def _check_peer(rank: int, peer: int, size: int) -> None:
    if not 0 <= peer < size or peer == rank:
        raise SimulationError(f"rank {rank} addresses invalid peer {peer}")
