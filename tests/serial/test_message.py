"""mpicoll.args.message against mpi4py's own parser, one process.

Every case is handed to mpicoll's parser and, the same argument, to a real
mpi4py call on a communicator over MPI.COMM_SELF: a distributed graph with
``k`` edges from this process to itself, so that ``Neighbor_alltoall(v)``
parses it as mpi4py parses a collective's buffer split into ``k`` blocks,
and moves its data. Both must accept it, selecting the same bytes (what
mpi4py's call sends from it, or where its call writes into it), or both
reject it, mpicoll's exception being an instance of mpi4py's type (with
the same MPI error class, or the same message).
"""

from __future__ import annotations

import array
import ctypes
import functools

import numpy as np
import pytest
from mpi4py import MPI

from mpicoll.device import hostmodel
from mpicoll.device import cuda
from mpicoll.errors import (BufferSpecError, InvalidArgumentError,
                            MPIArgumentError, MpicollError, OpTypeError,
                            RootError)
from mpicoll.args.checks import (
    check_alias,
    check_op,
    check_reduce_scatter,
    check_reduction,
    check_root,
)
from mpicoll.args.datatypes import pack, unpack
from mpicoll.args.message import (
    Message,
    VectorMessage,
    is_bottom,
    is_in_place,
    message,
    vector_message,
)

SELF = MPI.COMM_SELF
WHERE = {"rank": 0, "collective": "test"}
CAP = 256  # bytes a block may carry in the reference calls


# -- buffers mpi4py reaches through DLPack and the CUDA array interface ------

class DL:
    """Only DLPack (CPU), delegating to a NumPy array."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class DLv0(DL):
    """A DLPack exporter from before versions (no keywords)."""

    def __dlpack__(self):
        return self.a.__dlpack__()


class CudaDL(DL):
    """Claims CUDA memory (host memory really, so MPI can use it)."""

    def __dlpack__(self, stream=None, **kwargs):
        assert stream == -1
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return (2, 0)


class CAI:
    """Only ``__cuda_array_interface__`` over a NumPy array's memory."""

    def __init__(self, a, readonly=False, typestr=None, strides=None,
                 mask=None):
        self.a = a
        self.__cuda_array_interface__ = {
            "data": (a.ctypes.data, readonly), "shape": a.shape,
            "typestr": typestr or a.dtype.str, "strides": strides,
            "mask": mask, "version": 3}


class HostRuntime(hostmodel.ModelRuntime):
    def as_array(self, obj):
        return getattr(obj, "a", obj).view(hostmodel.DeviceArray)


@pytest.fixture(scope="module", autouse=True)
def device_runtimes():
    runtime = HostRuntime()
    kinds = (hostmodel.DeviceArray, CudaDL, CAI)
    for kind in kinds:
        cuda.register_runtime(kind, runtime)
    yield
    for kind in kinds:
        cuda.register_runtime(kind, None)


# -- the cases -------------------------------------------------------------------

def ints(n=12, dtype="i4"):
    return np.arange(1, n + 1, dtype=dtype) * 0x01010101 if \
        np.dtype(dtype).itemsize >= 4 else np.arange(1, n + 1, dtype=dtype)


def readonly(a):
    a.flags.writeable = False
    return a


CONTIG3 = MPI.INT.Create_contiguous(3).Commit()
VECTOR = MPI.INT.Create_vector(2, 1, 3).Commit()
INDEXED = MPI.INT.Create_indexed([1, 2], [0, 4]).Commit()
STRUCT = MPI.Datatype.Create_struct([1, 2], [0, 8], [MPI.DOUBLE, MPI.INT]
                                    ).Commit()
RESIZED = MPI.INT.Create_resized(0, 8).Commit()
UNCOMMITTED = MPI.INT.Create_contiguous(2)

