"""Which algorithm runs, and why.

In order of precedence:

1. the call's ``algorithm=`` argument, unless ``"auto"``;
2. the environment variable ``MPICOLL_<COLLECTIVE>_ALGORITHM`` (e.g.
   ``MPICOLL_ALLREDUCE_ALGORITHM=ring``), read when the ``Comm`` is made;
3. a rules file named by ``MPICOLL_RULES`` (as written by the benchmark's
   ``--emit-rules``), read when the ``Comm`` is made, used only when its
   ``nranks`` equals the communicator's size; an entry that is unknown or
   whose constraints fail for a call falls back to 4, saying so;
4. the default rules below, by communicator size, message bytes and whether
   the op commutes.

A named algorithm (1 or 2) whose declared constraints rule it out raises
:class:`~mpicoll.errors.ConstraintError`; ``auto`` only ever picks
algorithms whose constraints hold, falling back to ``native``. Every choice
carries a reason, so "which algorithm ran and why" has an answer.

The default rules come from the benchmark at 2 ranks on the development
machines (2 cores; ``docs/performance.md``, ``bash
bench/performance.sh``): below :data:`SMALL` the MPI
library's own call wins or ties, because a hand-built call pays about a
microsecond of Python per call and per round, except one case: allreduce
on 2 ranks at ``MPI_THREAD_MULTIPLE`` (mpi4py's default), where MPICH's
own small allreduce is about twice as slow as at ``MPI_THREAD_SINGLE``
and recursive doubling (one exchange and one add) took 0.8-0.9x its time
through mpicoll from 32 B to 2 KiB (:data:`PAIR_BY_HAND`; at 8 B and
8 KiB, and at single, the library's call was faster); above it, per
collective:

- allreduce: at two ranks recursive doubling up to :data:`MEDIUM` (one
  exchange of the whole vector), then the bandwidth-bound algorithms
  (Rabenseifner, ring), which send each byte about twice instead of
  ``log2 p`` times; 0.5-0.7x the library's time from 16 KiB up;
- reduce: at two ranks the binomial tree (one message; 0.15-0.5x),
  beyond, Rabenseifner;
- reduce_scatter(_block): ring or pairwise (0.4-0.6x from 64 KiB);
- scan and exscan: recursive doubling (0.1-0.4x: MPICH's own is slow here);
- bcast and allgather: the library at two ranks (hand-built ties or loses
  by up to 14%: one message either way), van de Geijn / ring beyond;
- everything else: the library (not faster by hand here, or unmeasured).

Beyond two ranks (more ranks than these machines' cores make timings
meaningless) the cost model orders the candidates of :data:`BEYOND_PAIR`:
:func:`mpicoll.model.formulas.estimate` with the parameters of the
calibration file named by ``MPICOLL_CALIBRATION`` (``python -m
mpicoll.calibrate``), else of
:data:`mpicoll.model.calibration.DEFAULT_CALIBRATION`, the development
machine's.
"""

from __future__ import annotations

import json
import math
import os
from typing import NamedTuple

import numpy as np

from mpicoll.coll.registry import Algorithm, algorithms, lookup
from mpicoll.collectives import COLLECTIVES
from mpicoll.errors import (
    ConstraintError,
    InvalidArgumentError,
    UnknownAlgorithmError,
)

SMALL = 16 * 1024  # bytes: below, the native call
MEDIUM = 1024 * 1024  # bytes: at 2 ranks, recursive doubling below
#: bytes (low, high]: a blocking allreduce on 2 ranks at
#: MPI_THREAD_MULTIPLE by hand (measured faster at 32 B-2 KiB, slower at 8 B
#: and 8 KiB; nonblocking, MPICH's own call with its request was faster,
#: and persistent, MPICH's persistent call)
PAIR_BY_HAND = (8, 4096)
#: bytes (low, high]: an in-place allreduce on 2 ranks takes Rabenseifner
#: (on 2 ranks the same two half-vector exchanges as the ring: half the
#: vector reduced per rank), where recursive doubling was 1.1-1.4x slower
#: in place in three runs of four at 128 and 256 KiB (out of place it was
#: the fastest there)
INPLACE_HALVES = (64 * 1024, 256 * 1024)


