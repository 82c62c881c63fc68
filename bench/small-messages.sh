#!/usr/bin/env bash
# The runs behind docs/performance.md's "Small messages, persistent calls
# and auto" section, at 2 ranks (the 2 cores of the development machines):
#   bash bench/small-messages.sh [OUTDIR]     # default docs/performance
# writes OUTDIR/<run>.txt (what each run printed) and .json:
#   call-overhead          bench/call_overhead.py, one rank: mpicoll's
#                          Python per call (replayed, persistent, guarded)
#   peers-n2-allreduce-L   bench/peers.py -c allreduce at thread level L
#                          (multiple, mpi4py's default, and single), with
#                          the nonblocking and persistent columns
#   peers-n2-allreduce-rewritten   the same at multiple, the input written
#                          before every call (--rewrite)
#   peers-n2-allreduce-cma[-rewritten]   the multiple and rewritten runs
#                          with MPICH's single-copy transfers on
#                          (MPIR_CVAR_CH4_CMA_ENABLE=1; off by default, as
#                          it needs ptrace permission)
#   peers-n2-allreduce-cma-ab   1-16 MiB, CMA off and on in turn, 3 times
#   new-arrays-n2          bench/new_arrays.py: allreduce on new arrays
#                          every call (mpi4py, native, auto)
#   bench-n2-small         every collective's auto against native, 8 B-4 KiB
#   bench-n2-F             allreduce, every algorithm, 8 KiB-4 MiB, input
#                          rewritten, F = out-of-place and inplace
# Each run interleaves its contenders; compare numbers within a table.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv.sh
. scripts/venv.sh
out=${1:-docs/performance}
mkdir -p "$out"

launch() {  # launch NAME ARGS...: 2 ranks, keep what it prints
    local name=$1
    shift
    echo "== $name: mpiexec -n 2 python -m mpi4py $*" | tee "$out/$name.txt"
    "$mpiexec" -n 2 "$py" -m mpi4py "$@" | tee -a "$out/$name.txt"
}

echo "== call-overhead: python bench/call_overhead.py" \
    | tee "$out/call-overhead.txt"
"$py" bench/call_overhead.py | tee -a "$out/call-overhead.txt"
# (python -m mpi4py would initialize MPI at its default level first)
peers() {  # peers NAME ARGS...: bench/peers.py -c allreduce at 2 ranks
    local name=$1
    shift
    local settings
    settings=$(env | grep -E '^MPIR_CVAR_CH4_CMA' | tr '\n' ' ' || true)
    echo "== $name: ${settings}mpiexec -n 2 python bench/peers.py -c allreduce -e 16M $*" \
        | tee "$out/$name.txt"
    "$mpiexec" -n 2 "$py" bench/peers.py -c allreduce -e 16M \
        --time-budget 150 --json "$out/$name.json" "$@" \
        | tee -a "$out/$name.txt"
}
peers peers-n2-allreduce-multiple --thread-level multiple
peers peers-n2-allreduce-single --thread-level single
peers peers-n2-allreduce-rewritten --rewrite
MPIR_CVAR_CH4_CMA_ENABLE=1 peers peers-n2-allreduce-cma
MPIR_CVAR_CH4_CMA_ENABLE=1 peers peers-n2-allreduce-cma-rewritten --rewrite
ab=$out/peers-n2-allreduce-cma-ab.txt
: > "$ab"
for _ in 1 2 3; do
    for cma in 0 1; do
        echo "== MPIR_CVAR_CH4_CMA_ENABLE=$cma mpiexec -n 2 python bench/peers.py -c allreduce -b 1M -e 16M --time-budget 20" \
            | tee -a "$ab"
        MPIR_CVAR_CH4_CMA_ENABLE=$cma "$mpiexec" -n 2 "$py" bench/peers.py \
            -c allreduce -b 1M -e 16M --time-budget 20 | tee -a "$ab"
    done
done
echo "== new-arrays-n2: mpiexec -n 2 python bench/new_arrays.py" \
    | tee "$out/new-arrays-n2.txt"
"$mpiexec" -n 2 "$py" bench/new_arrays.py | tee -a "$out/new-arrays-n2.txt"
launch bench-n2-small -m mpicoll.bench -c all -a native,auto -e 4K \
    --time-budget 60 --json "$out/bench-n2-small.json"
for form in out-of-place inplace; do
    flag=()
    [ "$form" = inplace ] && flag=(--inplace)
    launch "bench-n2-$form" -m mpicoll.bench -c allreduce -a all \
        -b 8K -e 4M --rewrite "${flag[@]}" --time-budget 90 \
        --json "$out/bench-n2-$form.json"
done
