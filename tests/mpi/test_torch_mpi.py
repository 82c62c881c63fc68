"""Tier 2, with PyTorch installed (``pip install 'mpicoll[torch]'``; skipped
otherwise): ``mpicoll.ProcessGroup`` against torch.distributed itself.

torch.distributed runs with the gloo backend on the same ranks (rank 0 picks
a free port on 127.0.0.1 and broadcasts it over MPI). Each *scenario* is a
function ``scenario(face, watch, algorithm, **params)`` that builds its
tensors from the rank, makes calls on ``face`` (the gloo side, through
:class:`Torch`, or ``mpicoll.ProcessGroup``) and returns what to compare:
tensors (equal values, dtype and shape: ``torch.equal``) and plain values
(the source rank ``recv`` returns, whether a call returned a Work or None).
Tensors passed to ``watch`` are the caller's output tensors: their
``data_ptr()`` must be the same after the calls (zero-copy: the result lands
in the caller's tensor). The gloo side runs once; mpicoll's once for every
algorithm of the collective (``"auto"`` and ``mpicoll.algorithms(c)``).

A call both sides refuse must raise a ``mpicoll.MpicollError`` on mpicoll's
side that is an instance of the type torch raised where that makes sense:
ValueError, TypeError and the like always; torch's RuntimeError (its generic
C++ error, raised for most bad arguments in gloo) only with
``MPICOLL_TORCH_STRICT=1`` (otherwise a differing type is a warning).
Differences are collected on every rank and reported together at the end
of each test.

``MPICOLL_TORCH_SELFTEST=1`` puts torch.distributed on the mpicoll side too
(gloo against itself): must pass, or a scenario is wrong.

What gloo (torch 2.13, CPU) does not do, and so is tested here on mpicoll's
side only (or in tests/mpi/test_process_group_mpi.py): all_gather and
all_to_all with sizes that differ by rank, all_gather_into_tensor into a
stacked (size, ...) output, int16 and unsigned integers wider than 8 bits
in any call ("Invalid scalar type"; float8 too), complex tensors in gather,
scan and exscan; a send, recv or isend to a rank outside the group crashes
the process (SIGSEGV), so it is not tried. gloo silently reduces or
broadcasts the wrong elements of a non-contiguous tensor; mpicoll refuses
them as mpi4py does (BufferError).
"""

from __future__ import annotations

import datetime
import math
import os
import socket
import warnings

import pytest
from mpi4py import MPI

import mpicoll

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.interface,
    # torch 2.13 renamed these two all_gather_single and reduce_scatter_single
    pytest.mark.filterwarnings(
        "ignore:`torch.distributed.(all_gather_into_tensor|"
        "reduce_scatter_tensor)` is deprecated:FutureWarning"),
]
WORLD = MPI.COMM_WORLD
SELFTEST = os.environ.get("MPICOLL_TORCH_SELFTEST") == "1"
STRICT = os.environ.get("MPICOLL_TORCH_STRICT") == "1"
TIMEOUT = 60  # seconds: gloo's own timeout and Work.wait's


class TorchCompatWarning(UserWarning):
    """mpicoll raised another exception type than torch's RuntimeError."""


@pytest.fixture(scope="module")
def gloo():
    """torch.distributed (gloo) on the same ranks, on a port rank 0 found
    free and told the others; destroyed at the end of the module."""
    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("this torch has no torch.distributed with gloo")
    port = None
    if WORLD.rank == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    port = WORLD.bcast(port)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=WORLD.rank,
        world_size=WORLD.size, timeout=datetime.timedelta(seconds=TIMEOUT))
    try:
        yield Torch()
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def pg(gloo):
    if SELFTEST:
        return Torch()
    return mpicoll.ProcessGroup(WORLD)


class Torch:
    """torch.distributed's functions on ``group`` (None: the default one),
    called as ``mpicoll.ProcessGroup``'s methods are (``algorithm=`` is
    ignored). Scenarios pass ``async_op`` by keyword: torch has ``group``
    in its place."""

    def __init__(self, group=None) -> None:
        self.group = group

    def rank(self) -> int:
        return dist.get_rank(self.group)

    def size(self) -> int:
        return dist.get_world_size(self.group)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        function = getattr(dist, name)

        def call(*args, algorithm="auto", **kwargs):
            return function(*args, group=self.group, **kwargs)

        call.__name__ = name
        return call

    def batch_isend_irecv(self, ops):
        return dist.batch_isend_irecv(ops)


def is_torch(face) -> bool:
    return isinstance(face, Torch)


def rop(face, name):
    """ReduceOp ``name`` (SUM, PRODUCT, ...) of ``face``'s kind."""
    return getattr(dist.ReduceOp if is_torch(face) else mpicoll.ReduceOp,
                   name)


def p2p(face, name, tensor, peer, tag=0):
    """A P2POp of ``face``'s kind: ``name`` is "isend" or "irecv"."""
    if is_torch(face):
        return dist.P2POp(getattr(dist, name), tensor, peer, face.group, tag)
    return mpicoll.P2POp(getattr(face, name), tensor, peer, tag)


def completed(work) -> bool:
    """``is_completed()`` after ``wait()``: mpicoll's must say True;
    torch's Work may still say False for a moment (gloo's reduce_scatter
    with uneven sizes), so it is not asked."""
    return work.is_completed() if isinstance(work, mpicoll.Work) else True


