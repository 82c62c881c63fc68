#!/usr/bin/env bash
# The device path's checks on a machine with a GPU, in one go, essentials
# first (a run cut short still tells the most):
#   bash bench/gpu_check.sh [--dry-run] [--wheels DIR] [--archive FILE] \
#       OUTDIR [RANKS]
#  1. the device tests under mpiexec -n RANKS (default 2; the ranks share
#     the GPU): tests/gpu on CuPy;
#  2. bench/device_latency.py at 1 and RANKS ranks: what each CUDA
#     operation of a staged call costs (the host model's latencies);
#  3. the small-message table: allreduce, bcast, alltoall, 8 B-64 KiB,
#     native and every hand-built algorithm (python -m mpicoll.bench);
#  4. bench/device_model.py: the same small calls on the host model, their
#     time split into device, CUDA calls, MPI and mpicoll;
#  5. the 16 MiB all-to-all, hierarchical against pairwise and native;
#  6. bench/overlap.py at the default batch and at 32768;
#  7. the whole benchmark sweep; 8. bench/device_probe.py (profiles).
# Each step's output goes to OUTDIR/<step>.txt (and stdout), each step has
# a timeout, and --archive FILE packs OUTDIR into FILE after every step
# (for a machine that returns few files). The exit status is the number of
# steps that failed; 2 before any step for bad usage or no GPU.
#
# Without a GPU it refuses to start, unless --dry-run: then every step runs
# on the host model of CUDA (mpicoll/device/hostmodel.py: --device model,
# tests/mpi/test_device_mpi.py for the tests, smaller messages and overlap
# runs, short time budgets), which is how CI keeps this script working.
#
# Needs a Python with mpi4py, an MPI library, pytest-mpi, and (on a GPU)
# CuPy: $PYTHON (default python3) and $MPIEXEC (default mpiexec), with
# mpicoll importable (the checkout is put on PYTHONPATH). --wheels DIR
# instead makes a venv over the system's packages (CuPy there) and
# installs DIR's wheels into it, offline: bash bench/gpu_wheels.sh DIR
# downloads them (MPICH, mpi4py, pytest-mpi for Python 3.12) where pip
# can reach PyPI. About 3 minutes on an H200.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dry=0 wheels="" archive=""
while [ $# -gt 0 ]; do
    case $1 in
        --dry-run) dry=1; shift ;;
        --wheels) wheels=${2:?--wheels DIR}; shift 2 ;;
        --archive) archive=${2:?--archive FILE}; shift 2 ;;
        -*) echo "bench/gpu_check.sh: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
