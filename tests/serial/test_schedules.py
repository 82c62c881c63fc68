"""Tier 1: every registered hand-built algorithm, simulated without MPI.

For every collective in :data:`mpicoll.collectives.COLLECTIVES` and every
algorithm the registry holds for it (``"native"`` aside), all ranks' schedules
run in one process (:func:`mpicoll.sim.data.simulate`), which matches sends to
receives with no buffering at all and raises on deadlocks, unmatched or
truncated messages and receives overlapping other buffers of their round.
Results are then checked exactly against a NumPy reference:

- sizes 1..17, 24, 32, 33; counts {0, 1, p-1, p, p+1, 1000};
- every root at sizes up to ``ALL_ROOTS_UP_TO``, roots {0, p//2, p-1} above;
- in place and out of place where the layout aliases them (and for
  scatter and scatterv, whose root's ``recv`` is a view of its ``send``);
- uneven per-rank counts (zeros included) for reduce_scatter, allgatherv,
  gatherv and scatterv, and ragged matrices for alltoallv;
- integer SUM on int64 data unique per (rank, index), exact whatever the
  reduction order, and, for every algorithm not declared
  ``commutative_only``, :data:`~mpicoll.sim.data.STR_CONCAT` (associative,
  not commutative) whose result spells out the fold order: it must be
  ``x0 + x1 + ... + x{p-1}``. The string runs use count 17 in place of 1000
  (object arrays are slow).

The last part of the file feeds the simulator broken schedules, to show
each of those checks can fail.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from mpicoll.coll import algorithms, lookup, register, registry
from mpicoll.coll.registry import Algorithm
from mpicoll.collectives import COLLECTIVES
from mpicoll.schedule.ops import Op, builtin_op
from mpicoll.schedule.core import SYNC, Copy, Recv, Reduce, Round, Schedule, Send, Span
from mpicoll.schedule.layout import buffer_lengths
from mpicoll.schedule.bind import bind
from mpicoll.sim.matching import SimulationError, run_bound
from mpicoll.sim.data import STR_CONCAT, garbage, simulate
from mpicoll.topo import block_bounds

SIZES = (*range(1, 18), 24, 32, 33)
ALL_ROOTS_UP_TO = 8
BIG = 1000  # the large integer count
STR_BIG = 17  # its stand-in for object arrays
SUM = builtin_op("sum")

HAND_BUILT = [
    (c, name) for c in COLLECTIVES for name in algorithms(c) if name != "native"
]


def alg(collective: str, name: str) -> Algorithm:
    return lookup(collective, name)


def order_keeping(collective: str, name: str) -> bool:
    """Whether the string (rank order) check applies."""
    return COLLECTIVES[collective].reducing and \
        not alg(collective, name).commutative_only


def int_counts(p: int) -> list[int]:
    return sorted({0, 1, p - 1, p, p + 1, BIG})


def str_counts(p: int) -> list[int]:
    return sorted({0, 1, p - 1, p, p + 1, STR_BIG})


def roots(collective: str, p: int) -> list[int]:
    if not COLLECTIVES[collective].rooted:
        return [0]
    if p <= ALL_ROOTS_UP_TO:
        return list(range(p))
    return sorted({0, p // 2, p - 1})


def inplace_modes(collective: str) -> tuple[bool, ...]:
    simulated = COLLECTIVES[collective].inplace in ("aliased", "root_keeps")
    return (False, True) if simulated else (False,)


def uneven_counts(p: int) -> list[tuple[int, ...]]:
    """Per-rank counts (reduce_scatter, the v-variants), zeros included."""
    patterns = [
        tuple(r % 3 for r in range(p)),  # 0, 1, 2, 0, 1, 2 ...
        tuple(0 if r % 2 else r + 1 for r in range(p)),  # odd ranks get none
        tuple(7 if r == p - 1 else 0 for r in range(p)),  # all on the last
        tuple(5 if r == 0 else 0 for r in range(p)),  # all on the first
        tuple(p - r + (r == p // 2) * 40 for r in range(p)),  # ragged, no zero
    ]
    return list(dict.fromkeys(patterns))


def ragged_matrices(p: int) -> list[tuple[tuple[int, ...], ...]]:
    """Alltoallv matrices, ``M[i][j]`` from rank ``i`` to rank ``j``, zeros included."""
    patterns = [
        lambda i, j: (i + 2 * j) % 3,
        lambda i, j: 5 if i == p // 2 else 0,  # all on one row
        lambda i, j: 4 if j == p - 1 else 0,  # all on one column
        lambda i, j: i - j + 1 if j <= i else 0,  # lower triangle, ragged
    ]
    return [tuple(tuple(f(i, j) for j in range(p)) for i in range(p))
            for f in patterns]


# --- data and references ----------------------------------------------------

def int_data(rank: int, n: int) -> np.ndarray:
    return rank * 1_000_003 + np.arange(n, dtype=np.int64)


def str_data(rank: int, n: int) -> np.ndarray:
    return np.array([f"{rank}.{i};" for i in range(n)], dtype=object)


def reduction(xs: list[np.ndarray]) -> np.ndarray:
    """Elementwise fold over ranks 0..p-1 in order (sum or concatenation)."""
    out = xs[0].copy()
    for x in xs[1:]:
        out = out + x
    return out


def expected_outputs(collective, xs, p, count, root):
    """What every rank's recv must hold afterwards."""
    if collective == "allreduce":
        return [reduction(xs)] * p
    if collective == "reduce":
        red = reduction(xs)
        return [red if r == root else red[:0] for r in range(p)]
    if collective == "bcast":
        return [xs[root]] * p
    if collective == "allgather":
        return [np.concatenate(xs)] * p
    if collective in ("reduce_scatter", "reduce_scatter_block"):
        counts = count if collective == "reduce_scatter" else (count,) * p
        displ = block_bounds(counts)[:-1]
        red = reduction(xs)
        return [red[displ[r]:displ[r] + counts[r]] for r in range(p)]
    if collective == "barrier":
        return [xs[0][:0]] * p
    if collective in ("gather", "allgatherv", "gatherv"):
        whole = np.concatenate(xs)
        if collective == "allgatherv":
            return [whole] * p
        return [whole if r == root else whole[:0] for r in range(p)]
    if collective in ("scatter", "scatterv"):
        bounds = block_bounds(count if collective == "scatterv" else (count,) * p)
        return [xs[root][bounds[r]:bounds[r + 1]] for r in range(p)]
    if collective in ("alltoall", "alltoallv"):
        matrix = count if collective == "alltoallv" else ((count,) * p,) * p
        rows = [block_bounds(row) for row in matrix]
        return [np.concatenate([x[b[r]:b[r + 1]] for x, b in zip(xs, rows)])
                for r in range(p)]
    if collective == "scan":
        return [reduction(xs[:r + 1]) for r in range(p)]
    if collective == "exscan":  # rank 0's recv is undefined (MPI): unchecked
        return [None] + [reduction(xs[:r]) for r in range(1, p)]
    raise KeyError(collective)


