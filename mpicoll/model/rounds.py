"""Who sends what to whom, round by round: a collective's schedules as text.

    python -m mpicoll.rounds allreduce ring --ranks 4
    python -m mpicoll.rounds bcast binomial --ranks 8 --root 3 --count 2
    python -m mpicoll.rounds allreduce hierarchical --ranks 4 --nodes 0,0,1,1

(Named ``rounds``, not ``explain``: explain mode, ``MPICOLL_EXPLAIN`` and
:meth:`mpicoll.api.comm.Comm.explain`, says which algorithm a call runs and
why; this module says what an algorithm does.)

The schedules of all ranks are matched message by message (between a pair
of ranks in posting order, as MPI matches them) and laid on one time line,
the model of :mod:`mpicoll.sim.matching`: a message takes one step and
can start once both its sender and its receiver have posted their rounds;
a rank posts a round once its previous round is done (all its messages
through, then its local steps). Round ``t`` of the diagram is step ``t`` of
that time line, so a chain shows as a chain even where each rank has only
one or two rounds of its own; :func:`depth`, the number of steps, is the
latency along the deepest path ("Rounds" in the builders' docstrings).

A message prints as ``0→1 send[0:2]→tmp[0:2]`` (rank 0's span of ``send``
into rank 1's span of ``tmp``; a whole buffer by its name alone, one element
as ``[i]``), a local step as ``1: recv = tmp ∘ send`` (``∘`` the operation,
the left operand covering the lower ranks) or ``1: recv[0:2] ← send``,
under the round whose step ends before it.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from mpicoll.coll import algorithms, lookup
from mpicoll.collectives import COLLECTIVES
from mpicoll.schedule.core import Copy, Schedule, Span
from mpicoll.schedule.layout import buffer_lengths

WIDTH = 88  # characters per printed line


def default_count(collective: str, size: int, count: int | None = None):
    """The ``count`` argument for ``size`` ranks: ``count`` (default: ``size``
    elements for a whole vector, so that ``p`` blocks have one element each,
    else 1) per rank, shaped as the collective's row says."""
    shape = COLLECTIVES[collective].counts
    n = count if count is not None else (size if shape == "whole" else 1)
    if shape == "per_rank":
        return (n,) * size
    if shape == "matrix":
        return ((n,) * size,) * size
    return 0 if shape == "none" else n


def schedules(collective: str, algorithm: str, size: int, count=None, *,
              root: int = 0, commutative: bool = True, nodes=None,
              **params) -> list[Schedule]:
    """Every rank's schedule; ``count`` as :func:`default_count` shapes it."""
    alg = lookup(collective, algorithm)
    if alg is None or alg.native:
        known = [a for a in algorithms(collective) if a != "native"]
        raise ValueError(f"{collective} has no hand-built algorithm "
                         f"{algorithm!r} (known: {', '.join(known)})")
    if not isinstance(count, tuple):
        count = default_count(collective, size, count)
    return [alg.schedule(r, size, count, root=root, commutative=commutative,
                         nodes=nodes, **params) for r in range(size)]


def timeline(scheds: list[Schedule]):
    """``(messages, finish)``: each message as ``(step, src, src span, dst,
    dst span)``, and for every rank the step at which each of its rounds
    ends. Raises ``ValueError`` for unmatched messages or a deadlock."""
    size = len(scheds)
    sends, recvs = defaultdict(list), defaultdict(list)  # (src, dst): [(round, span)]
    for r, sched in enumerate(scheds):
        for k, rnd in enumerate(sched.rounds):
            for m in rnd.sends:
                sends[r, m.peer].append((k, m.span))
            for m in rnd.recvs:
                recvs[m.peer, r].append((k, m.span))
    waits = defaultdict(list)  # (rank, round): [(peer, peer's round, message)]
    for pair in set(sends) | set(recvs):
        out, into = sends[pair], recvs[pair]
        if len(out) != len(into):
            raise ValueError(f"{len(out)} messages from rank {pair[0]} to "
                             f"rank {pair[1]}, {len(into)} receives")
        for i, ((ks, s), (kr, d)) in enumerate(zip(out, into)):
            if len(s) != len(d):
                raise ValueError(f"rank {pair[0]} sends {len(s)} elements to "
                                 f"rank {pair[1]}, which receives {len(d)}")
            waits[pair[0], ks].append((pair[1], kr, (*pair, i)))
            waits[pair[1], kr].append((pair[0], ks, (*pair, i)))
    finish: list[list[int]] = [[] for _ in range(size)]
    done: dict[tuple, int] = {}  # (src, dst, i): step
    progress = True
    while progress:
        progress = False
        for r in range(size):
            k = len(finish[r])
            if k == len(scheds[r].rounds):
                continue
            posted = finish[r][-1] if k else 0
            peers = waits[r, k]
            if any(len(finish[p]) < kp for p, kp, _ in peers):
                continue  # a peer has not posted its round yet
            end = posted
            for p, kp, key in peers:
                step = max(posted, finish[p][kp - 1] if kp else 0) + 1
                done[key] = step
                end = max(end, step)
            finish[r].append(end)
            progress = True
    stuck = [f"rank {r} round {len(f) + 1}" for r, f in enumerate(finish)
             if len(f) < len(scheds[r].rounds)]
    if stuck:
        raise ValueError("deadlock: " + ", ".join(stuck))
    messages = sorted(
        (done[src, dst, i], src, s, dst, d)
        for (src, dst), out in sends.items()
        for i, ((_, s), (_, d)) in enumerate(zip(out, recvs[src, dst])))
    return messages, finish


