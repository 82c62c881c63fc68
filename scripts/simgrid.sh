#!/usr/bin/env bash
# Make SimGrid (the network simulator behind mpicoll.netsim) importable from
# the project's venv: the optional extra the simulation tests need.
#
#     scripts/simgrid.sh            # venv: $MPICOLL_VENV or .venv
#
# Installs Debian's python3-simgrid (SimGrid 3.32, built for Python 3.11)
# with apt-get when it is missing (through sudo unless run as root), then
# links ONLY its extension module into the venv's site-packages; the rest
# of Debian's dist-packages stays invisible. The venv's Python must be a
# 3.11 (the extension's ABI). Idempotent: a second run changes nothing.
set -euo pipefail

venv=${MPICOLL_VENV:-.venv}
if [ ! -x "$venv/bin/python" ]; then
    echo "simgrid.sh: no venv at $venv (run scripts/venv.sh first)" >&2
    exit 1
fi
py=$(cd "$venv/bin" && pwd)/python

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

if dpkg-query -W -f='${Status}' python3-simgrid 2>/dev/null \
        | grep -q 'install ok installed'; then
    echo "simgrid.sh: python3-simgrid already installed"
else
    echo "simgrid.sh: installing python3-simgrid with apt-get"
    if ! as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q python3-simgrid; then
        as_root apt-get update -q
        as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q python3-simgrid
    fi
fi

module=$(dpkg-query -L python3-simgrid | grep -E '/simgrid\.cpython-[^/]*\.so$' | head -n 1)
if [ -z "$module" ]; then
    echo "simgrid.sh: python3-simgrid ships no simgrid extension module" >&2
    exit 1
fi
suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
if [ "${module##*/}" != "simgrid$suffix" ]; then
    echo "simgrid.sh: $module does not match $py (needs simgrid$suffix)" >&2
    exit 1
fi

site=$("$py" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
link="$site/${module##*/}"
if [ "$(readlink "$link" 2>/dev/null || true)" = "$module" ]; then
    echo "simgrid.sh: $link already links to $module"
else
    ln -sfn "$module" "$link"
    echo "simgrid.sh: linked $link -> $module"
fi

# Import from / so that no folder named simgrid in the caller's directory
# hides the module.
version=$(cd / && "$py" -c 'import simgrid; print(simgrid.simgrid_version)' 2>/dev/null)
echo "simgrid.sh: $py imports SimGrid $version"
