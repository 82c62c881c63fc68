"""Fixtures of the SimGrid tests: the module, and SimGrid 4.1's build."""

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def simgrid():
    """SimGrid, or a skip (missing, or built for another Python)."""
    try:
        import simgrid
    except ImportError as e:
        pytest.skip(f"SimGrid does not import ({e}): scripts/simgrid.sh")
    return simgrid


@pytest.fixture
def simgrid41(simgrid):
    """The folder of scripts/simgrid41.sh's SimGrid 4.1 build, or a skip."""
    root = Path(__file__).resolve().parents[2]
    venv = os.path.dirname(os.path.dirname(sys.executable))
    proc = subprocess.run(["bash", str(root / "scripts" / "simgrid41.sh"),
                           "--print-dir"], capture_output=True, text=True,
                          cwd=root, env=dict(os.environ, MPICOLL_VENV=venv))
    if proc.returncode:
        pytest.skip("no SimGrid 4.1 build: scripts/simgrid41.sh")
    return proc.stdout.strip()
