#!/usr/bin/env bash
# Every host run that docs/performance.md quotes, from a fresh machine with only Python:
#   bash bench/performance.sh [OUTDIR]        # default docs/results
# Sets up .venv like tests/run-all.sh (add torch for the gloo column:
# .venv/bin/pip install torch==2.13.0), then writes OUTDIR/<run>.txt, what
# each run printed under two header lines (the command; the date, host,
# CPUs and library versions):
#   bench-n2                  the default sweep of python -m mpicoll.bench
#   bench-n2-small            every collective's auto against native, 8 B-4 KiB
#   bench-n2-out-of-place     allreduce, every algorithm, 8 KiB-4 MiB, input
#   bench-n2-inplace          rewritten before every call; out of place, in place
#   call-overhead             bench/call_overhead.py, one rank
#   call-overhead-n2          the same on 2 ranks (--world): messages too
#   call-overhead-guards(-n2) --guards: the default deadline and recorder's
#                             cost, one rank and 2 ranks
#   peers-n2                  bench/peers.py, 8 B-32 MiB by factors of 4
#   peers-n2-allreduce-L      bench/peers.py -c allreduce at thread level
#                             L = multiple (mpi4py's default), single
#   peers-n2-allreduce-rewritten   the same at multiple, input rewritten
#   peers-n2-allreduce-cma-off-on  1-16 MiB with MPICH's single-copy
#                             transfers off and on in turn, 3 times
#   new-arrays-n2             bench/new_arrays.py
#   osu-n2-C                  bench/osu_check.py for C = allreduce, bcast
#   wrap-demos-n2, wrap-forms-n2   bench/wrap_cost.py demos, forms
#   wrap-instructions(-pure)  bench/wrap_instructions.py (with valgrind),
#                             with the C twins and with MPICOLL_PURE=1
#   device-model-n1, -n2      bench/device_model.py: small staged calls on
#                             the host model of CUDA, their time split
#   overlap-n2-model-A        bench/overlap.py --device model, A = ring,
#                             native: the bucketer on the host model
#   overlap-n2-A              bench/overlap.py --offload-ms 5 for A = native,
#                             ring (and its timeline, overlap-n2-ring.png),
#                             ring with bucket views, ring without the
#                             progress thread
#   ddp-step-n2(-batch4, -sync)  bench/ddp_step.py: a DDP step on the
#                             mpicoll backend, on gloo, with mpicoll's hook
#                             (with torch only)
# All at 2 ranks: the development machines have 2 cores. Each run
# interleaves its contenders; compare numbers within one table.
# The GPU runs are bench/gpu_check.sh's.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv.sh
. scripts/venv.sh
out=${1:-docs/results}
mkdir -p "$out"
machine="$(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n): $(nproc) CPUs ($(
    sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(
    "$py" -c 'import platform, numpy, mpi4py
mpi4py.rc.initialize = False
from mpi4py import MPI
print("Python", platform.python_version(), "| NumPy", numpy.__version__,
      "| mpi4py", mpi4py.__version__, "|",
      MPI.Get_library_version().splitlines()[0])')"

record() {  # record NAME COMMAND...: run it, keep what it prints
    local name=$1
    shift
    local shown="$*"
    shown=${shown/#on2 /mpiexec -n 2 python -m mpi4py }
    shown=${shown/#peers /mpiexec -n 2 python bench\/peers.py }
    shown=${shown//"$mpiexec"/mpiexec}
    shown=${shown//"$py"/python}
    printf '== %s: %s\n== %s\n' "$name" "$shown" "$machine" |
        tee "$out/$name.txt"
    "$@" | tee -a "$out/$name.txt"
}
on2() {  # on2 ARGS...: 2 ranks, mpi4py's own launcher module
    "$mpiexec" -n 2 "$py" -m mpi4py "$@"
}
peers() {  # peers ARGS...: bench/peers.py at 2 ranks, MPI initialized by
    # the script itself (so that it chooses the thread level)
    "$mpiexec" -n 2 "$py" bench/peers.py "$@"
}

record bench-n2 on2 -m mpicoll.bench
record bench-n2-small on2 -m mpicoll.bench -c all -a native,auto -e 4K \
    --time-budget 60
record bench-n2-out-of-place on2 -m mpicoll.bench -c allreduce -a all \
    -b 8K -e 4M --rewrite --time-budget 90
record bench-n2-inplace on2 -m mpicoll.bench -c allreduce -a all \
    -b 8K -e 4M --rewrite --inplace --time-budget 90
record call-overhead "$py" bench/call_overhead.py
record call-overhead-n2 "$mpiexec" -n 2 "$py" bench/call_overhead.py --world
record call-overhead-guards "$py" bench/call_overhead.py --guards
record call-overhead-guards-n2 "$mpiexec" -n 2 "$py" bench/call_overhead.py \
    --guards --world
record peers-n2 on2 bench/peers.py -e 64M --time-budget 300
for level in multiple single; do
    record "peers-n2-allreduce-$level" peers -c allreduce -e 16M \
        --time-budget 150 --thread-level "$level"
done
record peers-n2-allreduce-rewritten peers -c allreduce -e 16M \
    --time-budget 150 --rewrite
cma=$out/peers-n2-allreduce-cma-off-on.txt
printf '== %s\n' "$machine" > "$cma"
for _ in 1 2 3; do
    for on in 0 1; do
        echo "== MPIR_CVAR_CH4_CMA_ENABLE=$on mpiexec -n 2 python bench/peers.py -c allreduce -b 1M -e 16M --time-budget 20" |
            tee -a "$cma"
        MPIR_CVAR_CH4_CMA_ENABLE=$on peers -c allreduce -b 1M -e 16M \
            --time-budget 20 | tee -a "$cma"
    done
done
record new-arrays-n2 "$mpiexec" -n 2 "$py" bench/new_arrays.py
for c in allreduce bcast; do
    record "osu-n2-$c" on2 bench/osu_check.py -c "$c"
done
record wrap-demos-n2 on2 bench/wrap_cost.py demos --runs 9
record wrap-forms-n2 on2 bench/wrap_cost.py forms
if command -v valgrind > /dev/null; then
    record wrap-instructions "$py" bench/wrap_instructions.py
    record wrap-instructions-pure env MPICOLL_PURE=1 "$py" \
        bench/wrap_instructions.py
fi
record device-model-n1 "$mpiexec" -n 1 "$py" -m mpi4py bench/device_model.py
record device-model-n2 on2 bench/device_model.py
for a in ring native; do  # model matrix products at 100 MFLOP/s
    MPICOLL_MODEL_LATENCIES=assumed,flops=0.0001 record "overlap-n2-model-$a" \
        on2 bench/overlap.py --device model --size 128 --batch 16 \
        --layers 16 --bucket-kb 128 --algorithm "$a"
done
export OMP_NUM_THREADS=1  # one BLAS thread per rank: 2 ranks, 2 cores
record overlap-n2-native on2 bench/overlap.py --algorithm native --offload-ms 5
record overlap-n2-ring on2 bench/overlap.py --algorithm ring --offload-ms 5 \
    --plot "$out/overlap-n2-ring.png"
record overlap-n2-ring-views on2 bench/overlap.py --algorithm ring \
    --offload-ms 5 --bucket-views
MPICOLL_PROGRESS_THREAD=0 record overlap-n2-ring-nothread on2 \
    bench/overlap.py --algorithm ring --offload-ms 5
if "$py" -c 'import torch' 2> /dev/null; then
    ddp=("$mpiexec" -n 2 "$py" bench/ddp_step.py --threads 1 --rounds 5
         --steps 4)
    record ddp-step-n2 "${ddp[@]}" --batch 32
    record ddp-step-n2-batch4 "${ddp[@]}" --batch 4
    record ddp-step-n2-sync "${ddp[@]}" --batch 32 --sync
fi
