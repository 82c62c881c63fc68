#!/usr/bin/env bash
# Calibrate and validate the cost model at 2 and 4 ranks (writes the shipped file).
#   bash bench/calibrate.sh [OUTDIR]
# runs, for N = 2 and 4 ranks,
#   mpiexec -n N python -m mpi4py -m mpicoll.calibrate --check --statistic p5
# which measures the calibration's points (8 B-64 MiB) and times every
# hand-built algorithm of allreduce, bcast, allgather, reduce_scatter_block
# and alltoall (64 KiB-16 MiB) in the same interleaved rounds, fits the
# calibration file and sets each measured time beside its prediction; then
# bench/validation_hits.py counts the predictions within ±30%. Writes
#   mpicoll/model/calibration-default.json  the 2-rank calibration (auto's)
#   docs/results/validation-nN.txt          what run N printed, the load
#                                           before and after, the count
#   results/calibrate/                      the 4-rank calibration and
#                                           both runs' rows (JSON)
# or, given OUTDIR, all of them into OUTDIR instead (calibration-nN.json,
# validation-nN.txt, validation-nN.json). 4 ranks are oversubscribed on 2
# cores (MPIR_CVAR_ENABLE_HEAVY_YIELD=1 so waiting ranks yield).
# STATISTIC (default p5) is what a point and a measured time are of all
# ranks' calls: the 5th percentile, because on a shared machine the noise
# is one-sided (other tenants only slow calls down); p50 gives the median.
# NumPy's advice for huge pages is off (NUMPY_MADVISE_HUGEPAGE=0, unless
# set), so that large buffers are not backed by huge pages for some calls
# and not others. About 5 minutes on a 2-core VM.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv.sh
. scripts/venv.sh
export NUMPY_MADVISE_HUGEPAGE=${NUMPY_MADVISE_HUGEPAGE:-0}
statistic=${STATISTIC:-p5}
if [ $# -gt 0 ]; then
    logs=$1 data=$1 shipped=$1/calibration-n2.json
else
    logs=docs/results data=results/calibrate
    shipped=mpicoll/model/calibration-default.json
fi
mkdir -p "$logs" "$data"

check() {  # check RANKS: python -m mpicoll.calibrate --check at RANKS ranks
    local ranks=$1 log="$logs/validation-n$1.txt"
    local cal="$data/calibration-n$ranks.json" rows="$data/validation-n$ranks.json"
    [ "$ranks" = 2 ] && cal=$shipped
    local args=(--check --statistic "$statistic" --out "$cal" --json "$rows")
    {
        echo "== mpiexec -n $ranks python -m mpi4py -m mpicoll.calibrate ${args[*]}"
        echo "== load before: $(uptime); NUMPY_MADVISE_HUGEPAGE=$NUMPY_MADVISE_HUGEPAGE"
    } | tee "$log"
    "$mpiexec" -n "$ranks" "$py" -m mpi4py -m mpicoll.calibrate "${args[@]}" \
        | tee -a "$log"
    echo "== $("$py" bench/validation_hits.py "$rows" "$cal")" | tee -a "$log"
    echo "== load after: $(uptime)" | tee -a "$log"
}

check 2
MPIR_CVAR_ENABLE_HEAVY_YIELD=1 check 4
