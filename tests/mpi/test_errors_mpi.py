"""Bad input fails on every rank before any message moves, with an error
that names the rank, the collective and what was wrong; and the rest of
the API contract (selection, fall-through, explain).

Every rank makes the same bad call, so none is left waiting: a check that
let a message out first would hang this test at the next collective
(pytest-timeout then fails it).
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll import ProcessGroup as PG
from mpicoll import errors

pytestmark = pytest.mark.mpi


@pytest.fixture(scope="module")
def comm():
    return mpicoll.Comm(MPI.COMM_WORLD)


def where(comm, collective):
    return f"[rank {comm.rank}] {collective}"


def test_receive_buffer_too_small(comm):
    x = np.ones(10)
    with pytest.raises(errors.BufferSpecError) as info:
        comm.Allreduce(x, np.empty(9), MPI.SUM, algorithm="ring")
    assert where(comm, "allreduce") in str(info.value)
    # mpi4py's own check and words; also the ValueError mpi4py raises
    assert "mismatch in send count 10 and receive count 9" in str(info.value)
    assert isinstance(info.value, ValueError)
    with pytest.raises(errors.BufferSpecError, match="negative count"):
        comm.Allgather(x, [np.empty(10 * comm.size), -1, MPI.DOUBLE])
    if comm.size > 1:  # mpi4py's count inference, its words
        with pytest.raises(errors.BufferSpecError, match="not a multiple"):
            comm.Allgather(x, np.empty(10 * comm.size - 1))
    # A receive block smaller than the block sent: natively MPI's rules
    # apply; forced hand-built, MPI's ERR_TRUNCATE before anything moves.
    with pytest.raises(errors.BufferSpecError, match="does not fit") as info:
        comm.Allgather(x, np.empty(9 * comm.size), algorithm="ring")
    assert where(comm, "allgather (ring)") in str(info.value)
    assert info.value.Get_error_class() == MPI.ERR_TRUNCATE


@pytest.mark.parametrize("algorithm", ["native", "recursive_doubling"])
def test_overlapping_send_and_receive_buffers(comm, algorithm):
    x = np.arange(8.0)
    for send, recv in ((x, x), (x[:6], x[2:8])):
        with pytest.raises(errors.BufferSpecError, match="IN_PLACE") as info:
            comm.Allreduce(send, recv, MPI.SUM, algorithm=algorithm)
        assert where(comm, "allreduce") in str(info.value)
    assert np.array_equal(x, np.arange(8.0))  # nothing moved
    comm.Scan(x[:4], x[4:], MPI.SUM, algorithm=algorithm)  # adjacent is fine


def test_root_out_of_range(comm):
    with pytest.raises(errors.InvalidArgumentError) as info:
        comm.Bcast(np.ones(3), root=comm.size)
    assert where(comm, "bcast") in str(info.value)
    assert f"root {comm.size}" in str(info.value)
    # also what mpi4py raises: MPI.Exception of class ERR_ROOT
    assert info.value.Get_error_class() == MPI.ERR_ROOT
    with pytest.raises(errors.InvalidArgumentError, match="root -1"):
        PG(comm).reduce(np.ones(3), dst=-1)


def test_read_only_and_non_contiguous_buffers(comm):
    frozen = np.ones(4)
    frozen.flags.writeable = False
    with pytest.raises(errors.BufferSpecError, match="not writable"):
        PG(comm).all_reduce(frozen)
    with pytest.raises(errors.BufferSpecError, match="not writable"):
        comm.Allreduce(np.ones(4), bytes(32), MPI.SUM)
    strided = np.ones(8)[::2]
    with pytest.raises(errors.BufferSpecError, match="not contiguous"):
        PG(comm).all_reduce(strided)
    with pytest.raises(errors.BufferSpecError, match="must be a tensor"):
        PG(comm).all_reduce([1.0, 2.0])


def test_unknown_algorithm_lists_the_available_ones(comm):
    with pytest.raises(errors.UnknownAlgorithmError) as info:
        PG(comm).all_reduce(np.ones(2), algorithm="nosuch")
    text = str(info.value)
    assert where(comm, "allreduce (nosuch)") in text
    assert "ring" in text and "native" in text


def test_constraint_violated(comm):
    def first(a, b):  # associative, not commutative
        return a

    with pytest.raises(errors.ConstraintError) as info:
        PG(comm).all_reduce(np.ones(2), op=first, algorithm="rabenseifner")
    assert "commutative" in str(info.value)
    assert where(comm, "allreduce (rabenseifner)") in str(info.value)
    # auto never picks an algorithm that cannot run: it still works.
    x = np.arange(4.0) + comm.rank
    PG(comm).all_reduce(x, op=first)
    assert np.array_equal(x, np.arange(4.0))


@pytest.mark.parametrize(("op", "dtype"), [("max", np.complex128),
                                           ("band", np.float32),
                                           ("sum", np.bool_),
                                           ("land", np.float64)])
def test_op_undefined_for_the_type(comm, op, dtype):
    with pytest.raises(errors.OpTypeError) as info:
        PG(comm).all_reduce(np.zeros(3, dtype), op=op)
    assert f"operation {op!r} is not defined" in str(info.value)
    assert where(comm, "allreduce") in str(info.value)


def test_bad_ops_and_counts(comm):
    with pytest.raises(errors.InvalidArgumentError, match="unknown operation"):
        PG(comm).all_reduce(np.ones(2), op="average")
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"does not define MPI\.MAXLOC") as info:
        comm.Allreduce(np.ones(2), np.empty(2), MPI.MAXLOC)
    assert info.value.Get_error_class() == MPI.ERR_OP  # as MPI says
    with pytest.raises(errors.InvalidArgumentError, match="expecting"):
        comm.Reduce_scatter(np.ones(4), np.empty(1), [1] * (comm.size + 1))
    with pytest.raises(errors.BufferSpecError,
                       match=r"5 elements .* the buffer holds 32"):
        comm.Bcast([np.ones(4), 5, MPI.DOUBLE])  # beyond the buffer
    with pytest.raises(errors.BufferSpecError, match="datatypes"):
        comm.Allreduce(np.ones(2), np.empty(2, np.float32), MPI.SUM)


def test_buffer_specifications_like_mpi4py(comm):
    data = np.arange(6, dtype=np.int32) + comm.rank
    out = bytearray(6 * 4)
    comm.Allreduce([data, MPI.INT], [out, MPI.INT], MPI.SUM)
    got = np.frombuffer(out, np.int32)
    assert np.array_equal(got, np.arange(6) * comm.size
                          + sum(range(comm.size)))
    part = np.zeros(6, np.int32)
    comm.Allreduce([data, 3, MPI.INT], [part, 3, MPI.INT], MPI.SUM,
                   algorithm="recursive_doubling")
    assert np.array_equal(part[:3], got[:3]) and not part[3:].any()


def test_environment_override_and_explain(comm, monkeypatch):
    monkeypatch.setenv("MPICOLL_ALLREDUCE_ALGORITHM", "ring")
    env_comm = mpicoll.Comm(MPI.COMM_WORLD)
    choice = env_comm.explain("allreduce", count=1000)
    assert choice.algorithm.name == "ring"
    assert "MPICOLL_ALLREDUCE_ALGORITHM=ring" in choice.reason
    x = np.ones(5)
    PG(env_comm).all_reduce(x)
    assert np.all(x == comm.size)
    # The call's own argument wins over the environment.
    assert env_comm.explain("allreduce", algorithm="native").algorithm.native
    monkeypatch.setenv("MPICOLL_ALLREDUCE_ALGORITHM", "nosuch")
    with pytest.raises(errors.UnknownAlgorithmError,
                       match="MPICOLL_ALLREDUCE_ALGORITHM"):
        PG(MPI.COMM_WORLD).all_reduce(np.ones(2))


def test_explain_form_and_in_place(comm):
    """explain() answers for each form of call and for in place, and
    refuses a form that is not one (locally: explain sends nothing)."""
    for form in ("blocking", "nonblocking", "persistent"):
        assert comm.explain("allreduce", count=4, form=form).algorithm
    assert comm.explain("allreduce", count=1 << 15, inplace=True).algorithm
    with pytest.raises(errors.InvalidArgumentError, match="form must be"):
        comm.explain("allreduce", form="eventually")


def by_model(comm, nbytes: int) -> dict:
    """The default cost model's prediction for each allreduce candidate."""
    from mpicoll.model.formulas import estimate
    from mpicoll.select.policy import BEYOND_PAIR, environment_cost_model

    network = environment_cost_model().network
    return {name: estimate("allreduce", name, comm.size, nbytes, network)
            for name in BEYOND_PAIR["allreduce"]}