#: Hand-built algorithms ``auto`` weighs beyond two ranks, from
#: :data:`SMALL` up: the cost model orders them (:func:`_by_model`). The
#: lists keep what the model cannot see: the bandwidth-bound algorithms
#: only (allgather by recursive doubling or Bruck, and alltoall, would win
#: a contention-free α-β model at every size and lose to the ring on a real
#: network at large ones), and ties go to the first.
BEYOND_PAIR = {
    "allreduce": ("rabenseifner", "ring", "recursive_doubling"),
    "reduce": ("rabenseifner", "binomial"),
    "reduce_scatter": ("ring", "pairwise"),
    "reduce_scatter_block": ("ring", "pairwise"),
    "scan": ("recursive_doubling",),
    "exscan": ("recursive_doubling",),
    "bcast": ("scatter_allgather", "binomial"),
    "allgather": ("ring",),
}


class CostModel:
    """What orders ``auto``'s candidates beyond two ranks: a calibration's
    ``network`` (:class:`mpicoll.model.cost.Network`) and where its costs
    come from (``source``, for explain mode). :meth:`from_file` reads the
    file (and imports the cost model) the first time either is asked
    for."""

    def __init__(self, network, source: str) -> None:
        self._network, self._source = network, source
        self._path: str | None = None

    @classmethod
    def from_file(cls, path: str, where: str) -> CostModel:
        model = cls(None, where)
        model._path = path
        return model

    @property
    def network(self):
        self._load()
        return self._network

    @property
    def source(self) -> str:
        self._load()
        return self._source

    def _load(self) -> None:
        if self._path is not None:
            self._network, self._source = _calibration(self._path,
                                                       self._source)
            self._path = None


def _preferences(collective: str, size: int, nbytes: int,
                 inplace: bool = False,
                 model: CostModel | None = None) -> tuple[str, ...]:
    """Hand-built algorithms to try, best first, for a message of ``nbytes``
    (the send buffer; bcast: the buffer) above :data:`SMALL`, in place or
    not; none: the library's call. Two ranks: the measured rules; more:
    :data:`BEYOND_PAIR` ordered by ``model``'s predicted times."""
    if size > 2:
        names = BEYOND_PAIR.get(collective, ())
        return names if model is None else \
            tuple(name for name, _ in _by_model(collective, names, size,
                                                nbytes, model.network))
    if collective == "allreduce":
        if inplace and INPLACE_HALVES[0] < nbytes <= INPLACE_HALVES[1]:
            return ("rabenseifner", "recursive_doubling")
        if nbytes < MEDIUM:
            return ("recursive_doubling",)
        return ("rabenseifner", "ring", "recursive_doubling")
    if collective == "reduce":
        return ("binomial",)
    if collective in ("reduce_scatter", "reduce_scatter_block"):
        return ("ring", "pairwise")
    if collective in ("scan", "exscan"):
        return ("recursive_doubling",)
    return ()


def _by_model(collective: str, names, size: int, nbytes: int,
              network) -> list[tuple[str, float]]:
    """``names`` with their predicted seconds on ``network``, fastest
    first (a stable sort: ties keep the listed order): the closed forms
    of :data:`mpicoll.model.formulas.PUBLISHED` through
    :func:`mpicoll.model.formulas.estimate`, O(1), so a first call at 65,536 ranks
    chooses at once (``tests/serial/test_model.py`` checks the forms against
    the schedules' own critical paths); a name without one goes last."""
    from mpicoll.model.formulas import estimate

    times = [(name, estimate(collective, name, size, nbytes, network))
             for name in names]
    return sorted(((n, math.inf if t is None else t) for n, t in times),
                  key=lambda item: item[1])


