#!/usr/bin/env bash
# The device path's checks on a machine with a GPU, in one go:
#   bash bench/gpu_check.sh OUTDIR [RANKS]
# 1. the CuPy tests (tests/gpu) under mpiexec -n RANKS (default 2; the
#    ranks share the GPU); 2. bench/device_latency.py at 1 and RANKS ranks;
#    3. bench/overlap.py --device cuda, at the default batch of 64 and at
#    32768 (where the backward pass takes about as long as the all-reduce
#    on an H200); 4. the benchmark sweep, python -m mpicoll.bench --device
#    cuda (validated, --time-budget 60); 5. bench/device_probe.py (where
#    staged calls spend their time). Each step's output goes to OUTDIR
#    (and stdout), 8 files in all; each has a timeout, so a hang costs
#    minutes, not the machine. The exit status is the number of steps that
#    failed. About 2 minutes on an H200 (docs/performance.md, "On a GPU").
# Needs a Python with mpicoll importable, mpi4py, an MPI library, CuPy and
# pytest-mpi: $PYTHON (default python3) and $MPIEXEC (default mpiexec).
set -uo pipefail
out=${1:?usage: bash bench/gpu_check.sh OUTDIR [RANKS]}
n=${2:-2}
py=${PYTHON:-python3}
mpiexec=${MPIEXEC:-mpiexec}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 MPIEXEC_TIMEOUT=300
failed=0

step() {  # step NAME SECONDS COMMAND...: run it, log to OUTDIR/NAME.txt
    local name=$1 limit=$2
    shift 2
    echo "== $name: $*"
    local start=$SECONDS
    timeout "$limit" "$@" 2>&1 | tee "$out/$name.txt"
    local rc=${PIPESTATUS[0]}
    echo "== $name: exit $rc after $((SECONDS - start)) s" |
        tee -a "$out/$name.txt"
    [ "$rc" = 0 ] || failed=$((failed + 1))
}

{
    date -u
    nvidia-smi -L
    "$py" -c 'import cupy, mpi4py, numpy; from mpi4py import MPI
import mpicoll.device.cuda as c
print("cupy", cupy.__version__, "CUDA runtime",
      cupy.cuda.runtime.runtimeGetVersion(), "| mpi4py", mpi4py.__version__,
      "|", MPI.Get_library_version().splitlines()[0], "| numpy",
      numpy.__version__)
print("library says CUDA-aware:", c.library_says_cuda_aware(),
      "| mpicoll stages:", not c.cuda_aware())'
} 2>&1 | tee "$out/machine.txt"

step "cupy-tests-n$n" 240 "$mpiexec" -n "$n" "$py" -m mpi4py -m pytest -q \
    -rs --with-mpi -m mpi tests/gpu
step "latency" 60 bash -c "'$mpiexec' -n 1 '$py' bench/device_latency.py &&
    '$mpiexec' -n $n '$py' bench/device_latency.py"
step "overlap-cuda-n$n" 90 "$mpiexec" -n "$n" "$py" -m mpi4py \
    bench/overlap.py --device cuda
step "overlap-cuda-n$n-batch32768" 90 "$mpiexec" -n "$n" "$py" -m mpi4py \
    bench/overlap.py --device cuda --batch 32768
step "bench-cuda-n$n" 150 "$mpiexec" -n "$n" "$py" -m mpicoll.bench \
    --device cuda --time-budget 60 --json "$out/bench-cuda-n$n.json"
step "probe-n$n" 120 "$mpiexec" -n "$n" "$py" bench/device_probe.py
exit "$failed"
