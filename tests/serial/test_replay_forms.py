"""A repeated call in every buffer form skips the parser: the guard of the
fast path of ``mpicoll.Comm`` (mpicoll.engine.replay), counted, not timed.

On ``MPI.COMM_SELF`` (MPI as a singleton), each case makes its call three
times on the very same objects: the first is parsed and kept, the next
two must run without entering the message parser (counted by wrapping
``message`` and ``vector_message`` where the face imports them) and give
the raw communicator's result. A spec changed in place (a new count, a
new buffer, counts changed inside a nested list) must be parsed again.
Every case runs on both twins of the replay gate, the likeness key and the
recorder's stamp (the C accelerators and their Python originals).
"""

from __future__ import annotations

import array
import mmap

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from compatcases import DLPackOnly
from mpicoll.api import comm as comm_module
from mpicoll.api import vector_calls
from mpicoll.engine import likeness, replay
from mpicoll.engine.gate import Gate
from mpicoll.engine.likeness import Keys
from mpicoll.engine.replay import _Frozen
from mpicoll.guard import recorder
from mpicoll.guard.recorder import Stamped

SELF = MPI.COMM_SELF
N = 8


def buffers():
    """Each kind of byte buffer of N bytes, holding 1..N."""
    data = bytes(range(1, N + 1))
    mm = mmap.mmap(-1, N)
    mm[:] = data
    a = np.frombuffer(data, np.uint8).copy()
    ba = bytearray(data)
    return {"ndarray": a, "bytearray": ba, "memoryview": memoryview(ba),
            "mmap": mm, "array": array.array("B", data),
            "dlpack": DLPackOnly(a)}


def bcast_specs():
    specs = {}
    for kind, buf in buffers().items():
        specs[f"buf {kind}"] = lambda b=buf: b
        specs[f"[buf, count, TYPE] {kind}"] = lambda b=buf: [b, N, MPI.BYTE]
    a = np.arange(1, N + 1, dtype=np.uint8)
    specs["[buf, TYPE]"] = lambda: [a, MPI.BYTE]
    specs["[buf, count]"] = lambda: [a, N]
    specs["[buf, (count, displ), TYPE]"] = lambda: [a, (N, 0), MPI.BYTE]
    specs["[buf, typecode]"] = lambda: [a, "B"]
    specs["(buf, count, TYPE) tuple"] = lambda: (a, N, MPI.BYTE)
    return specs


def calls():
    """name -> a function making (call on a communicator, what it wrote)."""
    cases = {}
    for name, make in bcast_specs().items():
        def bcast(make=make):
            spec = make()
            return (lambda c: c.Bcast(spec, 0)), spec
        cases[f"Bcast {name}"] = bcast

    def reduction(method, inplace=False, listed=False):
        def case():
            x = np.arange(1.0, N + 1)
            y = np.zeros(N)
            s = MPI.IN_PLACE if inplace else ([x, MPI.DOUBLE] if listed else x)
            r = [y, N, MPI.DOUBLE] if listed else y
            if inplace:
                y[:] = x
            return (lambda c: getattr(c, method)(s, r, MPI.SUM)), y
        return case

    for method in ("Allreduce", "Scan", "Reduce_scatter_block"):
        cases[f"{method} buf"] = reduction(method)
        cases[f"{method} lists"] = reduction(method, listed=True)
    cases["Allreduce IN_PLACE"] = reduction("Allreduce", inplace=True)

    def rooted(method):
        def case():
            x = np.arange(1, N + 1, dtype=np.int32)
            y = np.zeros(N, np.int32)
            send, recv = [x, N, MPI.INT], [y, N, MPI.INT]
            if method == "Reduce":
                return (lambda c: c.Reduce(send, recv, MPI.SUM, 0)), y
            return (lambda c: getattr(c, method)(send, recv, 0)), y
        return case

    for method in ("Reduce", "Gather", "Scatter"):
        cases[f"{method} lists"] = rooted(method)

    def gathering(method):
        def case():
            x = np.arange(1, N + 1, dtype=np.int64)
            y = np.zeros(N, np.int64)
            if method == "Allgather":
                spec = [y, N, MPI.INT64_T]
                y[:] = x
                return (lambda c: c.Allgather(MPI.IN_PLACE, spec)), y
            if method == "Alltoall":
                send = [x, MPI.INT64_T]
                return (lambda c: c.Alltoall(send, y)), y
            counts = [N]
            spec = [y, (counts, [0]), MPI.INT64_T]
            return (lambda c: c.Allgatherv(x, spec)), y
        return case

    for method in ("Allgather", "Alltoall", "Allgatherv"):
        cases[f"{method} lists"] = gathering(method)

    def agreeing(method):  # counts agreed again on each replay
        def case():
            x = np.arange(1, N + 1, dtype=np.int64)
            y = np.zeros(N, np.int64)
            s, r = [x, ([N], [0]), MPI.INT64_T], [y, ([N], [0]), MPI.INT64_T]
            if method == "Alltoallv":
                return (lambda c: c.Alltoallv(s, r)), y
            if method == "Gatherv":
                return (lambda c: c.Gatherv([x, N, MPI.INT64_T], r, 0)), y
            return (lambda c: c.Scatterv(s, [y, N, MPI.INT64_T], 0)), y
        return case

    for method in ("Alltoallv", "Gatherv", "Scatterv"):
        cases[f"{method} lists"] = agreeing(method)

    def reduce_scatter():
        x = np.arange(1.0, N + 1)
        y = np.zeros(N)
        counts = [N]
        return (lambda c: c.Reduce_scatter(x, y, counts, MPI.SUM)), y

    cases["Reduce_scatter counts list"] = reduce_scatter
    cases["Barrier"] = lambda: ((lambda c: c.Barrier()), None)
    return cases


