"""``python -m mpicoll.trace``: verdicts on synthetic flight-recorder traces.

Each test writes ``mpicoll-trace-rank<R>.json`` files in ``tmp_path`` (the
recorder's format, times fixed: nothing is measured here) and checks what
:func:`mpicoll.trace.analyse` finds and :func:`mpicoll.trace.render` says;
one test runs the command itself, text and ``--json``.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpicoll.trace import TraceError, analyse, load, ranges, render
from mpicoll.trace.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_796_200_000.0
DUMP = T0 + 700.0  # every file is dumped at this time
WORLD = [0, 1, 2, 3]


def call(seq, collective="allreduce", state="completed", start=None, **kw):
    """One call entry; started ``10 * seq`` s after T0 unless ``start``."""
    start = T0 + 10.0 * seq if start is None else start
    entry = {"seq": seq, "collective": collective, "algorithm": "native",
             "form": "blocking", "dtype": "float64", "count": 1024,
             "bytes": 8192, "op": "sum", "root": None, "state": state,
             "start": start, "end": start + 0.1 if state == "completed" else None,
             "round": None, "peer": None, "stack": None}
    entry.update(kw)
    return entry


def comm(rank, calls, ranks=WORLD, name="MPI_COMM_WORLD", ordinal=1,
         seq=None, blocked=None):
    """One communicator record of world rank ``rank``: ``seq`` defaults to
    the last call, ``blocked`` to the last call in state ``started``."""
    if seq is None:
        seq = max((c["seq"] for c in calls), default=0)
    if blocked is None:
        blocked = max((c["seq"] for c in calls if c["state"] == "started"),
                      default=0)
    return {"id": ",".join(map(str, ranks)) + f"#{ordinal}", "ranks": ranks,
            "rank": ranks.index(rank), "name": name, "seq": seq,
            "blocked": blocked, "calls": calls}


def write(folder, rank, *comms, world=4, reason="deadline"):
    """Rank ``rank``'s trace file holding ``comms``."""
    trace = {"format": "mpicoll-trace 1", "rank": rank, "world_size": world,
             "host": f"node{rank // 2}", "pid": 1000 + rank, "time": DUMP,
             "reason": reason, "communicators": list(comms)}
    (folder / f"mpicoll-trace-rank{rank}.json").write_text(json.dumps(trace))


def completed(n, names=None, offset=0.0):
    """Calls #1..#n completed, ``names[s]`` (default allreduce) each."""
    names = names or {}
    return [call(s, names.get(s, "allreduce"), start=T0 + 10.0 * s + offset)
            for s in range(1, n + 1)]


def verdict(folder):
    """The verdict and the text report on ``folder``'s traces."""
    v = analyse(load([folder]))
    return v, render(v)


def only(v):
    """The verdict's one communicator."""
    (c,) = v["communicators"]
    return c


def test_ranges():
    assert ranges([5, 0, 1, 2, 3]) == "0-3,5"
    assert ranges([0, 1, 4, 6, 7, 8]) == "0,1,4,6-8"
    assert ranges([]) == "-"


def test_clean_run(tmp_path):
    for r in WORLD:
        write(tmp_path, r, comm(r, completed(6, offset=0.001 * r)))
    v, text = verdict(tmp_path)
    c = only(v)
    assert v["ok"] and v["status"] == "clean" and c["status"] == "clean"
    assert c["first_divergent"] is None and c["stuck"] is None
    assert "  all 4 ranks completed every recorded call (last #6)" in text
    assert text.splitlines()[0] == ("mpicoll trace: 4 ranks, 4 files;"
                                    " dumped on deadline")
    assert c["common_calls"] == [1, 2, 3, 4, 5, 6]
    assert main([str(tmp_path)]) == 0


