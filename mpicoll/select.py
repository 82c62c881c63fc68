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

The default rules come from ``bench/allreduce_speed.py`` runs on the
development machines (see the README's speed table): below about 16 KiB the
latency-bound algorithms (recursive doubling, binomial trees, Bruck,
dissemination) win; above it the bandwidth-bound ones (ring, Rabenseifner,
scatter-allgather) do, which send each byte about twice instead of
``log2(p)`` times.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from mpicoll.coll.registry import Algorithm, algorithms, lookup
from mpicoll.errors import ConstraintError, UnknownAlgorithmError

SMALL = 16 * 1024  # bytes: latency-bound below, bandwidth-bound above

# Preference lists per collective: (small messages, large messages). The
# first entry whose constraints hold wins; "native" ends every list.
_PREFERENCES = {
    "allreduce": (("recursive_doubling",), ("rabenseifner", "ring",
                                            "recursive_doubling")),
    "reduce": (("binomial",), ("rabenseifner", "binomial")),
    "bcast": (("binomial",), ("scatter_allgather", "binomial")),
    "allgather": (("recursive_doubling", "bruck"), ("ring",)),
    "reduce_scatter_block": (("recursive_halving", "pairwise"),
                             ("ring", "pairwise")),
    "reduce_scatter": (("recursive_halving", "pairwise"),
                       ("ring", "pairwise")),
    "barrier": (("dissemination",), ("dissemination",)),
}


class Choice(NamedTuple):
    algorithm: Algorithm
    reason: str


def env_var(collective: str) -> str:
    return f"MPICOLL_{collective.upper()}_ALGORITHM"


def environment_overrides() -> dict[str, str]:
    """The ``MPICOLL_<COLLECTIVE>_ALGORITHM`` settings now in force."""
    found = {}
    for collective in _PREFERENCES:
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
    if size == 1:
        return Choice(lookup(collective, "native"),
                      "default rule: one rank, nothing to communicate")
    small, large = _PREFERENCES[collective]
    regime = "small" if nbytes < SMALL else "large"
    for name in small if regime == "small" else large:
        alg = lookup(collective, name)
        if alg is not None and alg.unmet(commutative=commutative) is None:
            return Choice(alg, f"default rule: {regime} message "
                               f"({nbytes} B, threshold {SMALL} B)")
    return Choice(lookup(collective, "native"),
                  "default rule: no hand-built algorithm fits; native")


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
