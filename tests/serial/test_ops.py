"""mpicoll.schedule.ops: built-in ops against NumPy, MPI's type table,
aliasing, user ops."""

import tracemalloc

import numpy as np
import pytest

from mpicoll.schedule.ops import BUILTIN_NAMES, Op, builtin_op

DTYPES = [
    np.bool_,
    np.int8, np.int16, np.int32, np.int64,
    np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64,
    np.complex64, np.complex128,
]

# MPI-4.1 section 6.9.2: which type classes each predefined op is defined on,
# written as NumPy dtype kinds (i, u: integer; f: floating; c: complex;
# b: logical). Written out here independently of mpicoll.schedule.ops.
MPI_TYPE_TABLE = {
    "sum": "iufc",
    "prod": "iufc",
    "max": "iuf",
    "min": "iuf",
    "land": "iub",
    "lor": "iub",
    "lxor": "iub",
    "band": "iu",
    "bor": "iu",
    "bxor": "iu",
}

# Reference semantics, from Python operators rather than the ufuncs the
# module uses. Logical ops give 1/0 in the operand type, as in C.
REFERENCE = {
    "sum": lambda a, b: a + b,
    "prod": lambda a, b: a * b,
    "max": lambda a, b: np.where(a >= b, a, b),
    "min": lambda a, b: np.where(a <= b, a, b),
    "land": lambda a, b: (a != 0) & (b != 0),
    "lor": lambda a, b: (a != 0) | (b != 0),
    "lxor": lambda a, b: (a != 0) ^ (b != 0),
    "band": lambda a, b: a & b,
    "bor": lambda a, b: a | b,
    "bxor": lambda a, b: a ^ b,
}

SUPPORTED = [
    (name, dt) for name in MPI_TYPE_TABLE for dt in DTYPES
    if np.dtype(dt).kind in MPI_TYPE_TABLE[name]
]
UNSUPPORTED = [
    (name, dt) for name in MPI_TYPE_TABLE for dt in DTYPES
    if np.dtype(dt).kind not in MPI_TYPE_TABLE[name]
]


