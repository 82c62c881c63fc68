"""Tier 1: the calibration file (:mod:`mpicoll.model.calibration`) without MPI:
fitting synthetic points recovers the costs they were made from, the file
round-trips through JSON, the loader names what is wrong with a bad file,
the model's size ranges price each message by its range, and
``python -m mpicoll.simulate --calibration`` uses the file."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mpicoll.model.calibration import Calibration, CalibrationError, fit, \
    fit_line, fit_slope, load_calibration, refit, split
from mpicoll.model.cost import Network, SizeRange, predict
from mpicoll.bench.validation import rewritten, writing
from mpicoll.sim.predict import main as simulate
from scripts import load

SIZES = [1 << i for i in range(3, 26)]  # 8 B .. 32 MiB
# (upto, alpha, beta) of the exchange; (upto, per byte) of copy and reduce
MESSAGES = [(4096, 3e-6, 1e-10), (1 << 20, 9e-6, 7e-11), (None, 2e-5, 1.2e-10)]
# (upto, alpha, beta) of a message one way: half an exchange's β
ONE_WAY = [(upto, a, b / 2) for upto, a, b in MESSAGES]
LOCAL = [(1 << 18, 2e-11), (None, 8e-11)]
# one message of 8 B through mpicoll's call and by the executor alone
CALL = ([(8, 5.5e-6)], [(8, 3.5e-6)])


def piecewise(table, n):
    return next(row[1:] for row in table if row[0] is None or n <= row[0])


def exchange_points(noise=None, table=MESSAGES):
    pts = [(n, a + b * n) for n in SIZES
           for a, b in [piecewise(table, n)]]
    if noise is not None:
        pts = [(n, t * f) for (n, t), f in zip(pts, noise)]
    return pts


def local_points(scale=1.0):
    return [(n, scale * piecewise(LOCAL, n)[0] * n) for n in SIZES]


def calibration(**info) -> Calibration:
    return fit(exchange_points(), local_points(),
               {("sum", "float32"): local_points(0.5),
                ("max", "float64"): local_points(2.0)}, ranges=3,
               reduce_out_of_place={("sum", "float32"): local_points(1.5)},
               one_way=exchange_points(table=ONE_WAY), **info)


def test_line_and_slope_recover_exact_costs():
    pts = [(n, 4e-6 + 2e-10 * n) for n in SIZES]
    assert fit_line(pts) == pytest.approx((4e-6, 2e-10), rel=1e-9)
    assert fit_slope([(n, 3e-11 * n) for n in SIZES]) == pytest.approx(3e-11)


def test_line_stays_non_negative():
    """Points falling with size get a flat line, not a negative β; points
    through the origin a zero α, not a negative one."""
    alpha, beta = fit_line([(1, 5.0), (10, 4.0), (100, 3.0)])
    assert beta == 0 and 3 < alpha < 5
    alpha, beta = fit_line([(10, 1.0), (100, 12.0), (1000, 130.0)])
    assert alpha == 0 and beta > 0


def test_points_timed_at_zero_are_left_out():
    """A point less its copy can come out at 0 under the noise (a short
    run's 5th percentile): the fits leave it out rather than weigh it by
    1/0, and a series of such points fits to 0."""
    line = [(8, 0.0), (16, 3e-6 + 16e-9), (32, 3e-6 + 32e-9),
            (64, 3e-6 + 64e-9)]
    assert fit_line(line) == pytest.approx((3e-6, 1e-9))
    assert fit_slope([(8, 0.0), (16, 16e-9)]) == pytest.approx(1e-9)
    assert fit_line([(8, 0.0), (16, 0.0)]) == (0.0, 0.0)
    assert fit_slope([(8, 0.0)]) == 0.0
    points = [(n, 0.0 if n < 64 else t) for n, t in exchange_points()]
    cal = fit(points, local_points(), {("sum", "float32"): local_points()},
              one_way=points)
    assert all(math.isfinite(x) for row in cal.ranges for x in row[1:])


def test_split_finds_the_knees():
    assert split([exchange_points()], 3) == [4096, 1 << 20]
    assert split([local_points(), local_points(3.0)], 2) == [1 << 18]


def test_fit_recovers_every_range():
    cal = calibration()
    bounds = [r[0] for r in cal.ranges]
    assert {4096, 1 << 18, 1 << 20} <= set(bounds)  # both splits' knees
    assert bounds[-1] is None
    for (upto, alpha, beta, copy), one_way in zip(cal.ranges, cal.one_way):
        n = upto or SIZES[-1]
        assert (alpha, beta) == pytest.approx(piecewise(MESSAGES, n), rel=1e-6)
        assert one_way == pytest.approx(piecewise(ONE_WAY, n), rel=1e-6)
        assert copy == pytest.approx(piecewise(LOCAL, n)[0], rel=1e-9)
    for table, scale in ((cal.gamma, 0.5), (cal.gamma_out_of_place, 1.5)):
        assert table[("sum", "float32")] == pytest.approx(
            [scale * piecewise(LOCAL, upto or SIZES[-1])[0]
             for upto, *_ in cal.ranges])


def test_fit_tolerates_noise():
    """With two percent of noise, every size's message cost stays within
    five percent (where β·n is small against α, β itself is loose)."""
    noise = np.random.default_rng(1).uniform(0.98, 1.02, len(SIZES))
    cal = fit(exchange_points(noise), local_points(),
              {("sum", "float32"): local_points()}, ranges=3)
    assert {4096, 1 << 18, 1 << 20} <= {r[0] for r in cal.ranges}
    for n, t in exchange_points():
        _, alpha, beta, _ = next(r for r in cal.ranges
                                 if r[0] is None or n <= r[0])
        assert alpha + beta * n == pytest.approx(t, rel=0.05)


def test_network_prices_by_range():
    """One 2-rank exchange of n bytes then its reduction (recursive
    doubling, ``recv = incoming op send``: out of place): each size takes
    its own range's α, β and out-of-place γ; above the last bound, the
    base costs."""
    cal = calibration()
    net = cal.network("sum", "float32")
    assert net.alpha == cal.ranges[-1][1]
    assert [r.upto for r in net.ranges] == [r[0] for r in cal.ranges[:-1]]
    for n in (64, 4096, 8192, 1 << 19, 1 << 22):
        a, b = piecewise(MESSAGES, n)
        g = 1.5 * piecewise(LOCAL, n)[0]
        want = a + b * n + g * n
        got = predict("allreduce", "recursive_doubling", 2, n // 4, 4, net)
        assert got == pytest.approx(want, rel=1e-6)
    # the ring allgather copies its own block, then exchanges it
    n = 1 << 16
    got = predict("allgather", "ring", 2, n // 4, 4, net)
    assert got == pytest.approx(2e-11 * n + 9e-6 + 7e-11 * n, rel=1e-6)


def test_a_message_one_way_takes_the_one_way_costs():
    """A 2-rank broadcast is one message one way, priced by the one-way
    points' range (an exchange takes the exchange's:
    test_network_prices_by_range). A file
    without one-way points (as before they were measured) prices one way
    as an exchange's direction."""
    cal = calibration()
    net = cal.network("sum", "float32")
    data = good()
    del data["one_way"], data["points"]["one_way"]
    without = Calibration.from_json(data)
    assert without.one_way == ()
    for n in (64, 8192, 1 << 19, 1 << 22):
        a, b = piecewise(ONE_WAY, n)
        assert predict("bcast", "binomial", 2, n, 1, net) == \
            pytest.approx(a + b * n, rel=1e-6)
        a, b = piecewise(MESSAGES, n)
        assert predict("bcast", "binomial", 2, n, 1,
                       without.network("sum", "float32")) == \
            pytest.approx(a + b * n, rel=1e-6)
    # four ranks, binomial: the root's two rounds are one way
    n = 1 << 16
    a, b = piecewise(ONE_WAY, n)
    assert predict("bcast", "binomial", 4, n, 1, net) == \
        pytest.approx(2 * (a + b * n), rel=1e-6)


