"""Tier 2: ``mpicoll.ProcessGroup`` (torch.distributed's calls) on NumPy
arrays, checked against results computed locally: every input is a function
of the rank, so every rank knows every rank's input. Every call, several
dtypes and shapes, every root, ``async_op`` False and True, and every
algorithm of the collective forced (``"auto"`` and each name of
``mpicoll.algorithms(collective)``); sync calls are repeated on the same
tensors (the engine replays them). Errors that every rank raises locally
must be ``mpicoll.MpicollError``s that are also ``ValueError`` or
``TypeError`` as Python would have it. ``tests/mpi/test_torch_mpi.py`` compares
the same calls with torch.distributed itself."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll import P2POp, ProcessGroup, ReduceOp

pytestmark = [pytest.mark.mpi, pytest.mark.interface]
WORLD = MPI.COMM_WORLD
TIMEOUT = 60  # seconds for Work.wait: a hang fails instead of blocking

SHAPES = [(5,), (2, 3), (), (3, 1, 2), (0,), (17,), (129, 7)]


def algorithms(collective):
    return ["auto", *mpicoll.algorithms(collective)]


class DLPackOnly:
    """A tensor type that exports nothing but DLPack (as a torch CPU tensor
    or a JAX array does): a view of ``array``, so results land in it."""

    def __init__(self, array) -> None:
        self.array = array
        self.shape = array.shape

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


# ------------------------------------------------------------ inputs

# op name -> (ReduceOp member, NumPy fold, dtypes it is checked on)
OPS = {
    "sum": (ReduceOp.SUM, np.add, [np.float64, np.float32, np.int32,
                                   np.int64, np.uint8, np.int8, np.float16,
                                   np.complex128]),
    "prod": (ReduceOp.PRODUCT, np.multiply, [np.float64, np.int64, np.int8,
                                             np.float32, np.complex128]),
    "min": (ReduceOp.MIN, np.minimum, [np.float64, np.float32, np.int32,
                                       np.uint8, np.int16]),
    "max": (ReduceOp.MAX, np.maximum, [np.float64, np.float32, np.int64,
                                       np.int8, np.uint16]),
    "band": (ReduceOp.BAND, np.bitwise_and, [np.int32, np.int64, np.uint8,
                                             np.int8, np.uint16]),
    "bor": (ReduceOp.BOR, np.bitwise_or, [np.int32, np.int64, np.uint8]),
    "bxor": (ReduceOp.BXOR, np.bitwise_xor, [np.int64, np.uint8, np.int16]),
}


def val(q, shape=(5,), dtype=np.int64, salt=0, op="sum"):
    """Rank ``q``'s input: small integers, so that every reduction is exact
    in every dtype and order (products: 1s and 2s; integer overflow wraps
    the same way in MPI and NumPy)."""
    n = int(np.prod(shape, dtype=np.int64))
    i = np.arange(n)
    if op == "prod":
        v = 1 + ((i + q + salt) % 3 == 0)
    elif op in ("band", "bor", "bxor"):
        v = (i * 37 + q * 11 + salt * 5) % 64
    else:
        v = (i * 7 + q * 5 + salt * 3) % 11
    v = v.astype(dtype)
    if np.issubdtype(np.dtype(dtype), np.complexfloating):
        v = v + 1j * ((i + q) % 2)
    return v.reshape(shape)


def fold(op, arrays):
    ufunc = OPS[op][1]
    out = arrays[0].copy()
    for a in arrays[1:]:
        out = ufunc(out, a)
    return out


def spelled(op, k):
    """The op as the ReduceOp member or its string, alternating with k."""
    return OPS[op][0] if k % 2 == 0 else op


def cases():
    """(op, dtype, shape) triples: each op on each of its dtypes, the shapes
    rotating."""
    out = []
    for op, (_, _, dtypes) in OPS.items():
        for dtype in dtypes:
            out.append((op, dtype, SHAPES[len(out) % len(SHAPES)]))
    return out


CASES = cases()
LARGE = [("sum", np.float32, (70001,)), ("max", np.int64, (3, 40000))]
DTYPES = [np.float64, np.int32, np.uint8, np.complex128, np.float32,
          np.int64]


def run(call, *args, async_op, **kwargs):
    """``call(*args, async_op=async_op, **kwargs)``; async: a Work, waited
    on and then completed; sync: None, as torch.distributed returns."""
    out = call(*args, async_op=async_op, **kwargs)
    if async_op:
        assert isinstance(out, mpicoll.Work), type(out)
        out.wait(timeout=TIMEOUT)
        assert out.is_completed()
    else:
        assert out is None, out


def same(got, want, what=""):
    got = np.asarray(got.array if isinstance(got, DLPackOnly) else got)
    assert got.dtype == want.dtype and got.shape == want.shape, \
        (what, got.dtype, got.shape, want.dtype, want.shape)
    assert np.array_equal(got, want), (what, got, want)


@pytest.fixture(scope="module")
def pg():
    return ProcessGroup(WORLD)


# --------------------------------------------------------- the group


def test_group_wraps_communicators():
    default = ProcessGroup()
    assert (default.rank(), default.size()) == (WORLD.rank, WORLD.size)
    assert isinstance(default.comm, mpicoll.Comm)
    wrapped = mpicoll.Comm(WORLD)
    same_comm = ProcessGroup(wrapped)
    assert same_comm.comm is wrapped
    assert (same_comm.rank(), same_comm.size()) == (WORLD.rank, WORLD.size)
    assert isinstance(ProcessGroup(WORLD).comm, mpicoll.Comm)
    assert {m.name for m in ReduceOp} >= {"SUM", "PRODUCT", "MIN", "MAX",
                                           "BAND", "BOR", "BXOR"}


def test_sub_communicators():
    """A Split's group numbers its own ranks: roots and results are local."""
    half = WORLD.Split(WORLD.rank % 2, WORLD.rank)
    dup = WORLD.Dup()
    try:
        for base in (half, mpicoll.Comm(dup)):
            g = ProcessGroup(base)
            p, r = g.size(), g.rank()
            assert (p, r) == (base.Get_size(), base.Get_rank())
            x = val(r, (4,))
            g.all_reduce(x)
            same(x, fold("sum", [val(q, (4,)) for q in range(p)]))
            y = val(r, (3,), np.float64)
            g.broadcast(y, src=p - 1)
            same(y, val(p - 1, (3,), np.float64))
            out = np.zeros((p, 2), np.int64)
            g.all_gather_into_tensor(out, val(r, (2,)))
            same(out, np.stack([val(q, (2,)) for q in range(p)]))
    finally:
        half.Free()
        dup.Free()


