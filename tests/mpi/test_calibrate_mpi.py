"""Tier 2: ``python -m mpicoll.calibrate`` under MPI, few repetitions,
called as a function: the file it writes is complete and loads, and the
validation times a small subset against its predictions. No time or ratio
is asserted (benchmarks measure; tests check)."""

import json

import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.bench.calibrate import main
from mpicoll.model.calibration import load_calibration

pytestmark = pytest.mark.mpi

FEW = ["-n", "3", "-w", "1", "--time-budget", "5", "--quiet"]


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """One calibration for the module, in rank 0's folder (shared)."""
    world = MPI.COMM_WORLD
    if world.Get_size() % 2:
        pytest.skip("ranks pair up: needs an even rank count")
    folder = world.bcast(str(tmp_path_factory.mktemp("cal")), 0)
    path = f"{folder}/cal.json"
    assert main(["--out", path, "-b", "8", "-e", "64K", "-f", "8",
                 "--ranges", "2", "--ops", "sum,max",
                 "--dtypes", "float32,int64", *FEW]) == 0
    return path, folder


def test_calibration_file_is_complete(calibrated):
    path, _ = calibrated
    cal = load_calibration(path)  # every number checked by the loader
    assert 1 <= len(cal.ranges) <= 3 and cal.ranges[-1][0] is None
    pairs = {(op, d) for op in ("sum", "max") for d in ("float32", "int64")}
    assert set(cal.gamma) == set(cal.gamma_out_of_place) == pairs
    sizes = [8, 64, 512, 4096, 32768]
    assert [n for n, _ in cal.points["exchange"]] == sizes
    for series in ("one_way", "copy", "exchange_clean", "write"):
        assert [n for n, _ in cal.points[series]] == sizes
    for series in ("reduce", "reduce_out_of_place"):
        assert [n for n, _ in cal.points[series]["max"]["int64"]] == sizes
    assert all(t > 0 for _, t in cal.points["exchange"])
    assert len(cal.one_way) == len(cal.ranges)  # fitted, one per range
    for series in ("call", "call_plan"):  # one message of 8 B each
        assert [n for n, _ in cal.points[series]] == [8]
    call, plan = (cal.points[k][0][1] for k in ("call", "call_plan"))
    assert cal.call == pytest.approx(max(call - plan, 0.0))
    size = MPI.COMM_WORLD.Get_size()
    assert cal.mpi["ranks"] == size
    assert cal.mpi["library"] and cal.mpi["mpi4py"]
    assert {"hostname", "cpu", "cores"} <= set(cal.machine)
    assert "mpicoll.calibrate" in cal.command and "--ranges 2" in cal.command
    assert cal.description.startswith("calibrated on ")
    with open(path) as f:
        assert json.load(f)["format"] == "mpicoll-calibration"


def test_validation_of_a_subset(calibrated):
    path, folder = calibrated
    out = f"{folder}/valid.json"
    assert main(["--validate", path, "-c", "allreduce,alltoall",
                 "-b", "1K", "-e", "1K", "--statistic", "p5", "--json", out,
                 *FEW]) == 0
    MPI.COMM_WORLD.Barrier()
    with open(out) as f:
        data = json.load(f)
    rows = data["rows"]
    for collective in ("allreduce", "alltoall"):
        want = {a for a in mpicoll.algorithms(collective) if a != "native"}
        assert {r["algorithm"] for r in rows
                if r["collective"] == collective} == want
    for r in rows:
        assert r["nranks"] == MPI.COMM_WORLD.Get_size()
        assert r["wrong"] == 0
        assert r["measured_us"] > 0 and r["predicted_us"] > 0
        assert r["within"] == (abs(r["error"]) <= 0.3)
    head = data["header"]
    assert head["description"].startswith("calibrated on ")
    assert "oversubscribed" in head and head["tolerance"] == 0.3
    assert head["statistic"] == "p5"


def test_check_calibrates_and_validates_in_one_run(tmp_path_factory,
                                                   capsys):
    """``--check``: the calibration file (its points from 8 B to 4x -e)
    and the validation rows of one interleaved run; ``--also`` counts
    the hits again at each other statistic of the same calls (rank 0
    prints)."""
    world = MPI.COMM_WORLD
    if world.Get_size() % 2:
        pytest.skip("ranks pair up: needs an even rank count")
    folder = world.bcast(str(tmp_path_factory.mktemp("check")), 0)
    path, out = f"{folder}/cal.json", f"{folder}/valid.json"
    assert main(["--check", "--out", path, "--json", out, "-c", "bcast",
                 "-b", "256", "-e", "1K", "--ops", "sum",
                 "--dtypes", "float32", "--ranges", "2", "--also",
                 "p5,avg", *FEW]) == 0
    world.Barrier()
    counts = [line for line in capsys.readouterr().out.splitlines()
              if line.startswith("# at ")]
    if world.Get_rank() == 0:
        n = 2 * (len(mpicoll.algorithms("bcast")) - 1)  # 2 sizes, hand-built
        assert [line.split(",")[0] for line in counts] == [
            "# at p50", "# at p5", "# at avg"]  # --statistic's first
        assert all(line.endswith(f" of {n} within ±30%") for line in counts)
    else:
        assert counts == []
    cal = load_calibration(path)
    sizes = [8 << i for i in range(10)]  # 8 B .. 4 KiB
    for series in ("exchange", "one_way", "exchange_clean", "copy", "write"):
        assert [n for n, _ in cal.points[series]] == sizes
    with open(out) as f:
        data = json.load(f)
    assert data["header"]["interleaved"] is True
    assert data["header"]["calibration"] == path
    rows = data["rows"]
    want = {a for a in mpicoll.algorithms("bcast") if a != "native"}
    assert {(r["algorithm"], r["nbytes"]) for r in rows} == \
        {(a, n) for a in want for n in (256, 1024)}
    for r in rows:
        assert r["wrong"] == 0
        assert r["measured_us"] > 0 and r["predicted_us"] > 0

