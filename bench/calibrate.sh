#!/usr/bin/env bash
# The runs behind docs/simulation.md's "Calibration" section (issue 15,
# item 3), on one machine:
#   bash bench/calibrate.sh [OUTDIR]     # default docs/simulation
# writes, for N = 2 and 4 ranks, OUTDIR/check-nN.txt (what the run printed,
# with the machine's load before and after), calibration-nN.json (the
# calibration file) and validation-nN.json (the validation's rows): one
#   python -m mpicoll.calibrate --check
# per rank count, which measures the calibration's points (8 B-64 MiB) and
# times every hand-built algorithm of allreduce, bcast, allgather,
# reduce_scatter_block and alltoall (64 KiB-16 MiB) in the same interleaved
# rounds, then fits the file and sets each measured time beside its
# prediction; and how many it would predict within ±30% with α on every
# message of a train and with every reduction priced at the in-place γ
# (bench/validation_hits.py). 4 ranks are oversubscribed on 2 cores
# (MPIR_CVAR_ENABLE_HEAVY_YIELD=1 so waiting ranks yield).
# STATISTIC (default p5) is what a point and a measured time are of all
# ranks' calls: the 5th percentile, because on a virtual machine the noise
# is one-sided (the host's other tenants only slow calls down); p50 gives
# the median.
# NumPy's advice for huge pages is off (NUMPY_MADVISE_HUGEPAGE=0, unless
# set): with it, a large buffer is backed by huge pages or not as the
# kernel finds them, and algorithms that build the very same schedules
# were timed up to 1.59x apart in one run (docs/simulation.md).
# About 4 minutes on the 2-core development VM. bench/calibrate_repeats.sh
# runs the 2-rank check again, to see how much of it is the run.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv.sh
. scripts/venv.sh
export NUMPY_MADVISE_HUGEPAGE=${NUMPY_MADVISE_HUGEPAGE:-0}
out=${1:-docs/simulation}
statistic=${STATISTIC:-p5}
mkdir -p "$out"

check() {  # check RANKS: python -m mpicoll.calibrate --check at RANKS ranks
    local ranks=$1 log="$out/check-n$1.txt"
    local args=(--check --statistic "$statistic"
                --out "$out/calibration-n$ranks.json"
                --json "$out/validation-n$ranks.json")
    {
        echo "== mpiexec -n $ranks python -m mpi4py -m mpicoll.calibrate ${args[*]}"
        echo "== load before: $(uptime); NUMPY_MADVISE_HUGEPAGE=$NUMPY_MADVISE_HUGEPAGE"
    } | tee "$log"
    "$mpiexec" -n "$ranks" "$py" -m mpi4py -m mpicoll.calibrate "${args[@]}" \
        | tee -a "$log"
    echo "== $("$py" bench/validation_hits.py "$out/validation-n$ranks.json" \
        "$out/calibration-n$ranks.json")" | tee -a "$log"
    echo "== load after: $(uptime)" | tee -a "$log"
}

check 2
MPIR_CVAR_ENABLE_HEAVY_YIELD=1 check 4
