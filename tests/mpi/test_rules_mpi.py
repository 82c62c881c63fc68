"""Tier 2: MPICOLL_RULES and explain mode under MPI, and the benchmark's
``--emit-rules``. Every rank takes the same path (same file, same calls)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.bench import main
from mpicoll.select.policy import load_rules

pytestmark = pytest.mark.mpi


@pytest.fixture
def shared(tmp_path):
    """A directory every rank sees: rank 0's tmp_path."""
    return MPI.COMM_WORLD.bcast(str(tmp_path))


def write_rules(shared, data, name="rules.json"):
    path = f"{shared}/{name}"
    if MPI.COMM_WORLD.rank == 0:
        with open(path, "w") as f:
            json.dump(data, f)
    MPI.COMM_WORLD.Barrier()
    return path


def test_rules_file_picks(shared, monkeypatch):
    size = MPI.COMM_WORLD.size
    path = write_rules(shared, {"nranks": size, "rules": {"allreduce": [
        {"max_bytes": 64, "algorithm": "ring"},
        {"max_bytes": None, "algorithm": "native"}]}})
    monkeypatch.setenv("MPICOLL_RULES", path)
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    c = comm.explain("allreduce", count=8, dtype="float64")
    assert c.algorithm.name == "ring"
    assert path in c.reason and "0..64 B" in c.reason
    c = comm.explain("allreduce", count=1 << 20, dtype="float64")
    assert c.algorithm.name == "native" and "65..inf B" in c.reason
    # a non-commutative op cannot use ring: default rules, said so
    c = comm.explain("allreduce", count=8, dtype="float64",
                     op=mpicoll.Op.from_callable(np.add, commute=False))
    assert "ring cannot run" in c.reason and "default rule" in c.reason
    # and a Python callable runs hand-built under auto (no MPI.Op per call;
    # said so where the default rule would have called the library)
    assert not c.algorithm.native
    assert by_hand(comm.size) or "MPI.Op" in c.reason
    x = np.arange(8.0)
    comm.Allreduce(MPI.IN_PLACE, x, MPI.SUM)
    assert np.array_equal(x, np.arange(8.0) * size)
    # the call argument and the environment still win
    assert comm.explain("allreduce", count=8,
                        algorithm="native").algorithm.name == "native"
    monkeypatch.setenv("MPICOLL_ALLREDUCE_ALGORITHM", "native")
    c = mpicoll.Comm(MPI.COMM_WORLD).explain("allreduce", count=8)
    assert c.algorithm.name == "native" and path not in c.reason


def test_rules_file_other_size_ignored(shared, monkeypatch):
    size = MPI.COMM_WORLD.size
    path = write_rules(shared, {"nranks": size + 1, "rules": {"allreduce": [
        {"max_bytes": None, "algorithm": "ring"}]}})
    monkeypatch.setenv("MPICOLL_RULES", path)
    c = mpicoll.Comm(MPI.COMM_WORLD).explain("allreduce", count=8)
    assert path not in c.reason and c.algorithm.name == (
        "recursive_doubling" if by_hand(size) else "native")


def by_hand(size: int) -> bool:
    """Whether the default rule runs a small allreduce by hand: on 2 ranks
    at MPI_THREAD_MULTIPLE (mpicoll.select.policy.PAIR_BY_HAND)."""
    return size == 2 and MPI.Query_thread() == MPI.THREAD_MULTIPLE


def test_bad_rules_file_raises(shared, monkeypatch):
    path = write_rules(shared, {"nranks": "two"}, "bad.json")
    monkeypatch.setenv("MPICOLL_RULES", path)
    with pytest.raises(mpicoll.InvalidArgumentError, match=r"bad\.json"):
        mpicoll.Comm(MPI.COMM_WORLD)


