"""The verdict of :func:`mpicoll.trace.verdict.analyse` as plain text.

A header line (ranks, files, why they were dumped), one block per
communicator (its first divergent call, or that it is stuck or clean; its
arrival table and straggler) and a closing ``verdict:`` line
(:func:`summary`). Ranks are world ranks, written compactly ("0-3,5").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mpicoll.trace.verdict import MIN_CALLS, MIN_LATENESS

#: Lines listed per kind (waiting ranks, ranks that never joined, table rows).
MAX_LINES = 8


def ranges(numbers: Iterable[int]) -> str:
    """``numbers`` sorted and written as runs: ``[0, 1, 2, 3, 5]`` ->
    ``"0-3,5"`` (a run of two as ``"0,1"``); ``"-"`` for none."""
    ns = sorted(set(numbers))
    runs: list[str] = []
    i = 0
    while i < len(ns):
        j = i
        while j + 1 < len(ns) and ns[j + 1] == ns[j] + 1:
            j += 1
        if j - i >= 2:
            runs.append(f"{ns[i]}-{ns[j]}")
        else:
            runs.extend(str(n) for n in ns[i:j + 1])
        i = j + 1
    return ",".join(runs) or "-"


def ranks_text(numbers: Iterable[int]) -> str:
    """``"rank 1"`` or ``"ranks 0,2-5"``."""
    ns = sorted(set(numbers))
    return f"rank {ns[0]}" if len(ns) == 1 else f"ranks {ranges(ns)}"


def call_text(seq: int, call: dict | None) -> str:
    """Call ``seq`` with what is known of it: ``"#6 allreduce (native,
    float64 x 1024, 8192 B)"``, or ``"#6 (in no recorded window)"``."""
    if not call or not call.get("collective"):
        return f"#{seq} (in no recorded window)"
    parts = [str(call[k]) for k in ("algorithm",) if call.get(k)]
    if call.get("form") and call["form"] != "blocking":
        parts.append(call["form"])
    count = call.get("count")
    if isinstance(count, list):
        count = f"{len(count)} counts"
    if call.get("dtype") and count is not None:
        parts.append(f"{call['dtype']} x {count}")
    if call.get("bytes") is not None:
        parts.append(f"{call['bytes']} B")
    parts += [f"op {call['op']}"] if call.get("op") else []
    parts += [f"root {call['root']}"] if call.get("root") is not None else []
    return f"#{seq} {call['collective']}" + (f" ({', '.join(parts)})"
                                              if parts else "")


def _capped(lines: list[str], indent: str) -> list[str]:
    """``lines`` indented, the first :data:`MAX_LINES` and a count of the rest."""
    out = [indent + line for line in lines[:MAX_LINES]]
    if len(lines) > MAX_LINES:
        out.append(f"{indent}... and {len(lines) - MAX_LINES} more")
    return out


def _divergence(found: dict[str, Any]) -> list[str]:
    """The lines on a communicator's first divergent call."""
    lines = [f"  first divergent call: {call_text(found['seq'], found['call'])}"]
    for state, label in (("started", "waiting in it"),
                         ("posted", "posted it, nobody waiting")):
        rows = [w for w in found["waiting"] if w["state"] == state]
        if not rows:
            continue
        waited = [w["waited_s"] for w in rows if w["waited_s"] is not None]
        since = f" (up to {max(waited):.1f} s before the dump)" if waited else ""
        lines.append(f"    {label}: {ranks_text(w['rank'] for w in rows)}{since}")
        lines += _capped([
            f"rank {w['rank']} waits"
            + (f" in round {w['round']}" if w["round"] is not None else "")
            + (f" for rank {w['peer']}" if w["peer"] is not None else "")
            for w in rows if w["round"] is not None or w["peer"] is not None],
            "      ")
        stacks = sorted({w["stack"] for w in rows if w["stack"]})
        lines += _capped([f"at {s}" for s in stacks], "      ")
    if found["completed"]:
        lines.append(f"    completed it: {ranks_text(found['completed'])}")
    lines += _capped([f"never joined: rank {w['rank']}: {w['where']}"
                      for w in found["never_joined"]], "    ")
    by_collective: dict[str, list[dict]] = {}
    for m in found["mismatched"]:
        by_collective.setdefault(m["collective"], []).append(m)
    for name, rows in by_collective.items():
        who = ranks_text(m["rank"] for m in rows)
        lines.append(f"    mismatch: {who} {'is' if len(rows) == 1 else 'are'}"
                     f" at call #{found['seq']} as {name}"
                     f" ({'/'.join(sorted({m['state'] for m in rows}))}),"
                     f" the others as {found['collective']}")
    return lines