# --------------------------------------------------------- reducing


@pytest.mark.parametrize("algorithm", algorithms("allreduce"))
def test_all_reduce(pg, algorithm):
    p, r = pg.size(), pg.rank()
    for k, (op, dtype, shape) in enumerate(CASES + LARGE):
        x = val(r, shape, dtype, op=op)
        want = fold(op, [val(q, shape, dtype, op=op) for q in range(p)])
        tensor = DLPackOnly(x) if k % 3 == 2 else x
        run(pg.all_reduce, tensor, spelled(op, k), async_op=k % 2 == 1,
            algorithm=algorithm)
        same(x, want, (op, dtype, shape))


@pytest.mark.parametrize("algorithm", algorithms("allreduce"))
def test_all_reduce_repeated_on_the_same_tensor(pg, algorithm):
    """A training loop: the same sync call on the same tensor, refilled in
    place, with the op as a keyword and positionally."""
    p, r = pg.size(), pg.rank()
    x = np.zeros((3, 4), np.float32)
    for step in range(4):
        x[...] = val(r, (3, 4), np.float32, salt=step)
        if step % 2:
            pg.all_reduce(x, ReduceOp.MAX, algorithm=algorithm)
            want = fold("max", [val(q, (3, 4), np.float32, salt=step)
                                for q in range(p)])
        else:
            pg.all_reduce(x, algorithm=algorithm)
            want = fold("sum", [val(q, (3, 4), np.float32, salt=step)
                                for q in range(p)])
        same(x, want, step)


