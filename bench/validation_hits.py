"""How many validated times a calibration predicts within ±30%, with the
model as it is and, on the same run's points, with two of its refinements
taken out: every reduction priced at the in-place γ (the model before
``gamma_out_of_place``), and every per-byte cost looked up by the
message's or the round's own bytes (before ``footprint_buffers``):

    python bench/validation_hits.py ROWS.json CALIBRATION.json

ROWS is ``python -m mpicoll.calibrate --check --json``'s file, CALIBRATION
the ``--out`` of the same run. Prints one line, e.g. ``119 of 120 within
±30% (117 with gamma in place for every reduction, 113 with per-byte costs
by message size)``. Used by bench/calibrate.sh and
bench/calibrate_repeats.sh.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import numpy as np

from mpicoll.calibration import load_calibration
from mpicoll.model import predict
from mpicoll.validation import TOLERANCE


def hits(rows: list[dict], path: str) -> tuple[int, int, int]:
    """Rows within the tolerance as predicted, as predicted with the
    in-place γ for every reduction, and with per-byte costs by message
    size (the write, the same in all, kept)."""
    cal = load_calibration(path)
    plain = replace(cal, gamma_out_of_place={})
    counts = [0, 0, 0]
    for r in rows:
        args = (r["collective"], r["algorithm"], r["nranks"], r["count"],
                np.dtype(r["dtype"]).itemsize)
        net = cal.network("sum", r["dtype"])
        model = predict(*args, net)
        for i, other in enumerate((plain.network("sum", r["dtype"]),
                                   replace(net, footprint_buffers=None))):
            ratio = (r["predicted_us"] - (model - predict(*args, other))
                     * 1e6) / r["measured_us"]
            counts[i + 1] += abs(ratio - 1) <= TOLERANCE
        counts[0] += r["within"]
    return tuple(counts)


def main(argv: list[str]) -> int:
    rows_path, cal_path = argv
    with open(rows_path) as f:
        rows = json.load(f)["rows"]
    within, in_place, by_message = hits(rows, cal_path)
    print(f"{within} of {len(rows)} within ±{TOLERANCE:.0%} ({in_place} with "
          f"gamma in place for every reduction, {by_message} with per-byte "
          "costs by message size)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