def inputs(collective, p, count, root, make):
    xs = []
    for r in range(p):
        n_send, n_recv = buffer_lengths(collective, r, p, count, root)
        # bcast reads its input from the root's recv.
        xs.append(make(r, n_recv if collective == "bcast" else n_send))
    return xs


def check_case(collective, name, p, count, *, root=0, inplace=False,
               kind="int", **params):
    make, op = (int_data, "sum") if kind == "int" else (str_data, STR_CONCAT)
    xs = inputs(collective, p, count, root, make)
    case = (f"{collective}/{name} p={p} count={count} root={root} "
            f"inplace={inplace} {kind}{' ' + str(params) if params else ''}")
    outs = simulate(collective, name, xs, count=count, op=op, root=root,
                    inplace=inplace, **params)
    want = expected_outputs(collective, xs, p, count, root)
    assert len(outs) == p, case
    for r, sched in enumerate(schedules(collective, name, p, count, root,
                                        commutative=kind == "int", **params)):
        check_schedule(collective, r, p, count, root, sched, case)
    for r, (got, exp) in enumerate(zip(outs, want)):
        if exp is None:
            continue
        assert got.shape == exp.shape, f"{case}: rank {r} shape"
        if not np.array_equal(got, exp):
            bad = np.flatnonzero(got != exp)
            pytest.fail(
                f"{case}: rank {r} wrong at {bad.size} of {exp.size} elements, "
                f"first at {bad[0]}: got {got[bad[0]]!r}, want {exp[bad[0]]!r}"
            )