SIMPLE = {
    # plain buffers, typed by their format
    "int32": lambda: ints(),
    "int64-l": lambda: ints(6, "l"),
    "int64-q": lambda: ints(6, "q"),
    "uint8": lambda: np.arange(12, dtype=np.uint8),
    "bool": lambda: np.arange(12) % 3 == 0,
    "float16": lambda: np.linspace(0, 1, 12, dtype=np.float16),
    "float64": lambda: np.linspace(0, 1, 6),
    "complex64": lambda: np.arange(6, dtype=np.complex64) * (1 + 2j),
    "complex128": lambda: np.arange(3, dtype=np.complex128) * (1 - 1j),
    "longdouble": lambda: np.arange(3, dtype=np.longdouble),
    "little-endian": lambda: ints(12, "<i4"),
    "fortran-2d": lambda: np.asfortranarray(ints().reshape(3, 4)),
    "c-2d": lambda: ints().reshape(2, 6),
    "0-d": lambda: np.array(7.5),
    "numpy-scalar": lambda: np.float64(7.5),
    "empty": lambda: np.zeros(0),
    "bytes": lambda: bytes(range(12)),
    "bytearray": lambda: bytearray(range(12)),
    "memoryview": lambda: memoryview(bytearray(range(12))),
    "array-i": lambda: array.array("i", range(6)),
    "array-d": lambda: array.array("d", range(6)),
    "array-u": lambda: array.array("u", "abcdef"),
    "ctypes": lambda: (ctypes.c_int * 6)(*range(6)),
    "in-place": lambda: MPI.IN_PLACE,
    # forms
    "[buf, INT]": lambda: [ints(), MPI.INT],
    "(buf, INT)": lambda: (ints(), MPI.INT),
    "[buf, 'i']": lambda: [ints(), "i"],
    "[buf, 'i4']": lambda: [ints(), "i4"],
    "[buf, 'd']": lambda: [ints(), "d"],
    "[buf, 'f8'] 5 ints": lambda: [ints(5), "f8"],
    "[buf, None]": lambda: [ints(), None],
    "[buf, 2]": lambda: [ints(), 2],
    "[buf, int64(2)]": lambda: [ints(), np.int64(2)],
    "[buf, True]": lambda: [ints(), True],
    "[buf, (2, 3)]": lambda: [ints(), (2, 3)],
    "[buf, [2, 3]]": lambda: [ints(), [2, 3]],
    "[buf, (None, 3)]": lambda: [ints(), (None, 3)],
    "[buf, (None, 6)]": lambda: [ints(), (None, 6)],
    "[buf, (0, 12)]": lambda: [ints(), (0, 12)],
    "[buf, 2, INT]": lambda: [ints(), 2, MPI.INT],
    "[buf, (2, 1), INT]": lambda: [ints(), (2, 1), MPI.INT],
    "[buf, 2, 3, INT]": lambda: [ints(), 2, 3, MPI.INT],
    "[buf, None, 3, 'i']": lambda: [ints(), None, 3, "i"],
    "[buf, 1, 1, DOUBLE]": lambda: [ints(), 1, 1, MPI.DOUBLE],
    "[buf, 2, None]": lambda: [ints(), 2, None],
    "[buf, 0, INT]": lambda: [ints(), 0, MPI.INT],
    "[buf, BYTE]": lambda: [ints(), MPI.BYTE],
    "[bytes, CHAR]": lambda: [bytes(range(12)), MPI.CHAR],
    "[datetime64, INT64]": lambda: [np.arange(6).astype("M8[s]"),
                                    MPI.INT64_T],
    "[structured, INT]": lambda: [np.zeros(3, "i4,i4"), MPI.INT],
    "[>i4, INT]": lambda: [ints(12, ">i4"), MPI.INT],
    "None, INT": lambda: [None, MPI.INT],
    "None, 0, INT": lambda: [None, 0, MPI.INT],
    "None, (0, 0), 'i'": lambda: [None, (0, 0), "i"],
    "BOTTOM, INT": lambda: [MPI.BOTTOM, MPI.INT],
    "IN_PLACE, INT": lambda: [MPI.IN_PLACE, MPI.INT],
    # derived datatypes
    "contiguous": lambda: [ints(), CONTIG3],
    "contiguous, 2": lambda: [ints(), 2, CONTIG3],
    "contiguous, (1, 1)": lambda: [ints(), (1, 1), CONTIG3],
    "vector": lambda: [ints(), 2, VECTOR],
    "vector inferred": lambda: [ints(), VECTOR],
    "indexed": lambda: [ints(), 1, INDEXED],
    "struct": lambda: [np.arange(6.0), 1, STRUCT],
    "resized": lambda: [ints(), 3, RESIZED],
    "INT_INT": lambda: [ints(), MPI.INT_INT],
    "DOUBLE_INT": lambda: [np.zeros(6), 2, MPI.DOUBLE_INT],
    "dup'd INT": lambda: [ints(), MPI.INT.Dup()],
    # DLPack, CUDA array interface, fake device arrays
    "dlpack": lambda: DL(ints()),
    "[dlpack, INT]": lambda: [DL(ints()), MPI.INT],
    "[dlpack, 2, 1, 'i']": lambda: [DL(ints()), 2, 1, "i"],
    "dlpack float16": lambda: DL(np.linspace(0, 1, 6, dtype=np.float16)),
    "dlpack bool": lambda: DL(np.arange(6) > 2),
    "dlpack complex": lambda: DL(np.arange(3, dtype=np.complex128)),
    "dlpack uint8": lambda: DL(np.arange(12, dtype=np.uint8)),
    "dlpack read-only": lambda: DL(readonly(ints())),
    "dlpack strided": lambda: DL(ints()[::2]),
    "dlpack v0": lambda: DLv0(ints()),
    "dlpack v0 read-only": lambda: DLv0(readonly(ints())),
    "dlpack datetime": lambda: DL(np.arange(3).astype("M8[s]")),
    "cuda dlpack": lambda: CudaDL(ints()),
    "[cuda dlpack, (2, 1), INT]": lambda: [CudaDL(ints()), (2, 1), MPI.INT],
    "cai": lambda: CAI(ints()),
    "cai float64": lambda: CAI(np.linspace(0, 1, 6)),
    "[cai, 3, 'i']": lambda: [CAI(ints()), 3, "i"],
    "cai read-only": lambda: CAI(ints(), readonly=True),
    "cai strided": lambda: CAI(ints(), strides=(8,)),
    "cai masked": lambda: CAI(ints(), mask=object()),
    "cai big-endian": lambda: CAI(ints(), typestr=">i4"),
    "[cai big-endian, INT]": lambda: [CAI(ints(), typestr=">i4"), MPI.INT],
    "cai unknown type": lambda: CAI(ints(), typestr="|V4"),
    "device array": lambda: ints().view(hostmodel.DeviceArray),
    "[device array, (2, 1)]": lambda: [ints().view(hostmodel.DeviceArray),
                                       (2, 1)],
    # rejected by mpi4py
    "None": lambda: None,
    "int": lambda: 3,
    "str": lambda: "abc",
    "list of ints": lambda: [1, 2],
    "[buf]": lambda: [ints()],
    "[]": lambda: [],
    "5 items": lambda: [ints(), 1, 2, 3, MPI.INT],
    "BOTTOM": lambda: MPI.BOTTOM,
    "None, None": lambda: [None, None],
    "None, 1": lambda: [None, 1],
    "None, 1, INT": lambda: [None, 1, MPI.INT],
    "[buf, 1.5]": lambda: [ints(), 1.5],
    "[buf, '2']": lambda: [ints(), "2"],
    "[buf, b'i']": lambda: [ints(), b"i"],
    "[buf, np.dtype]": lambda: [ints(), np.dtype("i4")],
    "[buf, 'zz']": lambda: [ints(), "zz"],
    "[buf, []]": lambda: [ints(), [[], 1]],
    "[buf, -1]": lambda: [ints(), -1],
    "[buf, (1, 99)]": lambda: [ints(), (1, 99)],
    "[buf, (1, 13)]": lambda: [ints(), (1, 13)],
    "[buf, (2, 1, 3)]": lambda: [ints(), (2, 1, 3)],
    "[buf, 1, INT, 5]": lambda: [ints(), 1, MPI.INT, 5],
    "[buf, 0, -1, INT]": lambda: [ints(), 0, -1, MPI.INT],
    "[buf, 2**70]": lambda: [ints(), 2**70],
    "[buf, [1], INT]": lambda: [ints(), [1], MPI.INT],
    "[buf, 1, 'zz']": lambda: [ints(), 1, "zz"],
    "[buf, 1, [1]]": lambda: [ints(), 1, [1]],
    "[buf, DATATYPE_NULL]": lambda: [ints(), MPI.DATATYPE_NULL],
    "[buf, 1, 1, DATATYPE_NULL]": lambda: [ints(), 1, 1, MPI.DATATYPE_NULL],
    "[buf, 1, DATATYPE_NULL]": lambda: [ints(), 1, MPI.DATATYPE_NULL],
    "[buf, LONG_DOUBLE_INT]": lambda: [ints(), MPI.LONG_DOUBLE_INT],
    "[buf, (None, 1), 'd']": lambda: [ints(), (None, 1), "d"],
    "uncommitted": lambda: [ints(), 1, UNCOMMITTED],
    "object": lambda: np.zeros(3, object),
    "structured": lambda: np.zeros(3, "i4,i4"),
    "S3": lambda: np.zeros(3, "S3"),
    "U3": lambda: np.zeros(3, "U3"),
    ">i4": lambda: ints(12, ">i4"),
    "datetime64": lambda: np.arange(3).astype("M8[s]"),
    "strided": lambda: ints()[::2],
    "[strided, INT]": lambda: [ints()[::2], MPI.INT],
    "strided memoryview": lambda: memoryview(bytearray(12))[::2],
    "read-only": lambda: readonly(ints()),
    "read-only bytes view": lambda: memoryview(bytes(12)),
}

