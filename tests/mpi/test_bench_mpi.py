"""Tier 2: the benchmark run under MPI, tiny sizes, called as functions.

Every rank takes the same path (same arguments, same planted error), so a
failure shows as a failed assertion, never as a hang.
"""

import dataclasses
import json

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.bench import main, parse_args, run
from mpicoll.bench.specs import SPECS

pytestmark = [pytest.mark.mpi, pytest.mark.interface]

TINY = ["-b", "8", "-e", "32", "-n", "3", "-w", "1", "--quiet"]


@pytest.fixture(scope="module")
def world():
    return mpicoll.Comm(MPI.COMM_WORLD)


def test_run_records(world):
    args = parse_args(["-c", "allreduce,bcast,alltoall,barrier", *TINY],
                      world.rank, world.size)
    records = run(args, world)
    for name in ("allreduce", "bcast", "alltoall", "barrier"):
        rows = [r for r in records if r["collective"] == name]
        algs = {r["algorithm"] for r in rows}
        assert algs == {*mpicoll.algorithms(name), "auto"}
    assert all(r["wrong"] == 0 for r in records)
    for r in records:
        assert r["nranks"] == world.size
        t = r["time_us"]
        assert 0 < t["min"] <= t["avg"] <= t["max"]
        assert (r["chosen"] is not None) == (r["algorithm"] == "auto")
    assert MPI.Intracomm(world).allgather(len(records)) == [len(records)] * world.size


def test_every_collective_in_place(world):
    args = parse_args(["-c", "all", "--inplace", "-a", "all", *TINY,
                       "-e", "16", "-r", str(world.size - 1)],
                      world.rank, world.size)
    records = run(args, world)
    assert {r["collective"] for r in records} == set(SPECS)
    assert all(r["wrong"] == 0 for r in records)


@pytest.mark.parametrize("inplace", [[], ["--inplace"]])
def test_every_collective_persistent(world, inplace):
    """--persistent: X_init once, Start + Wait per call; results checked."""
    args = parse_args(["-c", "all", "-a", "all", "--persistent", *inplace,
                       *TINY, "-e", "16"], world.rank, world.size)
    records = run(args, world)
    assert {r["collective"] for r in records} == set(SPECS)
    assert all(r["persistent"] and r["wrong"] == 0 for r in records)


@pytest.mark.parametrize("inplace", [[], ["--inplace"]])
def test_every_collective_rewritten(world, inplace):
    """--rewrite: the input written before every timed call; results
    (checked on fresh buffers) right, records marked."""
    args = parse_args(["-c", "all", "-a", "all", "--rewrite", *inplace,
                       *TINY, "-e", "16"], world.rank, world.size)
    records = run(args, world)
    assert {r["collective"] for r in records} == set(SPECS)
    assert all(r["rewritten"] and r["wrong"] == 0 for r in records)


def test_rewriting_writes_what_the_call_reads(world):
    """The write lands in the buffer the call reads: the send buffer, or
    the receive buffer of an in-place call, or a broadcast's buffer at its
    root only (elsewhere the call reads nothing); nothing without
    --rewrite."""
    from mpicoll.bench.harness import Case, make_buffers, rewriting

    seen = []
    for inplace in (False, True):
        case = Case(SPECS["allreduce"], 4, "float64", "sum", 0, inplace,
                    rewrite=True)
        bufs = make_buffers(case, world.rank, world.size)
        read = bufs.recv if inplace else bufs.send
        read[:] = 7
        calls = rewriting(case, bufs, {"c": lambda r=read: seen.append(
            r.copy())}, world.rank)
        calls["c"]()
        assert np.all(seen[-1] == 1)
        kept = {"c": calls["c"]}
        assert rewriting(dataclasses.replace(case, rewrite=False), bufs,
                         kept, world.rank) is kept
    root = world.size - 1
    case = Case(SPECS["bcast"], 4, "float64", "sum", root, False,
                rewrite=True)
    bufs = make_buffers(case, world.rank, world.size)
    bufs.recv[:] = 7
    rewriting(case, bufs, {"c": lambda: None}, world.rank)["c"]()
    assert np.all(bufs.recv == (1 if world.rank == root else 7))


