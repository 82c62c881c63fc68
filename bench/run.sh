#!/usr/bin/env bash
# The benchmark, from a fresh machine with only Python:
#   bash bench/run.sh                    # 2 ranks, the default sweep
#   NP=8 bash bench/run.sh -c allreduce -b 8 -e 64M --json out.json
# Sets up .venv like tests/run-all.sh, then runs
# mpiexec -n $NP python -m mpi4py -m mpicoll.bench "$@".
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv.sh
. scripts/venv.sh
if [ "${NP:-2}" -gt "$(nproc)" ]; then
    export MPIR_CVAR_ENABLE_HEAVY_YIELD=1  # oversubscribed: yield, don't spin
fi
exec "$mpiexec" -n "${NP:-2}" "$py" -m mpi4py -m mpicoll.bench "$@"