READ_ONLY = {"object",  # mpi4py would write pointers into it
             "overlapping"}  # receive blocks overlap: MPI leaves it undefined

VECTOR_CASES = {
    "buf": lambda k: ints(7),
    "[buf, INT]": lambda k: [ints(7), MPI.INT],
    "[buf, 'i']": lambda k: [ints(), "i"],
    "[buf, 2]": lambda k: [ints(), 2],
    "[buf, int64(2)]": lambda k: [ints(), np.int64(2)],
    "[buf, 0-d array]": lambda k: [ints(), np.array(2)],
    "[buf, counts]": lambda k: [ints(), [3, 1, 2][:k]],
    "[buf, counts array]": lambda k: [ints(), np.array([3, 1, 2][:k])],
    "[buf, (counts, displs)]": lambda k: [ints(), ([3, 1, 2][:k],
                                                   [9, 0, 4][:k])],
    "[buf, (None, 3)]": lambda k: [ints(6), (None, 3)],
    "[buf, (2, 3)]": lambda k: [ints(), (2, 3)],
    "[buf, (None, None)]": lambda k: [ints(), (None, None)],
    "[buf, counts, INT]": lambda k: [ints(), [3, 1, 2][:k], MPI.INT],
    "[buf, (counts, displs), 'i']": lambda k: [ints(), ([1] * k,
                                                        [5, 1, 3][:k]), "i"],
    "[buf, counts, displs, INT]": lambda k: [ints(), [2] * k, [4, 0, 8][:k],
                                             MPI.INT],
    "[buf, None, 3, INT]": lambda k: [ints(6), None, 3, MPI.INT],
    "[buf, 2, None, 'd']": lambda k: [ints(), 2, None, "d"],
    "overlapping": lambda k: [ints(), [4] * k, [0] * k, MPI.INT],
    "bytes": lambda k: bytes(range(12)),
    "None, INT": lambda k: [None, MPI.INT],
    "None, zeros": lambda k: [None, [0] * k, [0] * k, MPI.INT],
    "derived": lambda k: [ints(), [1] * k, [3, 0, 1][:k], CONTIG3],
    "struct": lambda k: [np.arange(6.0), ([1] * k, [0, 1, 2][:k]), STRUCT],
    "dlpack": lambda k: [DL(ints()), [2] * k, "i"],
    "cai": lambda k: [CAI(ints()), ([2] * k, [6, 0, 3][:k]), MPI.INT],
    "device array": lambda k: ints().view(hostmodel.DeviceArray),
    # rejected by mpi4py
    "None": lambda k: None,
    "5 items": lambda k: [ints(), 1, 2, 3, MPI.INT],
    "[buf, [counts]] (a list does not split)": lambda k: [ints(), [[1], [0]]],
    "[buf, wrong number of counts]": lambda k: [ints(), [1] * (k + 1)],
    "[buf, 1.5]": lambda k: [ints(), 1.5],
    "[buf, {1}]": lambda k: [ints(), {1}],
    "[buf, 'ab']": lambda k: [ints(), "ab"],
    "[buf, counts, 'ab', INT]": lambda k: [ints(), [1] * k, "ab", MPI.INT],
    "[buf, (counts, 1.0)]": lambda k: [ints(), ([1] * k, 1.0)],
    "[buf, [-1]]": lambda k: [ints(), [-1] * k, MPI.INT],
    "[buf, counts, DATATYPE_NULL]": lambda k: [ints(), [1] * k,
                                               MPI.DATATYPE_NULL],
    "[buf, DATATYPE_NULL]": lambda k: [ints(), MPI.DATATYPE_NULL],
    "[7 ints, 'd']": lambda k: [ints(7), "d"],
    "[buf, 2**70]": lambda k: [ints(), [2**70] * k],
    "read-only": lambda k: readonly(ints()),
    "strided": lambda k: ints()[::2],
}