def test_the_per_call_cost_is_added_once_to_every_prediction():
    """The file's ``call`` (the call point less the executor's, at least
    0) reaches the model's Network, which adds it once to every
    prediction; a file without it (as before it was measured) adds
    nothing."""
    cal = calibration(call=CALL)
    assert cal.call == pytest.approx(2e-6)
    net = cal.network("sum", "float32")
    assert net.call == cal.call
    data = json.loads(json.dumps(cal.to_json()))
    assert Calibration.from_json(data) == cal
    assert refit(cal, ranges=3) == cal  # from the call points
    del data["call"], data["points"]["call"], data["points"]["call_plan"]
    without = Calibration.from_json(data)
    assert without.call == 0.0 and good() == without.to_json()
    for c, a in (("bcast", "binomial"), ("allreduce", "ring"),
                 ("alltoall", "bruck")):
        for count in (64, 1 << 18):
            assert predict(c, a, 4, count, 4, net) == pytest.approx(
                predict(c, a, 4, count, 4,
                        without.network("sum", "float32")) + 2e-6, rel=1e-9)
    faster = fit(exchange_points(), local_points(),
                 {("sum", "float32"): local_points()},
                 call=(CALL[1], CALL[0]))  # the call faster than its round
    assert faster.call == 0.0


def test_ranges_equal_to_the_base_change_nothing():
    plain = Network(3e-6, 1e-9, 4e-10, 1e-10)
    ranged = Network(3e-6, 1e-9, 4e-10, 1e-10,
                     ranges=(SizeRange(100, 3e-6, 1e-9, 4e-10, 1e-10),
                             SizeRange(10_000, 3e-6, 1e-9, 4e-10, 1e-10)))
    for alg in ("ring", "rabenseifner", "recursive_doubling"):
        for count in (7, 1000, 100_000):
            assert math.isclose(predict("allreduce", alg, 6, count, 4, plain),
                                predict("allreduce", alg, 6, count, 4, ranged),
                                rel_tol=1e-12)


