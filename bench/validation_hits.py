"""Count the predictions within ±30% of the validated times, each model choice undone.

    python bench/validation_hits.py ROWS.json CALIBRATION.json

ROWS is ``python -m mpicoll.calibrate --check --json``'s file, CALIBRATION
the ``--out`` of the same run. The calibration is fitted again from its
raw points with this checkout's code (:func:`mpicoll.model.calibration.refit`)
and every row predicted again, so a run recorded earlier is counted as the
code now stands. Prints one line: ``119 of 120 within ±30% (118 with α on
every message of a train, 117 with at most 4 ranges of 3 sizes or more,
115 with gamma in place for every reduction, 116 with one way priced as an
exchange, 117 without the per-call cost)``: the model's trains, the fit's
ranges (:data:`~mpicoll.model.calibration.RANGES` and
:data:`~mpicoll.model.calibration.MIN_POINTS`), its out-of-place γ, its
one-way messages and its per-call cost (:mod:`mpicoll.model.cost`), each
undone alone on the same points. Then how far apart the run measured
identical work: the largest ratio of the slowest to the fastest time
among algorithms whose schedules are step for step the same at a size (at
2 ranks the ring, Rabenseifner, hierarchical and torus allreduces, for
one), e.g. ``identical schedules measured up to 1.23x apart (allreduce
ring, rabenseifner, hierarchical, torus at 16777216 B)``: no model of the
schedules can put those apart: one prediction meets times from ``m`` to
``r·m`` within ±30% only between ``0.7·r·m`` and ``1.3·m``, a window that
closes at ``r`` = 1.86. Last, the median ratio of predicted to measured
over the algorithms at each size (``median ratio by size: 64K 0.98, 256K
1.10, ...``). Used by bench/calibrate.sh and bench/calibrate_repeats.sh.

    python bench/validation_hits.py --runs DIR

counts over the runs of ``bash bench/calibrate_repeats.sh K DIR`` (its
``DIR/repeats/*-rows.json`` and ``*-cal.json``, each run predicted with
its own calibration): for how many cells (a collective, an algorithm, a
size) the median over the runs of the ratio of predicted to measured is
within ±30%, in how many runs every cell was, and the three cells
furthest out by median, e.g. ``over 6 runs: the median ratio of 120 of
120 cells within ±30%; every cell within in 5 of 6 runs...``. A single
run's time of a cell is one draw of a machine that times identical work
apart (above); the median over runs is what the cell takes here.
"""

from __future__ import annotations

import glob
import json
import os
import sys
from dataclasses import replace

import numpy as np

from mpicoll.model.calibration import load_calibration, refit
from mpicoll.coll import lookup
from mpicoll.model.cost import predict
from mpicoll.bench.validation import TOLERANCE, rewritten, size_label, writing

# what each count undoes: hits()'s arguments
VARIANTS = {
    "with α on every message of a train": {"trains": False},
    "with at most 4 ranges of 3 sizes or more": {"ranges": 4,
                                                 "min_points": 3},
    "with gamma in place for every reduction": {"in_place": True},
    "with one way priced as an exchange": {"one_way": False},
    "without the per-call cost": {"call": False},
}


def hits(rows: list[dict], path: str, **variant) -> int:
    """Rows predicted within the tolerance (:func:`ratios`' arguments)."""
    return within(ratios(rows, path, **variant))


def within(predicted: list[float]) -> int:
    """How many ratios of predicted to measured are within the tolerance."""
    return sum(abs(r - 1) <= TOLERANCE for r in predicted)


def ratios(rows: list[dict], path: str, trains: bool = True,
           in_place: bool = False, one_way: bool = True, call: bool = True,
           **fitting) -> list[float]:
    """Each row's prediction over its measured time, predicted by the
    calibration at ``path`` fitted again (``fitting``:
    :func:`~mpicoll.model.calibration.refit`'s arguments), on the model with
    ``trains`` (:class:`~mpicoll.model.cost.Network`), with ``in_place``
    every reduction at the in-place γ, without ``one_way`` every message
    at an exchange's costs, without ``call`` no per-call cost. A row's
    prediction is the model's plus the write of its input, as
    :func:`mpicoll.bench.validation.compare` makes it."""
    cal = refit(load_calibration(path), **fitting)
    if in_place:
        cal = replace(cal, gamma_out_of_place={})
    if not one_way:
        cal = replace(cal, one_way=())
    if not call:
        cal = replace(cal, call=0.0)
    write = writing(cal, path)
    out = []
    for r in rows:
        itemsize = np.dtype(r["dtype"]).itemsize
        net = replace(cal.network(r.get("op") or "sum", r["dtype"]),
                      trains=trains)
        predicted = predict(r["collective"], r["algorithm"], r["nranks"],
                            r["count"], itemsize, net) \
            + write(rewritten({"root": 0, **r}) * itemsize)
        out.append(predicted * 1e6 / r["measured_us"])
    return out