# -- what mpi4py does with them --------------------------------------------------

@functools.cache
def graph(k: int) -> MPI.Distgraphcomm:
    """k edges from this process to itself: neighbor collectives split
    buffers into k blocks, as a communicator of k ranks would."""
    return SELF.Create_dist_graph_adjacent([0] * k, [0] * k)


def mpi4py_reads(spec, k, vector):
    """The bytes mpi4py's call sends from ``spec``, per block. Received
    twice, into buffers filled with 0x00 and with 0xFF: a byte was sent
    where the two agree."""
    runs = []
    for fill in (0x00, 0xFF):
        out = np.full(k * CAP, fill, np.uint8)
        if vector:
            graph(k).Neighbor_alltoallv(spec, [out, (CAP, CAP), MPI.BYTE])
        else:
            graph(k).Neighbor_alltoall(spec, [out, MPI.BYTE])
        runs.append(out.reshape(k, CAP))
    sent = runs[0] == runs[1]
    blocks = []
    for i in range(k):
        n = CAP if sent[i].all() else int(sent[i].argmin())
        assert n < CAP and not sent[i][n:].any(), "a case too big for CAP"
        blocks.append(runs[0][i, :n].tobytes())
    return blocks


def mpi4py_writes(spec, k, vector, blocks):
    data = np.frombuffer(b"".join(blocks) or b"\0", np.uint8)
    if vector:
        sizes = [len(b) for b in blocks]
        graph(k).Neighbor_alltoallv([data, (sizes, None), MPI.BYTE], spec)
    else:
        graph(k).Neighbor_alltoall([data, len(blocks[0]), MPI.BYTE], spec)