@pytest.fixture(autouse=True, params=["built", "python"])
def twins(request, monkeypatch):
    """Every case with the twins the package runs (the C ones where they
    were built) and with the Python ones (tests/serial/test_twins.py)."""
    if request.param == "python":
        monkeypatch.setattr(replay, "FastGate", Gate)
        monkeypatch.setattr(recorder, "FastStamped", Stamped)
        monkeypatch.setattr(likeness, "FastKeys", Keys)


@pytest.fixture
def parses(monkeypatch):
    """How many times the message parser has been entered."""
    count = [0]
    for module in (comm_module, vector_calls):
        for name in ("message", "vector_message"):
            if hasattr(module, name):
                parse = getattr(module, name)

                def counting(*args, _parse=parse, **kwargs):
                    count[0] += 1
                    return _parse(*args, **kwargs)
                monkeypatch.setattr(module, name, counting)
    return count


def snapshot(out):
    if out is None:
        return None
    if isinstance(out, (list, tuple)):
        out = out[0]
    if isinstance(out, DLPackOnly):
        out = out.array
    return bytes(memoryview(out))


@pytest.mark.parametrize("case", sorted(calls()))
def test_a_repeated_call_is_not_parsed_again(case, parses):
    comm = mpicoll.Comm(SELF)
    call, out = calls()[case]()
    raw_call, raw_out = calls()[case]()
    raw_call(SELF)
    call(comm)
    first = parses[0]
    assert first >= (0 if case == "Barrier" else 1)  # the counter counts
    call(comm)
    call(comm)
    assert parses[0] == first, f"{case}: parsed again on a repeat"
    assert snapshot(out) == snapshot(raw_out)
    comm.free()


def test_a_changed_spec_is_parsed_again(parses):
    comm = mpicoll.Comm(SELF)
    a = np.arange(N, dtype=np.uint8)
    b = np.arange(2 * N, dtype=np.uint8)  # not alike a: parsed, not run
    # by its likeness (mpicoll.engine.likeness)
    spec = [a, N, MPI.BYTE]
    for _ in range(2):
        comm.Bcast(spec, 0)
    seen = parses[0]
    spec[1] = N // 2  # a new count
    comm.Bcast(spec, 0)
    assert parses[0] == seen + 1
    spec[0] = b  # a new buffer
    comm.Bcast(spec, 0)
    assert parses[0] == seen + 2
    comm.free()


def test_a_spec_frozen_sees_changes_in_nested_lists():
    a = np.zeros(N)
    counts, displs = [2, 2], [0, 2]
    spec = [a, (counts, displs), MPI.DOUBLE]
    frozen = _Frozen(spec)
    assert frozen.holds(spec)
    counts[1] = 3  # inside a tuple inside the list
    assert not frozen.holds(spec)
    counts[1] = 2
    assert frozen.holds(spec)
    a.dtype = np.int64  # the array reinterpreted in place
    assert not frozen.holds(spec)


