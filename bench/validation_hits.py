"""How many validated times a calibration predicts within ±30%, with the
model as it is and with every reduction priced at the in-place γ (the
model before ``gamma_out_of_place``), on the same run's points:

    python bench/validation_hits.py ROWS.json CALIBRATION.json

ROWS is ``python -m mpicoll.calibrate --check --json``'s file, CALIBRATION
the ``--out`` of the same run. Prints one line, e.g. ``113 of 120 within
±30% (109 with gamma in place for every reduction)`` (the recorded run in
docs/simulation/). Used by
bench/calibrate.sh and bench/calibrate_repeats.sh.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import numpy as np

from mpicoll.calibration import load_calibration
from mpicoll.model import predict
from mpicoll.validation import TOLERANCE


def hits(rows: list[dict], path: str) -> tuple[int, int]:
    """Rows within the tolerance as predicted, and as predicted with the
    in-place γ for every reduction (the write, the same in both, kept)."""
    cal = load_calibration(path)
    plain = replace(cal, gamma_out_of_place={})
    within = without = 0
    for r in rows:
        args = (r["collective"], r["algorithm"], r["nranks"], r["count"],
                np.dtype(r["dtype"]).itemsize)
        apart = predict(*args, cal.network("sum", r["dtype"])) \
            - predict(*args, plain.network("sum", r["dtype"]))
        ratio = (r["predicted_us"] - apart * 1e6) / r["measured_us"]
        within += r["within"]
        without += abs(ratio - 1) <= TOLERANCE
    return within, without


def main(argv: list[str]) -> int:
    rows_path, cal_path = argv
    with open(rows_path) as f:
        rows = json.load(f)["rows"]
    within, without = hits(rows, cal_path)
    print(f"{within} of {len(rows)} within ±{TOLERANCE:.0%} ({without} with "
          "gamma in place for every reduction)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