@pytest.mark.parametrize("algorithm", algorithms("reduce"))
def test_reduce(pg, algorithm):
    p, r = pg.size(), pg.rank()
    k = 0
    for dst in range(p):
        for async_op in (False, True):
            op, dtype, shape = CASES[(dst * 5 + k) % len(CASES)]
            k += 1
            x = val(r, shape, dtype, op=op)
            run(pg.reduce, x, dst, spelled(op, k), async_op=async_op,
                algorithm=algorithm)
            if r == dst:
                same(x, fold(op, [val(q, shape, dtype, op=op)
                                  for q in range(p)]), (dst, op, dtype))
            else:  # only read elsewhere
                same(x, val(r, shape, dtype, op=op), (dst, op, dtype))
    x = np.zeros(6)
    for step in range(3):  # repeated, keywords
        x[...] = val(r, (6,), np.float64, salt=step)
        pg.reduce(x, dst=step % p, op="max", algorithm=algorithm)
        if r == step % p:
            same(x, fold("max", [val(q, (6,), np.float64, salt=step)
                                 for q in range(p)]))


@pytest.mark.parametrize("algorithm", algorithms("reduce_scatter_block"))
def test_reduce_scatter_tensor(pg, algorithm):
    p, r = pg.size(), pg.rank()
    for k, (op, dtype, shape) in enumerate(CASES):
        block = (k % 3, *shape[1:]) if shape else (1,)  # rows of dim 0
        whole = (p * block[0], *block[1:])
        inp = val(r, whole, dtype, op=op)
        out = np.zeros(block, dtype)
        run(pg.reduce_scatter_tensor, out, inp, spelled(op, k),
            async_op=k % 2 == 1, algorithm=algorithm)
        total = fold(op, [val(q, whole, dtype, op=op) for q in range(p)])
        same(out, total[r * block[0]:(r + 1) * block[0]], (op, dtype, block))
        same(inp, val(r, whole, dtype, op=op))  # input only read
    out = np.zeros(4, np.int64)
    for step in range(3):  # repeated on the same tensors
        inp = np.empty(4 * p, np.int64)
        inp[...] = val(r, (4 * p,), salt=step)
        pg.reduce_scatter_tensor(out, inp, algorithm=algorithm)
        total = fold("sum", [val(q, (4 * p,), salt=step) for q in range(p)])
        same(out, total[4 * r:4 * r + 4], step)


@pytest.mark.parametrize("algorithm", algorithms("reduce_scatter"))
def test_reduce_scatter_lists(pg, algorithm):
    """Per-rank sizes may differ (and be zero)."""
    p, r = pg.size(), pg.rank()
    sizes = [(q + 1) % 3 for q in range(p)]
    for k, (op, dtype, _) in enumerate(CASES[::2]):
        ins = [val(r, (sizes[j], 2), dtype, salt=j, op=op) for j in range(p)]
        out = np.full((sizes[r], 2), 99, dtype)
        run(pg.reduce_scatter, out, ins, spelled(op, k),
            async_op=k % 2 == 0, algorithm=algorithm)
        same(out, fold(op, [val(q, (sizes[r], 2), dtype, salt=r, op=op)
                            for q in range(p)]), (op, dtype))


@pytest.mark.parametrize("collective", ["scan", "exscan"])
def test_scan_and_exscan(pg, collective):
    r = pg.rank()
    call = getattr(pg, collective)
    for algorithm in algorithms(collective):
        for k, (op, dtype, shape) in enumerate(CASES[1::3]):
            x = val(r, shape, dtype, op=op)
            run(call, x, spelled(op, k), async_op=k % 2 == 1,
                algorithm=algorithm)
            upto = r + 1 if collective == "scan" else r
            want = fold(op, [val(q, shape, dtype, op=op)
                             for q in range(upto)]) if upto else \
                val(r, shape, dtype, op=op)  # exscan: rank 0's is kept
            same(x, want, (algorithm, op, dtype))


# ---------------------------------------------------------- rooted


