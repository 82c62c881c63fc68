# shellcheck shell=bash
# Sourced by tests/run-all.sh and bench/run.sh: make sure .venv (or
# $MPICOLL_VENV) exists with mpicoll, the MPICH wheel and the test tools,
# and set $venv, $py and $mpiexec. Needs only python3 and PyPI.
venv=${MPICOLL_VENV:-.venv}
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[mpich,test]'
# shellcheck disable=SC2034  # used by the scripts that source this file
py="$venv/bin/python"
# shellcheck disable=SC2034
mpiexec="$venv/bin/mpiexec"
