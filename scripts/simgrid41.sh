#!/usr/bin/env bash
# Build SimGrid 4.1's Python module for the project's venv and cache it:
# the simulator mpicoll.sim.simgrid needs for 65,536 ranks (3.32's wait is
# O(p^2) per round). It does NOT touch the venv: the 3.32 link that
# scripts/simgrid.sh makes stays, and a simulation picks 4.1 with
#
#     MPICOLL_SIMGRID=$(scripts/simgrid41.sh --print-dir) python -m mpicoll.simulate ...
#     python -m mpicoll.simulate --simgrid "$(scripts/simgrid41.sh --print-dir)" ...
#
#     scripts/simgrid41.sh              # build once (~13-22 min on one core), then reuse
#     scripts/simgrid41.sh --print-dir  # the cache folder, when it holds a build
#
# Cache: ${XDG_CACHE_HOME:-~/.cache}/mpicoll/simgrid-4.1/ holds
# simgrid.cpython-*.so and the libsimgrid.so it loads (found through an
# $ORIGIN rpath), nothing else. Idempotent: a second run imports the cached
# module and stops. The build needs cmake, a C++ compiler and Boost headers
# (installed with apt-get when missing, through sudo unless run as root),
# the sdist from PyPI and pybind11 < 3 (3.x does not compile SimGrid's
# bindings), both fetched with the venv's pip into a scratch folder that is
# removed afterwards. Venv: $MPICOLL_VENV or .venv (its Python sets the ABI).
# Jobs: $SIMGRID_JOBS (default 1; the build is ~1 GB of RAM per job).
set -euo pipefail

version=4.1
release=4.1.0  # what the module reports as simgrid_version
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mpicoll/simgrid-$version
# shellcheck source=scripts/install-helpers.sh
. "$(dirname "$0")/install-helpers.sh"
py=$(venv_python simgrid41.sh)

# The version the cached module reports, or nothing. Imported from / with
# the cache first on the path, so that neither the 3.32 link in the venv
# nor a folder named simgrid in the caller's directory answers instead.
cached_version() {
    (cd / && PYTHONPATH="$cache" "$py" -c \
        'import simgrid; print(simgrid.simgrid_version)' 2>/dev/null) || true
}

if [ "${1:-}" = "--print-dir" ]; then
    if [ "$(cached_version)" = "$release" ]; then
        echo "$cache"
        exit 0
    fi
    echo "simgrid41.sh: no SimGrid $version build in $cache (run scripts/simgrid41.sh)" >&2
    exit 1
fi

if [ "$(cached_version)" = "$release" ]; then
    echo "simgrid41.sh: $cache already holds SimGrid $version for $py"
    exit 0
fi

apt_install simgrid41.sh cmake g++ make libboost-dev

scratch=$(mktemp -d "${TMPDIR:-/tmp}/simgrid41.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
echo "simgrid41.sh: building in $scratch"
"$py" -m pip download -q --no-deps --no-binary :all: "simgrid==$version" -d "$scratch"
"$py" -m pip install -q --target "$scratch/pybind11" 'pybind11>=2.4,<3'
tar -xzf "$scratch/simgrid-$version.tar.gz" -C "$scratch"
pybind11_dir=$(PYTHONPATH="$scratch/pybind11" "$py" -c \
    'import pybind11; print(pybind11.get_cmake_dir())')

mkdir -p "$scratch/build"
# The module and libsimgrid.so both land in build/lib; an $ORIGIN rpath
# lets the module find the library once both sit in the cache.
# shellcheck disable=SC2016  # $ORIGIN is for the dynamic loader, not bash
(cd "$scratch/build" && cmake -S "../simgrid-$version" -B . \
    -DCMAKE_BUILD_TYPE=Release \
    -DPYTHON_EXECUTABLE="$py" -DPython3_EXECUTABLE="$py" \
    -Dpybind11_DIR="$pybind11_dir" \
    -Denable_smpi=OFF -Denable_java=OFF -Denable_python=ON \
    -Dminimal-bindings=ON -Denable_model-checking=OFF -Denable_lto=OFF \
    -DCMAKE_BUILD_RPATH='$ORIGIN' >cmake.log)
make -C "$scratch/build" -j"${SIMGRID_JOBS:-1}" python-bindings

mkdir -p "$cache"
cp -P "$scratch"/build/lib/libsimgrid.so* "$scratch"/build/lib/simgrid.cpython-*.so "$cache/"
got=$(cached_version)
if [ "$got" != "$release" ]; then
    echo "simgrid41.sh: the module in $cache reports '$got', not $release" >&2
    exit 1
fi
echo "simgrid41.sh: cached SimGrid $version for $py in $cache"
