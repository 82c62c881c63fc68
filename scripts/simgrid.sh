#!/usr/bin/env bash
# Make SimGrid (the network simulator behind mpicoll.sim.simgrid) importable from
# the project's venv: the optional extra the simulation tests need.
#
#     scripts/simgrid.sh            # venv: $MPICOLL_VENV or .venv
#
# Installs Debian's python3-simgrid (SimGrid 3.32, built for Python 3.11)
# and libsimgrid-dev (SMPI's smpicc and smpirun, for the cross-check in
# tests/serial/test_smpi.py; ~8 s more) with apt-get when they are missing
# (through sudo unless run as root), then links ONLY the extension module
# into the venv's site-packages; the rest of Debian's dist-packages stays
# invisible. The venv's Python must be a 3.11 (the extension's ABI).
# Idempotent: a second run changes nothing. SimGrid 4.1, which 65,536
# simulated ranks need, is scripts/simgrid41.sh.
set -euo pipefail

# shellcheck source=scripts/install-helpers.sh
. "$(dirname "$0")/install-helpers.sh"
py=$(venv_python simgrid.sh)
apt_install simgrid.sh python3-simgrid libsimgrid-dev

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
