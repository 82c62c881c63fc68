"""Tier 1: the flight recorder (mpicoll.guard.recorder) and its trace file
(mpicoll.guard.dump), on one rank: numbering, states, the ring's window,
what a note decodes to, and a dump that the trace command reads."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.guard import dump
from mpicoll.guard.recorder import Recorder, decode
from mpicoll.trace import analyse, load

NOTE = ("allreduce", "ring", "blocking", np.dtype("float32"), 6, "sum", None)


def test_a_wrapped_run_is_numbered_stamped_and_unblocked():
    rec = Recorder(4)
    seen = []
    run = rec.wrap(lambda: seen.append(rec.blocked) or "result", NOTE)
    assert run() == "result" and run() == "result"
    assert seen == [1, 2]  # blocked in each call while it ran
    assert rec.seq == 2 and rec.blocked == 0
    rows = rec.calls()
    assert [r["seq"] for r in rows] == [1, 2]
    assert all(r["state"] == "completed" and r["end"] >= r["start"]
               for r in rows)


def test_a_run_that_raises_is_ended_and_unblocked():
    rec = Recorder(4)

    def fail():
        raise ValueError("no")

    with pytest.raises(ValueError):
        rec.wrap(fail, NOTE)()
    assert rec.blocked == 0 and rec.calls()[0]["state"] == "completed"


def test_the_ring_keeps_the_last_calls_only():
    rec = Recorder(3)
    for _ in range(7):
        rec.end(rec.begin(NOTE))
    assert [r["seq"] for r in rec.calls()] == [5, 6, 7]
    assert rec.note_at(4) is None and rec.note_at(8) is None
    assert rec.note_at(7) is NOTE


def test_states_posted_started_completed():
    rec = Recorder(8)
    posted = rec.begin((*NOTE[:2], "nonblocking", *NOTE[3:]), False)
    assert rec.blocked == 0
    blocking = rec.begin(NOTE)
    assert rec.blocked == blocking
    states = {r["seq"]: r["state"] for r in rec.calls()}
    assert states == {posted: "posted", blocking: "started"}
    rec.end(blocking)
    rec.end(posted)
    assert {r["state"] for r in rec.calls()} == {"completed"}


def test_a_blocked_hand_built_call_says_its_round_and_peer():
    class Step:
        def __init__(self, sends, recvs):
            self.sends, self.recvs = sends, recvs

    class Cursor:
        steps = (Step([(b"", 1)], [(b"", 1)]), Step([(b"", 3)], [(b"", 2)]))
        at = 1

    rec = Recorder(8)
    rec.begin(NOTE)
    rec.inflight = Cursor()
    row = rec.calls()[0]
    assert (row["round"], row["peer"]) == (2, 2)  # receiving from rank 2


def test_a_setup_step_counts_as_blocked_in_its_call():
    rec = Recorder(8)
    with rec.step("finding the ranks of each node"):  # before any call
        assert (rec.blocked, rec.doing) == (1, "finding the ranks of each node")
    assert (rec.blocked, rec.doing) == (0, None)
    seq = rec.begin(NOTE)
    with rec.step("agreeing"):  # inside a call: that call's number
        assert rec.blocked == seq
    assert (rec.blocked, rec.doing) == (seq, None)


def test_a_refused_call_gives_its_number_back():
    rec = Recorder(8)
    seq = rec.begin(NOTE)
    rec.end(seq)
    rec.undo(seq)
    assert rec.seq == 0 and rec.blocked == 0
    assert rec.begin(NOTE) == 1


def test_no_ring_still_numbers_calls():
    rec = Recorder(0)
    rec.wrap(lambda: None, NOTE)()
    assert rec.seq == 1 and rec.calls() == []


@pytest.mark.parametrize("count,elements", [(6, 6), ((1, 2, 3), 6),
                                            (((1, 2), (3, 4)), 10),
                                            (None, 0)])
def test_a_note_decodes_to_bytes(count, elements):
    row = decode((*NOTE[:4], count, *NOTE[5:]))
    assert row["bytes"] == 4 * elements and row["dtype"] == "float32"


def test_the_environment_sets_the_ring(monkeypatch):
    monkeypatch.setenv("MPICOLL_TRACE_BUFFER", "5")
    monkeypatch.setenv("MPICOLL_TRACE_STACK", "1")
    rec = Recorder.from_environment()
    assert rec.size == 5 and rec.stack
    rec.end(rec.begin(NOTE))
    assert rec.calls()[0]["stack"].endswith("test_the_environment_sets_the_ring")
    monkeypatch.setenv("MPICOLL_TRACE_BUFFER", "many")
    with pytest.raises(mpicoll.InvalidArgumentError, match="TRACE_BUFFER"):
        Recorder.from_environment()


def test_a_dump_is_read_by_the_trace_command(tmp_path, monkeypatch):
    monkeypatch.setenv("MPICOLL_TRACE_DIR", str(tmp_path))
    comm = mpicoll.Comm(MPI.COMM_SELF.Dup())
    x, y = np.ones(3), np.empty(3)
    for _ in range(3):
        comm.Allreduce(x, y, MPI.SUM)
    comm.Bcast(x, 0)
    path = mpicoll.dump_trace()
    assert path == str(tmp_path / "mpicoll-trace-rank0.json")
    data = json.loads((tmp_path / "mpicoll-trace-rank0.json").read_text())
    mine = [c for c in data["communicators"]
            if c["seq"] == 4 and c["calls"][-1]["collective"] == "bcast"]
    assert len(mine) == 1 and mine[0]["ranks"] == [0]
    assert [c["collective"] for c in mine[0]["calls"]] == \
        ["allreduce"] * 3 + ["bcast"]
    assert mine[0]["calls"][0]["bytes"] == 24
    verdict = analyse(load([tmp_path]))
    assert verdict["ok"], verdict
    comm.Free()  # no longer listed
    path = dump.dump("test")
    left = [] if path is None else json.loads(
        (tmp_path / "mpicoll-trace-rank0.json").read_text())["communicators"]
    assert mine[0]["id"] not in [c["id"] for c in left]


def test_sigusr1_writes_the_trace(tmp_path, monkeypatch):
    monkeypatch.setenv("MPICOLL_TRACE_DIR", str(tmp_path))
    comm = mpicoll.Comm(MPI.COMM_SELF.Dup())  # the handler is installed
    comm.Barrier()
    os.kill(os.getpid(), signal.SIGUSR1)  # handled between bytecodes
    data = json.loads((tmp_path / "mpicoll-trace-rank0.json").read_text())
    assert data["reason"] == "signal"
    comm.Free()
