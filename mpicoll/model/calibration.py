"""The calibration file: measured α, β, γ and copy costs, fitted and loaded.

``python -m mpicoll.calibrate`` (:mod:`mpicoll.bench.calibrate`, under MPI)
measures raw points on a machine; this module, which needs no MPI, fits
them and reads and writes the file, so that the model
(:func:`mpicoll.model.cost.predict`), ``python -m mpicoll.simulate
--calibration FILE`` and selection can use it:

    >>> cal = load_calibration("calibration.json")    # doctest: +SKIP
    >>> net = cal.network("sum", "float32")           # a model.Network
    >>> cal.description                               # for explain mode
    'calibrated on HOST (AMD EPYC, 2 cores), 2026-11-25, 2 ranks, MPICH 5.0.2'

The file (JSON, format ``mpicoll-calibration``, version 1; seconds and
seconds per byte):

``ranges``
    Message-size ranges in increasing order, each ``{"upto": bytes,
    "alpha", "beta", "copy"}``; the last has ``"upto": null`` (no limit).
    A message of ``n`` bytes costs its range's ``alpha + beta·n``; a
    round's ``n`` bytes copied cost ``copy·n``.
``one_way`` (optional)
    ``[{"alpha", "beta"} per range]``: a message that goes one way in its
    round (a broadcast's, a gather's), where ``alpha``/``beta`` above are
    a direction of an exchange; absent, one way costs as much.
``call`` (optional)
    Seconds per collective call apart from its rounds (mpicoll's Python:
    the arguments, the replayed plan, the tag), added once to every
    prediction; absent, 0.
``gamma``
    ``{op: {dtype: [per range]}}``: seconds per byte of reduction output
    (``"sum"``, ``"prod"``, ``"max"``, ``"min"`` by NumPy dtype name), for
    a reduction in place (``b = a op b``).
``gamma_out_of_place`` (optional)
    The same for a reduction into a third buffer (``dst = a op b``, as
    most schedules' first reduction of a vector is: ``recv = incoming op
    send``); absent, such a reduction costs ``gamma``.
``machine``, ``mpi``, ``date``, ``command``
    Where and how it was measured: hostname, CPU model and cores; MPI
    library, mpi4py version, ranks, thread level.
``points``
    The raw measurements the fit used: ``exchange``, ``one_way``,
    ``copy``, ``call`` and ``call_plan`` (``[bytes, seconds]`` pairs),
    ``reduce`` and ``reduce_out_of_place`` (``{op: {dtype: pairs}}``).

Fitting: per range, α and β are the least-squares ``alpha + beta·n`` line
through the exchange points (the one-way ones through the one-way
points, on the exchange's ranges), both γ and copy the slope through the
origin (``per_byte·n``) of the reduce and copy points, all by relative
error (so a range's per-byte cost absorbs the fixed Python cost of the
call at its smallest sizes; a point timed at 0 is left out). ``call`` is
the ``call`` point less the ``call_plan`` one (the same message through
mpicoll's call and through the executor alone), at least 0. The ranges'
bounds are the split of the sizes into at most ``k`` ranges of at least
:data:`MIN_POINTS` points that minimizes those fits' squared relative
error (:func:`split`).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field

import numpy as np

from mpicoll.model.cost import Network, SizeRange

FORMAT, VERSION = "mpicoll-calibration", 1
RANGES = 5  # fitted ranges, at most, of the messages and of the local steps
MIN_POINTS = 2  # points per fitted range, at least (two: the line through both)
RANGE_FIELDS = ("upto", "alpha", "beta", "copy")  # a range, in the file
ONE_WAY_FIELDS = ("alpha", "beta")  # a range's one-way costs, in the file
INFO = (("machine", dict), ("mpi", dict), ("date", str), ("command", str),
        ("points", dict))  # where it was measured, and the raw points
#: The calibration shipped with mpicoll, the cost model's parameters unless
#: ``MPICOLL_CALIBRATION`` names a file measured where the code runs.
DEFAULT_CALIBRATION = os.path.join(os.path.dirname(__file__),
                                   "calibration-default.json")


class CalibrationError(ValueError):
    """A calibration file that cannot be used, and why."""


@dataclass(frozen=True)
class Calibration:
    """A fitted calibration: ``ranges`` of ``(upto, alpha, beta, copy)``
    (the last ``upto`` None), ``gamma`` per ``(op, dtype)`` with one value
    per range (reductions in place), the same for reductions out of place
    (``gamma_out_of_place``; empty where they were not measured), the
    ``(alpha, beta)`` of a message one way per range (``one_way``; empty
    where not measured), the seconds a call costs apart from its rounds
    (``call``; 0 where not measured), and where it was measured."""

    ranges: tuple[tuple[int | None, float, float, float], ...]
    gamma: dict[tuple[str, str], tuple[float, ...]]
    gamma_out_of_place: dict[tuple[str, str], tuple[float, ...]] = field(
        default_factory=dict)
    one_way: tuple[tuple[float, float], ...] = ()
    call: float = 0.0
    machine: dict = field(default_factory=dict)
    mpi: dict = field(default_factory=dict)
    date: str = ""
    command: str = ""
    points: dict = field(default_factory=dict, compare=False)

    @property
    def description(self) -> str:
        """One line: where and when, for explain mode and table titles."""
        m, mpi = self.machine, self.mpi
        cpu = ", ".join(str(x) for x in (
            m.get("cpu"), m.get("cores") and f"{m['cores']} cores") if x)
        library = " ".join(str(mpi.get("library", "")).split()[:3])
        parts = [f"calibrated on {m.get('hostname', '?')}"
                 + (f" ({cpu})" if cpu else ""), self.date[:10],
                 mpi.get("ranks") and f"{mpi['ranks']} ranks", library]
        return ", ".join(str(p) for p in parts if p)

    def gamma_for(self, op: str, dtype: str, out_of_place: bool = False
                  ) -> tuple[float | None, ...]:
        """γ per range for ``op`` on ``dtype``, in place or out of place;
        for a pair not measured, the largest measured γ of each range (a
        cautious stand-in); None per range for out of place where the file
        has none (the model then takes γ in place)."""
        table = self.gamma_out_of_place if out_of_place else self.gamma
        if not table:
            return (None,) * len(self.ranges)
        if (op, dtype) in table:
            return table[(op, dtype)]
        return tuple(map(max, zip(*table.values())))

    @property
    def ranks_per_node(self) -> int | None:
        """How many of the calibration's ranks shared a node (None: not
        recorded): 1 measured a link between nodes, more one inside."""
        value = self.mpi.get("ranks_per_node")
        return value if isinstance(value, int) else None

    def network(self, op: str = "sum", dtype: str = "float32",
                intra: Calibration | None = None) -> Network:
        """The model's :class:`~mpicoll.model.cost.Network` for reductions of
        ``op`` on ``dtype``: the last range as its base costs, the others
        as its ``ranges``. Alone, one link, used within and between nodes;
        with ``intra`` (a calibration of two ranks on one node, this one
        of ranks on two nodes), messages inside a node take ``intra``'s
        α and β by size range (``alpha_intra``, ``beta_intra``,
        ``ranges_intra``; one way ``alpha_one_way_intra``,
        ``beta_one_way_intra``) and the rest this one's; γ, copy and the
        per-call cost stay this calibration's."""
        gamma = self.gamma_for(op, dtype)
        apart = self.gamma_for(op, dtype, out_of_place=True)
        pieces = [SizeRange(upto, a, b, g, c, o, *w)
                  for (upto, a, b, c), g, o, w
                  in zip(self.ranges, gamma, apart, self._one_way())]
        last = pieces.pop()
        inside: dict = {}
        if intra is not None:
            links = [SizeRange(upto, a, b, 0.0, 0.0, None, *w)
                     for (upto, a, b, _), w
                     in zip(intra.ranges, intra._one_way())]
            top = links.pop()
            inside = {"alpha_intra": top.alpha, "beta_intra": top.beta,
                      "alpha_one_way_intra": top.alpha_one_way,
                      "beta_one_way_intra": top.beta_one_way,
                      "ranges_intra": tuple(links)}
        return Network(last.alpha, last.beta, last.gamma, last.copy,
                       ranges=tuple(pieces),
                       gamma_out_of_place=last.gamma_out_of_place,
                       alpha_one_way=last.alpha_one_way,
                       beta_one_way=last.beta_one_way, call=self.call,
                       **inside)

    def _one_way(self) -> tuple:
        """``(alpha, beta)`` one way per range; ``(None, None)`` each where
        not measured."""
        return self.one_way or ((None, None),) * len(self.ranges)

    def to_json(self) -> dict:
        """The file's contents (module docstring)."""
        def nested(table: dict) -> dict:
            out: dict = {}
            for (op, dtype), values in table.items():
                out.setdefault(op, {})[dtype] = list(values)
            return out

        data = {"format": FORMAT, "version": VERSION,
                "machine": self.machine, "mpi": self.mpi, "date": self.date,
                "command": self.command,
                "ranges": [dict(zip(RANGE_FIELDS, r)) for r in self.ranges],
                "gamma": nested(self.gamma)}
        if self.gamma_out_of_place:
            data["gamma_out_of_place"] = nested(self.gamma_out_of_place)
        if self.one_way:
            data["one_way"] = [dict(zip(ONE_WAY_FIELDS, w))
                               for w in self.one_way]
        if self.call:
            data["call"] = self.call
        return {**data, "points": self.points}

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.to_json(), f, indent=1)
            f.write("\n")

    @classmethod
    def from_json(cls, data, source: str = "calibration") -> Calibration:
        """A calibration from the file's contents; CalibrationError (naming
        ``source``) if anything is missing or out of range."""
        def bad(what: str) -> CalibrationError:
            return CalibrationError(f"{source}: {what}")

        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise bad(f"not an {FORMAT} file (no \"format\": \"{FORMAT}\")")
        if data.get("version") != VERSION:
            raise bad(f"version {data.get('version')!r}, this mpicoll reads "
                      f"version {VERSION}")
        ranges = data.get("ranges")
        if not isinstance(ranges, list) or not ranges:
            raise bad("\"ranges\" must be a non-empty list")
        rows = []
        for i, r in enumerate(ranges):
            if not isinstance(r, dict) or set(r) != set(RANGE_FIELDS):
                raise bad(f"ranges[{i}] must have exactly the keys "
                          f"{', '.join(RANGE_FIELDS)}")
            last = i == len(ranges) - 1
            upto = r["upto"]
            if last != (upto is None) or not (
                    last or (isinstance(upto, int) and upto > 0)):
                raise bad(f"ranges[{i}].upto must be "
                          + ("null (the last range)" if last
                             else "a positive integer"))
            rows.append((upto, *(_cost(r[k], f"ranges[{i}].{k}", bad)
                                 for k in RANGE_FIELDS[1:])))
        bounds = [r[0] for r in rows[:-1]]
        if bounds != sorted(set(bounds)):
            raise bad("ranges' upto must increase")
        gamma = _gamma_table(data.get("gamma"), "gamma", len(rows), bad)
        apart = data.get("gamma_out_of_place")
        apart = {} if apart is None else _gamma_table(
            apart, "gamma_out_of_place", len(rows), bad)
        one_way = data.get("one_way", [])
        if not isinstance(one_way, list) or len(one_way) not in (
                0, len(rows)) or any(not isinstance(w, dict) or set(w) != set(
                    ONE_WAY_FIELDS) for w in one_way):
            raise bad(f"\"one_way\" must be a list of {len(rows)} objects "
                      f"(one per range) with the keys "
                      f"{', '.join(ONE_WAY_FIELDS)}")
        one_way = tuple(tuple(_cost(w[k], f"one_way[{i}].{k}", bad)
                              for k in ONE_WAY_FIELDS)
                        for i, w in enumerate(one_way))
        call = _cost(data.get("call", 0.0), "\"call\"", bad)
        info = {k: data.get(k, kind()) for k, kind in INFO}
        for k, kind in INFO:
            if not isinstance(info[k], kind):
                raise bad(f"\"{k}\" must be a JSON {kind.__name__}")
        return cls(tuple(rows), gamma, apart, one_way, call, **info)