def _arrivals(comm: dict[str, Any]) -> list[str]:
    """The arrival table and the straggler line of a communicator."""
    common, rows = comm["common_calls"], comm["stragglers"]
    if not common:
        return ["  stragglers: no call recorded by every member"]
    n = len(common)
    lines = [f"  arrivals over {n} call{'s' * (n != 1)} every member recorded"
             f" (#{ranges(common)}):", "      rank   last  mean lateness"]
    lines += [f"    {r['rank']:6d} {r['last']:3d}/{n:<3d}"
              f" {1e3 * r['mean_lateness_s']:10.1f} ms" for r in rows[:MAX_LINES]]
    if len(rows) > MAX_LINES:
        lines.append(f"    ... and {len(rows) - MAX_LINES} more ranks")
    top = rows[0]
    if comm["straggler"] is not None:
        lines.append(f"  straggler: rank {top['rank']} arrived last at"
                     f" {top['last']} of {n} calls, mean lateness"
                     f" {1e3 * top['mean_lateness_s']:.1f} ms")
    elif n < MIN_CALLS:
        lines.append(f"  straggler: none named over {n} calls"
                     f" ({MIN_CALLS} needed)")
    else:
        lines.append("  straggler: none (no rank arrived last at more than"
                     " half of the calls, late by"
                     f" {1e3 * MIN_LATENESS:g} ms or more on average)")
    return lines


def _communicator(comm: dict[str, Any]) -> list[str]:
    """The block of one communicator."""
    name = comm["name"] or "communicator"
    lines = [f"communicator {name} [{ranges(comm['ranks'])}] (id {comm['id']}):"]
    n = len(comm["ranks"])
    if comm["first_divergent"]:
        lines += _divergence(comm["first_divergent"])
    elif comm["stuck"]:
        stuck = comm["stuck"]
        waited = (f", for up to {stuck['waited_s']:.1f} s"
                  if stuck["waited_s"] is not None else "")
        lines.append(f"  every rank is in call #{stuck['seq']}"
                     f" ({stuck['collective'] or '?'}){waited}: slow or stuck"
                     " inside the MPI library, nobody missing")
    elif comm["no_trace"]:
        lines.append(f"  the {n - len(comm['no_trace'])} traced ranks agree on"
                     f" every recorded call; no trace of"
                     f" {ranks_text(comm['no_trace'])}")
    elif comm["in_flight"]:
        lines.append(f"  all {n} ranks agree on every recorded call; in flight,"
                     f" nobody waiting: #{ranges(comm['in_flight'])}")
    else:
        lines.append(f"  all {n} ranks completed every recorded call"
                     f" (last #{comm['last_seq']})")
    return lines + _arrivals(comm)


def summary(verdict: dict[str, Any]) -> str:
    """One line: the problem of each communicator that has one (and the
    stragglers named), or that everything is clean."""
    parts = []
    for comm in verdict["communicators"]:
        name = comm["name"] or f"[{ranges(comm['ranks'])}]"
        found, stuck = comm["first_divergent"], comm["stuck"]
        if found:
            never = [w["rank"] for w in found["never_joined"]]
            detail = [f"never joined: {ranges(never)}"] if never else []
            if found["mismatched"]:
                detail.append("mismatch: "
                              + ranges(m["rank"] for m in found["mismatched"]))
            parts.append(f"{name} diverges at call #{found['seq']}"
                         f" {found['collective'] or ''}".rstrip()
                         + (f" ({'; '.join(detail)})" if detail else ""))
        elif stuck:
            parts.append(f"{name}: every rank waits in call #{stuck['seq']}")
        elif comm["no_trace"]:
            parts.append(f"{name}: no trace of {ranks_text(comm['no_trace'])}")
        if comm["straggler"] is not None:
            parts.append(f"{name}: straggler rank {comm['straggler']}")
    if not parts and verdict["no_file"]:
        parts.append(f"no trace file of {ranks_text(verdict['no_file'])}")
    return "verdict: " + ("; ".join(parts) if parts else
                          "clean, every rank completed or agrees on every call")


def render(verdict: dict[str, Any]) -> str:
    """The whole report: header, a block per communicator, summary."""
    traced, world = verdict["traced"], verdict["world_size"]
    header = (f"mpicoll trace: {world} rank{'s' * (world != 1)},"
              f" {len(traced)} file{'s' * (len(traced) != 1)}")
    if verdict["no_file"]:
        header += f" (no file: {ranks_text(verdict['no_file'])})"
    reasons = ", ".join(f"{r}" + (f" x{n}" if len(verdict["reasons"]) > 1
                                  else "")
                        for r, n in sorted(verdict["reasons"].items()))
    lines = [f"{header}; dumped on {reasons}"]
    for comm in verdict["communicators"]:
        lines += _communicator(comm)
    lines.append(summary(verdict))
    return "\n".join(lines)
