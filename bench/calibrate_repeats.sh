#!/usr/bin/env bash
# Run the 2-rank calibration and validation K times; judge each cell by its median.
#   bash bench/calibrate_repeats.sh [K [OUTDIR]]   # default 12
# runs `python -m mpicoll.calibrate --check` at 2 ranks K times, alternating
# the 5th percentile and the median of all calls, and writes a summary:
# per run, how many of the 120 validated times its own calibration
# predicts within ±30% and how many it would with each of the model's
# choices undone (bench/validation_hits.py), how far apart it timed
# identical schedules, its points for a fresh and an unchanged exchange of
# 1 MiB (how far the machine moves between runs) and the cells it missed;
# then, over the runs, for how many cells the median ratio of predicted to
# measured is within ±30% (bench/validation_hits.py --runs). The summary
# goes to docs/results/validation-repeats.txt and each run's files
# (repeats/K-cal.json, K-rows.json) under results/calibrate-repeats/, or,
# given OUTDIR, OUTDIR/repeats.txt and OUTDIR/repeats/. NumPy's advice for
# huge pages is off, as in bench/calibrate.sh. About 110 s per run on a
# 2-core VM.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv.sh
. scripts/venv.sh
export NUMPY_MADVISE_HUGEPAGE=${NUMPY_MADVISE_HUGEPAGE:-0}
runs=${1:-12}
if [ $# -gt 1 ]; then
    out=$2 summary=$2/repeats.txt
else
    out=results/calibrate-repeats summary=docs/results/validation-repeats.txt
fi
mkdir -p "$out/repeats" "$(dirname "$summary")"
rm -f "$out"/repeats/*-cal.json "$out"/repeats/*-rows.json

echo "== $runs runs from $(date -u '+%F %T') UTC; load: $(uptime);" \
    "NUMPY_MADVISE_HUGEPAGE=$NUMPY_MADVISE_HUGEPAGE" \
    | tee "$summary"
for ((k = 1; k <= runs; k++)); do
    statistic=$([ $((k % 2)) = 1 ] && echo p5 || echo p50)
    cal=$out/repeats/$k-cal.json rows=$out/repeats/$k-rows.json
    "$mpiexec" -n 2 "$py" -m mpi4py -m mpicoll.calibrate --check --quiet \
        --statistic "$statistic" --out "$cal" --json "$rows" > /dev/null
    hits=$("$py" bench/validation_hits.py "$rows" "$cal")
    "$py" - "$k" "$statistic" "$hits" "$cal" "$rows" \
        <<'PY' | tee -a "$summary"
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
echo "== $("$py" bench/validation_hits.py --runs "$out")" | tee -a "$summary"
echo "== done $(date -u '+%T') UTC; load: $(uptime)" | tee -a "$summary"