def memory(spec) -> bytes:
    """The bytes of the buffer a case names."""
    obj = spec[0] if isinstance(spec, (list, tuple)) and spec else spec
    obj = getattr(obj, "a", obj)
    if isinstance(obj, np.ndarray):
        return obj.ravel(order="K").tobytes()
    if obj is None or obj is MPI.BOTTOM or obj is MPI.IN_PLACE:
        return b""
    return bytes(memoryview(obj).cast("B"))


def our_blocks(msg, k):
    """The bytes mpicoll's message selects, per block."""
    if isinstance(msg, Message):
        data = (pack(msg) if msg.derived else msg.array).tobytes()
        size = len(data) // k
        return [data[i * size:(i + 1) * size] for i in range(k)]
    if msg.derived:
        data, sizes = pack(msg).tobytes(), [c * msg.datatype.size
                                            for c in msg.counts]
        starts = np.cumsum([0, *sizes])
        return [data[s:s + n] for s, n in zip(starts, sizes)]
    return [msg.array[d:d + c].tobytes()
            for d, c in zip(msg.displs, msg.counts)]


def outcome(fn):
    try:
        return fn()
    except Exception as exc:
        return exc


def same_rejection(ours, theirs):
    assert isinstance(theirs, Exception), f"mpi4py accepted it: {theirs!r}"
    assert isinstance(ours, MpicollError), f"mpicoll accepted it: {ours!r}"
    assert isinstance(ours, type(theirs)), (type(ours).__mro__, theirs)
    assert "[rank 0] test: " in str(ours)
    if isinstance(theirs, MPI.Exception):
        assert ours.Get_error_class() == theirs.Get_error_class()
    else:
        text = theirs.args[0] if theirs.args else str(theirs)
        assert str(text) in str(ours)


def outside(error) -> bool:
    """Whether mpicoll refused data outside the buffer, which mpi4py hands
    to MPI (reading or writing past the buffer's end): not compared."""
    return isinstance(error, BufferSpecError) and (
        "the buffer holds" in str(error) or "MPI.BOTTOM" in str(error))


def compare(make, k, writable, vector):
    parse = vector_message if vector else message
    spec = make()
    ours = outcome(lambda: parse(spec, readonly=not writable, blocks=k,
                                 where=WHERE))
    if outside(ours):
        assert isinstance(ours, ValueError)
        return
    if writable:
        if isinstance(ours, Exception):
            theirs = outcome(lambda: mpi4py_writes(spec, k, vector, [b""] * k))
            return same_rejection(ours, theirs)
        rng = np.random.default_rng(len(repr(spec)))
        blocks = [rng.integers(0, 256, len(b), np.uint8).tobytes()
                  for b in our_blocks(ours, k)]
        mpi4py_writes(spec, k, vector, blocks)
        expected = make()  # our parse of a fresh copy, written by us
        msg = parse(expected, readonly=False, blocks=k, where=WHERE)
        if msg.derived:
            unpack(msg, np.frombuffer(b"".join(blocks) or b"\0", np.uint8))
        elif isinstance(msg, Message):
            msg.array[...] = np.frombuffer(b"".join(blocks), msg.unit)
        else:
            for d, c, b in zip(msg.displs, msg.counts, blocks):
                msg.array[d:d + c] = np.frombuffer(b, msg.unit)
        assert memory(spec) == memory(expected)
        assert our_blocks(ours, k) == blocks  # the view sees the writes
    theirs = outcome(lambda: mpi4py_reads(spec, k, vector))
    if isinstance(ours, Exception):
        return same_rejection(ours, theirs)
    assert not isinstance(theirs, Exception), f"mpi4py rejected: {theirs!r}"
    assert our_blocks(ours, k) == theirs


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("writable", [False, True], ids=["read", "write"])
@pytest.mark.parametrize("case", list(SIMPLE))
def test_simple_messages_as_mpi4py(case, writable, k):
    if writable and case in READ_ONLY:
        pytest.skip("mpi4py would write into an object array")
    compare(SIMPLE[case], k, writable, vector=False)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("writable", [False, True], ids=["read", "write"])
