# shellcheck shell=bash
# Functions that scripts/simgrid.sh and scripts/simgrid41.sh share
# (sourced, not run). Each takes the calling script's name for its messages.

# venv_python SCRIPT: the absolute path of the venv's python (venv:
# $MPICOLL_VENV or .venv); fails, saying so, when there is none.
venv_python() {
    local venv=${MPICOLL_VENV:-.venv}
    if [ ! -x "$venv/bin/python" ]; then
        echo "$1: no venv at $venv (run scripts/venv.sh first)" >&2
        return 1
    fi
    echo "$(cd "$venv/bin" && pwd)/python"
}

# apt_install SCRIPT PACKAGE...: install with apt-get (through sudo unless
# run as root) those of the Debian packages that are not installed yet,
# updating the package lists only when a first try fails.
apt_install() {
    local script=$1 package
    local missing=()
    shift
    for package in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null \
                | grep -q 'install ok installed'; then
            missing+=("$package")
        fi
    done
    if [ ${#missing[@]} -eq 0 ]; then
        echo "$script: $* already installed"
        return 0
    fi
    echo "$script: installing ${missing[*]} with apt-get"
    if ! _as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q "${missing[@]}"; then
        _as_root apt-get update -q
        _as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q "${missing[@]}"
    fi
}

_as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}
