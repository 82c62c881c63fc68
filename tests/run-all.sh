#!/usr/bin/env bash
# The whole test suite, from a fresh machine with only Python:
#   bash tests/run-all.sh
# 1. creates .venv (if missing) and installs mpicoll with the MPICH wheel and
#    the test tools; 2. lints; 3. tier 1 (schedules simulated in one process,
#    no MPI); 4. tier 2 (the MPI tests under mpiexec at 1, 2, 3, 4, 5, 8 ranks).
# Set MPICOLL_TEST_RANKS="2 4" to choose the rank counts.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv.sh
. scripts/venv.sh

"$venv/bin/ruff" check mpicoll tests bench

echo "== tier 1: schedules simulated in one process (both cores)"
"$py" -m pytest -q -n 2 tests

# More ranks than cores: MPICH busy-polls; yielding makes oversubscribed
# runs ~9x faster (../shared/MACHINE-FACTS.md). MPIEXEC_TIMEOUT ends a hung
# run; pytest-timeout (thread method) names the test that hung.
export MPIR_CVAR_ENABLE_HEAVY_YIELD=1 MPIEXEC_TIMEOUT=600
basetemp=$(mktemp -d)
for n in ${MPICOLL_TEST_RANKS:-1 2 3 4 5 8}; do
    echo "== tier 2: mpiexec -n $n"
    "$mpiexec" -n "$n" "$py" -m mpi4py -m pytest -q --with-mpi -m mpi \
        --basetemp="$basetemp/n$n" tests
done