class Choice(NamedTuple):
    algorithm: Algorithm
    reason: str


def env_var(collective: str) -> str:
    return f"MPICOLL_{collective.upper()}_ALGORITHM"


def environment_overrides() -> dict[str, str]:
    """The ``MPICOLL_<COLLECTIVE>_ALGORITHM`` settings now in force."""
    found = {}
    for collective in COLLECTIVES:
        value = os.environ.get(env_var(collective), "").strip()
        if value and value != "auto":
            found[collective] = value
    return found


RULES_VAR = "MPICOLL_RULES"
EXPLAIN_VAR = "MPICOLL_EXPLAIN"
CALIBRATION_VAR = "MPICOLL_CALIBRATION"


class Rules(NamedTuple):
    """A rules file: per collective, ``(max_bytes, algorithm)`` ranges in
    increasing order; ``max_bytes`` None = no upper bound; ``source``: where
    the rules came from (e.g. a simulation), None when the file says not."""
    path: str
    nranks: int
    ranges: dict[str, list[tuple[int | None, str]]]
    source: str | None = None


def load_rules(path: str) -> Rules:
    """Read and validate a rules file; InvalidArgumentError naming it."""
    def bad(what):
        return InvalidArgumentError(f"rules file {path} ({RULES_VAR}): {what}")

    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as exc:
        raise bad(f"cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise bad(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or set(data) - {"nranks", "rules", "source"} \
            or "nranks" not in data or "rules" not in data:
        raise bad('expected {"nranks": P, "rules": {...}} (and "source")')
    source = data.get("source")
    if source is not None and not isinstance(source, str):
        raise bad(f"source must be a string, got {source!r}")
    nranks = data["nranks"]
    if type(nranks) is not int or nranks < 1:
        raise bad(f"nranks must be a positive integer, got {nranks!r}")
    if not isinstance(data["rules"], dict):
        raise bad("rules must be an object of collective -> ranges")
    ranges = {}
    for collective, entries in data["rules"].items():
        if collective not in COLLECTIVES:
            raise bad(f"unknown collective {collective!r}")
        if not isinstance(entries, list) or not entries:
            raise bad(f"{collective}: expected a non-empty list of ranges")
        out, last = [], -1
        for i, e in enumerate(entries):
            if not isinstance(e, dict) or set(e) != {"max_bytes",
                                                     "algorithm"}:
                raise bad(f"{collective} range {i}: expected "
                          '{"max_bytes": N or null, "algorithm": NAME}')
            hi, name = e["max_bytes"], e["algorithm"]
            if not isinstance(name, str) or not name:
                raise bad(f"{collective} range {i}: algorithm must be a "
                          "name")
            if last is None:
                raise bad(f"{collective} range {i}: follows an unbounded "
                          "range")
            if hi is not None and (type(hi) is not int or hi <= last):
                raise bad(f"{collective} range {i}: max_bytes must be an "
                          f"integer above {last} or null, got {hi!r}")
            out.append((hi, name))
            last = hi
        ranges[collective] = out
    return Rules(path, nranks, ranges, source)


def environment_rules() -> Rules | None:
    """The rules file named by ``MPICOLL_RULES``, loaded, or None."""
    path = os.environ.get(RULES_VAR, "").strip()
    return load_rules(path) if path else None


def environment_cost_model() -> CostModel:
    """The cost model of the calibration file named by
    ``MPICOLL_CALIBRATION`` (as ``python -m mpicoll.calibrate`` writes
    it), read now (InvalidArgumentError naming a file that cannot be
    used); else of mpicoll's default
    (:data:`mpicoll.model.calibration.DEFAULT_CALIBRATION`), read when
    first needed."""
    path = os.environ.get(CALIBRATION_VAR, "").strip()
    if not path:
        from mpicoll.model.calibration import DEFAULT_CALIBRATION

        return CostModel.from_file(DEFAULT_CALIBRATION, "mpicoll's default")
    return CostModel(*_calibration(path, f"{CALIBRATION_VAR}={path}"))


def _calibration(path: str, where: str) -> tuple:
    """``(network, source)`` of the calibration file at ``path``."""
    from mpicoll.model.calibration import CalibrationError, load_calibration

    try:
        calibration = load_calibration(path)
    except CalibrationError as exc:
        raise InvalidArgumentError(f"{CALIBRATION_VAR}: {exc}") from None
    except OSError as exc:
        raise InvalidArgumentError(f"{CALIBRATION_VAR}: cannot read "
                                   f"{path}: {exc.strerror or exc}") from None
    return calibration.network(), f"{where}, {calibration.description}"


def environment_explain() -> bool:
    """Whether ``MPICOLL_EXPLAIN`` asks for explain mode."""
    return os.environ.get(EXPLAIN_VAR, "").strip().lower() not in (
        "", "0", "false", "no", "off")


def rule_for(rules: Rules, collective: str,
             nbytes: int) -> tuple[int, int | None, str] | None:
    """``(low, max_bytes, algorithm)`` of the range holding ``nbytes``
    (inclusive bounds), or None when no range does."""
    low = 0
    for hi, name in rules.ranges.get(collective, ()):
        if hi is None or nbytes <= hi:
            return low, hi, name
        low = hi + 1
    return None


def rules_from_records(records: list[dict], nranks: int) -> dict:
    """A rules file's contents from benchmark records: per collective and
    size, the fastest right (``wrong == 0``) algorithm other than auto,
    adjacent sizes with the same winner merged. Sizes are the bytes the
    selector sees (the row's ``selection_elements`` of the record's
    ``count``, times the item size), not the size the benchmark reports
    (its ``nbytes``, all ``nranks`` blocks where the row's
    ``report_blocks``). A range ends at the largest size measured in it
    (sizes between two measurements go to the upper range); the last range
    has no upper bound."""
    best: dict[str, dict[int, dict]] = {}
    for r in records:
        if r["algorithm"] == "auto" or r["wrong"] or r["nranks"] != nranks:
            continue
        itemsize = np.dtype(r["dtype"]).itemsize
        row = COLLECTIVES[r["collective"]]
        nbytes = row.selection_elements(r["count"], nranks) * itemsize
        sizes = best.setdefault(r["collective"], {})
        old = sizes.get(nbytes)
        if old is None or r["time_us"]["avg"] < old["time_us"]["avg"]:
            sizes[nbytes] = r
    rules = {}
    for collective, sizes in best.items():
        ranges: list[dict] = []
        for nbytes in sorted(sizes):
            name = sizes[nbytes]["algorithm"]
            if ranges and ranges[-1]["algorithm"] == name:
                ranges[-1]["max_bytes"] = nbytes
            else:
                ranges.append({"max_bytes": nbytes, "algorithm": name})
        ranges[-1]["max_bytes"] = None
        rules[collective] = ranges
    return {"nranks": nranks, "rules": rules}


def choose(collective: str, requested: str, *, size: int, nbytes: int,
           commutative: bool, overrides: dict[str, str],
           where: dict, rules: Rules | None = None,
           thread_multiple: bool = True, form: str = "blocking",
           inplace: bool = False, model: CostModel | None = None) -> Choice:
    """Pick the algorithm for one call; ``where`` names rank and call for
    errors; ``thread_multiple``: MPI runs at ``MPI_THREAD_MULTIPLE``;
    ``form``: ``"blocking"``, ``"nonblocking"`` or ``"persistent"``;
    ``inplace``: the output overwrites the input (the default rules
    differ by all three); ``model`` orders the hand-built candidates
    beyond two ranks (None: listed order)."""
    if requested != "auto":
        return Choice(_named(collective, requested, commutative, where,
                             "algorithm= argument"), "requested by the call")
    if collective in overrides:
        source = env_var(collective)
        name = overrides[collective]
        return Choice(_named(collective, name, commutative, where, source),
                      f"{source}={name}")
    fallback = ""
    found = None
    if rules is not None and rules.nranks == size:
        found = rule_for(rules, collective, nbytes)
    if found is not None:
        low, hi, name = found
        span = f"{low}..{'inf' if hi is None else hi} B"
        origin = f" ({rules.source})" if rules.source else ""
        source = f"rules file {rules.path}{origin}: {collective} {span}"
        alg = lookup(collective, name)
        if alg is None:
            fallback = f"{source}: unknown algorithm {name!r}; "
        elif (why := alg.unmet(commutative=commutative)) is not None:
            fallback = f"{source}: {name} cannot run (it {why}); "
        else:
            return Choice(alg, f"{source} -> {name}")
    default = _default(collective, size=size, nbytes=nbytes,
                       commutative=commutative,
                       thread_multiple=thread_multiple, form=form,
                       inplace=inplace, model=model)
    return default._replace(reason=fallback + default.reason) \
        if fallback else default


def _default(collective: str, *, size: int, nbytes: int,
             commutative: bool, thread_multiple: bool = True,
             form: str = "blocking", inplace: bool = False,
             model: CostModel | None = None) -> Choice:
    native = lookup(collective, "native")
    if size == 1:
        return Choice(native, "default rule: one rank, nothing to move")
    if PAIR_BY_HAND[0] < nbytes <= PAIR_BY_HAND[1] and size == 2 and \
            collective == "allreduce" and thread_multiple and \
            form == "blocking":
        return Choice(lookup(collective, "recursive_doubling"),
                      f"default rule: {nbytes} B on 2 ranks at "
                      "MPI_THREAD_MULTIPLE, where one exchange by hand beats "
                      "the library's blocking call")
    if nbytes < SMALL:
        return Choice(native, f"default rule: {nbytes} B < {SMALL} B, "
                              "where the library's own call is fastest")
    names = _preferences(collective, size, nbytes, inplace, model)
    for name in names:
        alg = lookup(collective, name)
        if alg.unmet(commutative=commutative) is None:
            if size > 2 and model is not None and len(names) > 1:
                return Choice(alg, _model_reason(collective, names, size,
                                                 nbytes, model))
            return Choice(alg, f"default rule: {nbytes} B on {size} ranks"
                          f"{', in place' if inplace else ''}")
    return Choice(native, "default rule: no hand-built algorithm fits")


def _model_reason(collective, names, size, nbytes, model) -> str:
    """Explain mode's words for a choice by the cost model."""
    times = ", ".join(f"{name} {t * 1e6:.4g} us" for name, t in _by_model(
        collective, names, size, nbytes, model.network))
    return (f"cost model ({model.source}): {nbytes} B on {size} ranks "
            f"predicted {times}")


def hand_built(collective: str, *, size: int, nbytes: int,
               commutative: bool, why: str) -> Choice | None:
    """The hand-built algorithm a call that should not run natively takes
    (``why`` says why): the default rule's preference for its size, else
    the first registered one that fits; None if none does."""
    names = [*_preferences(collective, size, max(nbytes, SMALL)),
             *algorithms(collective)]
    for name in names:
        alg = lookup(collective, name)
        if alg is not None and not alg.native and \
                alg.unmet(commutative=commutative) is None:
            return Choice(alg, f"{why}; {name} instead")
    return None


def _named(collective, name, commutative, where, source) -> Algorithm:
    alg = lookup(collective, name)
    where = {**where, "algorithm": name}
    if alg is None:
        raise UnknownAlgorithmError(
            f"unknown algorithm (from {source}); available: "
            + ", ".join(algorithms(collective)), **where)
    why = alg.unmet(commutative=commutative)
    if why is not None:
        raise ConstraintError(f"cannot run: it {why} (from {source})",
                              **where)
    return alg
