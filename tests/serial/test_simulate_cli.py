"""Tier 1: ``python -m mpicoll.simulate`` (predicted times, no MPI): its
table, ``--json`` records, ``--emit-rules`` files (read back by
:mod:`mpicoll.select.policy`) and the SimGrid model at a few ranks."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from mpicoll.select.policy import choose, load_rules
from mpicoll.sim.predict import main

ALGS = "ring,recursive_doubling,rabenseifner"
BASE = ["-c", "allreduce", "-a", ALGS, "-b", "1K", "-e", "1M", "-f", "32"]


def table_rows(text: str) -> list[list[str]]:
    """The data rows of the printed tables, split into columns."""
    return [line.split() for line in text.splitlines()
            if line.strip() and not line.startswith("#")
            and not line.lstrip().startswith("size")]


def test_table_parses_and_marks_the_best(capsys):
    assert main([*BASE, "--ranks", "16,64"]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert len(rows) == 2 * 3 * 3  # rank counts x sizes x algorithms
    for i in range(0, len(rows), 3):
        group = rows[i:i + 3]
        assert len({r[0] for r in group}) == 1  # one size
        times = [float(r[6]) for r in group]
        marked = [r for r in group if r[-1].endswith("*")]
        assert len(marked) == 1 and float(marked[0][6]) == min(times)
    # 16 ranks, 1 KiB: one message per round beats 2(p-1) rounds of a ring
    first = {r[5]: float(r[6]) for r in rows[:3]}
    assert first["recursive_doubling"] < first["ring"]


def test_json_records_are_the_benchmarks_marked_predicted(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main([*BASE, "--ranks", "16", "--network", "torus:4x4",
                 "--json", str(out), "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    data = json.loads(out.read_text())
    assert data["header"]["predicted"] is True
    assert data["header"]["model"] == "analytic"
    fields = {"collective", "algorithm", "chosen", "nranks", "dtype", "op",
              "root", "count", "nbytes", "inplace", "device", "persistent",
              "time_us", "algbw_gbps", "busbw_gbps", "iters", "wrong"}
    for r in data["records"]:
        assert fields <= set(r)
        assert r["predicted"] is True and r["model"] == "analytic"
        assert r["network"] == "torus:4x4" and r["nranks"] == 16
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 2 * 15 / 16)
        assert r["time_us"]["avg"] > 0


def test_emitted_rules_pick_the_predicted_best(tmp_path, capsys):
    out, rules = tmp_path / "p.json", tmp_path / "rules.json"
    assert main([*BASE, "--ranks", "16,64", "--json", str(out),
                 "--emit-rules", str(rules), "--quiet"]) == 0
    records = json.loads(out.read_text())["records"]
    for size in (16, 64):
        loaded = load_rules(str(tmp_path / f"rules.{size}.json"))
        assert loaded.nranks == size
        assert loaded.source.startswith("simulation, analytic model, flat:64")
        for nbytes in {r["nbytes"] for r in records}:
            mine = [r for r in records
                    if r["nranks"] == size and r["nbytes"] == nbytes]
            best = min(mine, key=lambda r: r["time_us"]["avg"])["algorithm"]
            c = choose("allreduce", "auto", size=size, nbytes=nbytes,
                       commutative=True, overrides={}, where={},
                       rules=loaded)
            assert c.algorithm.name == best
            assert "(simulation, analytic model" in c.reason


def test_plot_writes_a_png(tmp_path):
    """``--plot``: a panel per collective and rank count (matplotlib)."""
    path = tmp_path / "p.png"
    assert main([*BASE, "--ranks", "16,64", "--plot", str(path),
                 "--quiet"]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 5000


def test_bad_arguments_exit_2(capsys):
    assert main(["--network", "torus:2x2", "--ranks", "16"]) == 2
    assert main(["-a", "warp_drive"]) == 2
    assert main(["-c", "allreduse"]) == 2
    assert "usage" in capsys.readouterr().err


def test_a_simgrid_folder_without_simgrid_is_a_usage_error(tmp_path, capsys,
                                                          monkeypatch):
    monkeypatch.delenv("MPICOLL_SIMGRID", raising=False)
    assert main(["--model", "simgrid", "--simgrid", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "usage" in err and "no SimGrid module" in err
    monkeypatch.setenv("MPICOLL_SIMGRID", str(tmp_path / "none"))
    assert main(["--model", "simgrid"]) == 2
    assert "MPICOLL_SIMGRID" in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--sample-rounds", "1"], "--sample-rounds must be >= 2"),
    (["--sample-rounds", "x"], "invalid int value"),
    (["--sample-rounds", "3", "--keep", "4"], "use one"),
    (["--sample-rounds", "3", "--model", "analytic"], "for --model simgrid"),
])
def test_bad_sample_rounds_is_a_usage_error(capsys, extra, message):
    args = ["-c", "alltoall", "-a", "pairwise", "--model", "simgrid", *extra]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "usage" in err and message in err


def test_module_entry_point():
    proc = subprocess.run([sys.executable, "-m", "mpicoll.simulate", "-a",
                           "ring", "--ranks", "4", "-b", "64", "-e", "64"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert len(table_rows(proc.stdout)) == 1


@pytest.mark.skipif(importlib.util.find_spec("simgrid") is None,
                    reason="SimGrid not installed (scripts/simgrid.sh)")
def test_simgrid_model_matches_analytic_on_flat(tmp_path):
    """On ``flat`` SimGrid's time is the α-β-γ cost: the two models agree
    for ring and recursive doubling at 8 ranks."""
    times = {}
    for model in ("analytic", "simgrid"):
        out = tmp_path / f"{model}.json"
        assert main(["-a", "ring,recursive_doubling", "--ranks", "8", "-b",
                     "64K", "-e", "64K", "--model", model, "--json",
                     str(out), "--quiet"]) == 0
        times[model] = {r["algorithm"]: r["time_us"]["avg"] for r in
                        json.loads(out.read_text())["records"]}
    for alg, t in times["analytic"].items():
        assert times["simgrid"][alg] == pytest.approx(t, rel=0.02)