def test_network_refuses_bad_ranges():
    with pytest.raises(ValueError, match="increasing"):
        Network(1, 1, ranges=(SizeRange(10, 1, 1, 0, 0),
                              SizeRange(10, 1, 1, 0, 0)))
    with pytest.raises(ValueError, match=r"ranges\[0\]\.beta"):
        Network(1, 1, ranges=(SizeRange(10, 1, -1, 0, 0),))


def test_json_round_trip(tmp_path):
    cal = calibration(machine={"hostname": "h", "cpu": "C", "cores": 2},
                      mpi={"library": "MPICH Version: 5.0.2", "ranks": 2},
                      date="2026-11-25T20:00:00+00:00", command="x")
    path = tmp_path / "cal.json"
    cal.save(str(path))
    back = load_calibration(str(path))
    assert back == cal
    assert back.points["exchange"] == [list(p) for p in exchange_points()]
    assert set(back.points["reduce"]) == {"sum", "max"}
    assert back.network("max", "float64") == cal.network("max", "float64")
    assert back.description == ("calibrated on h (C, 2 cores), 2026-11-25, "
                                "2 ranks, MPICH Version: 5.0.2")


def test_unmeasured_op_takes_the_slowest_gamma():
    cal = calibration()
    assert cal.gamma_for("band", "int8") == cal.gamma[("max", "float64")]
    assert cal.gamma_for("max", "float64", out_of_place=True) == \
        cal.gamma_out_of_place[("sum", "float32")]