def test_rank_skipped_a_call(tmp_path):
    """Rank 1 skipped #6 allreduce: its seq is 5 and it now waits in a
    barrier on another communicator, which rank 0 never joins."""
    pair = [0, 1]
    for r in (0, 2, 3):
        calls = [*completed(5, {5: "bcast"}), call(6, state="started")]
        extra = [comm(r, completed(2), pair, "pair")] if r == 0 else []
        write(tmp_path, r, comm(r, calls), *extra)
    write(tmp_path, 1, comm(1, completed(5, {5: "bcast"})),
          comm(1, [*completed(2), call(3, "barrier", state="started")],
               pair, "pair"))
    v, text = verdict(tmp_path)
    world, sub = v["communicators"]
    found = world["first_divergent"]
    assert (found["seq"], found["collective"]) == (6, "allreduce")
    assert [w["rank"] for w in found["waiting"]] == [0, 2, 3]
    assert found["waiting"][0]["waited_s"] == pytest.approx(640.0)
    assert found["completed"] == [] and found["mismatched"] == []
    where = ("last call #5 bcast, completed 649.9 s before the dump;"
             " blocked in #3 barrier on pair")
    assert found["never_joined"] == [{"rank": 1, "where": where, "last_call": {
        "seq": 5, "collective": "bcast", "state": "completed"}}]
    assert ("  first divergent call: #6 allreduce (native, float64 x 1024,"
            " 8192 B, op sum)") in text
    assert "    waiting in it: ranks 0,2,3 (up to 640.0 s before the dump)" in text
    assert f"    never joined: rank 1: {where}" in text
    # the pair: rank 1 waits in #3, rank 0 is blocked in the world's #6
    pair_found = sub["first_divergent"]
    assert pair_found["seq"] == 3 and pair_found["waiting"][0]["rank"] == 1
    assert pair_found["never_joined"][0]["where"] == (
        "last call #2 allreduce, completed 679.9 s before the dump;"
        " blocked in #6 allreduce on MPI_COMM_WORLD")
    assert text.splitlines()[-1] == (
        "verdict: MPI_COMM_WORLD diverges at call #6 allreduce (never joined: 1);"
        " pair diverges at call #3 barrier (never joined: 0)")
    assert not v["ok"] and v["status"] == "divergent"


def test_dead_rank(tmp_path):
    for r in (0, 2, 3):
        write(tmp_path, r, comm(r, [*completed(5), call(6, state="started")]))
    v, text = verdict(tmp_path)
    found = only(v)["first_divergent"]
    assert v["no_file"] == [1] and only(v)["no_trace"] == [1]
    assert found["seq"] == 6
    assert [w["rank"] for w in found["waiting"]] == [0, 2, 3]
    assert found["never_joined"] == [{
        "rank": 1, "where": "no trace file (dead, stopped or never dumped)",
        "last_call": None}]
    assert text.startswith("mpicoll trace: 4 ranks, 3 files (no file: rank 1)")
    assert ("    never joined: rank 1: no trace file (dead, stopped or never"
            " dumped)") in text


def test_missing_file_after_clean_calls_is_not_ok(tmp_path):
    for r in (0, 1, 2):
        write(tmp_path, r, comm(r, completed(4)))
    v, text = verdict(tmp_path)
    assert only(v)["status"] == "incomplete" and not v["ok"]
    assert "  the 3 traced ranks agree on every recorded call; no trace of rank 3" \
        in text


def test_mismatch(tmp_path):
    """Rank 2 skipped #6 allreduce and went on to a barrier: its #6."""
    for r in WORLD:
        last = call(6, "barrier" if r == 2 else "allreduce", state="started")
        write(tmp_path, r, comm(r, [*completed(5), last]))
    v, text = verdict(tmp_path)
    found = only(v)["first_divergent"]
    assert (found["seq"], found["collective"]) == (6, "allreduce")
    assert found["mismatched"] == [{"rank": 2, "collective": "barrier",
                                    "state": "started"}]
    assert [w["rank"] for w in found["waiting"]] == [0, 1, 3]
    assert found["never_joined"] == []
    assert ("    mismatch: rank 2 is at call #6 as barrier (started),"
            " the others as allreduce") in text
    assert text.splitlines()[-1] == ("verdict: MPI_COMM_WORLD diverges at call"
                                     " #6 allreduce (mismatch: 2)")


def test_ring_windows_differ_but_agree(tmp_path):
    """Each rank keeps another window of #1..#10: no divergence, and the
    arrival statistics use #9, #10, the calls every window holds."""
    first = {0: 3, 1: 8, 2: 1, 3: 9}
    for r in WORLD:
        write(tmp_path, r, comm(r, completed(10)[first[r] - 1:]))
    v, text = verdict(tmp_path)
    c = only(v)
    assert c["status"] == "clean" and c["common_calls"] == [9, 10]
    assert "  arrivals over 2 calls every member recorded (#9,10):" in text
    assert "  straggler: none named over 2 calls (5 needed)" in text