@pytest.mark.parametrize("algorithm", algorithms("bcast"))
def test_broadcast(pg, algorithm):
    p, r = pg.size(), pg.rank()
    k = 0
    for src in range(p):
        for async_op in (False, True):
            dtype = DTYPES[k % len(DTYPES)]
            shape = SHAPES[k % len(SHAPES)]
            k += 1
            x = val(r, shape, dtype, salt=k)
            tensor = DLPackOnly(x) if k % 3 == 0 else x
            run(pg.broadcast, tensor, src, async_op=async_op,
                algorithm=algorithm)
            same(x, val(src, shape, dtype, salt=k), (src, dtype, shape))
    for src in (0, p - 1):  # large: pipelined and chunked paths
        x = val(r, (90001,), np.float64, salt=src)
        run(pg.broadcast, x, src, async_op=src > 0, algorithm=algorithm)
        same(x, val(src, (90001,), np.float64, salt=src), src)
    x = np.zeros((2, 5), np.float32)
    for step in range(3):  # repeated, keyword
        x[...] = val(r, (2, 5), np.float32, salt=step)
        pg.broadcast(x, src=(step + 1) % p, algorithm=algorithm)
        same(x, val((step + 1) % p, (2, 5), np.float32, salt=step))


@pytest.mark.parametrize("algorithm", algorithms("gather"))
def test_gather(pg, algorithm):
    p, r = pg.size(), pg.rank()
    k = 0
    for dst in range(p):
        for async_op in (False, True):
            dtype = DTYPES[k % len(DTYPES)]
            shape = SHAPES[k % len(SHAPES)]
            k += 1
            rows = [np.zeros(shape, dtype) for _ in range(p)] \
                if r == dst else None
            run(pg.gather, val(r, shape, dtype, salt=k), rows, dst,
                async_op=async_op, algorithm=algorithm)
            if r == dst:
                for q in range(p):
                    same(rows[q], val(q, shape, dtype, salt=k), (dst, q))
    rows = [np.zeros(3) for _ in range(p)] if r == p - 1 else None
    pg.gather(val(r, (3,), np.float64), gather_list=rows, dst=p - 1,
              algorithm=algorithm)
    if r == p - 1:
        for q in range(p):
            same(rows[q], val(q, (3,), np.float64))


@pytest.mark.parametrize("algorithm", algorithms("scatter"))
def test_scatter(pg, algorithm):
    p, r = pg.size(), pg.rank()
    k = 0
    for src in range(p):
        for async_op in (False, True):
            dtype = DTYPES[k % len(DTYPES)]
            shape = SHAPES[k % len(SHAPES)]
            k += 1
            parts = [val(q, shape, dtype, salt=k) for q in range(p)] \
                if r == src else None
            mine = np.zeros(shape, dtype)
            run(pg.scatter, mine, parts, src, async_op=async_op,
                algorithm=algorithm)
            same(mine, val(r, shape, dtype, salt=k), (src, dtype, shape))
    mine = np.zeros((2, 2), np.int32)
    parts = [val(q, (2, 2), np.int32) for q in range(p)] if r == 0 else None
    pg.scatter(mine, scatter_list=parts, src=0, algorithm=algorithm)
    same(mine, val(r, (2, 2), np.int32))


# --------------------------------------------------------- gathering


@pytest.mark.parametrize("algorithm", algorithms("allgatherv"))
def test_all_gather(pg, algorithm):
    p, r = pg.size(), pg.rank()
    for k, dtype in enumerate(DTYPES):
        shape = SHAPES[k % len(SHAPES)]
        outs = [np.zeros(shape, dtype) for _ in range(p)]
        if k % 3 == 1:
            outs = [DLPackOnly(o) for o in outs]
        run(pg.all_gather, outs, val(r, shape, dtype), async_op=k % 2 == 1,
            algorithm=algorithm)
        for q in range(p):
            same(outs[q], val(q, shape, dtype), (dtype, shape, q))
    for async_op in (False, True):  # uneven sizes, some empty
        outs = [np.zeros((q % 3, 2), np.int32) for q in range(p)]
        run(pg.all_gather, outs, val(r, (r % 3, 2), np.int32),
            async_op=async_op, algorithm=algorithm)
        for q in range(p):
            same(outs[q], val(q, (q % 3, 2), np.int32), q)