def default_choice(comm, nbytes: int, collective: str = "allreduce") -> str:
    """The default rule's choice for a small message, and its reason (one
    rank: none to make; an allreduce on two ranks at MPI_THREAD_MULTIPLE:
    by hand)."""
    if comm.size == 1:
        return "native (default rule: one rank, nothing to move)"
    if collective == "allreduce" and by_hand(comm.size):
        return (f"recursive_doubling (default rule: {nbytes} B on 2 ranks at "
                "MPI_THREAD_MULTIPLE, where one exchange by hand beats the "
                "library's blocking call)")
    return (f"native (default rule: {nbytes} B < 16384 B, where the "
            "library's own call is fastest)")


def test_explain_logs_once(monkeypatch, caplog):
    monkeypatch.setenv("MPICOLL_EXPLAIN", "1")
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    x = np.ones(16, dtype=np.float32)
    with caplog.at_level(logging.INFO, logger="mpicoll"):
        for _ in range(3):
            comm.Allreduce(MPI.IN_PLACE, x, MPI.SUM)
        comm.Allreduce(MPI.IN_PLACE, x, MPI.SUM, algorithm="native")
    lines = [r.getMessage() for r in caplog.records if r.name == "mpicoll"]
    assert lines == [
        f"[rank {comm.rank}] allreduce 64 B: {default_choice(comm, 64)}",
        f"[rank {comm.rank}] allreduce 64 B: native (requested by the call)"]


def test_set_explain(monkeypatch, caplog):
    monkeypatch.delenv("MPICOLL_EXPLAIN", raising=False)
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    x = np.ones(4)
    with caplog.at_level(logging.INFO, logger="mpicoll"):
        comm.Bcast(x, root=0)
        assert not caplog.records
        mpicoll.set_explain(True)
        try:
            comm.Bcast(np.ones(5), root=0)
            comm.Bcast(np.ones(5), root=0)
        finally:
            mpicoll.set_explain(None)
        comm.Bcast(np.ones(6), root=0)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [f"[rank {comm.rank}] bcast 40 B: "
                     f"{default_choice(comm, 40, 'bcast')}"]


def test_emit_rules(shared):
    path = f"{shared}/emitted.json"
    code = main(["-c", "allreduce,bcast,barrier", "-a", "all", "-b", "8",
                 "-e", "64", "-n", "3", "-w", "1", "--quiet",
                 "--emit-rules", path])
    assert code == 0
    rules = load_rules(path)  # every rank: main ends with a barrier
    assert rules.nranks == MPI.COMM_WORLD.size
    assert set(rules.ranges) == {"allreduce", "bcast", "barrier"}
    for ranges in rules.ranges.values():
        assert ranges[-1][0] is None
        for _, name in ranges:
            assert name != "auto"
    with open(path) as f:
        data = json.load(f)
    assert data["rules"]["barrier"] == [
        {"max_bytes": None, "algorithm": data["rules"]["barrier"][0][
            "algorithm"]}]


def test_beyond_two_ranks_the_cost_model_chooses(shared, monkeypatch):
    """Beyond two ranks auto orders its hand-built candidates by the cost
    model of MPICOLL_CALIBRATION (here a file every rank reads, with a
    huge alpha: the fewest rounds win) or of mpicoll's default; explain
    mode names the file. One and two ranks keep their rules."""
    from mpicoll.model.calibration import load_calibration
    from mpicoll.model.calibration import DEFAULT_CALIBRATION

    size = MPI.COMM_WORLD.size
    c = mpicoll.Comm(MPI.COMM_WORLD).explain("allreduce", count=1 << 18,
                                             dtype="float32")
    assert ("cost model (mpicoll's default" in c.reason) == (size > 2)
    data = load_calibration(DEFAULT_CALIBRATION).to_json()
    for r in data["ranges"]:
        r["alpha"] = 1.0
    path = write_rules(shared, data, "slow-start.json")
    monkeypatch.setenv("MPICOLL_CALIBRATION", path)
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    c = comm.explain("allreduce", count=1 << 18, dtype="float32")
    if size > 2:
        assert f"MPICOLL_CALIBRATION={path}" in c.reason
        assert c.algorithm.name == "recursive_doubling"
    x = np.arange(1 << 18, dtype=np.float32)
    comm.Allreduce(MPI.IN_PLACE, x)
    assert np.array_equal(x, np.arange(1 << 18, dtype=np.float32) * size)