def test_a_spec_with_counts_in_an_array_is_parsed_every_time(parses):
    """Counts in an array can change in place unseen: such a spec is
    never kept (mpicoll.engine.replay._frozen_counts)."""
    comm = mpicoll.Comm(SELF)
    y = np.zeros(N, np.int64)
    counts, displs = np.array([N]), np.array([0])
    spec = [y, (counts, displs), MPI.INT64_T]
    for _ in range(3):
        comm.Allgatherv(MPI.IN_PLACE, spec)
    assert parses[0] == 3
    comm.free()


def inline_calls():
    """name -> (call making its specs anew each time, what it wrote)."""
    x, y = np.arange(1.0, N + 1), np.zeros(N)
    a = np.arange(1, N + 1, dtype=np.uint8)
    g = np.zeros(N, np.int64)
    return {
        "Bcast([buf, TYPE])": (lambda c: c.Bcast([a, MPI.BYTE], 0), a),
        "Allreduce(lists)": (lambda c: c.Allreduce(
            [x, MPI.DOUBLE], [y, N, MPI.DOUBLE], MPI.SUM), y),
        "Allgather(IN_PLACE, [buf, count, TYPE])": (lambda c: c.Allgather(
            MPI.IN_PLACE, [g, N, MPI.INT64_T]), g),
        "Reduce_scatter(counts list)": (lambda c: c.Reduce_scatter(
            x, y, [N], MPI.SUM), y),
    }


@pytest.mark.parametrize("case", sorted(inline_calls()))
def test_a_new_spec_of_the_same_items_is_not_parsed_again(case, parses):
    """mpi4py's tutorial style, ``comm.Bcast([data, MPI.INT], root=0)``:
    the list is made anew in every call, holding the same objects."""
    comm = mpicoll.Comm(SELF)
    call, out = inline_calls()[case]
    call(comm)
    first = parses[0]
    assert first >= 1
    call(comm)
    call(comm)
    assert parses[0] == first, f"{case}: parsed again"
    raw_call, raw_out = inline_calls()[case]
    raw_call(SELF)
    assert snapshot(out) == snapshot(raw_out)
    comm.free()


def test_a_kept_call_sends_what_it_was_given(parses):
    """A kept call whose list the caller changes afterwards: a new list
    holding what the first held runs the first call, not the changed one."""
    comm = mpicoll.Comm(SELF)
    x, y = np.arange(1.0, N + 1), np.zeros(N)
    send, recv = [x, N, MPI.DOUBLE], [y, N, MPI.DOUBLE]
    comm.Allreduce(send, recv, MPI.SUM)
    recv[1] = 2  # the kept list now says 2 elements
    y[:] = 0
    comm.Allreduce([x, N, MPI.DOUBLE], [y, N, MPI.DOUBLE], MPI.SUM)
    assert (y == x).all()
    comm.free()


def alike_calls():
    """name -> a function making (a call on new objects each time, what
    it wrote): every buffer kind, bare and in a spec, made anew per call
    (mpicoll.engine.likeness)."""
    data = bytes(range(1, N + 1))
    makers = {
        "ndarray": lambda: np.frombuffer(data, np.uint8).copy(),
        "bytearray": lambda: bytearray(data),
        "memoryview": lambda: memoryview(bytearray(data)),
        "mmap": lambda: _mmap(data),
        "array": lambda: array.array("B", data),
    }
    cases = {}
    for kind, make in makers.items():
        cases[f"Bcast buf {kind}"] = lambda m=make: (
            lambda c: c.Bcast(m(), 0))
        cases[f"Bcast [buf, count, TYPE] {kind}"] = lambda m=make: (
            lambda c: c.Bcast([m(), N, MPI.BYTE], 0))
    x = np.arange(1.0, 2 * N + 1)
    cases["Allreduce new views"] = lambda: (
        lambda c: c.Allreduce(x[:N], np.zeros(N), MPI.SUM))
    cases["Allreduce [buf, TYPE] new arrays"] = lambda: (
        lambda c: c.Allreduce([x[:N].copy(), MPI.DOUBLE],
                              [np.zeros(N), MPI.DOUBLE], MPI.SUM))
    cases["Allgather new bytearrays"] = lambda: (
        lambda c: c.Allgather(bytearray(data), bytearray(N)))
    return cases