@pytest.mark.parametrize("algorithm", algorithms("allgather"))
def test_all_gather_into_tensor(pg, algorithm):
    """Output as the concatenation along dim 0 or stacked; the input may be
    the output's own block (in place)."""
    p, r = pg.size(), pg.rank()
    for k, dtype in enumerate(DTYPES):
        shape = SHAPES[k % len(SHAPES)] or (1,)
        parts = [val(q, shape, dtype) for q in range(p)]
        stacked = k % 2 == 0
        want = np.stack(parts) if stacked else np.concatenate(parts)
        out = np.zeros_like(want)
        run(pg.all_gather_into_tensor, out, parts[r], async_op=k % 3 == 1,
            algorithm=algorithm)
        same(out, want, (dtype, shape, stacked))
    for async_op in (False, True):  # in place: the input is out[r]
        out = np.zeros((p, 3), np.float64)
        out[r] = val(r, (3,), np.float64)
        run(pg.all_gather_into_tensor, out, out[r], async_op=async_op,
            algorithm=algorithm)
        same(out, np.stack([val(q, (3,), np.float64) for q in range(p)]))
    out = np.zeros(2 * p, np.int64)
    inp = np.zeros(2, np.int64)
    for step in range(3):  # repeated on the same tensors
        inp[...] = val(r, (2,), salt=step)
        pg.all_gather_into_tensor(out, inp, algorithm=algorithm)
        same(out, np.concatenate([val(q, (2,), salt=step)
                                  for q in range(p)]), step)


def block(src, dst, rows, cols, dtype, salt=0):
    """What rank ``src`` sends rank ``dst``: ``rows`` x ``cols``."""
    n = rows * cols
    return ((np.arange(n) + 100 * src + 10 * dst + salt) % 127).astype(
        dtype).reshape(rows, cols)


@pytest.mark.parametrize("algorithm", algorithms("alltoall"))
def test_all_to_all_single(pg, algorithm):
    p, r = pg.size(), pg.rank()
    for k, dtype in enumerate(DTYPES):
        rows, cols = k % 3, 1 + k % 2  # equal blocks of dim 0 (some empty)
        inp = np.concatenate([block(r, j, rows, cols, dtype, k)
                              for j in range(p)])
        out = np.full_like(inp, 7)
        run(pg.all_to_all_single, out, inp, async_op=k % 2 == 1,
            algorithm=algorithm)
        same(out, np.concatenate([block(i, r, rows, cols, dtype, k)
                                  for i in range(p)]), (dtype, rows, cols))
        same(inp, np.concatenate([block(r, j, rows, cols, dtype, k)
                                  for j in range(p)]))  # input only read


@pytest.mark.parametrize("algorithm", algorithms("alltoallv"))
def test_all_to_all_single_with_split_sizes(pg, algorithm):
    """Split sizes count rows of dim 0, as in torch; zeros allowed."""
    p, r = pg.size(), pg.rank()

    def rows(src, dst):
        return (src + 2 * dst) % 3

    for k, dtype in enumerate(DTYPES[:4]):
        inp = np.concatenate([block(r, j, rows(r, j), 3, dtype, k)
                              for j in range(p)])
        out = np.zeros((sum(rows(i, r) for i in range(p)), 3), dtype)
        run(pg.all_to_all_single, out, inp,
            [rows(i, r) for i in range(p)], [rows(r, j) for j in range(p)],
            async_op=k % 2 == 1, algorithm=algorithm)
        same(out, np.concatenate([block(i, r, rows(i, r), 3, dtype, k)
                                  for i in range(p)]), dtype)
    # only output_split_sizes given (the input splits equally), by keyword
    inp = np.concatenate([block(r, j, 2, 1, np.int64) for j in range(p)])
    out = np.zeros_like(inp)
    pg.all_to_all_single(out, inp, output_split_sizes=[2] * p,
                         algorithm=algorithm)
    same(out, np.concatenate([block(i, r, 2, 1, np.int64)
                              for i in range(p)]))