def _gamma_table(table, name: str, ranges: int, bad) -> dict:
    """``{(op, dtype): per range}`` from the file's ``{op: {dtype: [per
    range]}}`` under ``name``; ``bad(what)`` the error for what is wrong."""
    if not isinstance(table, dict) or not table:
        raise bad(f"\"{name}\" must map op to dtype to a list per range")
    out = {}
    for op, by_dtype in table.items():
        if not isinstance(by_dtype, dict) or not by_dtype:
            raise bad(f"{name}[{op!r}] must map dtype to a list per range")
        for dtype, values in by_dtype.items():
            where = f"{name}[{op!r}][{dtype!r}]"
            if not isinstance(values, list) or len(values) != ranges:
                raise bad(f"{where} must be a list of {ranges} values"
                          " (one per range)")
            out[(op, dtype)] = tuple(_cost(v, where, bad) for v in values)
    return out


def _cost(value, where: str, bad) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise bad(f"{where} must be a finite number >= 0, not {value!r}")
    return float(value)


def describe(cal: Calibration) -> str:
    """The fitted costs as a table (µs, GB/s)."""
    def gbps(per_byte: float) -> str:
        return f"{1e-9 / per_byte:8.2f}" if per_byte > 0 else f"{'inf':>8}"

    lines = [f"# {cal.description}",
             f"# {'range (bytes)':>22} {'alpha(us)':>9} {'1/beta':>8}"
             f" {'1/copy':>8}" + (f" {'one way: alpha(us)':>18}"
                                   f" {'1/beta':>8}" if cal.one_way else "")
             + "  (GB/s)"]
    lo = 0
    for i, (upto, alpha, beta, copy) in enumerate(cal.ranges):
        span = f"{lo + 1}..{upto if upto is not None else 'inf'}"
        one_way = (f" {cal.one_way[i][0] * 1e6:18.2f}"
                   f" {gbps(cal.one_way[i][1])}" if cal.one_way else "")
        lines.append(f"  {span:>22} {alpha * 1e6:9.2f} {gbps(beta)}"
                     f" {gbps(copy)}{one_way}")
        lo = upto
    lines.append(f"# per call, apart from its rounds: {cal.call * 1e6:.2f} us")
    for title, table in (("in place", cal.gamma),
                         ("out of place", cal.gamma_out_of_place)):
        if table:
            lines.append(f"# 1/gamma (GB/s) per range, {title}:"
                         f" {'op':>4} {'dtype':>8}")
        for (op, dtype), values in table.items():
            lines.append(f"  {op:>37} {dtype:>8} "
                         + " ".join(gbps(g) for g in values))
    return "\n".join(lines)


