"""The published closed-form costs of the classic algorithms, apart from
the schedules.

:data:`PUBLISHED` keeps, per ``(collective, algorithm)``, the α-β-γ cost
the literature gives (Thakur, Rabenseifner & Gropp 2005; Rabenseifner
2004; Bruck et al. 1997; van de Geijn et al. 1994; the cost comments of
MPICH's collective sources); :func:`formula` evaluates it on a
:class:`~mpicoll.model.cost.Network`, and ``tests/serial/test_model.py`` checks it
against the critical path :func:`mpicoll.model.cost.predict` reads off the
schedules. :func:`estimate` prices a form on a network whose costs depend
on the message size (a calibration's): O(1), what ``auto`` orders its
candidates by beyond two ranks (:mod:`mpicoll.select.policy`).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from mpicoll.model.cost import Network
from mpicoll.topo import floor_pow2


def _clg(p: int) -> int:
    """``ceil(log2 p)``."""
    return (p - 1).bit_length()


def _pof2(p: int) -> int | None:
    """``log2 p`` where p is a power of two, else None."""
    return p.bit_length() - 1 if p == floor_pow2(p) else None


def _rabenseifner(p, n, a, b, g, *, folds):
    """Recursive-halving reduce-scatter and a recursive-doubling allgather
    or binomial gather on the ``q = floor_pow2(p)`` core, then ``folds``
    (allreduce: 2, reduce: 1) whole-vector steps of the fold more."""
    q, f = floor_pow2(p), floor_pow2(p).bit_length() - 1
    folds *= p != q
    return ((2 * f + folds) * a + (2 * (q - 1) / q + folds) * n * b
            + (min(folds, 1) + (q - 1) / q) * n * g)


def _recursive_doubling(p, n, a, b, g):
    f, folded = floor_pow2(p).bit_length() - 1, p != floor_pow2(p)
    return (f + 2 * folded) * (a + n * b) + (f + folded) * n * g


def _scatter_allgather(p, n, a, b, g, *, allgather="ring"):
    if allgather == "ring":
        return (_clg(p) + p - 1) * a + 2 * (p - 1) / p * n * b
    f = _pof2(p)
    return None if f is None else 2 * f * a + 2 * (p - 1) / p * n * b


class Published(NamedTuple):
    """A closed form from the literature: ``expression`` (``lg`` is
    ``log2``, ``p' = floor_pow2(p)``, ``n`` as :func:`formula` says), its
    ``source``, and ``cost(p, n, alpha, beta, gamma, **params)`` in seconds
    (None for a p the source gives no form for)."""

    expression: str
    source: str
    cost: Callable[..., float | None]


_T = "Thakur, Rabenseifner & Gropp 2005"
_M = "; MPICH "  # then the MPICH function whose comment gives the form


def _forms():
    """The :data:`PUBLISHED` entries, shared ones keyed by several names."""
    ring = ("(p-1)α + ((p-1)/p)nβ", f"{_T}{_M}allgather_intra_ring",
            lambda p, n, a, b, g: (p - 1) * a + (p - 1) / p * n * b)
    tree = ("ceil(lg p)α + ((p-1)/p)nβ",
            f"{_T}{_M}gather_intra_binomial, scatter_intra_binomial",
            lambda p, n, a, b, g: _clg(p) * a + (p - 1) / p * n * b)
    rs = ("(p-1)α + ((p-1)/p)n(β + γ)", f"{_T}{_M}reduce_scatter_intra_pairwise",
          lambda p, n, a, b, g: (p - 1) * (a + n / p * (b + g)))
    yield ("allgather", "allgatherv"), "ring", ring
    yield ("allgather", "allgatherv"), "recursive_doubling", (
        "p a power of two: lg(p)α + ((p-1)/p)nβ",
        f"{_T}{_M}allgather_intra_recursive_doubling",
        lambda p, n, a, b, g: None if _pof2(p) is None
        else _pof2(p) * a + (p - 1) / p * n * b)
    yield ("allgather",), "bruck", (
        "ceil(lg p)α + ((p-1)/p)nβ", f"Bruck et al. 1997; {_T}{_M}"
        "allgather_intra_brucks", tree[2])
    yield ("reduce_scatter", "reduce_scatter_block"), "ring", rs
    yield ("reduce_scatter", "reduce_scatter_block"), "pairwise", rs
    yield ("reduce_scatter", "reduce_scatter_block"), "recursive_halving", (
        "p a power of two: lg(p)α + ((p-1)/p)n(β + γ)",
        f"{_T}{_M}reduce_scatter_intra_recursive_halving (its form for "
        "other p is approximate, it says)",
        lambda p, n, a, b, g: None if _pof2(p) is None
        else _pof2(p) * a + (p - 1) / p * n * (b + g))
    yield ("alltoall", "alltoallv"), "pairwise", (
        "(p-1)α + ((p-1)/p)nβ", f"{_T}{_M}alltoall_intra_pairwise", ring[2])
    yield ("alltoall",), "bruck", (
        "p a power of two: lg(p)α + (n/2)lg(p)β",
        f"Bruck et al. 1997; {_T}{_M}alltoall_intra_brucks",
        lambda p, n, a, b, g: None if _pof2(p) is None
        else _pof2(p) * (a + n / 2 * b))
    yield ("gather", "gatherv", "scatter", "scatterv"), "binomial", tree
    yield ("gather", "gatherv", "scatter", "scatterv"), "linear", (
        "(p-1)α + ((p-1)/p)nβ", "MPICH scatterv_allcomm_linear", ring[2])
    yield ("allreduce",), "ring", (
        "2(p-1)α + 2((p-1)/p)nβ + ((p-1)/p)nγ", f"{_T}; Patarasuk & Yuan 2009",
        lambda p, n, a, b, g: 2 * (p - 1) * a + (p - 1) / p * n * (2 * b + g))
    yield ("allreduce",), "recursive_doubling", (
        "lg(p)(α + nβ + nγ); other p (folded): (lg(p')+2)(α + nβ) + "
        "(lg(p')+1)nγ", f"{_T}{_M}allreduce_intra_recursive_doubling",
        _recursive_doubling)
    yield ("allreduce",), "rabenseifner", (
        "2lg(p)α + 2((p-1)/p)nβ + ((p-1)/p)nγ; other p: (2lg(p')+2)α + "
        "(2(p'-1)/p' + 2)nβ + (1 + (p'-1)/p')nγ",
        f"Rabenseifner 2004; {_T}{_M}allreduce_intra_reduce_scatter_allgather"
        " (which writes p for p')",
        lambda p, n, a, b, g: _rabenseifner(p, n, a, b, g, folds=2))
    yield ("allreduce",), "reduce_bcast", (
        "2ceil(lg p)(α + nβ) + ceil(lg p)nγ",
        f"{_T}{_M}reduce_intra_binomial then bcast_intra_binomial",
        lambda p, n, a, b, g: _clg(p) * (2 * a + 2 * n * b + n * g))
    yield ("reduce",), "binomial", (
        "ceil(lg p)(α + nβ + nγ) (a commutative op, or root 0)",
        f"{_T}{_M}reduce_intra_binomial",
        lambda p, n, a, b, g: _clg(p) * (a + n * b + n * g))
    yield ("reduce",), "rabenseifner", (
        "2lg(p)α + 2((p-1)/p)nβ + ((p-1)/p)nγ; other p, root in the core: "
        "(2lg(p')+1)α + (2(p'-1)/p' + 1)nβ + (1 + (p'-1)/p')nγ",
        f"Rabenseifner 2004; {_T}{_M}reduce_intra_reduce_scatter_gather "
        "(which writes p for p')",
        lambda p, n, a, b, g: _rabenseifner(p, n, a, b, g, folds=1))
    yield ("bcast",), "binomial", (
        "ceil(lg p)(α + nβ)", f"{_T}{_M}bcast_intra_binomial",
        lambda p, n, a, b, g: _clg(p) * (a + n * b))
    yield ("bcast",), "scatter_allgather", (
        "ring allgather: (ceil(lg p) + p-1)α + 2((p-1)/p)nβ; recursive "
        "doubling, p a power of two: 2lg(p)α + 2((p-1)/p)nβ",
        f"van de Geijn et al. 1994; {_T}{_M}bcast_intra_scatter_ring_allgather,"
        " bcast_intra_scatter_recursive_doubling_allgather", _scatter_allgather)
    yield ("barrier",), "dissemination", (
        "ceil(lg p)α", f"Hensgen, Finkel & Manber 1988; {_T}",
        lambda p, n, a, b, g: _clg(p) * a)
    yield ("barrier",), "binomial", (
        "2ceil(lg p)α", f"binomial gather then broadcast of nothing{_M}"
        "gather_intra_binomial, bcast_intra_binomial",
        lambda p, n, a, b, g: 2 * _clg(p) * a)


PUBLISHED: dict[tuple[str, str], Published] = {
    (c, name): Published(*entry)
    for collectives, name, entry in _forms() for c in collectives
}


def _typical_message(collective: str, algorithm: str, p: int,
                     n: float) -> float:
    """Bytes of the message that dominates ``algorithm``'s bandwidth term
    (``n`` as :func:`formula` says): a whole vector for recursive
    doubling, reduce-then-broadcast and the binomial broadcast and reduce;
    half of it for Rabenseifner and the logarithmic allgathers and gathers
    (their largest message); a block, ``n/p``, for everything else (the
    ring, pairwise and linear algorithms, and the scatter-allgather
    broadcast)."""
    if algorithm in ("reduce_bcast",) or (
            algorithm == "binomial" and collective in ("bcast", "reduce")) or (
            algorithm == "recursive_doubling" and collective in (
                "allreduce", "scan", "exscan")):
        return n
    if algorithm in ("rabenseifner", "recursive_doubling", "bruck",
                     "recursive_halving", "binomial"):
        return n / 2
    return n / max(p, 1)


def estimate(collective: str, algorithm: str, size: int, nbytes: float,
             network: Network, **params) -> float | None:
    """:func:`formula` on a network whose costs depend on the message size
    (:attr:`Network.ranges`, as a calibration gives them): the published
    form evaluated with α, β and γ of the range holding the algorithm's
    dominant message (:func:`_typical_message`). O(1), where
    :func:`~mpicoll.model.cost.predict` walks schedules (seconds to
    minutes at thousands of ranks with uneven blocks): what ``auto``
    orders candidates by beyond
    two ranks (:mod:`mpicoll.select.policy`). Exact where the network has one
    range (it is then :func:`formula`); otherwise an approximation that
    prices every message of the algorithm as its dominant one."""
    if not network.ranges:
        return formula(collective, algorithm, size, nbytes, network, **params)
    entry = PUBLISHED.get((collective, algorithm))
    if entry is None:
        return None
    m = _typical_message(collective, algorithm, size, nbytes)
    a, b, g = (float(network.by_size(name, m))
               for name in ("alpha", "beta", "gamma"))
    return entry.cost(size, nbytes, a, b, g, **params)


def formula(collective: str, algorithm: str, size: int, nbytes: float,
            network: Network, **params) -> float | None:
    """The published cost of ``algorithm`` in seconds on ``network``'s
    inter-node link, or None where :data:`PUBLISHED` has no form for it.

    ``nbytes`` is the ``n`` of the formulas: the vector (allreduce, reduce,
    bcast), the whole output (allgather, allgatherv), the whole input
    (reduce_scatter, reduce_scatter_block), the root's whole buffer
    (gather, scatter and their v-forms), one rank's whole send buffer
    (alltoall, alltoallv, diagonal block included); 0 for barrier.
    ``params``: bcast scatter_allgather's ``allgather``; no other entry
    takes any.
    """
    entry = PUBLISHED.get((collective, algorithm))
    if entry is None:
        return None
    return entry.cost(size, nbytes, network.alpha, network.beta,
                      network.gamma, **params)