def depth(scheds: list[Schedule]) -> int:
    """Steps from the first message to the last, along the deepest path."""
    return max((f[-1] for f in timeline(scheds)[1] if f), default=0)


def _span(span: Span, lengths: dict[str, int]) -> str:
    if span.start == 0 and span.stop == lengths[span.buf]:
        return span.buf
    if span.stop - span.start == 1:
        return f"{span.buf}[{span.start}]"
    return f"{span.buf}[{span.start}:{span.stop}]"


def _pack(label: str, items: list[str]) -> list[str]:
    """``items`` two spaces apart in lines of at most :data:`WIDTH`, the
    first after ``label``, the others under it."""
    lines, line = [], label
    for item in items:
        if len(line) + len(item) > WIDTH and len(line) > len(label):
            lines.append(line.rstrip())
            line = " " * len(label)
        line += item + "  "
    return [*lines, line.rstrip()]


def render(collective: str, algorithm: str, size: int, count=None, *,
           root: int = 0, commutative: bool = True, nodes=None,
           **params) -> str:
    """The diagram of ``algorithm`` on ``size`` ranks, as text."""
    if not isinstance(count, tuple):
        count = default_count(collective, size, count)
    scheds = schedules(collective, algorithm, size, count, root=root,
                       commutative=commutative, nodes=nodes, **params)
    messages, finish = timeline(scheds)
    lengths = []
    for r, sched in enumerate(scheds):
        send, recv = buffer_lengths(collective, r, size, count, root)
        lengths.append({"send": send, "recv": recv, "tmp": sched.tmp, "sync": 0})
    sent = defaultdict(list)
    for step, src, s, dst, d in messages:
        sync = "" if len(s) or s.buf != "sync" else " (sync)"
        what = sync or (f" {_span(s, lengths[src])}→{_span(d, lengths[dst])}")
        sent[step].append(f"{src}→{dst}{what}")
    local = defaultdict(list)
    for r, sched in enumerate(scheds):
        for rnd, step in zip(sched.rounds, finish[r]):
            for op in rnd.local:
                if isinstance(op, Copy):
                    text = f"{_span(op.dst, lengths[r])} ← {_span(op.src, lengths[r])}"
                else:
                    text = (f"{_span(op.dst, lengths[r])} = {_span(op.a, lengths[r])}"
                            f" ∘ {_span(op.b, lengths[r])}")
                local[step].append(f"{r}: {text}")
    shown = count if COLLECTIVES[collective].counts != "matrix" else "matrix"
    head = (f"{collective} {algorithm}, {size} rank{'s' if size != 1 else ''}, "
            f"count {shown}")
    if COLLECTIVES[collective].rooted:
        head += f", root {root}"
    if params:
        head += ", " + ", ".join(f"{k}={v}" for k, v in sorted(params.items()))
    tmp = [f"{r}: {s.tmp}" for r, s in enumerate(scheds) if s.tmp]
    lines = [head, "scratch (tmp elements): " + (", ".join(tmp) or "none")]
    width = len(str(max([*sent, *local], default=0)))
    for step in sorted(set(sent) | set(local)):
        label = "start" if step == 0 else f"round {step:>{width}}"
        if sent[step]:
            lines += _pack(f"{label}  ", sent[step])
            label = ""
        if local[step]:
            lines += _pack(f"{label:<{len('round ') + width}}  ", local[step])
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mpicoll.rounds",
        description="Print who sends what to whom in each round of a "
                    "hand-built algorithm, from the schedules of all ranks.")
    parser.add_argument("collective", choices=list(COLLECTIVES))
    parser.add_argument("algorithm")
    parser.add_argument("--ranks", "-p", type=int, default=4,
                        help="number of ranks (default 4)")
    parser.add_argument("--count", "-n", type=int,
                        help="elements per rank's vector or block (default: "
                             "one per block)")
    parser.add_argument("--root", type=int, default=0)
    parser.add_argument("--noncommutative", action="store_true",
                        help="schedule for an operation that does not commute")
    parser.add_argument("--nodes", help="the node of every rank, e.g. 0,0,1,1 "
                                        "(topology-aware algorithms)")
    parser.add_argument("--param", action="append", default=[],
                        metavar="NAME=VALUE", help="an algorithm parameter")
    args = parser.parse_args(argv)
    params = {}
    for item in args.param:
        name, _, value = item.partition("=")
        params[name] = int(value) if value.lstrip("-").isdigit() else value
    nodes = (tuple(int(n) for n in args.nodes.split(","))
             if args.nodes else None)
    try:
        print(render(args.collective, args.algorithm, args.ranks, args.count,
                     root=args.root, commutative=not args.noncommutative,
                     nodes=nodes, **params))
    except (ValueError, TypeError) as e:
        parser.error(str(e))
    return 0

