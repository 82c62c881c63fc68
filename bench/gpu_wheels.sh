#!/usr/bin/env bash
# The wheels bench/gpu_check.sh --wheels installs on a GPU machine that
# cannot reach PyPI, downloaded here:
#   bash bench/gpu_wheels.sh [DIR]        # default .whl (git ignores it)
# MPICH, mpi4py and pytest-mpi (the versions this machine's .venv has, else
# the newest), built for CPython $PYVER (default 3.12) on x86-64 Linux: the
# GPU image's python3, which already holds CuPy, NumPy and pytest. Then, on
# the GPU machine, from the checkout with DIR in it:
#   bash bench/gpu_check.sh --wheels DIR --archive OUT/gpu-check.tgz /tmp/gc 2
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.whl}
py=${PYTHON:-python3}
pyver=${PYVER:-3.12}
mkdir -p "$dir"
for name in mpich mpi4py pytest-mpi; do
    version=$(.venv/bin/python -m pip show "$name" 2>/dev/null |
        sed -n 's/^Version: //p') || true
    "$py" -m pip download -q --disable-pip-version-check --no-deps \
        --only-binary=:all: --python-version "$pyver" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$dir" \
        "$name${version:+==$version}"
done
ls -l "$dir"