def load_calibration(path: str) -> Calibration:
    """The calibration in the file at ``path`` (CalibrationError if it is
    not one; OSError if it cannot be read)."""
    with open(path) as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as e:
            raise CalibrationError(f"{path}: not JSON ({e})") from None
    return Calibration.from_json(data, source=path)


# --- fitting -------------------------------------------------------------


def _above_zero(points) -> tuple[np.ndarray, np.ndarray]:
    """``(n, t)`` of the pairs whose time is above 0: a point less its
    copy can come out at 0 (under the noise), which has no relative
    error to weigh."""
    pts = np.asarray(points, dtype=float).reshape(-1, 2)
    return pts[pts[:, 1] > 0].T


def fit_line(points) -> tuple[float, float]:
    """``(alpha, beta)`` >= 0 of ``t = alpha + beta·n`` through ``(n, t)``
    pairs, least squares on the relative error (pairs timed at 0 left
    out; ``(0, 0)`` if all are)."""
    n, t = _above_zero(points)
    if not t.size:
        return 0.0, 0.0
    w = 1 / t
    design = np.stack([w, n * w], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if alpha < 0:
        return 0.0, fit_slope(points)
    if beta < 0:
        return float(w.sum() / (w @ w)), 0.0
    return float(alpha), float(beta)


def fit_slope(points) -> float:
    """``per_byte`` >= 0 of ``t = per_byte·n`` through ``(n, t)`` pairs
    (``n > 0``), least squares on the relative error (pairs timed at 0
    left out; 0 if all are)."""
    n, t = _above_zero(points)
    x = n / t
    return float(max(0.0, x.sum() / (x @ x))) if t.size else 0.0


def _relative_error(points, fitted) -> float:
    n, t = _above_zero(points)
    error = fitted(n) / t - 1
    return float(error @ error)


def _line_error(points) -> float:
    alpha, beta = fit_line(points)
    return _relative_error(points, lambda n: alpha + beta * n)


def split(series, k: int, min_points: int = MIN_POINTS) -> list[int]:
    """Where the cost changes shape: the upper sizes of all but the last
    range of the split of the sizes of ``series`` (lists of ``(bytes,
    seconds)`` points on one grid of sizes) into at most ``k`` ranges of
    at least ``min_points`` sizes that minimizes the mean over the series
    of the squared relative error of a line per range (dynamic
    programming over split points)."""
    sizes = sorted({n for points in series for n, _ in points if n > 0})
    n = len(sizes)
    k = max(1, min(k, n // min_points))

    def error(i: int, j: int) -> float:
        lo, hi = sizes[i - 1] if i else 0, sizes[j - 1]
        mine = [m for m in (_in_range(points, lo, hi) for points in series)
                if len(m) >= 2]
        return sum(map(_line_error, mine)) / max(1, len(mine))

    cost = {(i, j): error(i, j) for i in range(n)
            for j in range(i + min_points, n + 1)}
    # best[m][j]: the least error of the first j sizes in m ranges, and
    # where the last of those ranges starts
    best = [{0: (0.0, 0)}]
    for m in range(1, k + 1):
        best.append({j: min((best[m - 1][i][0] + cost[(i, j)], i)
                            for i in best[m - 1] if (i, j) in cost)
                     for j in range(m * min_points, n + 1)})
    cuts, j = [], n
    for m in range(k, 1, -1):
        j = best[m][j][1]
        cuts.append(sizes[j - 1])
    return sorted(cuts)


def _in_range(points, lo: float, hi: float | None) -> list:
    return [(n, t) for n, t in points if n > lo and (hi is None or n <= hi)
            and n > 0]


def fit(exchange, copy, reduce: dict, ranges: int = RANGES, extra=None,
        reduce_out_of_place: dict | None = None,
        min_points: int = MIN_POINTS, one_way=None, call=None,
        **info) -> Calibration:
    """A :class:`Calibration` from raw points: ``exchange``, ``copy`` and
    (if measured) ``one_way`` ``(bytes, seconds)`` pairs, ``reduce`` (in
    place) and ``reduce_out_of_place`` ``{(op, dtype): pairs}``, all on
    one grid of sizes; ``call``: if measured, ``(through_mpicoll,
    by_executor)``, the pairs of one message made by a collective call
    and by the executor alone (the per-call cost is their difference at
    the first size, at least 0); ``extra``: more series kept with the
    points, not fitted (by name); ``info``: machine, mpi, date, command.
    Messages and local steps change shape at different sizes (protocol
    switches, cache sizes), so each gets its own split into at most
    ``ranges`` ranges of at least ``min_points`` sizes (:func:`split`),
    and the file's ranges are the union of the two: each range holds its
    message range's ``(alpha, beta)`` (and one way's, fitted on the same
    message ranges) and its local range's per-byte copy and γ slopes."""
    tables = {"reduce": reduce, "reduce_out_of_place": reduce_out_of_place
              or {}}
    messages = [*split([exchange], ranges, min_points), None]
    local = [*split([copy, *(pts for table in tables.values()
                             for pts in table.values())], ranges,
                    min_points), None]
    rows, one_way_rows = [], []
    gamma = {name: {key: [] for key in table}
             for name, table in tables.items()}
    for hi in [*sorted({*messages, *local} - {None}), None]:
        alpha, beta = fit_line(_around(exchange, messages, hi))
        rows.append((hi, alpha, beta, fit_slope(_around(copy, local, hi))))
        if one_way:
            one_way_rows.append(fit_line(_around(one_way, messages, hi)))
        for name, table in tables.items():
            for key, pts in table.items():
                gamma[name][key].append(fit_slope(_around(pts, local, hi)))
    calls = dict(zip(("call", "call_plan"), call or ()))
    per_call = max(calls["call"][0][1] - calls["call_plan"][0][1], 0.0) \
        if calls else 0.0
    raw = {name: [list(p) for p in pts] for name, pts in
           {"exchange": exchange, **({"one_way": one_way} if one_way else {}),
            "copy": copy, **calls, **(extra or {})}.items()}
    for name, table in tables.items():
        if table:
            raw[name] = {}
        for (op, dtype), pts in table.items():
            raw[name].setdefault(op, {})[dtype] = [list(p) for p in pts]
    in_place, apart = ({k: tuple(v) for k, v in gamma[name].items()}
                       for name in tables)
    return Calibration(tuple(rows), in_place, apart, tuple(one_way_rows),
                       per_call, points=raw, **info)


def refit(cal: Calibration, ranges: int = RANGES,
          min_points: int = MIN_POINTS) -> Calibration:
    """``cal`` fitted again from its own raw points (:attr:`Calibration.points`)
    by :func:`fit` (``ranges`` at most, ``python -m mpicoll.calibrate``'s
    default :data:`RANGES`, as the file does not record the run's; of
    ``min_points`` sizes at least): what this version's fitting makes of
    a recorded run."""
    pts = cal.points

    def pairs(series) -> list:
        return [tuple(p) for p in series]

    def table(name: str) -> dict:
        return {(op, dtype): pairs(series)
                for op, by_dtype in pts.get(name, {}).items()
                for dtype, series in by_dtype.items()}

    if "exchange" not in pts or "copy" not in pts or not table("reduce"):
        raise CalibrationError("the calibration has no raw points to refit "
                               "(\"exchange\", \"copy\", \"reduce\")")
    fitted = {"exchange", "one_way", "copy", "reduce", "reduce_out_of_place",
              "call", "call_plan"}
    call = (pairs(pts["call"]), pairs(pts["call_plan"])) \
        if pts.get("call") and pts.get("call_plan") else None
    return fit(pairs(pts["exchange"]), pairs(pts["copy"]), table("reduce"),
               ranges, {k: v for k, v in pts.items() if k not in fitted},
               table("reduce_out_of_place"), min_points,
               pairs(pts.get("one_way", [])), call, machine=cal.machine,
               mpi=cal.mpi, date=cal.date, command=cal.command)


def _around(points, bounds: list, hi: int | None) -> list:
    """The points of the range of ``bounds`` (upper sizes, the last None)
    that holds the size ``hi`` (None: the last range)."""
    i = len(bounds) - 1 if hi is None else \
        next(i for i, b in enumerate(bounds) if b is None or hi <= b)
    return _in_range(points, bounds[i - 1] if i else 0, bounds[i])