def test_main_writes_json_and_csv(world, tmp_path, monkeypatch):
    monkeypatch.setenv("MPIR_CVAR_MPICOLL_TEST_SETTING", "7")
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")  # read at import only
    base = MPI.Intracomm(world).bcast(str(tmp_path))
    out_json, out_csv = f"{base}/b.json", f"{base}/b.csv"
    out_png = f"{base}/b.png"
    code = main(["-c", "allreduce,reduce", "-a", "native,ring,auto", *TINY,
                 "--json", out_json, "--csv", out_csv, "--plot", out_png,
                 "--timeout", "30"])
    assert code == 0
    if world.rank == 0:
        with open(out_json) as f:
            data = json.load(f)
        head = data["header"]
        assert head["nranks"] == world.size and head["mpi_vendor"]
        assert {"mpi4py", "mpi_library", "thread_level", "hostnames",
                "ranks_per_node", "date", "command"} <= set(head)
        settings = head["mpi_settings"]
        assert settings["MPIR_CVAR_MPICOLL_TEST_SETTING"] == "7"
        assert settings["NUMPY_MADVISE_HUGEPAGE"] == "1"
        assert all(k.startswith(("MPIR_CVAR_", "MPICH_"))
                   or k == "NUMPY_MADVISE_HUGEPAGE" for k in settings)
        algs = {(r["collective"], r["algorithm"]) for r in data["records"]}
        assert algs == {("allreduce", "native"), ("allreduce", "ring"),
                        ("allreduce", "auto"), ("reduce", "native"),
                        ("reduce", "auto")}
        with open(out_csv) as f:
            lines = f.read().splitlines()
        assert len(lines) == 1 + len(data["records"])
        assert "time_us_p99" in lines[0]
        with open(out_png, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_planted_wrong_result_fails(world, monkeypatch):
    spec = SPECS["allreduce"]

    def off_by_one(*a):
        return spec.expected(*a) + 1

    monkeypatch.setitem(SPECS, "allreduce",
                        dataclasses.replace(spec, expected=off_by_one))
    args = parse_args(["-c", "allreduce", "-a", "native,ring", *TINY],
                      world.rank, world.size)
    records = run(args, world)
    assert all(r["wrong"] > 0 for r in records)
    assert main(["-c", "allreduce", "-a", "ring", *TINY]) == 1
    assert main(["-c", "allreduce", "-a", "ring", "--no-check", *TINY]) == 0


def test_bad_arguments_everywhere(world):
    assert main(["-c", "nope"]) == 2
    assert main(["-r", str(world.size)]) == 2
    MPI.Intracomm(world).Barrier()  # and nobody is left waiting


def test_peers_side_by_side(world, tmp_path):
    from scripts import load

    peers = load("peers")
    base = MPI.Intracomm(world).bcast(str(tmp_path))
    argv = ["-b", "8", "-e", "64", "-f", "8", "-n", "4", "-w", "1",
            "--rounds", "2", "--no-torch", "--json", f"{base}/peers.json"]
    assert peers.main(argv) == 0
    if world.rank == 0:
        with open(f"{base}/peers.json") as f:
            records = json.load(f)["records"]
        got = {(r["collective"], r["algorithm"]) for r in records}
        assert got == {(c, a) for c in peers.COLLECTIVES
                       for a in peers.CONTENDERS if a != "torch gloo"}
        assert all(r["wrong"] == 0 for r in records)
        best = [r for r in records if r["algorithm"] == "mpicoll best"]
        assert all(r["chosen"] in mpicoll.algorithms(r["collective"])
                   for r in best)


def test_peers_with_torch_gloo(world):
    pytest.importorskip("torch")
    from scripts import load

    peers = load("peers")
    assert peers.main(["-c", "allreduce,allgather,bcast", "-b", "64",
                       "-e", "64", "-n", "2", "-w", "1", "--rounds", "1"]) == 0


def test_osu_cross_check(world, capsys):
    from scripts import load

    osu = load("osu_check")
    for c in osu.COLLECTIVES:
        assert osu.main(["-c", c, "-b", "4", "-e", "16K", "--scale",
                         "0.01"]) == 0
    if world.rank == 0:
        out = capsys.readouterr().out
        assert out.count("OSU's method against ours") == 3
        assert "16384" in out


def test_wrap_cost_runs_the_demo_loops_and_every_form(world, capsys):
    """bench/wrap_cost.py: mpi4py's demo loops and the per-form table,
    shortened; every collective and form prints its row."""
    from scripts import load

    wrap = load("wrap_cost")
    assert wrap.main(["demos", "-e", "64", "--runs", "1",
                      "--scale", "0.001"]) == 0
    assert wrap.main(["forms", "--calls", "3", "--runs", "1"]) == 0
    if world.rank == 0:
        out = capsys.readouterr().out
        for collective in wrap.DEMOS:
            assert f"# {collective}, {world.size} ranks" in out
        rows = [line for line in out.splitlines()
                if line.startswith("  ") and ("native" in line
                                              or "built" in line)]
        assert len(rows) == len(wrap.forms_cases(world))