def done(ret, async_op):
    """Complete an async call; what the call returned, as a plain value."""
    if async_op:
        ret.wait()
        return "work" if completed(ret) else "work, not completed by wait()"
    return "none" if ret is None else f"returned {type(ret).__name__}"


def algorithms(collective):
    return ["auto", *mpicoll.algorithms(collective)]


BITWISE = ("BAND", "BOR", "BXOR")


def tval(q, shape=(5,), dtype=torch.float32, salt=0, op="SUM"):
    """Rank ``q``'s input: small integers, exact in every dtype and order
    of reduction (products: 1s and 2s; negative ones too where the dtype
    is signed)."""
    n = math.prod(shape)
    i = torch.arange(n)
    if op == "PRODUCT":
        v = 1 + ((i + q + salt) % 3 == 0).long()
    elif op in BITWISE:
        v = (i * 37 + q * 11 + salt * 5) % 64
    else:
        v = (i * 7 + q * 5 + salt * 3) % 11
        if dtype.is_signed:
            v = v - 5
    if dtype == torch.bool:
        v = v % 2 == 1
    elif dtype.is_complex:
        v = torch.complex(v.double(), ((i + q) % 2).double()).to(dtype)
    else:
        v = v.to(dtype)
    return v.reshape(shape)


# ------------------------------------------------------- comparing


class Outcome:
    def __init__(self, values=None, moved=(), exc=None) -> None:
        self.values, self.moved, self.exc = values, moved, exc


def outcome(scenario, face, **params) -> Outcome:
    watched = []

    def watch(t):
        watched.append((t, t.data_ptr()))
        return t

    try:
        values = scenario(face, watch, **params)
    except Exception as exc:
        return Outcome(exc=exc)
    moved = [i for i, (t, ptr) in enumerate(watched) if t.data_ptr() != ptr]
    return Outcome(values, moved)


def describe(exc) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}({first[:160]!r})"