def test_ring_window_no_longer_holds_the_divergent_call(tmp_path):
    """Ranks 0-2 are at #10 with windows #7-#10; rank 3 stopped after #4:
    #5 diverges though no window holds it, ranks 0-2 being past it."""
    for r in (0, 1, 2):
        write(tmp_path, r, comm(r, completed(10)[6:]))
    write(tmp_path, 3, comm(3, completed(4)))
    v, text = verdict(tmp_path)
    found = only(v)["first_divergent"]
    assert (found["seq"], found["collective"], found["call"]) == (5, None, None)
    assert found["completed"] == [0, 1, 2] and found["waiting"] == []
    assert found["never_joined"][0]["rank"] == 3
    assert found["never_joined"][0]["where"].startswith(
        "last call #4 allreduce, completed")
    assert "  first divergent call: #5 (in no recorded window)" in text
    assert "    completed it: ranks 0-2" in text
    assert only(v)["common_calls"] == []


def test_hand_built_round_and_peer(tmp_path):
    """A communicator of world ranks 3,2,1,0 (reversed): a peer is a
    communicator rank, reported as its world rank."""
    rev = [3, 2, 1, 0]
    waiting = {3: (2, 1), 1: (1, 3), 0: (2, 1)}  # world rank: (round, peer)
    for r in WORLD:
        calls = completed(3)
        if r in waiting:
            rnd, peer = waiting[r]
            calls.append(call(4, state="started", algorithm="ring", round=rnd,
                              peer=peer, stack="train.py:42 in step"))
        write(tmp_path, r, comm(r, calls, rev, "reversed", ordinal=2))
    v, text = verdict(tmp_path)
    c = only(v)
    assert c["id"] == "3,2,1,0#2"
    found = c["first_divergent"]
    assert [(w["rank"], w["round"], w["peer"]) for w in found["waiting"]] == [
        (0, 2, 2), (1, 1, 0), (3, 2, 2)]
    assert found["never_joined"][0]["rank"] == 2
    assert "communicator reversed [0-3] (id 3,2,1,0#2):" in text
    assert "  first divergent call: #4 allreduce (ring, float64 x 1024," in text
    for line in ("rank 0 waits in round 2 for rank 2",
                 "rank 1 waits in round 1 for rank 0",
                 "rank 3 waits in round 2 for rank 2",
                 "at train.py:42 in step"):
        assert f"\n      {line}\n" in text


def test_every_rank_in_one_call(tmp_path):
    for r in WORLD:
        write(tmp_path, r, comm(r, [*completed(5), call(6, "barrier",
                                                           state="started")]))
    v, text = verdict(tmp_path)
    c = only(v)
    assert c["status"] == "stuck" and c["first_divergent"] is None
    assert c["stuck"] == {"seq": 6, "collective": "barrier",
                          "waited_s": pytest.approx(640.0)}
    assert ("  every rank is in call #6 (barrier), for up to 640.0 s: slow or"
            " stuck inside the MPI library, nobody missing") in text
    assert not v["ok"]


def test_posted_call_and_a_waiting_rank(tmp_path):
    """#6 iallreduce posted on every rank; rank 0 waits in it, the others
    did not wait but entered #7 barrier: #6 is where they disagree."""
    for r in WORLD:
        state = "started" if r == 0 else "posted"
        calls = [*completed(5), call(6, state=state, form="nonblocking")]
        if r:
            calls.append(call(7, "barrier", state="started"))
        write(tmp_path, r, comm(r, calls))
    v, text = verdict(tmp_path)
    found = only(v)["first_divergent"]
    assert found["seq"] == 6
    assert [(w["rank"], w["state"]) for w in found["waiting"]] == [
        (0, "started"), (1, "posted"), (2, "posted"), (3, "posted")]
    assert "    posted it, nobody waiting: ranks 1-3" in text
    assert "(native, nonblocking, float64 x 1024" in text


def test_posted_everywhere_is_in_flight(tmp_path):
    for r in WORLD:
        write(tmp_path, r, comm(r, [*completed(5), call(6, state="posted")]))
    v, text = verdict(tmp_path)
    assert only(v)["in_flight"] == [6] and v["ok"]
    assert "  all 4 ranks agree on every recorded call; in flight, nobody" \
        " waiting: #6" in text


def test_straggler_named(tmp_path):
    late = {0: 0.0, 1: 0.01, 2: 0.02, 3: 0.2}
    for r in WORLD:
        write(tmp_path, r, comm(r, completed(10, offset=late[r])))
    v, text = verdict(tmp_path)
    c = only(v)
    assert c["straggler"] == 3 and v["ok"]
    assert c["stragglers"][0] == {"rank": 3, "last": 10, "calls": 10,
                                  "mean_lateness_s": pytest.approx(0.2)}
    assert [row["rank"] for row in c["stragglers"]] == [3, 2, 1, 0]
    assert ("  straggler: rank 3 arrived last at 10 of 10 calls, mean"
            " lateness 200.0 ms") in text
    assert "         3  10/10       200.0 ms" in text