@pytest.mark.parametrize("algorithm", algorithms("alltoallv"))
def test_all_to_all_lists(pg, algorithm):
    p, r = pg.size(), pg.rank()

    def rows(src, dst):
        return (2 * src + dst) % 3

    for k, dtype in enumerate(DTYPES[:4]):
        ins = [block(r, j, rows(r, j), 2, dtype, k) for j in range(p)]
        outs = [np.zeros((rows(i, r), 2), dtype) for i in range(p)]
        run(pg.all_to_all, outs, ins, async_op=k % 2 == 0,
            algorithm=algorithm)
        for i in range(p):
            same(outs[i], block(i, r, rows(i, r), 2, dtype, k), (dtype, i))


@pytest.mark.parametrize("algorithm", algorithms("barrier"))
def test_barrier(pg, algorithm):
    for k in range(4):
        run(pg.barrier, async_op=k % 2 == 1, algorithm=algorithm)
    pg.barrier()


def test_async_calls_in_flight_together(pg):
    """Several Works outstanding at once, completed in reverse order."""
    p, r = pg.size(), pg.rank()
    a = val(r, (6,), np.float64)
    b = val(r, (4,), np.int32)
    c = val(r, (3,), np.int64)
    outs = [np.zeros(2, np.int64) for _ in range(p)]
    works = [pg.all_reduce(a, async_op=True),
             pg.broadcast(b, src=p - 1, async_op=True),
             pg.all_reduce(c, op="max", async_op=True, algorithm="ring"),
             pg.all_gather(outs, val(r, (2,)), async_op=True)]
    for w in reversed(works):
        w.wait(timeout=TIMEOUT)
    assert all(w.is_completed() for w in works)
    same(a, fold("sum", [val(q, (6,), np.float64) for q in range(p)]))
    same(b, val(p - 1, (4,), np.int32))
    same(c, fold("max", [val(q, (3,)) for q in range(p)]))
    for q in range(p):
        same(outs[q], val(q, (2,)))
    mpicoll.waitall([pg.barrier(async_op=True)], timeout=TIMEOUT)


# -------------------------------------------------- point-to-point


def test_send_recv(pg):
    p, r = pg.size(), pg.rank()
    if p == 1:
        pytest.skip("needs two ranks")
    right, left = (r + 1) % p, (r - 1) % p
    for k, dtype in enumerate(DTYPES[:3]):
        shape = SHAPES[k]
        got = np.zeros(shape, dtype)
        # evens send first, odds receive first: no rank waits on itself
        for turn in ((0, 1) if r % 2 == 0 else (1, 0)):
            if turn == 0:
                assert pg.send(val(r, shape, dtype), right, tag=k) is None
            elif k == 1:  # any source: the sender's rank is returned
                assert pg.recv(got, tag=k) == left
            else:
                assert pg.recv(got, left, k) == left
        same(got, val(left, shape, dtype), dtype)
    got = np.zeros(3)  # tags keep messages apart
    if r == 0:
        pg.send(np.full(3, 2.0), 1, tag=2)
        pg.send(np.full(3, 1.0), 1, tag=1)
    elif r == 1:
        assert pg.recv(got, src=0, tag=1) == 0
        same(got, np.full(3, 1.0))
        assert pg.recv(DLPackOnly(got), src=0, tag=2) == 0
        same(got, np.full(3, 2.0))


def test_isend_irecv(pg):
    p, r = pg.size(), pg.rank()
    right, left = (r + 1) % p, (r - 1) % p
    got = np.zeros((2, 3), np.float32)
    recv = pg.irecv(got, left, tag=4)
    send = pg.isend(val(r, (2, 3), np.float32), right, tag=4)
    assert isinstance(recv, mpicoll.Work)
    assert isinstance(send, mpicoll.Work)
    mpicoll.waitall([send, recv], timeout=TIMEOUT)
    assert recv.is_completed() and send.is_completed()
    same(got, val(left, (2, 3), np.float32))
    got = np.zeros(4, np.int64)  # any source
    recv = pg.irecv(got, tag=5)
    pg.isend(val(r, (4,)), right, 5).wait(timeout=TIMEOUT)
    recv.wait(timeout=TIMEOUT)
    same(got, val(left, (4,)))