class Diffs:
    """Differences found on this rank; :meth:`finish` fails the test on
    every rank with every rank's list."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def add(self, what: str) -> None:
        self.found.append(f"[rank {WORLD.rank}] {what}")

    def compare(self, what, want: Outcome, got: Outcome, *,
                superset_ok=False) -> None:
        if want.exc is not None and got.exc is not None:
            self.raised_alike(what, want.exc, got.exc)
        elif want.exc is not None:
            if not superset_ok:
                self.add(f"{what}: torch raised {describe(want.exc)}, "
                         "mpicoll raised nothing")
        elif got.exc is not None:
            self.add(f"{what}: torch returned, mpicoll raised "
                     f"{describe(got.exc)}")
        else:
            self.equal(what, want.values, got.values)
            if got.moved:
                self.add(f"{what}: not zero-copy: watched tensors "
                         f"{got.moved} have a new data_ptr()")

    def equal(self, what, want, got) -> None:
        if len(want) != len(got):
            self.add(f"{what}: {len(got)} results, torch's {len(want)}")
            return
        for k, (a, b) in enumerate(zip(want, got)):
            if isinstance(a, torch.Tensor):
                if not isinstance(b, torch.Tensor) or a.dtype != b.dtype or \
                        a.shape != b.shape or not torch.equal(a, b):
                    self.add(f"{what}: result {k}: mpicoll {b!r}, "
                             f"torch {a!r}")
            elif a != b:
                self.add(f"{what}: result {k}: mpicoll {b!r}, torch {a!r}")

    def raised_alike(self, what, want: BaseException, got: BaseException):
        if SELFTEST:
            if type(got) is not type(want):
                self.add(f"{what}: {describe(got)} vs {describe(want)}")
            return
        if not isinstance(got, mpicoll.MpicollError):
            self.add(f"{what}: mpicoll raised {describe(got)}, not an "
                     f"MpicollError (torch: {describe(want)})")
        elif not isinstance(got, type(want)):
            line = (f"{what}: mpicoll raised {type(got).__name__} "
                    f"({', '.join(c.__name__ for c in type(got).__mro__[1:-2])}"
                    f"), not a {type(want).__name__} as torch: "
                    f"{describe(want)}")
            if isinstance(want, RuntimeError) and not STRICT:
                warnings.warn(line, TorchCompatWarning, stacklevel=2)
            else:
                self.add(line)

    def finish(self) -> None:
        every = [d for rank in WORLD.allgather(self.found) for d in rank]
        assert not every, f"{len(every)} differences:\n" + "\n".join(every)


@pytest.fixture
def diffs():
    return Diffs()


def check(diffs, what, scenario, gloo, pg, names=("auto",),
          superset_ok=False, **params):
    """``scenario`` on gloo once, then on mpicoll with each algorithm of
    ``names``."""
    want = outcome(scenario, gloo, **params)
    for algorithm in names:
        got = outcome(scenario, pg, algorithm=algorithm, **params)
        diffs.compare(f"{what} [{algorithm}]", want, got,
                      superset_ok=superset_ok)


# ----------------------------------------------------- the scenarios


def all_reduce(face, watch, algorithm="auto", *, dtype, shape, op,
               async_op):
    t = watch(tval(face.rank(), shape, dtype, op=op))
    ret = face.all_reduce(t, rop(face, op), async_op=async_op,
                          algorithm=algorithm)
    return [t, done(ret, async_op)]


def reduce(face, watch, algorithm="auto", *, dst, dtype, op, async_op):
    t = watch(tval(face.rank(), (3, 2), dtype, op=op))
    ret = face.reduce(t, dst, rop(face, op), async_op=async_op,
                      algorithm=algorithm)
    # elsewhere torch leaves partial results in t (gloo does), mpicoll
    # leaves it as it was: only dst's tensor is defined
    return [t if face.rank() == dst else None, done(ret, async_op)]


def broadcast(face, watch, algorithm="auto", *, src, dtype, shape,
              async_op):
    t = watch(tval(face.rank(), shape, dtype, salt=src))
    ret = face.broadcast(t, src, async_op=async_op, algorithm=algorithm)
    return [t, done(ret, async_op)]


def all_gather(face, watch, algorithm="auto", *, dtype, shape, async_op):
    outs = [watch(torch.zeros(shape, dtype=dtype))
            for _ in range(face.size())]
    ret = face.all_gather(outs, tval(face.rank(), shape, dtype),
                          async_op=async_op, algorithm=algorithm)
    return [*outs, done(ret, async_op)]


def all_gather_into_tensor(face, watch, algorithm="auto", *, dtype, shape,
                           async_op, inplace=False):
    p, r = face.size(), face.rank()
    out = watch(torch.zeros((p * shape[0], *shape[1:]), dtype=dtype))
    if inplace:  # the input is the output's own block
        inp = out[r * shape[0]:(r + 1) * shape[0]]
        inp.copy_(tval(r, shape, dtype))
    else:
        inp = tval(r, shape, dtype)
    ret = face.all_gather_into_tensor(out, inp, async_op=async_op,
                                      algorithm=algorithm)
    return [out, done(ret, async_op)]


def reduce_scatter(face, watch, algorithm="auto", *, dtype, op, sizes,
                   async_op):
    p, r = face.size(), face.rank()
    ins = [tval(r, (sizes[j], 2), dtype, salt=j, op=op) for j in range(p)]
    out = watch(torch.full((sizes[r], 2), 3, dtype=dtype))
    ret = face.reduce_scatter(out, ins, rop(face, op), async_op=async_op,
                              algorithm=algorithm)
    return [out, done(ret, async_op)]


def reduce_scatter_tensor(face, watch, algorithm="auto", *, dtype, op,
                          shape, async_op):
    p, r = face.size(), face.rank()
    inp = tval(r, (p * shape[0], *shape[1:]), dtype, op=op)
    out = watch(torch.zeros(shape, dtype=dtype))
    ret = face.reduce_scatter_tensor(out, inp, rop(face, op),
                                     async_op=async_op, algorithm=algorithm)
    return [out, inp, done(ret, async_op)]


def gather(face, watch, algorithm="auto", *, dst, dtype, async_op):
    p, r = face.size(), face.rank()
    rows = [watch(torch.zeros(2, 3, dtype=dtype)) for _ in range(p)] \
        if r == dst else None
    ret = face.gather(tval(r, (2, 3), dtype), rows, dst, async_op=async_op,
                      algorithm=algorithm)
    return [*(rows or []), done(ret, async_op)]


def scatter(face, watch, algorithm="auto", *, src, dtype, async_op):
    p, r = face.size(), face.rank()
    parts = [tval(q, (4,), dtype, salt=src) for q in range(p)] \
        if r == src else None
    mine = watch(torch.zeros(4, dtype=dtype))
    ret = face.scatter(mine, parts, src, async_op=async_op,
                       algorithm=algorithm)
    return [mine, done(ret, async_op)]


def block(src, dst, rows, cols=2, dtype=torch.float32):
    """What rank ``src`` sends rank ``dst``."""
    v = (torch.arange(rows * cols) + 100 * src + 10 * dst) % 127
    return v.to(dtype).reshape(rows, cols)


def all_to_all(face, watch, algorithm="auto", *, dtype, rows, async_op):
    p, r = face.size(), face.rank()
    ins = [block(r, j, rows, 2, dtype) for j in range(p)]
    outs = [watch(torch.zeros(rows, 2, dtype=dtype)) for _ in range(p)]
    ret = face.all_to_all(outs, ins, async_op=async_op, algorithm=algorithm)
    return [*outs, done(ret, async_op)]


def all_to_all_single(face, watch, algorithm="auto", *, dtype, splits,
                      async_op):
    """``splits``: None (equal blocks of 2 rows), "both" (rows that
    differ by pair of ranks, zeros among them) or "output" (only
    output_split_sizes given)."""
    p, r = face.size(), face.rank()

    def rows(i, j):
        return 2 if splits in (None, "output") else (i + 2 * j) % 3

    inp = torch.cat([block(r, j, rows(r, j), 3, dtype) for j in range(p)])
    out = watch(torch.zeros(sum(rows(i, r) for i in range(p)), 3,
                            dtype=dtype))
    outs = [rows(i, r) for i in range(p)]
    ins = [rows(r, j) for j in range(p)]
    if splits is None:
        ret = face.all_to_all_single(out, inp, async_op=async_op,
                                     algorithm=algorithm)
    elif splits == "output":
        ret = face.all_to_all_single(out, inp, output_split_sizes=outs,
                                     async_op=async_op, algorithm=algorithm)
    else:
        ret = face.all_to_all_single(out, inp, outs, ins, async_op=async_op,
                                     algorithm=algorithm)
    return [out, done(ret, async_op)]


def barrier(face, watch, algorithm="auto", *, async_op):
    return [done(face.barrier(async_op=async_op, algorithm=algorithm),
                 async_op)]


# ---------------------------------------------------------- tests


@pytest.mark.parametrize("algorithm", algorithms("allreduce"))
def test_all_reduce_as_gloo(gloo, pg, diffs, algorithm):
    for k, (dtype, op, shape) in enumerate([
            (torch.float32, "SUM", (2, 3)), (torch.float64, "MAX", (7,)),
            (torch.int64, "PRODUCT", ()), (torch.int32, "MIN", (0,)),
            (torch.uint8, "BXOR", (3, 1, 2)), (torch.int32, "BOR", (129,)),
            (torch.int8, "BAND", (4,)), (torch.float16, "SUM", (33, 3))]):
        for async_op in (k % 2 == 1, k % 2 == 0):
            check(diffs, f"all_reduce {dtype} {op} {shape} async={async_op}",
                  all_reduce, gloo, pg, [algorithm], dtype=dtype,
                  shape=shape, op=op, async_op=async_op)
    diffs.finish()


def test_reduce_as_gloo(gloo, pg, diffs):
    p = WORLD.size
    for dst in range(p):
        for k, (dtype, op) in enumerate([(torch.float32, "SUM"),
                                         (torch.int64, "MAX")]):
            check(diffs, f"reduce dst={dst} {dtype} {op}", reduce, gloo, pg,
                  algorithms("reduce"), dst=dst, dtype=dtype, op=op,
                  async_op=bool((dst + k) % 2))
    diffs.finish()


DATA_DTYPES = [torch.float32, torch.int64, torch.bfloat16, torch.bool,
               torch.uint8, torch.complex64, torch.float16, torch.int32]


def test_broadcast_as_gloo(gloo, pg, diffs):
    """Pure data movement: every dtype gloo has, bfloat16 and bool too."""
    for src in range(WORLD.size):
        for k in range(2):
            dtype = DATA_DTYPES[(2 * src + k) % len(DATA_DTYPES)]
            shape = [(5,), (2, 3), (), (0,)][(src + k) % 4]
            check(diffs, f"broadcast src={src} {dtype} {shape}", broadcast,
                  gloo, pg, algorithms("bcast"), src=src, dtype=dtype,
                  shape=shape, async_op=k == 1)
    diffs.finish()


def test_all_gather_as_gloo(gloo, pg, diffs):
    for k, dtype in enumerate(DATA_DTYPES):
        shape = [(3,), (2, 2), (), (0,)][k % 4]
        check(diffs, f"all_gather {dtype} {shape}", all_gather, gloo, pg,
              algorithms("allgatherv"), dtype=dtype, shape=shape,
              async_op=k % 2 == 1)
    diffs.finish()


def test_all_gather_into_tensor_as_gloo(gloo, pg, diffs):
    for k, (dtype, shape) in enumerate([(torch.float32, (3,)),
                                        (torch.int64, (2, 3)),
                                        (torch.bfloat16, (1, 2, 2)),
                                        (torch.bool, (4,))]):
        for inplace in (False, True):
            check(diffs, f"all_gather_into_tensor {dtype} {shape} "
                  f"inplace={inplace}", all_gather_into_tensor, gloo, pg,
                  algorithms("allgather"), dtype=dtype, shape=shape,
                  inplace=inplace, async_op=bool((k + inplace) % 2))
    diffs.finish()


def test_reduce_scatter_as_gloo(gloo, pg, diffs):
    p = WORLD.size
    for k, (dtype, op, sizes) in enumerate([
            (torch.float32, "SUM", [2] * p),
            (torch.int64, "MAX", [(q + 1) % 3 for q in range(p)]),
            (torch.int32, "BXOR", [1] * p)]):
        check(diffs, f"reduce_scatter {dtype} {op} sizes={sizes}",
              reduce_scatter, gloo, pg, algorithms("reduce_scatter"),
              dtype=dtype, op=op, sizes=sizes, async_op=k % 2 == 1)
    diffs.finish()


def test_reduce_scatter_tensor_as_gloo(gloo, pg, diffs):
    for k, (dtype, op, shape) in enumerate([
            (torch.float32, "SUM", (3,)), (torch.int64, "MIN", (2, 3)),
            (torch.float64, "PRODUCT", (1,)), (torch.int32, "BAND", (4, 1))]):
        check(diffs, f"reduce_scatter_tensor {dtype} {op} {shape}",
              reduce_scatter_tensor, gloo, pg,
              algorithms("reduce_scatter_block"), dtype=dtype, op=op,
              shape=shape, async_op=k % 2 == 0)
    diffs.finish()


def test_gather_and_scatter_as_gloo(gloo, pg, diffs):
    """(gloo's gather takes no complex tensors.)"""
    real = [d for d in DATA_DTYPES if not d.is_complex]
    for root in range(WORLD.size):
        dtype = real[root % len(real)]
        check(diffs, f"gather dst={root} {dtype}", gather, gloo, pg,
              algorithms("gather"), dst=root, dtype=dtype,
              async_op=root % 2 == 1)
        dtype = DATA_DTYPES[root % len(DATA_DTYPES)]
        check(diffs, f"scatter src={root} {dtype}", scatter, gloo, pg,
              algorithms("scatter"), src=root, dtype=dtype,
              async_op=root % 2 == 0)
    diffs.finish()


def test_all_to_all_as_gloo(gloo, pg, diffs):
    for k, (dtype, rows) in enumerate([(torch.float32, 2),
                                       (torch.int64, 1),
                                       (torch.bfloat16, 0)]):
        check(diffs, f"all_to_all {dtype} rows={rows}", all_to_all, gloo,
              pg, algorithms("alltoallv"), dtype=dtype, rows=rows,
              async_op=k % 2 == 1)
    for k, dtype in enumerate([torch.float32, torch.int32, torch.bool]):
        check(diffs, f"all_to_all_single {dtype}", all_to_all_single, gloo,
              pg, algorithms("alltoall"), dtype=dtype, splits=None,
              async_op=k % 2 == 1)
        for splits in ("both", "output"):
            check(diffs, f"all_to_all_single {dtype} splits={splits}",
                  all_to_all_single, gloo, pg, algorithms("alltoallv"),
                  dtype=dtype, splits=splits, async_op=k % 2 == 0)
    diffs.finish()


def test_barrier_as_gloo(gloo, pg, diffs):
    for async_op in (False, True, False):
        check(diffs, f"barrier async={async_op}", barrier, gloo, pg,
              algorithms("barrier"), async_op=async_op)
    diffs.finish()


def point_to_point(face, watch, algorithm="auto"):
    """Blocking send/recv round a ring (evens send first), recv from any
    source, isend/irecv and batch_isend_irecv with both neighbours."""
    p, r = face.size(), face.rank()
    right, left = (r + 1) % p, (r - 1) % p
    got = watch(torch.zeros(2, 3))
    sources = []
    for turn in ((0, 1) if r % 2 == 0 else (1, 0)):
        if turn == 0:
            sources.append(face.send(tval(r, (2, 3)), right, tag=1))
        else:
            sources.append(face.recv(got, left, tag=1))
    anyone = watch(torch.zeros(4, dtype=torch.int64))
    recv = face.irecv(anyone, tag=2)  # any source
    send = face.isend(tval(r, (4,), torch.int64), right, tag=2)
    send.wait()
    recv.wait()
    flags = [completed(send), completed(recv)]
    from_left = watch(torch.zeros(3, dtype=torch.float64))
    from_right = watch(torch.zeros(2, 2, dtype=torch.int32))
    works = face.batch_isend_irecv([
        p2p(face, "irecv", from_left, left, 3),
        p2p(face, "irecv", from_right, right, 4),
        p2p(face, "isend", tval(r, (3,), torch.float64), right, 3),
        p2p(face, "isend", tval(r, (2, 2), torch.int32), left, 4)])
    for w in works:
        w.wait()
    flags += [completed(w) for w in works]
    return [got, anyone, from_left, from_right, *sources, *flags,
            len(works)]


def test_point_to_point_as_gloo(gloo, pg, diffs):
    if WORLD.size == 1:
        pytest.skip("gloo refuses a send to the sending rank itself")
    check(diffs, "send/recv, isend/irecv, batch_isend_irecv", point_to_point,
          gloo, pg)
    diffs.finish()


# ------------------------------------------ what gloo does not do


def uneven_rows(i, j):
    return (i + 2 * j) % 3


def uneven_all_gather(face, watch, algorithm="auto"):
    p, r = face.size(), face.rank()
    outs = [watch(torch.zeros(q % 3 + 1, 2)) for q in range(p)]
    face.all_gather(outs, tval(r, (r % 3 + 1, 2)), algorithm=algorithm)
    return outs


def uneven_all_to_all(face, watch, algorithm="auto"):
    p, r = face.size(), face.rank()
    outs = [watch(torch.zeros(uneven_rows(i, r), 2)) for i in range(p)]
    face.all_to_all(outs, [block(r, j, uneven_rows(r, j)) for j in range(p)],
                    algorithm=algorithm)
    return outs


def stacked_all_gather_into_tensor(face, watch, algorithm="auto"):
    out = watch(torch.zeros(face.size(), 3))
    face.all_gather_into_tensor(out, tval(face.rank(), (3,)),
                                algorithm=algorithm)
    return [out]


def complex_gather(face, watch, algorithm="auto"):
    p, r = face.size(), face.rank()
    rows = [watch(torch.zeros(2, dtype=torch.complex64)) for _ in range(p)] \
        if r == p - 1 else None
    face.gather(tval(r, (2,), torch.complex64), rows, p - 1,
                algorithm=algorithm)
    return rows or []


def all_reduce_and_broadcast_of(dtype):
    def scenario(face, watch, algorithm="auto"):
        t = watch(tval(face.rank(), (5,), dtype))
        face.all_reduce(t, rop(face, "MAX"), algorithm=algorithm)
        b = watch(tval(face.rank(), (2, 2), dtype))
        face.broadcast(b, 0, algorithm=algorithm)
        return [t, b]

    def expected(p, r):
        most = tval(0, (5,), dtype).long()
        for q in range(1, p):
            most = torch.maximum(most, tval(q, (5,), dtype).long())
        return [most.to(dtype), tval(0, (2, 2), dtype)]

    return scenario, expected


NOT_IN_GLOO = {
    # name: (scenario, expected(p, r): what it returns on rank r of p)
    "all_gather with sizes that differ by rank": (
        uneven_all_gather,
        lambda p, r: [tval(q, (q % 3 + 1, 2)) for q in range(p)]),
    "all_to_all with sizes that differ by rank pair": (
        uneven_all_to_all,
        lambda p, r: [block(i, r, uneven_rows(i, r)) for i in range(p)]),
    "all_gather_into_tensor into a stacked (size, n) output": (
        stacked_all_gather_into_tensor,
        lambda p, r: [torch.stack([tval(q, (3,)) for q in range(p)])]),
    "gather of complex64 tensors": (
        complex_gather,
        lambda p, r: [tval(q, (2,), torch.complex64) for q in range(p)]
        if r == p - 1 else []),
    **{f"all_reduce MAX and broadcast of {dtype}":
       all_reduce_and_broadcast_of(dtype)
       for dtype in (torch.int16, torch.uint16, torch.uint32, torch.uint64)},
}


@pytest.mark.parametrize("what", list(NOT_IN_GLOO))
def test_calls_gloo_does_not_do(gloo, pg, diffs, what):
    """Probed on gloo: where gloo refuses the call on every rank, mpicoll's
    result is checked against values computed locally and the comparison
    skipped, naming gloo's error; where gloo takes it, compared as above."""
    if SELFTEST:
        pytest.skip("gloo against gloo")
    scenario, expected = NOT_IN_GLOO[what]
    want = outcome(scenario, gloo)
    refused = WORLD.allgather(want.exc is not None)
    if not any(refused):
        diffs.compare(what, want, outcome(scenario, pg))
        diffs.finish()
        return
    assert all(refused), f"gloo refused {what} on some ranks only"
    got = outcome(scenario, pg)
    if got.exc is not None:
        diffs.add(f"{what}: mpicoll raised {describe(got.exc)}")
    else:
        diffs.equal(what, expected(WORLD.size, WORLD.rank), got.values)
        if got.moved:
            diffs.add(f"{what}: not zero-copy: {got.moved}")
    diffs.finish()
    pytest.skip(f"gloo does not implement {what} ({describe(want.exc)}); "
                "mpicoll checked against values computed locally")


def test_scan_and_exscan_not_in_torch(pg):
    """torch.distributed has no scan: mpicoll's, on torch tensors, against
    values computed locally."""
    if SELFTEST:
        pytest.skip("torch.distributed has no scan or exscan")
    r = WORLD.rank
    for collective in ("scan", "exscan"):
        for algorithm in algorithms(collective):
            t = tval(r, (2, 3), torch.int64)
            pointer = t.data_ptr()
            getattr(pg, collective)(t, mpicoll.ReduceOp.SUM,
                                    algorithm=algorithm)
            upto = r + 1 if collective == "scan" else r
            want = sum(tval(q, (2, 3), torch.int64) for q in range(upto)) \
                if upto else tval(r, (2, 3), torch.int64)
            assert t.data_ptr() == pointer
            assert torch.equal(t, want), (collective, algorithm)


# ------------------------------------------------------ zero-copy


def into_views(face, watch, algorithm="auto"):
    """Results land in views: a slice of a bigger tensor (neighbours
    untouched), a 0-dim tensor, a transposed (Fortran-ordered) one, and
    the list tensors of all_gather keep their identity."""
    p, r = face.size(), face.rank()
    whole = torch.full((10,), -1.0)
    part = watch(whole[2:7])
    part.copy_(tval(r, (5,)))
    face.all_reduce(part, algorithm=algorithm)
    scalar = watch(torch.tensor(float(r + 1)))
    face.all_reduce(scalar, rop(face, "MAX"), algorithm=algorithm)
    transposed = watch(tval(r, (2, 3)).t())
    face.all_reduce(transposed, algorithm=algorithm)
    outs = [watch(torch.zeros(3)) for _ in range(p)]
    ids = [id(t) for t in outs]
    face.all_gather(outs, tval(r, (3,)))
    return [whole, scalar, transposed, *outs, [id(t) for t in outs] == ids]


def test_results_land_in_the_callers_tensors(gloo, pg, diffs):
    check(diffs, "views", into_views, gloo, pg, algorithms("allreduce"))
    diffs.finish()


def test_mpi4py_face_takes_tensors_as_mpi4py_does():
    """mpi4py 4 takes DLPack objects (torch CPU tensors); mpicoll.Comm the
    same, zero-copy, against the raw communicator doing the same."""
    raw = WORLD.Dup()
    comm = mpicoll.Comm(WORLD)
    p, r = WORLD.size, WORLD.rank
    try:
        for algorithm in algorithms("allreduce"):
            for dtype in (torch.float32, torch.int64, torch.float16,
                          torch.complex64):
                want, got = tval(r, (2, 3), dtype), tval(r, (2, 3), dtype)
                raw.Allreduce(MPI.IN_PLACE, want, MPI.SUM)
                pointer = got.data_ptr()
                comm.Allreduce(MPI.IN_PLACE, got, MPI.SUM,
                               algorithm=algorithm)
                assert got.data_ptr() == pointer
                assert torch.equal(got, want), (algorithm, dtype)
            want, got = torch.zeros(4, dtype=torch.int32), \
                torch.zeros(4, dtype=torch.int32)
            raw.Allreduce(tval(r, (4,), torch.int32), want, MPI.MAX)
            comm.Allreduce(tval(r, (4,), torch.int32), got, MPI.MAX,
                           algorithm=algorithm)
            assert torch.equal(got, want), algorithm
            want, got = tval(r, (5,), torch.bool), tval(r, (5,), torch.bool)
            raw.Allreduce(MPI.IN_PLACE, want, MPI.LOR)
            comm.Iallreduce(MPI.IN_PLACE, got, MPI.LOR,
                            algorithm=algorithm).Wait()
            assert torch.equal(got, want), algorithm
        for algorithm in algorithms("bcast"):
            want, got = tval(r, (3, 2)), tval(r, (3, 2))
            raw.Bcast(want, root=p - 1)
            comm.Bcast(got, root=p - 1, algorithm=algorithm)
            assert torch.equal(got, want), algorithm
        for algorithm in algorithms("allgather"):
            want = torch.zeros(3 * p, dtype=torch.int32)
            got = torch.zeros(3 * p, dtype=torch.int32)
            raw.Allgather(tval(r, (3,), torch.int32), want)
            pointer = got.data_ptr()
            comm.Allgather(tval(r, (3,), torch.int32), got,
                           algorithm=algorithm)
            assert got.data_ptr() == pointer
            assert torch.equal(got, want), algorithm
        for algorithm in algorithms("alltoall"):
            send = torch.cat([block(r, j, 2) for j in range(p)])
            want, got = torch.zeros_like(send), torch.zeros_like(send)
            raw.Alltoall(send, want)
            comm.Alltoall(send, got, algorithm=algorithm)
            assert torch.equal(got, want), algorithm
        # refused alike: each mpicoll error is an instance of mpi4py's
        for what, make, op in [
                ("requires_grad", lambda: torch.ones(3, requires_grad=True),
                 MPI.SUM),
                ("not contiguous", lambda: torch.ones(4, 4)[:, ::2], MPI.SUM),
                ("bfloat16 (no MPI type: bytes)",
                 lambda: torch.ones(3, dtype=torch.bfloat16), MPI.SUM)]:
            try:
                raw.Allreduce(MPI.IN_PLACE, make(), op)
            except Exception as exc:
                want = exc
            else:
                pytest.fail(f"mpi4py took a tensor {what}")
            with pytest.raises(type(want)) as got:
                comm.Allreduce(MPI.IN_PLACE, make(), op)
            assert isinstance(got.value, mpicoll.MpicollError), what
            if isinstance(want, MPI.Exception):
                assert got.value.Get_error_class() == \
                    want.Get_error_class(), what
    finally:
        raw.Free()


def test_non_contiguous_tensors_are_refused(pg):
    """gloo takes these and reduces or broadcasts the wrong elements (the
    first n of the storage); mpicoll refuses them, as mpi4py does."""
    if SELFTEST:
        pytest.skip("gloo takes non-contiguous tensors")
    strided = torch.arange(16.0).reshape(4, 4)[:, ::2]
    for call in (lambda: pg.all_reduce(strided),
                 lambda: pg.broadcast(strided, 0),
                 lambda: pg.all_gather([torch.zeros(4, 2)] * WORLD.size,
                                       strided),
                 lambda: pg.all_to_all_single(
                     torch.zeros(WORLD.size, 2),
                     torch.zeros(WORLD.size, 4)[:, ::2])):
        with pytest.raises(mpicoll.BufferSpecError) as got:
            call()
        assert isinstance(got.value, BufferError)


# --------------------------------------------------------- errors


def invalid_calls(p, r):
    """(name, call(face)): calls every rank makes alike and torch refuses
    locally on every rank before any message moves."""
    f4, f8, i4 = torch.float32, torch.float64, torch.int32
    z = torch.zeros
    cases = [
        ("all_gather: size+1 tensors",
         lambda g: g.all_gather([z(2) for _ in range(p + 1)], z(2))),
        ("all_gather: dtypes differ",
         lambda g: g.all_gather([z(2, dtype=i4) for _ in range(p)], z(2))),
        ("all_gather: own slot of another size",
         lambda g: g.all_gather([z(3) for _ in range(p)], z(2))),
        ("all_gather_into_tensor: wrong size",
         lambda g: g.all_gather_into_tensor(z(3 * p + 1), z(3))),
        ("all_gather_into_tensor: dtypes differ",
         lambda g: g.all_gather_into_tensor(z(3 * p, dtype=f8), z(3))),
        ("reduce_scatter: size+1 inputs",
         lambda g: g.reduce_scatter(z(1), [z(1) for _ in range(p + 1)])),
        ("reduce_scatter: dtypes differ",
         lambda g: g.reduce_scatter(z(1, dtype=i4), [z(1) for _ in range(p)])),
        ("reduce_scatter_tensor: wrong size",
         lambda g: g.reduce_scatter_tensor(z(3), z(3 * p + 1))),
        ("reduce_scatter_tensor: dtypes differ",
         lambda g: g.reduce_scatter_tensor(z(2, dtype=i4), z(2 * p))),
        ("all_to_all: size+1 tensors",
         lambda g: g.all_to_all([z(1) for _ in range(p + 1)],
                                [z(1) for _ in range(p + 1)])),
        ("all_to_all: dtypes differ",
         lambda g: g.all_to_all([z(1, dtype=i4) for _ in range(p)],
                                [z(1) for _ in range(p)])),
        ("all_to_all_single: split sizes do not sum",
         lambda g: g.all_to_all_single(z(2 * p), z(2 * p), [2] * p,
                                       [3] * p)),
        ("all_to_all_single: size+1 split sizes",
         lambda g: g.all_to_all_single(z(2 * p), z(2 * p), [2] * (p + 1),
                                       [2] * (p + 1))),
        ("all_to_all_single: dtypes differ",
         lambda g: g.all_to_all_single(z(2 * p, dtype=f8), z(2 * p, dtype=f4))),
        ("all_to_all_single: input not contiguous",
         lambda g: g.all_to_all_single(z(p, 2), z(p, 4)[:, ::2])),
        ("all_reduce: op is not an op",
         lambda g: g.all_reduce(z(2), op=object())),
        ("all_reduce: None for the tensor", lambda g: g.all_reduce(None)),
        ("all_reduce: a list for the tensor",
         lambda g: g.all_reduce([1.0, 2.0])),
        ("all_reduce: BAND on float32",
         lambda g: g.all_reduce(z(2), rop(g, "BAND"))),
        ("all_reduce: MAX on complex64",
         lambda g: g.all_reduce(z(2, dtype=torch.complex64), rop(g, "MAX"))),
        ("all_reduce async: BOR on float64",
         lambda g: g.all_reduce(z(2, dtype=f8), rop(g, "BOR"),
                                async_op=True)),
        ("broadcast: src = size", lambda g: g.broadcast(z(2), p)),
        ("broadcast: src = -1", lambda g: g.broadcast(z(2), -1)),
        ("reduce: dst = size + 3", lambda g: g.reduce(z(2), p + 3)),
        ("gather: dst = size", lambda g: g.gather(z(2), None, p)),
        ("scatter: src = size", lambda g: g.scatter(z(2), None, p)),
        ("send: negative tag", lambda g: g.send(z(2), (r + 1) % p, tag=-1)),
        ("batch_isend_irecv: an op that is not isend/irecv",
         lambda g: g.batch_isend_irecv([
             dist.P2POp(dist.broadcast, z(1), (r + 1) % p) if is_torch(g)
             else mpicoll.P2POp(g.broadcast, z(1), (r + 1) % p)])),
    ]
    if p > 1:
        cases += [
            ("all_gather: size-1 tensors",
             lambda g: g.all_gather([z(2) for _ in range(p - 1)], z(2))),
            ("all_gather: the list mixes dtypes",
             lambda g: g.all_gather([z(2, dtype=f8 if q == r else i4)
                                     for q in range(p)], z(2, dtype=f8))),
        ]
    return cases


def test_invalid_calls_raise_as_torch(gloo, pg, diffs):
    """Every rank makes the same invalid call; each side raises, mpicoll's
    error an instance of torch's (RuntimeError: see the module doc).
    ``op="average"`` is left out: torch takes no op strings at all (a
    TypeError), mpicoll takes them (an unknown name is a ValueError)."""
    for name, call in invalid_calls(WORLD.size, WORLD.rank):
        def scenario(face, watch, algorithm="auto", call=call):
            work = call(face)
            if work is not None:  # torch raises some errors in wait()
                work.wait()
            return []

        want = outcome(scenario, gloo)
        if want.exc is None:  # a case torch takes is no invalid call
            diffs.add(f"{name}: torch raised nothing (bad case)")
            continue
        diffs.compare(name, want, outcome(scenario, pg))
    x = tval(WORLD.rank, (3,))  # every rank raised locally: still usable
    pg.all_reduce(x)
    assert torch.equal(x, sum(tval(q, (3,)) for q in range(WORLD.size)))
    diffs.finish()


# ----------------------------------- dtypes and tensors gloo also takes


def test_tensors_that_require_grad(gloo, pg, diffs):
    """gloo takes leaf tensors that require grad (``dist.broadcast(param,
    0)`` syncing a model's parameters is common); DLPack refuses to export
    them."""
    def scenario(face, watch, algorithm="auto"):
        r = face.rank()
        t = watch(torch.zeros(3, requires_grad=True))
        with torch.no_grad():
            t.copy_(tval(r, (3,)))
        face.broadcast(t, 0, algorithm=algorithm)
        param = watch(torch.nn.Parameter(tval(r, (2, 2))))
        face.all_reduce(param, algorithm=algorithm)
        outs = [torch.zeros(2) for _ in range(face.size())]
        face.all_gather(outs, torch.ones(2, requires_grad=True))
        return [t.detach(), param.detach(), *outs]

    check(diffs, "requires_grad", scenario, gloo, pg)
    diffs.finish()


ALL_DTYPES = [torch.float32, torch.float64, torch.float16, torch.int64,
              torch.int32, torch.int16, torch.int8, torch.uint8,
              torch.complex64, torch.complex128,
              # gloo reduces these; mpicoll refuses: MPI has no bfloat16
              # type (it travels as bytes), and its ops on bool are the
              # logical ones (LAND, LOR, LXOR), not mapped from torch's yet
              pytest.param(torch.bfloat16, marks=pytest.mark.xfail(
                  strict=True, reason="bfloat16 reductions are refused")),
              pytest.param(torch.bool, marks=pytest.mark.xfail(
                  strict=True, reason="torch's ops on bool not mapped"))]
ALL_OPS = ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_every_dtype_and_op_as_gloo(gloo, pg, diffs, dtype):
    """all_reduce of each dtype with each op, as gloo: the same result, or
    both refuse (mpicoll may take what gloo refuses: MPI has PRODUCT on
    complex). bool and bfloat16 last: gloo reduces both."""
    for k, op in enumerate(ALL_OPS):
        for shape in [(7,), [(2, 3), (), (0,), (65,)][k % 4]]:
            check(diffs, f"all_reduce {dtype} {op} {shape}", all_reduce,
                  gloo, pg, superset_ok=True, dtype=dtype, shape=shape,
                  op=op, async_op=k % 2 == 1)
    diffs.finish()