def test_auto_rules(comm):
    small = comm.explain("allreduce", count=4)
    large = comm.explain("allreduce", count=1 << 22)
    if comm.size == 1:
        assert small.algorithm.native and "one rank" in small.reason
        return
    if comm.size == 2 and MPI.Query_thread() == MPI.THREAD_MULTIPLE:
        assert small.algorithm.name == "recursive_doubling"
        assert "MPI_THREAD_MULTIPLE" in small.reason
    else:
        assert small.algorithm.native and "B <" in small.reason
    medium = comm.explain("allreduce", count=1 << 14)  # 128 KiB of float64
    if comm.size == 2:  # the measured rules
        assert medium.algorithm.name == "recursive_doubling"
        assert large.algorithm.name == "rabenseifner"
        assert "default rule" in large.reason
    else:  # the cost model's fastest candidate (mpicoll.select.policy.BEYOND_PAIR)
        for choice, nbytes in ((medium, 8 << 14), (large, 8 << 22)):
            times = by_model(comm, nbytes)
            assert choice.algorithm.name == min(times, key=times.get)
            assert "cost model (mpicoll's default" in choice.reason
    nc = comm.explain("allreduce", count=1 << 22, op=lambda a, b: a)
    assert nc.algorithm.name == "recursive_doubling"
    assert comm.explain("barrier").algorithm.native


def test_algorithms_listing_and_fall_through(comm):
    assert mpicoll.algorithms("allreduce")[0] == "native"
    assert {"reduce_bcast", "recursive_doubling", "ring",
            "rabenseifner"} <= set(mpicoll.algorithms("allreduce"))
    assert comm.Get_rank() == MPI.COMM_WORLD.Get_rank()
    assert comm.Get_size() == comm.size
    halves = mpicoll.Comm(comm.Split(comm.rank % 2, comm.rank))
    x = np.ones(3)
    PG(halves).all_reduce(x, algorithm="ring")
    assert np.all(x == halves.size)
