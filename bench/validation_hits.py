"""How many validated times the model predicts within ±30%, as it is and
with each of three of its choices undone, on one run's own points:

    python bench/validation_hits.py ROWS.json CALIBRATION.json

ROWS is ``python -m mpicoll.calibrate --check --json``'s file, CALIBRATION
the ``--out`` of the same run. The calibration is fitted again from its
raw points with this checkout's code (:func:`mpicoll.calibration.refit`)
and every row predicted again, so a run recorded before a change of the
model or the fit is counted as the code now stands. Prints one line, e.g.
``119 of 120 within ±30% (118 with α on every message of a train, 117
with at most 4 ranges of 3 sizes or more, 115 with gamma in place for
every reduction)``: the model's trains and its out-of-place γ
(:mod:`mpicoll.model`), and the fit's ranges as they were before
:data:`~mpicoll.calibration.RANGES` and
:data:`~mpicoll.calibration.MIN_POINTS` became 5 and 2, each undone
alone. Used by bench/calibrate.sh and bench/calibrate_repeats.sh.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import numpy as np

from mpicoll.calibration import load_calibration, refit
from mpicoll.model import predict
from mpicoll.validation import TOLERANCE, rewritten, writing

# what each count undoes: hits()'s arguments
VARIANTS = {
    "with α on every message of a train": {"trains": False},
    "with at most 4 ranges of 3 sizes or more": {"ranges": 4,
                                                 "min_points": 3},
    "with gamma in place for every reduction": {"in_place": True},
}


def hits(rows: list[dict], path: str, trains: bool = True,
         in_place: bool = False, **fitting) -> int:
    """Rows predicted within the tolerance by the calibration at ``path``,
    fitted again (``fitting``: :func:`~mpicoll.calibration.refit`'s
    arguments), on the model with ``trains``
    (:class:`~mpicoll.model.Network`) and, with ``in_place``, every
    reduction at the in-place γ. A row's prediction is the model's plus
    the write of its input, as :func:`mpicoll.validation.compare` makes
    it."""
    cal = refit(load_calibration(path), **fitting)
    if in_place:
        cal = replace(cal, gamma_out_of_place={})
    write = writing(cal, path)
    within = 0
    for r in rows:
        itemsize = np.dtype(r["dtype"]).itemsize
        net = replace(cal.network(r.get("op") or "sum", r["dtype"]),
                      trains=trains)
        predicted = predict(r["collective"], r["algorithm"], r["nranks"],
                            r["count"], itemsize, net) \
            + write(rewritten({"root": 0, **r}) * itemsize)
        within += abs(predicted * 1e6 / r["measured_us"] - 1) <= TOLERANCE
    return within


def main(argv: list[str]) -> int:
    rows_path, cal_path = argv
    with open(rows_path) as f:
        rows = json.load(f)["rows"]
    undone = ", ".join(f"{hits(rows, cal_path, **args)} {name}"
                       for name, args in VARIANTS.items())
    print(f"{hits(rows, cal_path)} of {len(rows)} within ±{TOLERANCE:.0%} "
          f"({undone})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
