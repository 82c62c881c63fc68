"""The result table the benchmark and the predictor print, and the
per-size summary under it.

A record is one algorithm at one size (the fields of
:func:`mpicoll.bench.harness.record`): a row of the table gives its size,
count, dtype, op, root, algorithm (``auto(ring)`` for what ``auto``
chose), average, least and greatest time per call in µs, algorithm and
bus bandwidth in GB/s (nccl-tests' ``algbw`` and ``busbw``) and wrong
elements; ``*`` marks the fastest right algorithm of its size.
"""

from __future__ import annotations

from typing import NamedTuple

COLUMNS = (f"{'size':>10} {'count':>10} {'type':>8} {'redop':>5} {'root':>4}"
           f" {'algorithm':>32} {'avg(us)':>10} {'min(us)':>10}"
           f" {'max(us)':>10} {'algbw':>7} {'busbw':>7} {'#wrong':>6}")


def _label(record: dict) -> str:
    """``auto(ring)`` for auto, else the algorithm's name."""
    if record["chosen"]:
        return f"auto({record['chosen']})"
    return record["algorithm"]


def _fastest(records: list[dict]) -> dict | None:
    """The right record with the least average time, auto left out."""
    named = [r for r in records if r["algorithm"] != "auto" and not r["wrong"]]
    return min(named, key=lambda r: r["time_us"]["avg"], default=None)


def print_rows(records: list[dict]) -> None:
    """The rows of one size under :data:`COLUMNS`, the fastest marked."""
    best = _fastest(records)
    for r in records:
        t = r["time_us"]
        mark = "*" if r is best else " "
        print(f"{r['nbytes']:>10} {r['count']:>10} {r['dtype']:>8} "
              f"{r['op'] or '-':>5} {r['root'] if r['root'] is not None else '-':>4}"
              f" {_label(r):>32} {t['avg']:>10.2f} {t['min']:>10.2f}"
              f" {t['max']:>10.2f} {r['algbw_gbps']:>7.3f}"
              f" {r['busbw_gbps']:>7.3f} {r['wrong']:>6}{mark}", flush=True)


class SizeSummary(NamedTuple):
    """One size of a collective's closing summary."""
    nbytes: int
    best: str | None  # the fastest right algorithm, auto left out
    best_speedup: float | None  # native time / best time
    auto: str | None  # what auto chose
    auto_speedup: float | None  # native time / auto time


def summary(records: list[dict], collective: str) -> list[SizeSummary]:
    """Per size of ``collective``: the best algorithm and what auto chose,
    each with its speed-up over native (None where not measured)."""
    by_size: dict[int, list[dict]] = {}
    for r in records:
        if r["collective"] == collective:
            by_size.setdefault(r["nbytes"], []).append(r)
    out = []
    for nbytes, rows in by_size.items():
        native = next((r for r in rows if r["algorithm"] == "native"), None)
        auto = next((r for r in rows if r["algorithm"] == "auto"), None)
        best = _fastest(rows)
        out.append(SizeSummary(nbytes, best and best["algorithm"],
                               _speedup(native, best), auto and auto["chosen"],
                               _speedup(native, auto)))
    return out


def _speedup(native: dict | None, record: dict | None) -> float | None:
    """Native's average time over ``record``'s, None if either is missing."""
    if record is None or native is None or record["time_us"]["avg"] <= 0:
        return None
    return native["time_us"]["avg"] / record["time_us"]["avg"]
