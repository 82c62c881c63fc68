#!/usr/bin/env bash
# The whole test suite, from a fresh machine with only Python:
#   bash tests/run-all.sh
# 1. creates .venv (if missing) and installs mpicoll with the MPICH wheel and
#    the test tools; 2. lints (ruff, shellcheck); 3. tier 1 (schedules
#    simulated in one process, no MPI); 4. tier 2 (the MPI tests under
#    mpiexec at 1, 2, 3, 4, 5, 8 ranks); 5. the Slurm scripts on a local
#    Slurm cluster (as root; 30-75 s here).
# Set MPICOLL_TEST_RANKS="2 4" to choose the rank counts.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv.sh
. scripts/venv.sh

"$venv/bin/ruff" check mpicoll tests bench
"$venv/bin/shellcheck" -x tests/run-all.sh scripts/venv.sh bench/*.sh \
    slurm/*.sh slurm/*.sbatch

echo "== tier 1: schedules simulated in one process (both cores)"
"$py" -m pytest -q -n 2 tests

# More ranks than cores: MPICH busy-polls; yielding makes oversubscribed
# runs ~9x faster (../shared/MACHINE-FACTS.md). MPIEXEC_TIMEOUT ends a hung
# run; pytest-timeout (thread method) names the test that hung.
export MPIR_CVAR_ENABLE_HEAVY_YIELD=1 MPIEXEC_TIMEOUT=600
# Check mode (mpicoll.check) at the rank counts in MPICOLL_TEST_CHECKED
# (default 3 and 5): every collective of every test is first agreed by all
# ranks, so a mismatch between ranks fails loudly. The other counts run
# without it, as users mostly do: replayed calls only exist there.
checked=" ${MPICOLL_TEST_CHECKED-3 5} "
basetemp=$(mktemp -d)
for n in ${MPICOLL_TEST_RANKS:-1 2 3 4 5 8}; do
    check=0
    [[ $checked == *" $n "* ]] && check=1
    echo "== tier 2: mpiexec -n $n (MPICOLL_CHECK=$check)"
    MPICOLL_CHECK=$check "$mpiexec" -n "$n" "$py" -m mpi4py -m pytest -q \
        --with-mpi -m mpi --basetemp="$basetemp/n$n" tests
done

# The Slurm batch scripts against a real Slurm on this machine (needs root;
# installs Debian's Slurm if missing; tests/test_slurm.py says why it skips
# where it cannot). The tests bring the cluster up and down; the trap is
# for an interrupted run.
echo "== slurm: slurm/*.sbatch on a local cluster (slurm/local-cluster.sh)"
export MPICOLL_SLURM_DIR=/tmp/mpicoll-slurm-test MPICOLL_SLURM_PORT=16917
trap 'bash slurm/local-cluster.sh down >/dev/null 2>&1 || true' EXIT
MPICOLL_TEST_SLURM=1 "$py" -m pytest -q -rs -m slurm tests/test_slurm.py