@pytest.mark.parametrize("case", list(VECTOR_CASES))
def test_vector_messages_as_mpi4py(case, writable, k):
    if writable and case in READ_ONLY:
        pytest.skip("receiving into overlapping blocks is undefined")
    compare(functools.partial(VECTOR_CASES[case], k), k, writable,
            vector=True)


# -- what the views are ------------------------------------------------------------

def test_views_share_the_callers_memory():
    a = ints()
    for spec in (a, [a, (2, 3)], [a, "d"], DL(a), [a, 1, 1, MPI.DOUBLE]):
        msg = message(spec, readonly=False, where=WHERE)
        assert type(msg.array) is np.ndarray and msg.array.ndim == 1
        assert np.shares_memory(msg.array, a)
    msg = message([a, (2, 3)], readonly=False, where=WHERE)
    msg.array[:] = -1
    assert a.tolist()[2:6] == [a[2], -1, -1, a[5]]
    assert msg.count == 2 and msg.offset == 12 and msg.unit == np.int32


def test_read_only_buffers_stay_read_only():
    a = readonly(ints())
    for spec in (a, DL(a), bytes(12), [memoryview(bytes(12)), "i"]):
        msg = message(spec, readonly=True, where=WHERE)
        assert not msg.array.flags.writeable


def test_blocks_divide_an_inferred_count_not_an_explicit_one():
    a = ints()
    assert message(a, readonly=True, blocks=3, where=WHERE).count == 4
    assert message(a, readonly=True, blocks=0, where=WHERE).count == 12
    msg = message([a, 2], readonly=True, blocks=3, where=WHERE)
    assert msg.count == 2 and msg.array.size == 6
    vec = vector_message(ints(7), readonly=True, blocks=3, where=WHERE)
    assert vec.counts == (3, 2, 2) and vec.displs == (0, 3, 5)
    vec = vector_message([a, (None, 4)], readonly=True, blocks=3,
                         where=WHERE)
    assert vec.displs == (0, 4, 8) and vec.array.size == 12


def test_the_export_is_held_while_the_message_lives():
    """As mpi4py holds a buffer during a call: a bytearray cannot resize."""
    data = bytearray(8)
    msg = message(data, readonly=False, where=WHERE)
    with pytest.raises(BufferError):
        data.append(1)
    del msg
    data.append(1)


def test_in_place_and_bottom():
    assert is_in_place(None) and is_in_place(MPI.IN_PLACE)
    assert not is_in_place(MPI.BOTTOM) and is_bottom(MPI.BOTTOM)
    msg = message(MPI.IN_PLACE, readonly=True, where=WHERE)
    assert msg.count == 0 and msg.datatype == MPI.UNSIGNED_CHAR


def test_null_ignores_the_argument():
    assert message(object(), readonly=False, null=True, where=WHERE) is None
    assert vector_message("junk", readonly=False, blocks=2, null=True,
                          where=WHERE) is None


def test_device_arrays_give_device_views():
    a = ints()
    for spec in (a.view(hostmodel.DeviceArray), CAI(a), CudaDL(a)):
        msg = message([spec, (3, 2), MPI.INT], readonly=False, where=WHERE)
        assert type(msg.array) is hostmodel.DeviceArray
        assert msg.array.tolist() == a[2:5].tolist()
        assert np.shares_memory(msg.array, a)


def test_a_runtime_view_that_is_a_copy_is_refused(monkeypatch):
    """Writes into a copy would never reach the caller's buffer."""
    monkeypatch.setattr(HostRuntime, "as_array",
                        lambda self, obj: obj.a.copy().view(
                            hostmodel.DeviceArray))
    with pytest.raises(BufferError, match="not the buffer's memory"):
        message(CAI(ints()), readonly=False, where=WHERE)


def test_derived_datatypes_on_device_memory_are_refused():
    with pytest.raises(BufferSpecError, match="device memory"):
        message([CAI(ints()), 1, CONTIG3], readonly=True, where=WHERE)