out=${1:?usage: bash bench/gpu_check.sh [--dry-run] [--wheels DIR] [--archive FILE] OUTDIR [RANKS]}
n=${2:-2}
py=${PYTHON:-python3}
mpiexec=${MPIEXEC:-mpiexec}
if [ -n "$wheels" ]; then
    venv=$(mktemp -d)/venv
    # The venv sees $py's own packages (CuPy) through a .pth file: its
    # --system-site-packages alone would show the base interpreter's only
    # when $py is itself a venv's, as the GPU image's python3 is.
    if ! { "$py" -m venv "$venv" &&
        "$py" -c 'import site; print("\n".join(site.getsitepackages()))' \
            > "$("$venv/bin/python" -c 'import site
print(site.getsitepackages()[0])')/gpu-check-outer.pth" &&
        "$venv/bin/python" -m pip install -q --no-index --no-deps \
            "$wheels"/*.whl; }; then
        echo "bench/gpu_check.sh: installing $wheels failed" >&2
        exit 2
    fi
    py=$venv/bin/python mpiexec=$venv/bin/mpiexec
fi
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
    MPIEXEC_TIMEOUT=300 OMP_NUM_THREADS=1
if [ "$dry" = 1 ]; then
    device=model
    export MPICOLL_MODEL_LATENCIES=assumed
else
    device=cuda
    if ! why=$("$py" -c 'from mpicoll.bench.device import unavailable
import sys; why = unavailable("cuda"); print(why or ""); sys.exit(bool(why))'
    ); then
        echo "bench/gpu_check.sh: no GPU to check here (${why:-$py failed})." \
            "Run it on a machine with one, or with --dry-run to run every" \
            "step on the host model of CUDA." >&2
        exit 2
    fi
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
case $archive in /* | "") ;; *) archive=$PWD/$archive ;; esac
cd "$repo" || exit 2
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
    [ -z "$archive" ] || tar -czf "$archive" -C "$out" .
}
on_n=("$mpiexec" -n "$n" "$py")  # python under mpiexec -n RANKS

{
    date -u
    if [ "$dry" = 1 ]; then
        echo "dry run: the host model of CUDA ($MPICOLL_MODEL_LATENCIES)"
    else
        nvidia-smi -L
    fi
    "$py" bench/cuda_aware.py
    "$py" -c 'import sys, numpy, mpi4py; from mpi4py import MPI
import mpicoll.device.cuda as c
print("Python", sys.version.split()[0], "| mpi4py", mpi4py.__version__, "|",
      MPI.Get_library_version().splitlines()[0], "| numpy", numpy.__version__)
try:
    import cupy
    print("cupy", cupy.__version__, "CUDA runtime",
          cupy.cuda.runtime.runtimeGetVersion(), "| mpicoll stages:",
          not c.cuda_aware())
except Exception as e:
    print("no CuPy:", type(e).__name__, e)'
} 2>&1 | tee "$out/machine.txt"

if [ "$dry" = 1 ]; then
    tests=tests/mpi/test_device_mpi.py budget=5 calls=100 big_message=1M
    overlap=(--size 128 --batch 16 --layers 16 --bucket-kb 128 --steps 3)
    big=(--batch 64 --layers 8) sweep=(-e 64K)
else
    tests=tests/gpu budget=40 calls=500 big_message=16M
    overlap=()
    big=(--batch 32768) sweep=()
fi
step "tests-n$n" 240 "${on_n[@]}" -m mpi4py -m pytest -q -rs --with-mpi -m mpi \
    -p no:cacheprovider "$tests"
step latency 90 bash -c "'$mpiexec' -n 1 '$py' bench/device_latency.py \
    --device $device && '$mpiexec' -n $n '$py' bench/device_latency.py \
    --device $device"
step "small-n$n" 150 "${on_n[@]}" -m mpicoll.bench --device "$device" \
    -c allreduce,bcast,alltoall -a all -b 8 -e 64K -f 8 \
    --time-budget "$budget"
step "model-n$n" 120 "${on_n[@]}" -m mpi4py bench/device_model.py --calls "$calls"
step "alltoall16m-n$n" 90 "${on_n[@]}" -m mpicoll.bench --device "$device" \
    -c alltoall -a native,pairwise,hierarchical -b "$big_message" \
    -e "$big_message" --time-budget "$budget"
if [ "$dry" = 1 ]; then  # matrix products slow enough to hide buckets
    export MPICOLL_MODEL_LATENCIES=assumed,flops=0.0001
fi
step "overlap-n$n" 90 "${on_n[@]}" -m mpi4py bench/overlap.py --device "$device" \
    --algorithm ring "${overlap[@]}"
step "overlap-n$n-big" 90 "${on_n[@]}" -m mpi4py bench/overlap.py \
    --device "$device" --algorithm ring "${overlap[@]}" "${big[@]}"
[ "$dry" = 0 ] || export MPICOLL_MODEL_LATENCIES=assumed
step "bench-n$n" 150 "${on_n[@]}" -m mpicoll.bench --device "$device" "${sweep[@]}" \
    --time-budget "$((budget * 3 / 2))" --json "$out/bench-n$n.json"
step "probe-n$n" 120 "${on_n[@]}" bench/device_probe.py --device "$device"
exit "$failed"