def test_batch_isend_irecv(pg):
    """Both neighbours at once, the op as pg.isend/pg.irecv or their names,
    several dtypes and shapes."""
    p, r = pg.size(), pg.rank()
    right, left = (r + 1) % p, (r - 1) % p
    from_left = np.zeros((2, 2), np.int32)
    from_right = np.zeros(5, np.float64)
    works = pg.batch_isend_irecv([
        P2POp(pg.irecv, DLPackOnly(from_left), left, 7),
        P2POp("irecv", from_right, right),
        P2POp(pg.isend, val(r, (2, 2), np.int32), right, 7),
        P2POp("isend", val(r, (5,), np.float64), left)])
    assert len(works) == 4
    assert all(isinstance(w, mpicoll.Work) for w in works)
    mpicoll.waitall(works, timeout=TIMEOUT)
    assert all(w.is_completed() for w in works)
    same(from_left, val(left, (2, 2), np.int32))
    same(from_right, val(right, (5,), np.float64))
    assert pg.batch_isend_irecv([]) == []


# ------------------------------------------------------------ errors


def test_errors_raised_on_every_rank(pg):
    """Every rank makes the same wrong call, so each raises before any
    message moves; then the group still works. Each case names the
    exception types it must be (all are MpicollErrors)."""
    p, r = pg.size(), pg.rank()
    f8, i4 = np.float64, np.int32
    V, T = ValueError, TypeError
    B = mpicoll.BufferSpecError
    A = mpicoll.InvalidArgumentError
    cases = [
        # wrong list lengths
        ("all_gather: p+1 tensors", (B, V), lambda: pg.all_gather(
            [np.zeros(2) for _ in range(p + 1)], np.zeros(2))),
        ("all_gather: p-1 tensors", (B, V), lambda: pg.all_gather(
            [np.zeros(2) for _ in range(p - 1)], np.zeros(2))),
        ("reduce_scatter: p+1 inputs", (B, V), lambda: pg.reduce_scatter(
            np.zeros(1), [np.zeros(1) for _ in range(p + 1)])),
        ("all_to_all: p+1 tensors", (B, V), lambda: pg.all_to_all(
            [np.zeros(1) for _ in range(p + 1)],
            [np.zeros(1) for _ in range(p + 1)])),
        ("all_to_all_single: p+1 split sizes", (B, V),
         lambda: pg.all_to_all_single(np.zeros(p), np.zeros(p),
                                      [1] * p, [1] * (p + 1))),
        ("all_to_all_single: splits do not sum", (B, V),
         lambda: pg.all_to_all_single(np.zeros(2 * p), np.zeros(2 * p),
                                      [2] * p, [3] * p)),
        # mismatched dtypes and sizes
        ("all_gather: dtypes differ", (B, V), lambda: pg.all_gather(
            [np.zeros(2, i4) for _ in range(p)], np.zeros(2, f8))),
        ("all_gather: own slot of another size", (B, V),
         lambda: pg.all_gather([np.zeros(3) for _ in range(p)],
                               np.zeros(2))),
        ("all_gather_into_tensor: dtypes differ", (B, V),
         lambda: pg.all_gather_into_tensor(np.zeros(2 * p, np.float32),
                                           np.zeros(2, f8))),
        ("all_gather_into_tensor: wrong size", (B, V),
         lambda: pg.all_gather_into_tensor(np.zeros(2 * p + 1),
                                           np.zeros(2))),
        ("reduce_scatter_tensor: wrong size", (B, V),
         lambda: pg.reduce_scatter_tensor(np.zeros(2),
                                          np.zeros(2 * p + 1))),
        ("reduce_scatter_tensor: dtypes differ", (B, V),
         lambda: pg.reduce_scatter_tensor(np.zeros(2, i4),
                                          np.zeros(2 * p, f8))),
        ("reduce_scatter: dtypes differ", (B, V),
         lambda: pg.reduce_scatter(np.zeros(1, i4),
                                   [np.zeros(1, f8) for _ in range(p)])),
        ("all_to_all_single: dtypes differ", (B, V),
         lambda: pg.all_to_all_single(np.zeros(p, i4), np.zeros(p, f8))),
        ("all_to_all: dtypes differ", (B, V), lambda: pg.all_to_all(
            [np.zeros(1, i4) for _ in range(p)],
            [np.zeros(1, f8) for _ in range(p)])),
        # ops
        ("all_reduce: unknown op string", (A, V),
         lambda: pg.all_reduce(np.ones(2), op="average")),
        ("reduce: unknown op string", (A, V),
         lambda: pg.reduce(np.ones(2), 0, op="avg")),
        ("scan: unknown op string", (A, V),
         lambda: pg.scan(np.ones(2), op="nope")),
        ("reduce_scatter_tensor: unknown op string", (A, V),
         lambda: pg.reduce_scatter_tensor(np.ones(1), np.ones(p),
                                          op="mean")),
        ("all_reduce: op not an op", (A, T),
         lambda: pg.all_reduce(np.ones(2), op=object())),
        ("all_reduce: band on floats", (mpicoll.OpTypeError, T),
         lambda: pg.all_reduce(np.ones(2), op=ReduceOp.BAND)),
        ("exscan: bxor on complex", (mpicoll.OpTypeError, T),
         lambda: pg.exscan(np.ones(2, np.complex128), op="bxor")),
        # roots, peers, tags
        ("broadcast: src = size", (A, V),
         lambda: pg.broadcast(np.ones(2), src=p)),
        ("reduce: dst = -1", (A, V), lambda: pg.reduce(np.ones(2), dst=-1)),
        ("gather: dst = size + 3", (A, V),
         lambda: pg.gather(np.ones(2), None, dst=p + 3)),
        ("scatter: src = -1", (A, V),
         lambda: pg.scatter(np.ones(2), None, src=-1)),
        ("send: dst = size + 3", (A, V), lambda: pg.send(np.ones(1), p + 3)),
        ("recv: src = size + 3", (A, V), lambda: pg.recv(np.ones(1), p + 3)),
        ("isend: negative tag", (A, V),
         lambda: pg.isend(np.ones(1), (r + 1) % p, tag=-1)),
        ("batch_isend_irecv: bad op", (A, V), lambda: pg.batch_isend_irecv(
            [P2POp("isendrecv", np.ones(1), (r + 1) % p)])),
        # tensors
        ("all_reduce: a list for a tensor", (B, T),
         lambda: pg.all_reduce([1.0, 2.0])),
        ("broadcast: None for a tensor", (B, T),
         lambda: pg.broadcast(None)),
        ("all_reduce: not contiguous", (B, BufferError),
         lambda: pg.all_reduce(np.ones((4, 4))[:, ::2])),
        ("all_reduce: read-only", (B, BufferError),
         lambda: pg.all_reduce(np.frombuffer(bytes(16)))),
        ("all_reduce: unknown algorithm", (mpicoll.UnknownAlgorithmError, V),
         lambda: pg.all_reduce(np.ones(2), algorithm="no-such")),
        ("all_reduce async: unknown op string", (A, V),
         lambda: pg.all_reduce(np.ones(2), op="average", async_op=True)),
    ]
    if p > 1:  # (one rank: one block, one dtype)
        cases += [
            ("all_gather: the list mixes dtypes", (B, V),
             lambda: pg.all_gather([np.zeros(2, f8 if q == r else i4)
                                    for q in range(p)], np.zeros(2, f8))),
            ("all_to_all_single: uneven blocks", (B, V),
             lambda: pg.all_to_all_single(np.zeros(2 * p + 1),
                                          np.zeros(2 * p + 1))),
        ]
    wrong = []
    for name, kinds, call in cases:
        try:
            call()
        except Exception as exc:
            if not isinstance(exc, mpicoll.MpicollError) or \
                    not all(isinstance(exc, k) for k in kinds):
                bases = ", ".join(c.__name__ for c in type(exc).__mro__[1:-2])
                want = ", ".join(k.__name__ for k in kinds)
                wrong.append(f"{name}: raised {type(exc).__name__} ({bases}),"
                             f" want {want}: {exc}")
            elif f"rank {r}" not in str(exc):
                wrong.append(f"{name}: the message does not name the rank: "
                             f"{exc}")
        else:
            wrong.append(f"{name}: raised nothing")
    x = val(r, (3,))  # every rank raised locally: the group still works
    pg.all_reduce(x)
    same(x, fold("sum", [val(q, (3,)) for q in range(p)]))
    assert not wrong, "\n".join(wrong)
