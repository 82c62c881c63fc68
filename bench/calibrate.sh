#!/usr/bin/env bash
# The runs behind docs/simulation.md's "Calibration" section (issue 15,
# item 3), on one machine:
#   bash bench/calibrate.sh [OUTDIR]     # default docs/simulation
# writes OUTDIR/<run>.txt (what each run printed, with the machine's load
# before and after) and .json:
#   calibration-n2   python -m mpicoll.calibrate at 2 ranks: the fitted
#                    α, β, copy and γ per size range (the .json is the
#                    calibration file itself)
#   validation-n2    --validate at 2 ranks: every hand-built algorithm of
#                    allreduce, bcast, allgather, reduce_scatter_block and
#                    alltoall, 64 KiB-16 MiB, measured against predicted
#   validation-n4    the same at 4 ranks (oversubscribed on 2 cores, with
#                    MPIR_CVAR_ENABLE_HEAVY_YIELD=1 so waiting ranks yield)
# STATISTIC=p5 (default p50) makes every point and every measured time the
# 5th percentile of all ranks' calls instead of the median: on a machine
# others are loading, closer to what it does alone.
# About 8 minutes on the 2-core development VM.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv.sh
. scripts/venv.sh
out=${1:-docs/simulation}
statistic=${STATISTIC:-p50}
mkdir -p "$out"

launch() {  # launch NAME RANKS ARGS...: python -m mpicoll.calibrate
    local name=$1 ranks=$2
    shift 2
    {
        echo "== $name: mpiexec -n $ranks python -m mpi4py -m mpicoll.calibrate $* --statistic $statistic"
        echo "== load before: $(uptime)"
    } | tee "$out/$name.txt"
    "$mpiexec" -n "$ranks" "$py" -m mpi4py -m mpicoll.calibrate "$@" \
        --statistic "$statistic" | tee -a "$out/$name.txt"
    echo "== load after: $(uptime)" | tee -a "$out/$name.txt"
}

launch calibration-n2 2 --out "$out/calibration-n2.json"
launch validation-n2 2 --validate "$out/calibration-n2.json" \
    --json "$out/validation-n2.json"
MPIR_CVAR_ENABLE_HEAVY_YIELD=1 launch validation-n4 4 \
    --validate "$out/calibration-n2.json" --json "$out/validation-n4.json"