def test_no_straggler_when_lateness_is_spread(tmp_path):
    """Call s: rank s % 4 starts 0.2 s late; each is last at 3 of 12."""
    for r in WORLD:
        calls = [call(s, start=T0 + 10.0 * s + (0.2 if s % 4 == r else 0.0))
                 for s in range(1, 13)]
        write(tmp_path, r, comm(r, calls))
    v, text = verdict(tmp_path)
    c = only(v)
    assert c["straggler"] is None
    assert [row["last"] for row in c["stragglers"]] == [3, 3, 3, 3]
    assert all(row["mean_lateness_s"] == pytest.approx(0.05)
               for row in c["stragglers"])
    assert ("  straggler: none (no rank arrived last at more than half of the"
            " calls, late by 10 ms or more on average)") in text


def test_no_straggler_when_the_last_is_barely_late(tmp_path):
    """Rank 3 is last at every call, but by 1 ms: jitter, not a straggler."""
    for r in WORLD:
        calls = [call(s, start=T0 + 10.0 * s + (1e-3 if r == 3 else 0.0))
                 for s in range(1, 11)]
        write(tmp_path, r, comm(r, calls))
    v, _ = verdict(tmp_path)
    c = only(v)
    assert c["stragglers"][0]["rank"] == 3 and c["stragglers"][0]["last"] == 10
    assert c["straggler"] is None


def test_no_straggler_over_too_few_calls(tmp_path):
    for r in WORLD:
        write(tmp_path, r, comm(r, completed(4, offset=0.2 * (r == 1))))
    c = only(verdict(tmp_path)[0])
    assert c["stragglers"][0]["last"] == 4 and c["straggler"] is None


def test_load_errors(tmp_path):
    with pytest.raises(TraceError, match="no mpicoll-trace-rank"):
        load([tmp_path])
    write(tmp_path, 0, comm(0, completed(1)))
    dup = tmp_path / "copy"
    dup.mkdir()
    write(dup, 0, comm(0, completed(1)))
    with pytest.raises(TraceError, match="a second trace of rank 0"):
        load([tmp_path, dup])
    (tmp_path / "mpicoll-trace-rank1.json").write_text('{"format": "other"}')
    with pytest.raises(TraceError, match="not an 'mpicoll-trace 1' trace"):
        load([tmp_path])
    assert main([str(tmp_path / "nowhere")]) == 2


def test_command_line(tmp_path):
    """``python -m mpicoll.trace DIR`` and ``--json``: rank 3 never joined #6."""
    for r in (0, 1, 2):
        write(tmp_path, r, comm(r, [*completed(5), call(6, state="started")]))
    write(tmp_path, 3, comm(3, completed(5)))
    command = [sys.executable, "-m", "mpicoll.trace", str(tmp_path)]
    text = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert text.returncode == 1, text.stderr
    assert text.stdout.splitlines()[:5] == [
        "mpicoll trace: 4 ranks, 4 files; dumped on deadline",
        "communicator MPI_COMM_WORLD [0-3] (id 0,1,2,3#1):",
        "  first divergent call: #6 allreduce (native, float64 x 1024, 8192 B,"
        " op sum)",
        "    waiting in it: ranks 0-2 (up to 640.0 s before the dump)",
        "    never joined: rank 3: last call #5 allreduce, completed 649.9 s"
        " before the dump"]
    js = subprocess.run([*command, "--json"], capture_output=True, text=True,
                        cwd=ROOT, timeout=120)
    assert js.returncode == 1, js.stderr
    out = json.loads(js.stdout)
    c = only(out)
    assert (out["status"], c["status"]) == ("divergent", "divergent")
    assert c["first_divergent"]["seq"] == 6
    assert [w["rank"] for w in c["first_divergent"]["never_joined"]] == [3]
    assert [w["rank"] for w in c["first_divergent"]["waiting"]] == [0, 1, 2]
    assert c["straggler"] is None and len(c["stragglers"]) == 4
    assert out["summary"] == ("verdict: MPI_COMM_WORLD diverges at call #6"
                              " allreduce (never joined: 3)")
