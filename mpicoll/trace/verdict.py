"""Merge the flight recorder's per-process traces and diagnose them.

Pure Python (no MPI, no numpy): :func:`load` reads the
``mpicoll-trace-rank<R>.json`` files, :func:`analyse` matches the members
of each communicator by its ``id`` and returns the verdict as a JSON-ready
dict. Ranks in the verdict are ``MPI.COMM_WORLD`` ranks (the file names'),
communicator rank ``r`` of a communicator being world rank ``ranks[r]``.

A hand-built call's ``peer`` is read as a rank *of the communicator* (the
ranks a schedule talks to) and reported as its world rank.

Times are each process's ``time.time()``: ages ("12.3 s before the dump")
compare a call with its own file's dump time, but the straggler statistics
compare call starts across processes, which across nodes assumes their
clocks are synchronised (NTP or PTP); an offset between two hosts reads as
lateness of the host whose clock is ahead.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from collections.abc import Iterable
from typing import Any

FORMAT = "mpicoll-trace 1"
PATTERN = "mpicoll-trace-rank*.json"
NO_FILE = "no trace file (dead, stopped or never dumped)"
NO_RECORD = "its trace has no record of this communicator"
#: A straggler is named only over at least this many common calls...
MIN_CALLS = 5
#: ...and only if it is late by at least this much on average (seconds):
#: ranks of a healthy run arrive microseconds to a few milliseconds apart
MIN_LATENESS = 0.01
#: What a call entry carries that describes the call (not its progress).
CALL_FIELDS = ("collective", "algorithm", "form", "dtype", "count", "bytes",
               "op", "root")

Trace = dict[str, Any]


class TraceError(ValueError):
    """No trace file, or one that is unreadable or not a trace."""


def find(paths: Iterable[str | Path]) -> list[Path]:
    """The trace files named by ``paths``: a folder stands for its
    ``mpicoll-trace-rank*.json`` files, a file for itself; sorted, without
    repeats. :class:`TraceError` for a path that does not exist."""
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found.extend(sorted(path.glob(PATTERN)))
        elif path.is_file():
            found.append(path)
        else:
            raise TraceError(f"{path}: no such file or folder")
    return sorted(set(found))


def load(paths: Iterable[str | Path]) -> list[Trace]:
    """The traces in ``paths`` (see :func:`find`), one dict per process as
    written, sorted by world rank, each with its file name under
    ``"file"``. :class:`TraceError` when there is none, when a file is not
    JSON or not of format ``mpicoll-trace 1``, or two are of one rank."""
    paths = list(paths)
    files = find(paths)
    if not files:
        raise TraceError(f"no {PATTERN} file in {', '.join(map(str, paths))}")
    traces: dict[int, Trace] = {}
    for file in files:
        try:
            trace = json.loads(file.read_text())
        except (OSError, ValueError) as e:
            raise TraceError(f"{file}: cannot read it ({e})") from e
        if not isinstance(trace, dict) or trace.get("format") != FORMAT:
            raise TraceError(f"{file}: not an {FORMAT!r} trace")
        rank = trace.get("rank")
        if not isinstance(rank, int):
            raise TraceError(f"{file}: no integer 'rank'")
        if rank in traces:
            raise TraceError(f"{file}: a second trace of rank {rank} "
                             f"(the first: {traces[rank]['file']})")
        traces[rank] = dict(trace, file=str(file))
    return [traces[r] for r in sorted(traces)]


class _Member:
    """One member of one communicator: its process's trace and its record
    of the communicator (both None without a file, the record None when
    the file lacks the communicator)."""

    def __init__(self, rank: int, trace: Trace | None,
                 record: dict | None):
        self.rank, self.trace, self.record = rank, trace, record
        record = record or {}
        self.calls = {int(c["seq"]): c for c in record.get("calls") or ()}
        self.seq = int(record.get("seq") or 0)
        self.blocked = int(record.get("blocked") or 0)

    def status(self, s: int) -> tuple[str, dict | None]:
        """This member at call ``s``: (``"absent"``, ``"not_begun"``,
        ``"past"`` (begun, older than its window) or the recorded
        ``state``, the call's entry or None)."""
        if self.record is None:
            return "absent", None
        call = self.calls.get(s)
        if call is not None:
            return call.get("state") or "completed", call
        if self.seq < s:
            return "not_begun", None
        return ("started" if self.blocked == s else "past"), None

    def ago(self, t: float | None) -> float | None:
        """Seconds from time ``t`` to this process's dump (None if none)."""
        if t is None or self.trace is None or self.trace.get("time") is None:
            return None
        return round(float(self.trace["time"]) - float(t), 6)


def _judge(s: int, present: list[_Member], absent: list[_Member]) -> str | None:
    """``"divergent"`` when the members disagree at call ``s`` (one has not
    begun it, two recorded different collectives, or one waits in it while
    another does not or has no trace), ``"stuck"`` when every member waits
    in it, None when they agree."""
    states = [m.status(s) for m in present]
    kinds = {kind for kind, _ in states}
    collectives = {call.get("collective") for _, call in states if call}
    if "not_begun" in kinds or len(collectives) > 1:
        return "divergent"
    if "started" in kinds:
        return "stuck" if kinds == {"started"} and not absent else "divergent"
    return None


def _where(m: _Member, cid: str) -> dict:
    """Where a member that never joined a call is instead: its last call
    on the communicator, and a call it is blocked in on another one."""
    if m.trace is None or m.record is None:
        return {"rank": m.rank, "where": NO_FILE if m.trace is None
                else NO_RECORD, "last_call": None}
    last = m.calls.get(m.seq)
    if m.seq == 0:
        where = "no call yet on this communicator"
    elif last is None:
        where = f"last call #{m.seq} (no longer in its recorded window)"
    else:
        state, name = last.get("state") or "completed", last.get("collective")
        if state == "completed":
            where = f"last call #{m.seq} {name}, completed"
            ago = m.ago(last.get("end"))
            where += f" {ago:.1f} s before the dump" if ago is not None else ""
        elif state == "started":
            where = f"blocked in #{m.seq} {name}"
            ago = m.ago(last.get("start"))
            where += f" for {ago:.1f} s" if ago is not None else ""
        else:
            where = f"last call #{m.seq} {name}, posted, nobody waiting"
        if last.get("stack"):
            where += f" (at {last['stack']})"
    for other in m.trace.get("communicators") or ():
        if other.get("id") != cid and other.get("blocked"):
            call = next((c for c in other.get("calls") or ()
                         if c.get("seq") == other["blocked"]), {})
            where += (f"; blocked in #{other['blocked']} "
                      f"{call.get('collective', '?')} on "
                      f"{other.get('name') or other['id']}")
    return {"rank": m.rank, "where": where,
            "last_call": None if last is None else {
                "seq": m.seq, "collective": last.get("collective"),
                "state": last.get("state")}}


def _finding(s: int, ranks: list[int], present: list[_Member],
             absent: list[_Member], cid: str) -> dict:
    """What each member does at the divergent call ``s``."""
    states = [(m, *m.status(s)) for m in present]
    votes = Counter(call.get("collective") for _, _, call in states if call)
    majority = votes.most_common(1)[0][0] if votes else None
    sample = next((c for _, _, c in states
                   if c and c.get("collective") == majority), None)
    found: dict[str, Any] = {
        "seq": s, "collective": majority,
        "call": None if sample is None else {k: sample.get(k)
                                             for k in CALL_FIELDS},
        "waiting": [], "completed": [], "never_joined": [], "mismatched": []}
    for m, kind, call in states:
        if call is not None and call.get("collective") != majority:
            found["mismatched"].append({"rank": m.rank, "collective":
                                        call.get("collective"), "state": kind})
        elif kind in ("started", "posted"):
            peer = (call or {}).get("peer")
            if isinstance(peer, int) and 0 <= peer < len(ranks):
                peer = ranks[peer]
            found["waiting"].append({
                "rank": m.rank, "state": kind,
                "round": (call or {}).get("round"), "peer": peer,
                "waited_s": m.ago((call or {}).get("start")),
                "stack": (call or {}).get("stack")})
        elif kind in ("completed", "past"):
            found["completed"].append(m.rank)
        else:
            found["never_joined"].append(_where(m, cid))
    found["never_joined"] += [_where(m, cid) for m in absent]
    for key in ("waiting", "never_joined", "mismatched"):
        found[key].sort(key=lambda w: w["rank"])
    found["completed"].sort()
    return found


def _stragglers(present: list[_Member]) -> tuple[list[int], list[dict],
                                                 int | None]:
    """Arrival order over the calls every present member recorded (the
    same ``seq`` and collective in every window): the calls' numbers, a
    row per rank ``{rank, last, calls, mean_lateness_s}`` (calls it was the
    only one to start last at; its start minus the call's earliest start,
    averaged), sorted by ``last`` then lateness, and the straggler: the rank
    last at more than half of at least :data:`MIN_CALLS` calls and late by
    :data:`MIN_LATENESS` or more on average, else None."""
    if len(present) < 2:
        return [], [], None
    common = sorted(set.intersection(*(set(m.calls) for m in present)))
    common = [s for s in common
              if len({m.calls[s].get("collective") for m in present}) == 1
              and all(m.calls[s].get("start") is not None for m in present)]
    last = dict.fromkeys((m.rank for m in present), 0)
    late = dict.fromkeys((m.rank for m in present), 0.0)
    for s in common:
        starts = {m.rank: float(m.calls[s]["start"]) for m in present}
        first, latest = min(starts.values()), max(starts.values())
        at_latest = [r for r, t in starts.items() if t == latest]
        if len(at_latest) == 1:
            last[at_latest[0]] += 1
        for r, t in starts.items():
            late[r] += t - first
    n = len(common)
    rows = sorted(({"rank": r, "last": last[r], "calls": n,
                    "mean_lateness_s": round(late[r] / n, 6) if n else 0.0}
                   for r in last),
                  key=lambda row: (-row["last"], -row["mean_lateness_s"],
                                   row["rank"]))
    top = rows[0]
    named = top["rank"] if n >= MIN_CALLS and 2 * top["last"] > n and \
        top["mean_lateness_s"] >= MIN_LATENESS else None
    return common, rows, named


def _communicator(cid: str, ranks: list[int], name: str,
                  by_rank: dict[int, Trace]) -> dict:
    """The verdict on one communicator (see :func:`analyse`)."""
    members = []
    for r in ranks:
        trace = by_rank.get(r)
        record = next((c for c in (trace or {}).get("communicators") or ()
                       if c.get("id") == cid), None)
        members.append(_Member(r, trace, record))
    present = [m for m in members if m.record is not None]
    absent = [m for m in members if m.record is None]
    top = max(m.seq for m in present)
    candidates = sorted({s for m in present for s in m.calls}
                        | {m.seq + 1 for m in present}
                        | {m.blocked for m in present})
    divergent = stuck = None
    for s in (s for s in candidates if 1 <= s <= top):
        judged = _judge(s, present, absent)
        if judged == "divergent":
            divergent = _finding(s, ranks, present, absent, cid)
            break
        if judged == "stuck" and stuck is None:
            waited = [m.ago((m.calls.get(s) or {}).get("start")) for m in present]
            stuck = {"seq": s, "collective": next(
                (m.calls[s].get("collective") for m in present if s in m.calls),
                None), "waited_s": max((w for w in waited if w is not None),
                                       default=None)}
    in_flight = sorted({s for m in present for s, c in m.calls.items()
                        if c.get("state") == "posted"})
    common, rows, named = _stragglers(present)
    status = ("divergent" if divergent else "stuck" if stuck
              else "incomplete" if absent else "clean")
    return {"id": cid, "name": name, "ranks": ranks, "status": status,
            "no_trace": [m.rank for m in absent], "last_seq": top,
            "first_divergent": divergent, "stuck": None if divergent else stuck,
            "in_flight": in_flight, "common_calls": common,
            "stragglers": rows, "straggler": named}


def analyse(traces: list[Trace]) -> dict:
    """The verdict on ``traces`` (from :func:`load`), a JSON-ready dict:
    ``world_size``, ``files``, ``traced`` and ``no_file`` (world ranks),
    ``reasons`` (dump reason: count), ``communicators`` (one dict each,
    largest first: ``id``, ``name``, ``ranks``, ``status``, ``no_trace``,
    ``first_divergent`` {seq, collective, call, waiting [{rank, state,
    round, peer, waited_s, stack}], completed, never_joined [{rank, where,
    last_call}], mismatched [{rank, collective, state}]} or None, ``stuck``
    {seq, collective, waited_s} or None, ``in_flight``, ``common_calls``,
    ``stragglers`` [{rank, last, calls, mean_lateness_s}], ``straggler``),
    ``status`` (the worst: divergent, stuck, incomplete, clean) and ``ok``
    (clean: nothing diverges, waits or lacks a trace)."""
    by_rank = {t["rank"]: t for t in traces}
    world = max([int(t.get("world_size") or 0) for t in traces]
                + [r + 1 for r in by_rank])
    comms: dict[str, tuple[list[int], str]] = {}
    for t in traces:
        for c in t.get("communicators") or ():
            comms.setdefault(c["id"], ([int(r) for r in c["ranks"]],
                                       c.get("name") or ""))
    order = sorted(comms, key=lambda cid: (-len(comms[cid][0]), cid))
    verdicts = [_communicator(cid, *comms[cid], by_rank) for cid in order]
    worst = ("divergent", "stuck", "incomplete")
    status = next((s for s in worst if any(v["status"] == s for v in verdicts)),
                  "incomplete" if len(by_rank) < world else "clean")
    return {"world_size": world, "files": [t["file"] for t in traces
                                           if "file" in t],
            "traced": sorted(by_rank),
            "no_file": sorted(set(range(world)) - set(by_rank)),
            "reasons": dict(Counter(str(t.get("reason")) for t in traces)),
            "communicators": verdicts, "status": status,
            "ok": status == "clean"}