def test_without_out_of_place_points_every_reduction_costs_gamma():
    """A file without ``gamma_out_of_place`` (as before it was measured)
    prices a reduction out of place as one in place."""
    data = good()
    del data["gamma_out_of_place"], data["points"]["reduce_out_of_place"]
    cal = Calibration.from_json(data)
    assert cal.gamma_out_of_place == {}
    net = cal.network("sum", "float32")
    assert net.gamma_out_of_place is None
    assert all(r.gamma_out_of_place is None for r in net.ranges)
    n = 1 << 19
    a, b = piecewise(MESSAGES, n)
    assert predict("allreduce", "recursive_doubling", 2, n // 4, 4, net) == \
        pytest.approx(a + b * n + 0.5 * piecewise(LOCAL, n)[0] * n, rel=1e-6)


def test_validation_hits_count_the_model_and_five_choices_undone(tmp_path,
                                                                  capsys):
    """bench/validation_hits.py refits the run's points and counts the rows
    within ±30% as the model is, and with each of five choices undone.
    Rows measured as predicted (the model plus the input's write, 0.1 of
    LOCAL per byte): the 2-rank recursive doubling of 512 KiB reduces out
    of place (γ 1.5 against 0.5 per byte of LOCAL's: 63 of its 113 µs),
    so it misses at the in-place γ; the reduce-scatter reduces in place,
    so it hits either way; the pipelined broadcast of 512 KiB is a train
    of 4 segments one way, so with α on each (3 more of 9 µs on its 27)
    it misses, and priced as an exchange (β twice the one way's: 46 µs)
    too. Without the per-call cost (none here) all still hit. The ring
    reduce-scatter, measured 1.2 times its prediction, hits every time,
    and its schedules on 2 ranks are the pairwise one's: the line names
    those two, measured 1.2x apart, and ends with the median ratio at the
    one size. The synthetic points are lines between their bends, so any
    split fits them alike."""
    hits = load("validation_hits")
    path, rows_path = tmp_path / "cal.json", tmp_path / "rows.json"
    cal = calibration(extra={"write": local_points(0.1)})
    cal.save(str(path))
    net, n = cal.network("sum", "float32"), 1 << 19
    write = writing(cal, str(path))
    rows = []
    for c, a, slower in (("allreduce", "recursive_doubling", 1.0),
                         ("reduce_scatter_block", "pairwise", 1.0),
                         ("bcast", "pipelined", 1.0),
                         ("reduce_scatter_block", "ring", 1.2)):
        row = {"collective": c, "algorithm": a, "nranks": 2, "count": n // 4,
               "nbytes": n, "dtype": "float32", "root": None}
        row["measured_us"] = 1e6 * slower * (predict(c, a, 2, n // 4, 4, net)
                                             + write(rewritten(row) * 4))
        rows.append(row)
    assert hits.hits(rows, str(path)) == 4
    assert hits.hits(rows, str(path), trains=False) == 3
    assert hits.hits(rows, str(path), ranges=4, min_points=3) == 4
    assert hits.hits(rows, str(path), in_place=True) == 3
    assert hits.hits(rows, str(path), one_way=False) == 3
    assert hits.hits(rows, str(path), call=False) == 4
    ratio, twins = hits.twins(rows)
    assert ratio == pytest.approx(1.2)
    assert [r["algorithm"] for r in twins] == ["pairwise", "ring"]
    assert hits.twins(rows[:3]) == (1.0, [])
    rows_path.write_text(json.dumps({"rows": rows}))
    assert hits.main([str(rows_path), str(path)]) == 0
    assert capsys.readouterr().out == (
        "4 of 4 within ±30% (3 with α on every message of a train, 4 with "
        "at most 4 ranges of 3 sizes or more, 3 with gamma in place for "
        "every reduction, 3 with one way priced as an exchange, 4 without the "
        "per-call cost); identical "
        "schedules measured up to 1.20x apart (reduce_scatter_block "
        f"pairwise, ring at {n} B); median ratio by size: 512K 1.00\n")


def test_validation_hits_over_runs_take_each_cell_s_median(tmp_path,
                                                          capsys):
    """``--runs DIR``: each run of DIR/repeats predicted with its own
    calibration, a cell counted within when its median ratio over the
    runs is. Three runs of two cells measured at 1/0.6, 1/1.0 and 1/1.1
    of the prediction (ring) and 1/1.0, 1/1.5, 1/1.4 (pairwise): the
    ring's median is 1.0 and the pairwise one's 1.4, so 1 of 2 cells
    within, though no run had every cell within."""
    hits = load("validation_hits")
    runs = tmp_path / "repeats"
    runs.mkdir()
    cal = calibration(extra={"write": local_points(0.1)})
    net, n = cal.network("sum", "float32"), 1 << 19
    write = writing(cal, "cal")
    for k, ratios in enumerate(((0.6, 1.0), (1.0, 1.5), (1.1, 1.4)), 1):
        cal.save(str(runs / f"{k}-cal.json"))
        rows = []
        for a, ratio in zip(("ring", "pairwise"), ratios):
            row = {"collective": "reduce_scatter_block", "algorithm": a,
                   "nranks": 2, "count": n // 4, "nbytes": n,
                   "dtype": "float32", "root": None}
            row["measured_us"] = 1e6 * (predict(
                "reduce_scatter_block", a, 2, n // 4, 4, net)
                + write(rewritten(row) * 4)) / ratio
            rows.append(row)
        (runs / f"{k}-rows.json").write_text(json.dumps({"rows": rows}))
    assert hits.main(["--runs", str(tmp_path)]) == 0
    assert capsys.readouterr().out == (
        "over 3 runs: the median ratio of 1 of 2 cells within ±30%; every "
        "cell within in 0 of 3 runs; furthest by median: "
        "reduce_scatter_block pairwise 512K 1.40, reduce_scatter_block ring "
        "512K 1.00\n")


def test_refit_is_the_fit_of_the_points():
    """refit() fits a calibration again from its raw points: the same
    calibration; a bend between the last two sizes gets a range of its
    own with ranges of two sizes, not of three; without points, a clear
    error."""
    cal = calibration(extra={"write": local_points()})
    again = refit(cal, ranges=3)  # calibration() fits 3
    assert again == cal and again.points == cal.points
    steep = [(n, t * (3 if n > 1 << 23 else 1)) for n, t in exchange_points()]
    assert split([steep], 4, 2)[-1] == 1 << 23  # 16 and 32 MiB apart
    assert split([steep], 4, 3)[-1] < 1 << 23
    with pytest.raises(CalibrationError, match="no raw points"):
        refit(Calibration(cal.ranges, cal.gamma))


def good() -> dict:
    return json.loads(json.dumps(calibration().to_json()))


BAD = [
    (lambda d: d.update(format="other"), "not an mpicoll-calibration"),
    (lambda d: d.update(version=2), "version 2"),
    (lambda d: d.pop("ranges"), '"ranges" must be'),
    (lambda d: d["ranges"][0].pop("beta"), r"ranges\[0\] must have"),
    (lambda d: d["ranges"][-1].update(upto=10), r"\]\.upto must be null"),
    (lambda d: d["ranges"][0].update(upto=None), r"ranges\[0\]\.upto must be"
                                                 " a positive"),
    (lambda d: d["ranges"][1].update(upto=8), "must increase"),
    (lambda d: d["ranges"][0].update(alpha=-1), r"ranges\[0\]\.alpha must be"),
    (lambda d: d["ranges"][0].update(alpha=True), r"ranges\[0\]\.alpha"),
    (lambda d: d["gamma"]["sum"].update(float32=[1e-10]),
     r"gamma\['sum'\]\['float32'\] must be a list of \d+ values"),
    (lambda d: d.update(gamma={}), '"gamma" must map'),
    (lambda d: d["gamma_out_of_place"]["sum"].update(float32=[1e-10]),
     r"gamma_out_of_place\['sum'\]\['float32'\] must be a list of"),
    (lambda d: d["gamma_out_of_place"]["sum"]["float32"].__setitem__(0, -1),
     r"gamma_out_of_place\['sum'\]\['float32'\] must be a finite number"),
    (lambda d: d.update(gamma_out_of_place={}),
     '"gamma_out_of_place" must map'),
    (lambda d: d.update(machine="vm"), '"machine" must be a JSON dict'),
    (lambda d: d["one_way"].pop(), '"one_way" must be a list of'),
    (lambda d: d["one_way"][0].pop("beta"), '"one_way" must be a list of'),
    (lambda d: d["one_way"][1].update(alpha=-1),
     r"one_way\[1\]\.alpha must be a finite number"),
    (lambda d: d.update(call=-1e-6), '"call" must be a finite number'),
    (lambda d: d.update(call="2us"), '"call" must be a finite number'),
]


@pytest.mark.parametrize("spoil, message", BAD)
def test_loader_names_what_is_wrong(tmp_path, spoil, message):
    data = good()
    spoil(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match=message) as info:
        load_calibration(str(path))
    assert str(path) in str(info.value)


def test_loader_refuses_what_is_not_json(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{ranges: 1")
    with pytest.raises(CalibrationError, match="not JSON"):
        load_calibration(str(path))


def test_simulate_takes_a_calibration(tmp_path, capsys):
    path = tmp_path / "cal.json"
    calibration(machine={"hostname": "h"}).save(str(path))
    out = tmp_path / "p.json"
    assert simulate(["-a", "ring", "--ranks", "2", "-b", "64K", "-e", "64K",
                     "--calibration", str(path), "--json", str(out),
                     "--quiet"]) == 0
    data = json.loads(out.read_text())
    assert data["header"]["calibration"].startswith("calibrated on h")
    assert data["header"]["alpha"] is None
    n = 1 << 16  # ring at 2 ranks: copy n, two half exchanges, reduce n/2
    want = predict("allreduce", "ring", 2, n // 4, 4,
                   load_calibration(str(path)).network())
    assert data["records"][0]["time_us"]["avg"] == pytest.approx(want * 1e6)


@pytest.mark.parametrize("extra", [["--alpha", "1e-6"],
                                   ["--model", "simgrid"]])
def test_simulate_refuses_calibration_with_other_costs(tmp_path, capsys,
                                                       extra):
    path = tmp_path / "cal.json"
    calibration().save(str(path))
    assert simulate(["--calibration", str(path), *extra]) == 2
    assert "--calibration takes the place" in capsys.readouterr().err


def test_simulate_reports_a_bad_calibration(tmp_path, capsys):
    path = tmp_path / "cal.json"
    path.write_text("{}")
    assert simulate(["--calibration", str(path)]) == 2
    assert "not an mpicoll-calibration file" in capsys.readouterr().err


# An inside-node link ten times the speed of the one between nodes, and its
# own size split.
INSIDE = [(1 << 15, 3e-7, 1e-11), (None, 1e-6, 8e-12)]


def two_links(tmp_path):
    """Files of a calibration between nodes (1 rank per node) and one
    inside a node (2), as python -m mpicoll.calibrate writes them."""
    inter = calibration(mpi={"ranks": 2, "ranks_per_node": 1})
    points = [(n, a + b * n) for n in SIZES for a, b in [piecewise(INSIDE, n)]]
    intra = fit(points, local_points(), {("sum", "float32"): local_points()},
                ranges=2, mpi={"ranks": 2, "ranks_per_node": 2})
    paths = tmp_path / "inter.json", tmp_path / "intra.json"
    inter.save(str(paths[0]))
    intra.save(str(paths[1]))
    return inter, intra, [str(x) for x in paths]


def test_intra_and_inter_calibrations_combine(tmp_path):
    """Two ranks on one node pay the intra calibration's α and β by its
    ranges, on two nodes the inter one's; the reduction (out of place) is
    the inter calibration's γ either way."""
    inter, intra, _ = two_links(tmp_path)
    net = inter.network("sum", "float32", intra=intra)
    assert net.alpha_intra == intra.ranges[-1][1]
    assert [r.upto for r in net.ranges_intra] == [r[0] for r in intra.ranges[:-1]]
    for n in (1024, 1 << 15, 1 << 16, 1 << 22):
        g = 1.5 * piecewise(LOCAL, n)[0] * n
        a, b = piecewise(INSIDE, n)
        inside = predict("allreduce", "recursive_doubling", 2, n // 4, 4, net,
                         nodes=(0, 0))
        assert inside == pytest.approx(a + b * n + g, rel=1e-4)
        a, b = piecewise(MESSAGES, n)
        across = predict("allreduce", "recursive_doubling", 2, n // 4, 4, net,
                         nodes=(0, 1))
        assert across == pytest.approx(a + b * n + g, rel=1e-4)
        # one way: across, the inter file's one-way costs; inside, the
        # intra file's exchange (it has no one-way points)
        a, b = piecewise(ONE_WAY, n)
        assert predict("bcast", "binomial", 2, n, 1, net, nodes=(0, 1)) \
            == pytest.approx(a + b * n, rel=1e-4)
        a, b = piecewise(INSIDE, n)
        assert predict("bcast", "binomial", 2, n, 1, net, nodes=(0, 0)) \
            == pytest.approx(a + b * n, rel=1e-4)
    with pytest.raises(ValueError, match="ranges_intra"):
        Network(1, 1, ranges_intra=(SizeRange(10, 1, 1, 0, 0),))


def test_simulate_takes_an_intra_calibration(tmp_path):
    inter, intra, (inter_path, intra_path) = two_links(tmp_path)
    out = tmp_path / "p.json"
    assert simulate(["-a", "recursive_doubling", "--ranks", "4",
                     "--ranks-per-node", "2", "-b", "1M", "-e", "1M",
                     "--calibration", inter_path,
                     "--calibration-intra", intra_path, "--json", str(out),
                     "--quiet"]) == 0
    data = json.loads(out.read_text())  # one exchange inside, one across
    assert data["header"]["calibration_intra"] == intra.description
    want = predict("allreduce", "recursive_doubling", 4, 1 << 18, 4,
                   inter.network(intra=intra), nodes=(0, 0, 1, 1))
    assert data["records"][0]["time_us"]["avg"] == pytest.approx(want * 1e6)
    alone = predict("allreduce", "recursive_doubling", 4, 1 << 18, 4,
                    inter.network(), nodes=(0, 0, 1, 1))
    assert want < alone  # the exchange inside a node is the faster link


@pytest.mark.parametrize("swap, extra, message", [
    (False, [], "needs --ranks-per-node above 1"),
    (True, ["--ranks-per-node", "2"], "measured with 2 rank(s) per node"),
    (None, ["--ranks-per-node", "2"], "refines --calibration"),
])
def test_simulate_refuses_a_wrong_intra_calibration(tmp_path, capsys, swap,
                                                    extra, message):
    _, _, (inter_path, intra_path) = two_links(tmp_path)
    files = {False: ["--calibration", inter_path],
             True: ["--calibration", intra_path],
             None: []}[swap]
    assert simulate([*files, "--calibration-intra", intra_path,
                     "--ranks", "4", *extra]) == 2
    assert message in capsys.readouterr().err


def test_calibrate_refuses_an_odd_rank_count(capsys):
    from mpicoll.bench.calibrate import parse_args

    with pytest.raises(SystemExit):
        parse_args([], rank=0, size=3)
    assert "3 is odd" in capsys.readouterr().err
    args = parse_args(["--validate", "f.json"], rank=0, size=2)
    assert (args.minbytes, args.maxbytes, args.stepfactor) == \
        (64 << 10, 16 << 20, 4.0)
    args = parse_args([], rank=0, size=2)
    assert args.point_sizes == [8 << i for i in range(24)]  # 8 B .. 64 MiB
    args = parse_args(["--check", "-e", "1M"], rank=0, size=2)
    assert (args.minbytes, args.stepfactor) == (64 << 10, 4.0)
    assert args.point_sizes == [8 << i for i in range(20)]  # 8 B .. 4 MiB
    with pytest.raises(SystemExit):
        parse_args(["--check", "--validate", "f.json"], rank=0, size=2)
    assert "not allowed with" in capsys.readouterr().err
    args = parse_args(["--check", "--statistic", "p5", "--also", "p50,avg"],
                      rank=0, size=2)
    assert (args.statistic, args.also) == ("p5", ["p50", "avg"])
    for bad, message in ((["--check", "--also", "p99"], "--also: choose"),
                         (["--also", "p50"], "--also needs --check")):
        with pytest.raises(SystemExit):
            parse_args(bad, rank=0, size=2)
        assert message in capsys.readouterr().err