def _mmap(data: bytes) -> mmap.mmap:
    m = mmap.mmap(-1, len(data))
    m[:] = data
    return m


@pytest.mark.parametrize("case", sorted(alike_calls()))
def test_a_call_on_new_objects_alike_is_not_parsed(case, parses):
    """A call on new objects of the same kind and size as a kept call's
    runs by its likeness: mpi4py's own call on the new objects, no parse."""
    comm = mpicoll.Comm(SELF)
    call = alike_calls()[case]()
    call(comm)
    first = parses[0]
    assert first >= 1
    call(comm)
    call(comm)
    assert parses[0] == first, f"{case}: parsed again on new objects"
    comm.free()


def test_new_objects_alike_but_refused_take_the_full_path(parses):
    """Alike in kind and size but not usable: a strided view (mpi4py
    refuses it), send and receive at the same address. Each is parsed,
    and raises what the raw communicator raises (mpicoll's error is a
    subclass)."""
    comm = mpicoll.Comm(SELF)
    x = np.zeros(2 * N)
    comm.Allreduce(x[:N], np.zeros(N), MPI.SUM)  # kept by likeness
    seen = parses[0]
    for send, recv in ((x[::2], np.zeros(N)),  # strided
                       (x[:N], x[:N])):  # aliased
        with pytest.raises(Exception) as raw:
            SELF.Allreduce(send, recv, MPI.SUM)
        with pytest.raises(type(raw.value)):
            comm.Allreduce(send, recv, MPI.SUM)
    assert parses[0] > seen
    comm.free()


@pytest.mark.parametrize("nested", [False, True], ids=["flat", "nested"])
def test_a_count_replaced_by_an_array_is_parsed_again(parses, nested):
    """Kept specs are compared by value past their buffer; an array put
    in place of a count (which compares elementwise) is a change, parsed
    again, with mpi4py's outcome, not an error of the comparison."""
    comm = mpicoll.Comm(SELF)
    a = np.arange(N, dtype=np.uint8)
    spec = [a, (N, 0), MPI.BYTE] if nested else [a, N, MPI.BYTE]
    for _ in range(2):
        comm.Bcast(spec, 0)
    seen = parses[0]
    outcomes = []
    for c in (SELF, comm):
        if nested:
            spec[1] = (np.array([N, N]), 0)
        else:
            spec[1] = np.array([N, N])
        try:
            c.Bcast(spec, 0)
            outcomes.append(None)
        except Exception as exc:  # compared with mpi4py's
            outcomes.append(type(exc))
    assert outcomes[1] is outcomes[0] or (
        outcomes[0] is not None and issubclass(outcomes[1], outcomes[0]))
    assert parses[0] == seen + 1
    comm.free()


def test_new_dlpack_objects_alike_to_the_last_are_not_parsed(parses):
    """A host DLPack exporter (a torch CPU tensor, say) made anew for each
    call runs by its likeness (type, dtype, shape), as mpi4py's own call
    on it, with mpi4py's result; one memory for both buffers raises as
    mpi4py's call does."""
    comm = mpicoll.Comm(SELF)
    outs = {}
    for c in (SELF, comm):
        got = []
        for k in range(4):
            x = DLPackOnly(np.arange(1.0, N + 1) * (k + 1))
            y = DLPackOnly(np.zeros(N))
            c.Allreduce(x, y, MPI.SUM)
            b = DLPackOnly(np.full(N, k, np.uint8))
            c.Bcast(b, 0)
            got += [y.array.copy(), b.array.copy()]
            if k == 0:
                first = parses[0]
        if c is comm:
            assert parses[0] == first, "parsed again on new alike objects"
        same = np.zeros(N)
        try:
            c.Allreduce(DLPackOnly(same), DLPackOnly(same), MPI.SUM)
            got.append(None)
        except Exception as exc:  # compared with mpi4py's
            got.append(type(exc))
        outs[c is comm] = got
    raw, ours = outs[False], outs[True]
    assert all(np.array_equal(a, b) for a, b in zip(raw[:-1], ours[:-1]))
    assert ours[-1] is raw[-1] or (raw[-1] is not None
                                   and issubclass(ours[-1], raw[-1]))
    comm.free()