def operands(dtype, n=257, seed=0):
    """Two arrays with zeros, ties, negatives (where signed) and, for
    integers, values that overflow in sum/prod (wrapping like C)."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        a, b = rng.integers(0, 2, n).astype(bool), rng.integers(0, 2, n).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        b = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        a[:20] = rng.integers(0, 3, 20)  # small values: zeros and ties
        b[:20] = rng.integers(0, 3, 20)
    else:
        a = rng.integers(-50, 50, n).astype(dt) / 4
        b = rng.integers(-50, 50, n).astype(dt) / 4
        if dt.kind == "c":
            a = a + 1j * rng.integers(-50, 50, n).astype(dt) / 8
            b = b + 1j * rng.integers(-50, 50, n).astype(dt) / 8
        a, b = a.astype(dt), b.astype(dt)
        b[:10] = a[:10]  # ties
        a[10:20] = 0
    return a, b


def reference(name, a, b):
    with np.errstate(over="ignore"):
        return REFERENCE[name](a, b).astype(a.dtype)


def test_builtin_names():
    assert set(BUILTIN_NAMES) == set(MPI_TYPE_TABLE)
    for name in BUILTIN_NAMES:
        op = builtin_op(name)
        assert isinstance(op, Op)
        assert op.name == name
        assert op.commutative
        assert builtin_op(name.upper()) is op  # shared, case-insensitive
    assert builtin_op("nosuchop") is None


@pytest.mark.parametrize(
    "name,dtype", SUPPORTED, ids=[f"{n}-{np.dtype(d).name}" for n, d in SUPPORTED]
)
def test_builtin_matches_numpy(name, dtype):
    op = builtin_op(name)
    assert op.supports(dtype)
    assert op.supports(np.dtype(dtype))
    a, b = operands(dtype)
    a0, b0 = a.copy(), b.copy()
    dst = np.empty_like(a)
    op.apply(a, b, dst)
    assert dst.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(dst, reference(name, a, b))
    np.testing.assert_array_equal(a, a0)  # inputs untouched
    np.testing.assert_array_equal(b, b0)


@pytest.mark.parametrize(
    "name,dtype", UNSUPPORTED,
    ids=[f"{n}-{np.dtype(d).name}" for n, d in UNSUPPORTED],
)
def test_supports_refuses_mpi_undefined(name, dtype):
    assert not builtin_op(name).supports(dtype)


@pytest.mark.parametrize(
    "name,dtype",
    [("max", np.complex128), ("min", np.complex64), ("band", np.float64),
     ("bxor", np.float32), ("sum", np.bool_), ("prod", np.bool_),
     ("land", np.float64), ("lor", np.complex128), ("band", np.bool_),
     ("sum", object), ("max", "U4")],
)
def test_supports_refuses_named_pairs(name, dtype):
    assert not builtin_op(name).supports(dtype)


@pytest.mark.parametrize("name", list(MPI_TYPE_TABLE))
@pytest.mark.parametrize("alias", ["a", "b", "both"])
def test_apply_with_dst_aliasing_an_input(name, alias):
    dtype = np.int32 if name not in ("land", "lor", "lxor") else np.int64
    a, b = operands(dtype, seed=1)
    if alias == "both":
        b = a
    expected = reference(name, a, b)
    a_alias, b_alias = a.copy(), b.copy()
    if alias == "both":
        b_alias = a_alias
    dst = {"a": a_alias, "b": b_alias, "both": a_alias}[alias]
    builtin_op(name).apply(a_alias, b_alias, dst)
    np.testing.assert_array_equal(dst, expected)


def test_apply_into_a_view_of_a_larger_buffer():
    """Ops write through views, as schedules bind spans of one buffer."""
    buf = np.arange(12, dtype=np.int64)
    builtin_op("sum").apply(buf[0:4], buf[4:8], buf[8:12])
    np.testing.assert_array_equal(buf[8:12], [4, 6, 8, 10])
    builtin_op("max").apply(buf[8:12], buf[0:4], buf[0:4])  # dst aliases b
    np.testing.assert_array_equal(buf[:4], [4, 6, 8, 10])


def test_builtin_in_place_allocates_nothing():
    a = np.ones(1 << 20)  # 8 MiB
    b = np.full(1 << 20, 2.0)
    op = builtin_op("sum")
    op.apply(a, b, a)  # warm up
    tracemalloc.start()
    try:
        op.apply(a, b, a)
        op.apply(a, b, b)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < a.nbytes // 16, peak
    assert a[0] == 5.0 and b[0] == 7.0


def test_from_callable_defaults_to_non_commutative():
    def first(a, b):
        return a

    op = Op.from_callable(first)
    assert op.commutative is False
    assert op.name == "first"
    # A user op is not limited by MPI's type table.
    for dt in (np.float64, np.complex128, np.bool_, object):
        assert op.supports(dt)
    assert Op.from_callable(np.add, commute=True).commutative is True
    assert Op.from_callable(lambda a, b: a, name="left").name == "left"


def test_from_callable_apply_and_aliasing():
    op = Op.from_callable(lambda a, b: 2 * a + b)  # associative? no matter here
    a = np.array([1, 2, 3])
    b = np.array([10, 20, 30])
    dst = np.empty(3, dtype=int)
    op.apply(a, b, dst)
    np.testing.assert_array_equal(dst, [12, 24, 36])
    op.apply(a, b, b)  # dst aliases b: computed from the old b
    np.testing.assert_array_equal(b, [12, 24, 36])
    op.apply(a, a, a)  # dst aliases both
    np.testing.assert_array_equal(a, [3, 6, 9])


def test_from_callable_on_object_arrays_keeps_operand_order():
    op = Op.from_callable(lambda a, b: a + b)
    a = np.array(["x", "y"], dtype=object)
    b = np.array(["1", "2"], dtype=object)
    op.apply(a, b, a)
    assert list(a) == ["x1", "y2"]