@pytest.mark.parametrize(("spec", "match"), [
    ([ints(), 99], "need bytes 0 to 396"),
    ([ints(), 1, 12, MPI.INT], "need bytes 48 to 52"),
    ([ints(), 4, VECTOR], "need bytes 0 to 64"),
    ([MPI.BOTTOM, 1, MPI.INT], "MPI.BOTTOM"),
])
def test_mpicoll_refuses_what_mpi4py_leaves_to_mpi(spec, match):
    """mpi4py passes these to MPI, which reads outside the buffer."""
    with pytest.raises(BufferSpecError, match=match) as info:
        message(spec, readonly=True, where=WHERE)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("spec", [
    [ints(), [4], [9], MPI.INT],
    [ints(), [1], [-1], MPI.INT],
    [None, [1], [0], MPI.INT],
])
def test_vector_blocks_must_lie_in_the_buffer(spec):
    with pytest.raises(BufferSpecError) as info:
        vector_message(spec, readonly=True, blocks=1, where=WHERE)
    assert isinstance(info.value, ValueError)


def test_a_null_datatype_is_refused_even_for_no_data():
    """MPICH takes ``Bcast([buf, 0, MPI.DATATYPE_NULL])``; mpicoll does
    not (``Gatherv`` with the same raises MPI.ERR_TYPE)."""
    with pytest.raises(MPIArgumentError) as info:
        message([ints(), 0, MPI.DATATYPE_NULL], readonly=True, where=WHERE)
    assert info.value.Get_error_class() == MPI.ERR_TYPE


# -- staging derived datatypes ------------------------------------------------------

@pytest.mark.parametrize(("datatype", "count", "unit"), [
    (CONTIG3, 2, np.int32), (VECTOR, 2, np.int32), (INDEXED, 1, np.int32),
    (MPI.INT_INT, 3, np.int32), (STRUCT, 1, None), (RESIZED, 3, np.int32)])
def test_pack_and_unpack_move_what_mpi_sends(datatype, count, unit):
    source = np.arange(48, dtype=np.uint8).view(np.int32) if unit else \
        np.arange(6.0)
    msg = message([source, count, datatype], readonly=True, where=WHERE)
    assert msg.derived and msg.array is None
    assert msg.unit == (None if unit is None else np.dtype(unit))
    packed = pack(msg)
    assert packed.dtype == (np.uint8 if unit is None else unit)
    sent = np.zeros(CAP, np.uint8)
    status = MPI.Status()
    SELF.Sendrecv([source, count, datatype], 0, 0, [sent, MPI.BYTE], 0, 0,
                  status)
    assert packed.tobytes() == sent[:status.Get_count(MPI.BYTE)].tobytes()
    target = np.zeros_like(source)
    unpack(message([target, count, datatype], readonly=False, where=WHERE),
           packed)
    native = np.zeros_like(source)
    SELF.Sendrecv([source, count, datatype], 0, 0, [native, count, datatype],
                  0, 0)
    assert target.tobytes() == native.tobytes()


def test_pack_and_unpack_vector_messages():
    source = ints()
    msg = vector_message([source, ([1, 2], [2, 0]), CONTIG3], readonly=True,
                         blocks=2, where=WHERE)
    packed = pack(msg)
    assert packed.tolist() == source[6:9].tolist() + source[0:6].tolist()
    target = np.zeros_like(source)
    unpack(vector_message([target, ([1, 2], [2, 0]), CONTIG3],
                          readonly=False, blocks=2, where=WHERE), packed)
    assert target.tolist() == [*source[:9].tolist(), 0, 0, 0]


# -- the checks MPI makes ------------------------------------------------------------

def test_mpi_errors_are_mpi_exceptions_with_their_class():
    error = RootError("bad root", error_class=MPI.ERR_ROOT, **WHERE)
    assert isinstance(error, MPI.Exception) and isinstance(error, ValueError)
    assert error.Get_error_class() == MPI.ERR_ROOT == error.error_class
    assert str(error) == "[rank 0] test: bad root"
    with pytest.raises(MPI.Exception):
        raise error


@pytest.mark.parametrize("root", [0, 99, -5, 1, True, 0.5, np.int32(0),
                                  np.array(0), "0", None, 2**40,
                                  MPI.PROC_NULL, MPI.ROOT, np.array([0]),
                                  float("nan"), float("inf")])
def test_roots_as_mpi_checks_them(root):
    theirs = outcome(lambda: SELF.Bcast(ints(), root=root))
    ours = outcome(lambda: check_root(root, 1, where=WHERE))
    if theirs is None:
        assert ours == 0
    else:
        same_rejection(ours, theirs)


OPS = ["SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "LXOR", "BAND", "BOR",
       "BXOR", "MAXLOC", "MINLOC", "REPLACE", "NO_OP"]
TYPES = [MPI.INT, MPI.DOUBLE, MPI.C_DOUBLE_COMPLEX, MPI.C_BOOL, MPI.BYTE,
         MPI.CHAR, MPI.WCHAR, MPI.FLOAT16_T, MPI.LONG_DOUBLE, MPI.INT_INT,
         MPI.DOUBLE_INT, CONTIG3]