def run_all(collective, name, p, counts, kind, **params):
    for count in counts:
        if COLLECTIVES[collective].counts == "per_rank":
            count = (count,) * p  # the even case; see the uneven tests
        elif collective == "alltoallv":
            count = ((count,) * p,) * p
        for root in roots(collective, p):
            for inplace in inplace_modes(collective):
                check_case(collective, name, p, count, root=root,
                           inplace=inplace, kind=kind, **params)


# --- the registry-wide suite ------------------------------------------------

INT_CASES = [
    pytest.param(c, name, p, count, id=f"{c}-{name}-p{p}-c{count}")
    for c, name in HAND_BUILT
    for p in SIZES
    for count in (int_counts(p) if c != "barrier" else [0])
]

STR_CASES = [
    pytest.param(c, name, p, id=f"{c}-{name}-p{p}")
    for c, name in HAND_BUILT
    if order_keeping(c, name)
    for p in SIZES
]

UNEVEN_CASES = [
    pytest.param(c, name, p, id=f"{c}-{name}-p{p}")
    for c, name in HAND_BUILT
    if COLLECTIVES[c].counts == "per_rank"
    for p in SIZES
]

ALLTOALLV_CASES = [
    pytest.param(name, p, id=f"alltoallv-{name}-p{p}")
    for c, name in HAND_BUILT
    if c == "alltoallv"
    for p in SIZES
]


def test_registry_has_every_collective():
    for c in COLLECTIVES:
        names = algorithms(c)
        assert names[0] == "native"
        assert lookup(c, "native").native
        assert len(names) == len(set(names))
        assert lookup(c, "no-such-algorithm") is None
    assert HAND_BUILT, "no hand-built algorithm registered"
    for c, name in HAND_BUILT:
        a = alg(c, name)
        assert a.collective == c and a.name == name and callable(a.build)
        assert not a.native
    with pytest.raises(ValueError, match="twice"):
        register(HAND_BUILT[0][0], HAND_BUILT[0][1])(lambda *a, **k: None)


#: A collective with equal blocks -> its form with per-rank counts.
PER_RANK_FORM = {"reduce_scatter_block": "reduce_scatter",
                 "allgather": "allgatherv", "gather": "gatherv",
                 "scatter": "scatterv", "alltoall": "alltoallv"}
SHARED = [(c, v, name) for c, v in PER_RANK_FORM.items()
          for name in algorithms(c) if name != "native" and name in algorithms(v)
          and alg(c, name).build is alg(v, name).build]


def test_equal_block_collectives_share_their_per_rank_builders():
    """One builder per algorithm serves a collective and its per-rank form
    wherever both have it (gather and gatherv's linear, ...)."""
    for c, v in PER_RANK_FORM.items():
        for name in set(algorithms(c)) & set(algorithms(v)) - {"native"}:
            assert alg(c, name).build is alg(v, name).build, (c, v, name)
    assert {(c, name) for c, _, name in SHARED} >= {
        ("gather", "linear"), ("scatter", "binomial"), ("allgather", "ring"),
        ("alltoall", "pairwise"), ("reduce_scatter_block", "ring")}


@pytest.mark.parametrize("collective,per_rank,name", SHARED,
                         ids=[f"{c}-{n}" for c, _, n in SHARED])
