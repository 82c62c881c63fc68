"""Which algorithm runs, and why.

In order of precedence:

1. the call's ``algorithm=`` argument, unless ``"auto"``;
2. the environment variable ``MPICOLL_<COLLECTIVE>_ALGORITHM`` (e.g.
   ``MPICOLL_ALLREDUCE_ALGORITHM=ring``), read when the ``Comm`` is made;
3. the default rules below, by communicator size, message bytes and whether
   the op commutes.

A named algorithm (1 or 2) whose declared constraints rule it out raises
:class:`~mpicoll.errors.ConstraintError`; ``auto`` only ever picks
algorithms whose constraints hold, falling back to ``native``. Every choice
carries a reason, so "which algorithm ran and why" has an answer.

The default rules come from ``bench/allreduce_speed.py`` at 2 ranks on the
development machines (2 cores; the README's speed table): below
:data:`SMALL` the MPI library's own call wins, because a hand-built call
pays about a microsecond of Python per round and per call; from there to
:data:`MEDIUM` at two ranks recursive doubling wins (one exchange of the
whole vector); above, the bandwidth-bound algorithms (Rabenseifner, ring,
scatter-allgather), which send each byte about twice instead of ``log2 p``
times. Rules for more than two ranks follow MPICH's choices and were not
measured here (more ranks than cores make timings meaningless).
"""

from __future__ import annotations

import os
from typing import NamedTuple

from mpicoll.coll.registry import Algorithm, algorithms, lookup
from mpicoll.errors import ConstraintError, UnknownAlgorithmError
from mpicoll.schedule.layout import COLLECTIVES

SMALL = 16 * 1024  # bytes: below, the native call
MEDIUM = 1024 * 1024  # bytes: at 2 ranks, recursive doubling below


def _preferences(collective: str, size: int, nbytes: int) -> tuple[str, ...]:
    """Hand-built algorithms to try, best first, for a message of ``nbytes``
    (the send buffer; bcast: the buffer) above :data:`SMALL`."""
    if collective == "allreduce":
        if size == 2 and nbytes < MEDIUM:
            return ("recursive_doubling",)
        return ("rabenseifner", "ring", "recursive_doubling")
    if collective == "reduce":
        return ("rabenseifner", "binomial")
    if collective == "bcast":
        return ("binomial",) if size <= 2 else ("scatter_allgather",
                                                "binomial")
    if collective == "allgather":
        return ("ring",)
    if collective in ("reduce_scatter", "reduce_scatter_block"):
        return ("ring", "pairwise")
    return ()  # barrier, and collectives not yet measured: the library


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


def choose(collective: str, requested: str, *, size: int, nbytes: int,
           commutative: bool, overrides: dict[str, str],
           where: dict) -> Choice:
    """Pick the algorithm for one call; ``where`` names rank and call for
    errors."""
    if requested != "auto":
        return Choice(_named(collective, requested, commutative, where,
                             "algorithm= argument"), "requested by the call")
    if collective in overrides:
        source = env_var(collective)
        name = overrides[collective]
        return Choice(_named(collective, name, commutative, where, source),
                      f"{source}={name}")
    native = lookup(collective, "native")
    if size == 1:
        return Choice(native, "default rule: one rank, nothing to move")
    if nbytes < SMALL:
        return Choice(native, f"default rule: {nbytes} B < {SMALL} B, "
                              "where the library's own call is fastest")
    for name in _preferences(collective, size, nbytes):
        alg = lookup(collective, name)
        if alg.unmet(commutative=commutative) is None:
            return Choice(alg, f"default rule: {nbytes} B on {size} ranks")
    return Choice(native, "default rule: no hand-built algorithm fits")


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
