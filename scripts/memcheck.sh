#!/usr/bin/env bash
# Tier 2 with NumPy's freed memory held in quarantine (tests/memcheck): a
# write into a buffer after NumPy freed it -- an MPI request outliving the
# buffers it was given -- fails the run and is reported with the Python
# frames that freed the buffer and the test after which it was found.
#
#   bash scripts/memcheck.sh [RANKS] [mpich|openmpi] [pytest arguments]
#
# Defaults: 3 ranks, MPICH, tests/mpi tests/gpu in check mode (about 3 min
# at 3 ranks on 2 cores; twice the plain run). Needs a C compiler.
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${1:-3}
impl=${2:-mpich}
shift $(($# < 2 ? $# : 2))
if [ "$impl" = openmpi ]; then
    . scripts/venv-openmpi.sh
    py=$ompi_py
    launch=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
            'OMPI_MCA_btl=^ofi,uct' "$ompi_mpiexec" --oversubscribe)
else
    . scripts/venv.sh
    launch=(env MPIR_CVAR_ENABLE_HEAVY_YIELD=1 "$mpiexec")
fi
build=$(mktemp -d)
flags=$("$py" -c 'import sysconfig, numpy
print("-I" + sysconfig.get_paths()["include"], "-I" + numpy.get_include(),
      sysconfig.get_config_var("EXT_SUFFIX"))')
read -r inc numpy_inc suffix <<<"$flags"
cc -O1 -shared -fPIC "$inc" "$numpy_inc" tests/memcheck/quarantine.c \
    -o "$build/quarantine$suffix"
cp tests/memcheck/plugin.py "$build/memcheck_plugin.py"
if [ $# -eq 0 ]; then
    set -- --ignore=tests/mpi/test_leaks_mpi.py tests/mpi tests/gpu
fi
status=0
PYTHONPATH="$build" MPICOLL_MEMCHECK_LOG="$build/report" \
    MPICOLL_CHECK=${MPICOLL_CHECK-1} MPIEXEC_TIMEOUT=${MPIEXEC_TIMEOUT-900} \
    "${launch[@]}" -n "$ranks" "$py" -m mpi4py -m pytest -q \
    -p memcheck_plugin --with-mpi -m mpi -p no:cacheprovider \
    --basetemp="$build/tmp" "$@" || status=$?
if compgen -G "$build/report.*" >/dev/null; then
    cat "$build"/report.*
    echo "memcheck: memory written after it was freed (above)"
    status=1
fi
exit "$status"