def test_equal_blocks_are_the_per_rank_form_widened(collective, per_rank, name):
    """The registry hands the shared builder an equal-blocks ``count`` as
    ``(count,) * p`` (alltoall: the constant matrix): the schedules are the
    per-rank form's, every rank, root and node map alike."""
    row = COLLECTIVES[collective]
    for p, count in ((1, 3), (5, 2), (8, 0), (6, 7)):
        wide = (count,) * p
        if COLLECTIVES[per_rank].counts == "matrix":
            wide = (wide,) * p
        kwargs = {"nodes": tuple(r // 2 for r in range(p))} \
            if alg(collective, name).topology else {}
        for root in range(p) if row.rooted else (0,):
            for rank in range(p):
                assert alg(collective, name).schedule(
                    rank, p, count, root=root, **kwargs) == alg(
                    per_rank, name).schedule(rank, p, wide, root=root,
                                             **kwargs), (p, count, root, rank)


@pytest.mark.parametrize("collective,name,p,count", INT_CASES)
def test_int_sum_exact(collective, name, p, count):
    """Integer SUM (or plain data movement), every root, in and out of place."""
    run_all(collective, name, p, [count], "int")


@pytest.mark.parametrize("collective,name,p", STR_CASES)
def test_noncommutative_rank_order(collective, name, p):
    """STR_CONCAT: the result is the fold over ranks 0..p-1, in that order."""
    run_all(collective, name, p, str_counts(p), "str")


# Values other than the registered defaults for every algorithm parameter
# (the defaults run above). A newly registered parameter fails
# test_every_param_has_variants until it is listed here.
PARAM_VARIANTS = {
    ("bcast", "pipelined"): [{"segment": 1}, {"segment": 300}],
    ("bcast", "scatter_allgather"): [{"allgather": "recursive_doubling"}],
}

PARAM_CASES = [
    pytest.param(c, name, params, p, id=f"{c}-{name}-"
                 + "-".join(f"{k}={v}" for k, v in params.items()) + f"-p{p}")
    for (c, name), variants in PARAM_VARIANTS.items()
    if lookup(c, name) is not None
    for params in variants
    for p in SIZES
]


def test_every_param_has_variants():
    for c, name in HAND_BUILT:
        a = alg(c, name)
        if not a.params:
            continue
        variants = PARAM_VARIANTS.get((c, name), [])
        for key, default in a.params.items():
            assert any(v.get(key, default) != default for v in variants), (
                f"{c}/{name}: add non-default values of {key!r} to PARAM_VARIANTS")
    for c, name in PARAM_VARIANTS:
        assert lookup(c, name) is not None, f"{c}/{name} is not registered"


@pytest.mark.parametrize("collective,name,params,p", PARAM_CASES)
def test_param_variants(collective, name, params, p):
    counts = int_counts(p)
    if params.get("segment") == 1:
        counts = [c for c in counts if c < BIG]  # a round per element: slow
    run_all(collective, name, p, counts, "int", **params)
    if order_keeping(collective, name):
        run_all(collective, name, p, str_counts(p), "str", **params)


@pytest.mark.parametrize(("collective", "name", "p"), UNEVEN_CASES)
def test_uneven_counts(collective, name, p):
    """Per-rank counts with zeros: reduce_scatter, allgatherv, gatherv and
    scatterv (every root, as in the sweep)."""
    kinds = ["int", "str"] if order_keeping(collective, name) else ["int"]
    for counts in uneven_counts(p):
        for kind in kinds:
            for root in roots(collective, p):
                for inplace in inplace_modes(collective):
                    check_case(collective, name, p, counts, root=root,
                               kind=kind, inplace=inplace)


@pytest.mark.parametrize(("name", "p"), ALLTOALLV_CASES)
def test_alltoallv_ragged_matrices(name, p):
    """Alltoallv with ragged matrices, zeros included."""
    for matrix in ragged_matrices(p):
        check_case("alltoallv", name, p, matrix)



# --- static properties of the schedules --------------------------------------

def schedules(collective, name, p, count, root=0, commutative=True, **params):
    a = alg(collective, name)
    return [a.schedule(r, p, count, root=root, commutative=commutative,
                       **params)
            for r in range(p)]


def written_spans(schedule: Schedule):
    for rnd in schedule.rounds:
        for r in rnd.recvs:
            yield r.span
        for step in rnd.local:
            yield step.dst


def all_spans(schedule: Schedule):
    for rnd in schedule.rounds:
        yield from (s.span for s in rnd.sends)
        yield from (r.span for r in rnd.recvs)
        for step in rnd.local:
            yield from (step.src, step.dst) if isinstance(step, Copy) else step


_CHECKED: dict[int, Schedule] = {}  # id -> schedule, held so ids stay unique


def check_schedule(collective, rank, p, count, root, s: Schedule, where: str):
    """MPI's send buffer is read-only; every span is a range of its buffer.

    (The simulator cannot see either: it runs on a copy of the input, and
    an empty view hides a span with ``stop < start``.)
    """
    if _CHECKED.get(id(s)) is s:
        return  # the in-place run uses the same schedules
    assert s.tmp >= 0, where
    n_send, n_recv = buffer_lengths(collective, rank, p, count, root)
    if collective == "bcast":
        n_send = 0  # bcast's data lives in recv
    limit = {"send": n_send, "recv": n_recv, "tmp": s.tmp, "sync": 0}
    for span in written_spans(s):
        assert span.buf != "send", f"{where}: rank {rank} writes {span}"
    for span in all_spans(s):
        assert span.buf in limit, f"{where}: rank {rank}: {span}"
        assert 0 <= span.start <= span.stop <= limit[span.buf], (
            f"{where}: rank {rank}: {span} outside {limit[span.buf]} elements")
    if len(_CHECKED) > 10_000:
        _CHECKED.clear()
    _CHECKED[id(s)] = s


def test_check_schedule_catches_writes_to_send_and_bad_spans():
    ok = Schedule((Round((Send(1, Span("send", 0, 4)),),
                         (Recv(1, Span("recv", 0, 4)),), ()),), 0)
    check_schedule("allreduce", 0, 2, 4, 0, ok, "ok")
    bad = [
        Schedule((Round((), (Recv(1, Span("send", 0, 4)),), ()),), 0),
        Schedule((Round((), (), (Copy(Span("recv", 0, 4), Span("send", 0, 4)),)),),
                 0),
        Schedule((Round((), (), (Reduce(Span("recv", 0, 4), Span("tmp", 0, 4),
                                        Span("send", 0, 4)),)),), 4),
        Schedule((Round((Send(1, Span("recv", 3, 2)),), (), ()),), 0),
        Schedule((Round((Send(1, Span("tmp", 0, 5)),), (), ()),), 4),
        Schedule((Round((Send(1, Span("scratch", 0, 1)),), (), ()),), 0),
    ]
    for s in bad:
        with pytest.raises(AssertionError):
            check_schedule("allreduce", 0, 2, 4, 0, s, "bad")


# --- barrier: every rank leaves only after every rank arrived ----------------

def causal_knowledge(scheds: list[Schedule]) -> list[set[int]]:
    """Ranks whose arrival each rank has heard of when its schedule ends.

    Information flows only from a send to its matching receive (a send may
    complete before it is received, as an eager one does), and a message
    carries what the sender knew when it posted the round.
    """
    send_rounds = defaultdict(list)  # (src, dst) -> rounds, posting order
    for src, s in enumerate(scheds):
        for k, rnd in enumerate(s.rounds):
            for snd in rnd.sends:
                send_rounds[src, snd.peer].append(k)
    # before[r][k]: what rank r knows when it posts round k.
    before = [[{r} for _ in range(len(s.rounds) + 1)] for r, s in enumerate(scheds)]
    changed = True
    while changed:
        changed = False
        for r, s in enumerate(scheds):
            seen = defaultdict(int)
            known = {r}
            for k, rnd in enumerate(s.rounds):
                known = known | before[r][k]
                for rcv in rnd.recvs:
                    j = send_rounds[rcv.peer, r][seen[rcv.peer]]
                    seen[rcv.peer] += 1
                    known = known | before[rcv.peer][j]
                if not known <= before[r][k + 1]:
                    before[r][k + 1] = before[r][k + 1] | known
                    changed = True
    return [b[-1] for b in before]


BARRIERS = [name for c, name in HAND_BUILT if c == "barrier"]


@pytest.mark.parametrize("name", BARRIERS)
def test_barrier_completes_and_synchronises(name):
    for p in SIZES:
        outs = simulate("barrier", name, [np.empty(0)] * p)
        assert [o.shape for o in outs] == [(0,)] * p
        known = causal_knowledge(schedules("barrier", name, p, 0))
        for r in range(p):
            missing = set(range(p)) - known[r]
            assert not missing, f"p={p}: rank {r} may leave before {missing} arrive"


def test_causal_knowledge_sees_a_non_barrier():
    # rank 0 only sends, so it may leave before rank 1 arrives.
    scheds = [
        Schedule((Round((Send(1, SYNC),), (), ()),), 0),
        Schedule((Round((), (Recv(0, SYNC),), ()),), 0),
    ]
    assert causal_knowledge(scheds) == [{0}, {0, 1}]


# --- documentation and declared limits --------------------------------------

@pytest.mark.parametrize(
    "collective,name", HAND_BUILT, ids=[f"{c}-{n}" for c, n in HAND_BUILT]
)
def test_docstring(collective, name):
    a = alg(collective, name)
    doc = a.build.__doc__ or ""
    lines = doc.strip().splitlines()
    assert lines and lines[0].strip(), "no one-line summary"
    assert a.summary == lines[0]
    assert len(lines) > 2 and not lines[1].strip(), (
        "want a one-line summary, a blank line, then the details")
    low = doc.lower()
    assert "round" in low, "rounds not stated"
    assert "byte" in low, "bytes per rank not stated"
    assert "temp" in low or "memory" in low, "temporary memory not stated"


COMMUTATIVE_ONLY = [(c, n) for c, n in HAND_BUILT if alg(c, n).commutative_only]

# STR_CONCAT, but claiming to commute: runs the schedule an algorithm uses for
# commutative ops, and shows whether it keeps rank order.
CLAIMS_COMMUTATIVE = Op("str_concat_claimed_commutative", STR_CONCAT.apply,
                        commutative=True)


def test_unmet_reports_commutative_only():
    for c, name in HAND_BUILT:
        a = alg(c, name)
        assert a.unmet(commutative=True) is None
        if a.commutative_only:
            assert a.unmet(commutative=False)
        else:
            assert a.unmet(commutative=False) is None


@pytest.mark.parametrize(
    "collective,name", COMMUTATIVE_ONLY, ids=[f"{c}-{n}" for c, n in COMMUTATIVE_ONLY]
)
def test_commutative_only_is_needed(collective, name):
    """A ``commutative_only`` algorithm does reorder a fold somewhere (the
    others keep order, as test_noncommutative_rank_order shows)."""
    for p in range(2, 18):
        for count in (p + 1, 2 * p + 3):
            cnt = (count,) * p if collective == "reduce_scatter" else count
            for root in roots(collective, p):
                xs = inputs(collective, p, cnt, root, str_data)
                outs = simulate(collective, name, xs, count=cnt,
                                op=CLAIMS_COMMUTATIVE, root=root)
                want = expected_outputs(collective, xs, p, cnt, root)
                if any(not np.array_equal(g, w) for g, w in zip(outs, want)):
                    return
    pytest.fail(f"{collective}/{name} kept rank order everywhere: "
                "commutative_only is not needed")


# --- the simulator catches broken schedules ----------------------------------

def rounds(*rs) -> Schedule:
    """A schedule from (sends, recvs[, local]) triples."""
    return Schedule(tuple(Round(tuple(r[0]), tuple(r[1]),
                                tuple(r[2]) if len(r) > 2 else ())
                          for r in rs), 16)


def run_raw(scheds, n=8, dtype=np.int64, op=SUM):
    """Bind each rank's schedule to fresh buffers of ``n`` elements and run."""
    arrays = []
    for r, s in enumerate(scheds):
        arrays.append({"send": int_data(r + 1, n).astype(dtype),
                       "recv": np.zeros(n, dtype), "tmp": np.zeros(s.tmp, dtype),
                       "sync": np.empty(0, dtype)})
    run_bound([bind(s, a, op) for s, a in zip(scheds, arrays)])
    return arrays


def send(peer, buf="send", a=0, b=4):
    return Send(peer, Span(buf, a, b))


def recv(peer, buf="recv", a=0, b=4):
    return Recv(peer, Span(buf, a, b))


def test_raw_runner_exchanges_data():
    """The positive control for the broken cases below."""
    arrays = run_raw([rounds(([send(1)], [recv(1)])),
                      rounds(([send(0)], [recv(0)]))])
    np.testing.assert_array_equal(arrays[0]["recv"][:4], int_data(2, 4))
    np.testing.assert_array_equal(arrays[1]["recv"][:4], int_data(1, 4))


def test_catches_cyclic_wait():
    # Each rank waits for its left neighbour, which sends only afterwards.
    p = 3
    scheds = [rounds(([], [recv((r - 1) % p)]), ([send((r + 1) % p)], []))
              for r in range(p)]
    with pytest.raises(SimulationError, match="deadlock"):
        run_raw(scheds)


def test_catches_send_send_deadlock_without_buffering():
    # Both send first, in a round of their own: fine with an eager protocol,
    # a deadlock without buffering, so a schedule must not rely on it.
    scheds = [rounds(([send(1 - r)], []), ([], [recv(1 - r)])) for r in range(2)]
    with pytest.raises(SimulationError, match="deadlock"):
        run_raw(scheds)


def test_catches_length_mismatch():
    scheds = [rounds(([send(1, a=0, b=3)], [])),
              rounds(([], [recv(0, a=0, b=4)]))]
    with pytest.raises(SimulationError, match="3 elements"):
        run_raw(scheds)


def test_catches_unmatched_send():
    scheds = [rounds(([send(1)], [])), rounds()]
    with pytest.raises(SimulationError, match="deadlock: rank 0"):
        run_raw(scheds)


def test_catches_unmatched_receive():
    scheds = [rounds(), rounds(([], [recv(0)]))]
    with pytest.raises(SimulationError, match="deadlock: rank 1"):
        run_raw(scheds)


def test_messages_match_in_posting_order():
    # 0 sends 2 then 3 elements to 1, which expects 3 then 2.
    scheds = [rounds(([send(1, a=0, b=2)], []), ([send(1, a=2, b=5)], [])),
              rounds(([], [recv(0, a=0, b=3)]), ([], [recv(0, a=3, b=5)]))]
    with pytest.raises(SimulationError, match="sends 2 elements"):
        run_raw(scheds)


def test_catches_receive_overlapping_send_of_same_round():
    scheds = [rounds(([send(1, "recv", 0, 4)], [recv(1, "recv", 2, 6)])),
              rounds(([send(0)], [recv(0)]))]
    with pytest.raises(SimulationError, match="overlaps"):
        run_raw(scheds)


def test_catches_overlapping_receives():
    scheds = [rounds(([], [recv(1, "recv", 0, 2), recv(2, "recv", 1, 3)])),
              rounds(([send(0, a=0, b=2)], [])),
              rounds(([send(0, a=0, b=2)], []))]
    with pytest.raises(SimulationError, match="overlaps"):
        run_raw(scheds)


@pytest.mark.parametrize("peer", [0, 2, -1])
def test_catches_invalid_peer(peer):
    scheds = [rounds(([send(peer)], [])), rounds()]
    with pytest.raises(SimulationError, match="invalid peer"):
        run_raw(scheds)


def test_catches_span_outside_its_buffer():
    scheds = [rounds(([send(1, a=4, b=9)], [])), rounds(([], [recv(0, a=0, b=5)]))]
    with pytest.raises(IndexError, match="outside buffer"):
        run_raw(scheds)


def test_catches_reduction_partly_overlapping_its_output():
    step = Reduce(Span("recv", 0, 4), Span("send", 0, 4), Span("recv", 2, 6))
    with pytest.raises(ValueError, match="overlaps"):
        run_raw([rounds(([], [], [step]))])


@pytest.fixture
def broken(monkeypatch):
    """Register a throwaway allreduce builder for the duration of a test."""

    def install(build, commutative_only=False):
        monkeypatch.setitem(registry._REGISTRY["allreduce"], "broken",
                            Algorithm("allreduce", "broken", build,
                                      commutative_only))
        return "broken"

    return install


def test_catches_reading_garbage(broken):
    # Reduces an uninitialised scratch vector into the result.
    def build(rank, size, count, *, commutative):
        return Schedule((Round((), (), (
            Reduce(Span("send", 0, count), Span("tmp", 0, count),
                   Span("recv", 0, count)),)),), count)

    name = broken(build)
    with pytest.raises(TypeError):  # object garbage is None: str + None
        check_case("allreduce", name, 1, 5, kind="str")
    with pytest.raises(pytest.fail.Exception, match="wrong at"):
        check_case("allreduce", name, 1, 5, kind="int")


def test_catches_output_left_unwritten(broken):
    # Forgets the last element of the result: it keeps its garbage.
    def build(rank, size, count, *, commutative):
        n = max(count - 1, 0)
        return Schedule((Round((), (), (
            Copy(Span("send", 0, n), Span("recv", 0, n)),)),), 0)

    name = broken(build)
    with pytest.raises(pytest.fail.Exception, match="rank 0 wrong at 1 of 5"):
        check_case("allreduce", name, 1, 5)
    with pytest.raises(pytest.fail.Exception, match="got None"):
        check_case("allreduce", name, 1, 5, kind="str")


def test_catches_wrong_fold_order(broken):
    # Two ranks swap vectors and fold them with the operands the wrong way
    # round: integer SUM cannot tell, STR_CONCAT can.
    def build(rank, size, count, *, commutative):
        other = Span("tmp", 0, count)
        mine = Span("send", 0, count)
        return Schedule((Round((Send(1 - rank, mine),), (Recv(1 - rank, other),),
                               (Reduce(other, mine, Span("recv", 0, count)),)),),
                        count)

    name = broken(build)
    check_case("allreduce", name, 2, 6)
    with pytest.raises(pytest.fail.Exception, match="rank 0 wrong"):
        check_case("allreduce", name, 2, 6, kind="str")


def test_catches_inplace_clobbering(broken):
    # Rank 1 receives into its result before reading its own input: right
    # out of place, wrong when send aliases recv.
    def build(rank, size, count, *, commutative):
        send_, recv_ = Span("send", 0, count), Span("recv", 0, count)
        if rank == 0:
            return Schedule((Round((Send(1, send_),), (), ()),
                             Round((), (Recv(1, recv_),), ())), 0)
        return Schedule((Round((), (Recv(0, recv_),),
                               (Reduce(recv_, send_, recv_),)),
                         Round((Send(0, recv_),), (), ())), 0)

    name = broken(build)
    check_case("allreduce", name, 2, 3)
    check_case("allreduce", name, 2, 3, kind="str")
    with pytest.raises(pytest.fail.Exception, match="wrong at 3 of 3"):
        check_case("allreduce", name, 2, 3, inplace=True)


def test_simulate_rejects_native_and_bad_inputs():
    with pytest.raises(KeyError):
        simulate("allreduce", "native", [np.zeros(3)] * 2)
    name = next(n for c, n in HAND_BUILT if c == "allreduce")
    with pytest.raises(ValueError, match="needs"):
        simulate("allreduce", name, [np.zeros(3), np.zeros(3)], count=4)


def test_garbage_is_not_data():
    assert all(v is None for v in garbage(4, object))
    g = garbage(1000, np.int64)
    assert g.shape == (1000,) and g.dtype == np.int64
    assert len(np.unique(g)) > 900  # not zeros, not a constant
