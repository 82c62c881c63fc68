#!/usr/bin/env bash
# How much of bench/calibrate.sh's 2-rank validation is the run:
#   bash bench/calibrate_repeats.sh [K [OUTDIR]]   # default 4, docs/simulation
# runs `python -m mpicoll.calibrate --check` at 2 ranks K times, alternating
# the 5th percentile and the median of all calls, and writes
# OUTDIR/repeats.txt: per run, how many of the 120 validated times its own
# calibration predicts within ±30% and how many it would with the in-place
# γ for every reduction (bench/validation_hits.py, on the same run's
# points), its points for a fresh and an unchanged exchange of 1 MiB (how
# far the machine moves between runs), and the cells it missed.
# About 90 s per run on the 2-core development VM.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv.sh
. scripts/venv.sh
runs=${1:-4}
out=${2:-docs/simulation}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== $runs runs from $(date -u '+%F %T') UTC; load: $(uptime)" \
    | tee "$out/repeats.txt"
for ((k = 1; k <= runs; k++)); do
    statistic=$([ $((k % 2)) = 1 ] && echo p5 || echo p50)
    "$mpiexec" -n 2 "$py" -m mpi4py -m mpicoll.calibrate --check --quiet \
        --statistic "$statistic" --out "$work/cal.json" \
        --json "$work/rows.json" > /dev/null
    hits=$("$py" bench/validation_hits.py "$work/rows.json" "$work/cal.json")
    "$py" - "$k" "$statistic" "$hits" "$work/cal.json" "$work/rows.json" \
        <<'PY' | tee -a "$out/repeats.txt"
import json
import sys

k, statistic, hits, cal, rows = sys.argv[1:]
with open(cal) as f:
    points = json.load(f)["points"]
with open(rows) as f:
    missed = [f"{r['collective']} {r['algorithm']} {r['nbytes']} "
              f"{1 + r['error']:.2f}" for r in json.load(f)["rows"]
              if not r["within"]]
at = {name: dict(map(tuple, points[name]))[1 << 20] * 1e6
      for name in ("exchange", "exchange_clean")}
print(f"run {k} ({statistic}): {hits}; exchange of 1 MiB: fresh "
      f"{at['exchange']:.1f} us, unchanged {at['exchange_clean']:.1f} us; "
      f"missed: {', '.join(missed) or 'none'}")
PY
done
echo "== done $(date -u '+%T') UTC; load: $(uptime)" | tee -a "$out/repeats.txt"