def by_size(rows: list[dict], predicted: list[float]) -> str:
    """The median of the rows' ratios (``predicted``, :func:`ratios`)
    over the algorithms at each size: ``64K 0.73, 256K 0.73, ...``; a
    run's shortfall at small sizes (a fixed cost the model misses) shows
    at the first."""
    at: dict = {}
    for r, ratio in zip(rows, predicted):
        at.setdefault(r["nbytes"], []).append(ratio)
    return ", ".join(f"{size_label(n)} {np.median(at[n]):.2f}" for n in sorted(at))


def twins(rows: list[dict]) -> tuple[float, list[dict]]:
    """The largest ratio of the slowest to the fastest measured time among
    rows of one collective and size whose algorithms build the same
    schedules on every rank, and those rows (1.0 and [] if no two do)."""
    groups: dict = {}
    for r in rows:
        alg = lookup(r["collective"], r["algorithm"])
        count = r["count"]
        if isinstance(count, list):
            count = tuple(tuple(c) if isinstance(c, list) else c
                          for c in count)
        built = tuple(alg.schedule(rank, r["nranks"], count,
                                   root=r.get("root") or 0, commutative=True)
                      for rank in range(r["nranks"]))
        groups.setdefault((r["collective"], r["nbytes"], built), []).append(r)
    apart = [(max(m) / min(m), group) for group in groups.values()
             if len(group) > 1
             for m in [[x["measured_us"] for x in group]]]
    return max(apart, key=lambda a: a[0], default=(1.0, []))


def over_runs(folder: str) -> str:
    """The line ``--runs`` prints (module docstring) for the runs in
    ``folder/repeats``."""
    runs = sorted(glob.glob(os.path.join(folder, "repeats", "*-rows.json")))
    if not runs:
        raise SystemExit(f"no {folder}/repeats/*-rows.json")
    cells: dict = {}
    every = 0
    for path in runs:
        with open(path) as f:
            rows = json.load(f)["rows"]
        model = ratios(rows, path.replace("-rows.json", "-cal.json"))
        every += within(model) == len(rows)
        for r, ratio in zip(rows, model):
            cells.setdefault((r["collective"], r["algorithm"], r["nbytes"]),
                             []).append(ratio)
    medians = {cell: float(np.median(v)) for cell, v in cells.items()}
    worst = sorted(medians, key=lambda c: -abs(np.log(medians[c])))[:3]
    return (f"over {len(runs)} runs: the median ratio of "
            f"{within(list(medians.values()))} of {len(cells)} cells within "
            f"±{TOLERANCE:.0%}; every cell within in {every} of {len(runs)} "
            "runs; furthest by median: " + ", ".join(
                f"{c} {a} {size_label(n)} {medians[(c, a, n)]:.2f}"
                for c, a, n in worst))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--runs"]:
        print(over_runs(argv[1]))
        return 0
    rows_path, cal_path = argv
    with open(rows_path) as f:
        rows = json.load(f)["rows"]
    undone = ", ".join(f"{hits(rows, cal_path, **args)} {name}"
                       for name, args in VARIANTS.items())
    ratio, group = twins(rows)
    same = (f"{group[0]['collective']} "
            f"{', '.join(r['algorithm'] for r in group)} at "
            f"{group[0]['nbytes']} B" if group else "none")
    model = ratios(rows, cal_path)
    print(f"{within(model)} of {len(rows)} within ±{TOLERANCE:.0%} "
          f"({undone}); identical schedules measured up to {ratio:.2f}x "
          f"apart ({same}); median ratio by size: {by_size(rows, model)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
