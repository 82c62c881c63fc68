"""Tier 1 (no MPI needed): the benchmark's arguments, sizes, specs."""

import argparse

import numpy as np
import pytest

from mpicoll.bench.cli import cases, flat, main, parse_args
from mpicoll.bench.harness import Case, make_buffers
from mpicoll.bench.specs import OPS, SPECS
from mpicoll.cli import plot as plotting
from mpicoll.cli.sizes import parse_size, sizes
from mpicoll.cli.tables import summary
from mpicoll.schedule.layout import buffer_lengths

PS = (1, 2, 3, 5, 8)


@pytest.mark.parametrize("text, value", [
    ("8", 8), ("64K", 64 << 10), ("1M", 1 << 20), ("2G", 2 << 30),
    ("1.5k", 1536), ("16MB", 16 << 20), (" 32 ", 32)])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "abc", "-8", "1X"])
def test_parse_size_rejects(text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse_size(text)


def test_sizes():
    assert sizes(8, 64, 2) == [8, 16, 32, 64]
    assert sizes(8, 100, 4) == [8, 32]
    assert sizes(64, 64, 1) == [64]


@pytest.mark.parametrize("p", PS)
def test_busbw_factors(p):
    ring = (p - 1) / p
    want = {"allreduce": 2 * ring, "reduce": 1, "bcast": 1,
            "allgather": ring, "reduce_scatter_block": ring,
            "alltoall": ring, "gather": ring, "scatter": ring}
    for name, factor in want.items():
        assert SPECS[name].row.bus_factor(p) == pytest.approx(factor)


@pytest.mark.parametrize("p", PS)
def test_counts_and_sizes(p):
    """nccl-tests sizes: allgather etc. count p blocks, allreduce one."""
    assert SPECS["allreduce"].count_for(64, p, 4) == 16
    assert SPECS["allgather"].count_for(64, p, 4) == max(1, 16 // p)
    assert SPECS["allgather"].nbytes(3, p, 4) == 12 * p
    assert SPECS["barrier"].count_for(64, p, 4) == 0
    args = parse_args(["-c", "allgather", "-b", "4", "-e", "8"], 0, p)
    counts = [c.count for c in cases(args, p)]
    assert counts == sorted(set(counts))  # rounding duplicates dropped


def reference(name, sends, rank, root, n, op):
    """What ``rank`` must receive, from all ranks' send buffers."""
    p = len(sends)
    if name == "bcast":
        return sends[root]  # the root's input (see _bcast_input below)
    if name in ("allreduce", "reduce", "scan", "exscan"):
        ranks = {"scan": range(rank + 1), "exscan": range(rank)}.get(
            name, range(p))
        if (name == "reduce" and rank != root) or not ranks:
            return None
        return OPS[op].reduce(np.stack([sends[r] for r in ranks]), axis=0)
    if name == "reduce_scatter_block":
        total = OPS[op].reduce(np.stack(sends), axis=0)
        return total[rank * n:(rank + 1) * n]
    if name in ("allgather", "gather"):
        return np.concatenate(sends) if name == "allgather" or \
            rank == root else None
    if name == "alltoall":
        return np.concatenate([s[rank * n:(rank + 1) * n] for s in sends])
    if name == "scatter":
        return sends[root][rank * n:(rank + 1) * n]
    return None


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("op", sorted(OPS))
def test_expected_matches_reference(name, p, op):
    """Each spec's expected output is what the collective must deliver,
    worked out independently from every rank's input."""
    spec, n, root = SPECS[name], 3, p - 1
    case = Case(spec, 0 if name == "barrier" else n, "int64", op, root, False)
    bufs = [make_buffers(case, r, p) for r in range(p)]
    if name == "bcast":
        sends = [bufs[root].recv] * p
    else:
        sends = [b.send for b in bufs]
    for r in range(p):
        slen, rlen = buffer_lengths(name, r, p, case.count, root)
        assert bufs[r].send.size == slen and bufs[r].recv.size == rlen
        want = spec.expected(r, p, case.count, root, "int64", op)
        ref = reference(name, sends, r, root, case.count, op)
        if ref is None:
            assert want is None
        else:
            np.testing.assert_array_equal(want, ref)


@pytest.mark.parametrize("name", [n for n, s in SPECS.items()
                                  if s.row.inplace is not None])
@pytest.mark.parametrize("p", (2, 3))
def test_inplace_buffers(name, p):
    """In place (at the root only for rooted ones), one argument is
    MPI.IN_PLACE and the output view already holds this rank's input."""
    from mpi4py import MPI

    case = Case(SPECS[name], 2, "float32", "sum", 0, True)
    for r in range(p):
        bufs = make_buffers(case, r, p)
        in_place = MPI.IN_PLACE is bufs.send or MPI.IN_PLACE is bufs.recv
        assert in_place == (r == 0 or name not in ("reduce", "gather",
                                                   "scatter"))
        if in_place:
            assert bufs.out.size in (2, 2 * p)
            assert np.all(bufs.out != 0) if "gather" not in name else \
                np.all(bufs.out[2 * r:2 * r + 2] != 0)


@pytest.mark.parametrize("argv", [
    ["-c", "nope"], ["-a", "nope"], ["-b", "1M", "-e", "8"],
    ["-r", "5"], ["-n", "0"], ["-f", "1"], ["-b", "zz"], ["--timeout", "0"]])
def test_bad_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        parse_args(argv, 0, 2)
    assert e.value.code == 2
    assert "usage" in capsys.readouterr().err


def test_bad_arguments_quiet_off_rank_0(capsys):
    with pytest.raises(SystemExit):
        parse_args(["-c", "nope"], 1, 2)
    assert capsys.readouterr().err == ""
    assert main(["-c", "nope"]) == 2


def test_algorithm_selection():
    args = parse_args(["-c", "allreduce,bcast", "-a", "ring,native,auto"],
                      0, 2)
    assert args.algorithms == {"allreduce": ["ring", "native", "auto"],
                               "bcast": ["native", "auto"]}
    args = parse_args(["-c", "barrier"], 0, 2)
    assert args.algorithms["barrier"][0] == "native"
    assert args.algorithms["barrier"][-1] == "auto"


def _rec(alg, avg, nbytes=8, wrong=0):
    return {"collective": "allreduce", "algorithm": alg, "nbytes": nbytes,
            "wrong": wrong, "time_us": {"avg": avg, "min": 1, "max": 2,
                                        "p50": 1, "p99": 2}}


def test_summary_and_flat():
    recs = [_rec("native", 10.0), _rec("ring", 5.0), _rec("auto", 4.0),
            _rec("bruck", 1.0, wrong=3)]
    recs[2]["chosen"] = "ring"
    assert summary(recs, "allreduce") == [(8, "ring", 2.0, "ring", 2.5)]
    assert summary(recs[1:], "allreduce") == [(8, "ring", None, "ring",
                                               None)]
    row = flat(recs[0])
    assert row["time_us_avg"] == 10.0 and "time_us" not in row


def test_budget_split():
    """The budget is split between collectives, then between sizes."""
    from mpicoll.bench.cli import _Budget

    args = parse_args(["-c", "allreduce,bcast", "-b", "8", "-e", "16"], 0, 2)
    todo = cases(args, 2)  # 2 sizes each
    assert _Budget(0, todo).next(0) is None
    share = _Budget(8.0, todo).next(0)
    assert 1.9 < share <= 2.0  # 8 s / 2 collectives / 2 sizes


def _record(collective, algorithm, nbytes, busbw, chosen=None, wrong=0):
    return {"collective": collective, "algorithm": algorithm,
            "chosen": chosen, "nbytes": nbytes, "nranks": 2,
            "busbw_gbps": busbw, "wrong": wrong}


def test_plot_writes_a_png(tmp_path):
    records = [_record(c, a, n, n / 1e6 * (2 if a == "ring" else 1),
                       chosen="ring" if a == "auto" else None)
               for c in ("allreduce", "bcast") for a in ("native", "ring",
                                                         "auto")
               for n in (8, 64, 512)]
    records.append(_record("barrier", "native", 0, 0.0))
    records.append(_record("bcast", "ring", 4096, 9.9, wrong=3))
    path = tmp_path / "b.png"
    plotting.plot_busbw(records, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 5000


def test_plot_without_matplotlib_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setattr(plotting, "available", lambda: False)
    with pytest.raises(SystemExit) as info:
        parse_args(["--plot", "x.png"])
    assert info.value.code == 2
    assert "matplotlib" in capsys.readouterr().err