@pytest.mark.parametrize("datatype", TYPES, ids=lambda t: t.Get_name())
@pytest.mark.parametrize("op", OPS)
def test_ops_on_datatypes_as_mpi_checks_them(op, datatype):
    op = getattr(MPI, op)

    def reduce():
        a, b = np.zeros(64, np.uint8), np.zeros(64, np.uint8)
        SELF.Reduce([a, 1, datatype], [b, 1, datatype], op=op)

    theirs = outcome(reduce)
    ours = outcome(lambda: check_op(op, datatype, where=WHERE))
    if theirs is None:
        assert ours is None
    else:
        same_rejection(ours, theirs)
        assert isinstance(ours, OpTypeError)
    assert outcome(lambda: check_op(op, datatype, where=WHERE)).__class__ \
        is ours.__class__  # cached


def test_user_ops_are_not_checked():
    op = MPI.Op.Create(lambda a, b, t: None)
    try:
        check_op(op, MPI.C_DOUBLE_COMPLEX, where=WHERE)
    finally:
        op.Free()


@pytest.mark.parametrize(("send", "recv"), [
    (np.zeros(2), np.zeros(3)), (np.zeros(2), np.zeros(2, "f4")),
    (np.zeros(2), np.zeros(3, "f4")), (np.zeros(2, "l"), np.zeros(2, "q")),
    ([np.zeros(2, "i4"), MPI.INT], [np.zeros(2, "i4"), MPI.INT.Dup()]),
    (np.zeros(2), np.zeros(2)), ([np.zeros(4), 2, MPI.DOUBLE], np.zeros(2)),
])
def test_reduction_buffers_as_mpi4py_checks_them(send, recv):
    theirs = outcome(lambda: SELF.Reduce(send, recv, op=MPI.SUM))

    def ours():
        check_reduction(message(send, readonly=True, where=WHERE),
                        message(recv, readonly=False, where=WHERE),
                        where=WHERE)

    if theirs is None:
        assert outcome(ours) is None
    else:
        same_rejection(outcome(ours), theirs)


@pytest.mark.parametrize(("send", "recv", "counts"), [
    (np.zeros(4), np.zeros(4), [4]), (np.zeros(4), np.zeros(4), [3]),
    (np.zeros(4), np.zeros(3), [4]), (np.zeros(4, "f4"), np.zeros(4), [4]),
    (None, np.zeros(4), [4]), (None, np.zeros(4), [2])])
def test_reduce_scatter_as_mpi4py_checks_it(send, recv, counts):
    theirs = outcome(lambda: SELF.Reduce_scatter(
        MPI.IN_PLACE if send is None else send, recv, counts))

    def ours():
        check_reduce_scatter(
            None if send is None else message(send, readonly=True,
                                              where=WHERE),
            message(recv, readonly=False, where=WHERE), counts, 0,
            where=WHERE)

    if theirs is None:
        assert outcome(ours) is None
    else:
        same_rejection(outcome(ours), theirs)


@pytest.mark.parametrize(("send", "recv", "rejected"), [
    (lambda r: r, lambda r: r, True),
    (lambda r: [r, (2, 1), MPI.DOUBLE], lambda r: [r, (2, 1), MPI.DOUBLE],
     True),
    (lambda r: [r, 0, MPI.DOUBLE], lambda r: [r, 0, MPI.DOUBLE], False),
    (lambda r: np.zeros(4), lambda r: r, False)])
def test_one_buffer_to_send_and_receive_is_mpis_err_buffer(send, recv,
                                                           rejected):
    r = np.zeros(4)
    theirs = outcome(lambda: SELF.Allreduce(send(r), recv(r), op=MPI.SUM))
    assert (theirs is not None) == rejected
    ours = outcome(lambda: check_alias(
        message(send(r), readonly=True, where=WHERE),
        message(recv(r), readonly=False, where=WHERE), where=WHERE))
    if rejected:
        same_rejection(ours, theirs)
    else:
        assert ours is None
    vector = vector_message(r, readonly=False, blocks=1, where=WHERE)
    assert isinstance(vector, VectorMessage)
    assert (outcome(lambda: check_alias(message(r, readonly=True,
                                                where=WHERE), vector,
                                        where=WHERE)) is not None)


def test_errors_are_invalid_argument_errors():
    for spec in ([ints(), "zz"], None, readonly(ints()), [ints(), -1]):
        with pytest.raises(InvalidArgumentError):
            message(spec, readonly=False, where=WHERE)
