"""The layers below the engine need no MPI, CUDA or torch, and
``import mpicoll`` loads nothing until a name is used.

setup.cfg's import-linter contracts check the imports as written (the lint
step of tests/run-all.sh); these tests run the code in fresh interpreters:
with mpi4py, CuPy and torch made unimportable, the algorithms build their
schedules and the data simulator runs every hand-built algorithm of a
collective; and a bare ``import mpicoll`` imports no module of mpicoll's
layers, nor mpi4py."""

import subprocess
import sys

import pytest

BLOCKED = "\n".join([
    "import sys",
    "for name in ('mpi4py', 'cupy', 'torch'):",
    "    sys.modules[name] = None  # importing it raises ImportError",
])


def run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_blocking_works():
    """The block itself: importing mpi4py fails under it."""
    proc = subprocess.run([sys.executable, "-c", BLOCKED + "\nimport mpi4py"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "import of mpi4py halted" in proc.stderr


@pytest.mark.parametrize("collective", ["allreduce", "bcast", "alltoall",
                                        "reduce_scatter_block", "scan"])
def test_algorithms_and_data_simulator_run_without_mpi(collective):
    code = BLOCKED + f"""
import numpy as np
import mpicoll.coll
from mpicoll.simulate import simulate

size = 4
names = [n for n in mpicoll.coll.algorithms({collective!r})
         if n != "native" and not mpicoll.coll.lookup({collective!r}, n).topology
         and not mpicoll.coll.lookup({collective!r}, n).cartesian]
assert names
for name in names:
    n = 12 if {collective!r} != "bcast" else 3
    xs = [np.arange(n, dtype=np.int64) * (r + 1) for r in range(size)]
    out = simulate({collective!r}, name, xs)
    assert len(out) == size
loaded = sorted(m for m in sys.modules if m.split(".")[0] in
                ("mpi4py", "cupy", "torch") and sys.modules[m] is not None)
assert not loaded, loaded
print(len(names))
"""
    assert int(run(code)) >= 1


def test_import_mpicoll_loads_no_layer():
    code = """
import sys
import mpicoll
mpicoll.__version__
ours = sorted(m for m in sys.modules if m.startswith("mpicoll."))
print(ours, "mpi4py.MPI" in sys.modules)
"""
    assert run(code).split() == ["[]", "False"]


def test_the_faces_load_neither_tools_nor_optional_libraries():
    """``mpicoll.Comm`` and ``mpicoll.ProcessGroup`` load what a call
    needs: not the benchmark, the simulators, the cost model (read the
    first time ``auto`` weighs algorithms beyond two ranks), the
    hand-built algorithms (loaded by the first lookup of one), meshes,
    bucketing, torch, CuPy or matplotlib."""
    code = """
import sys
import mpicoll
mpicoll.Comm, mpicoll.ProcessGroup
from mpicoll.coll.registry import BUILDERS
heavy = ("mpicoll.bench", "mpicoll.sim", "mpicoll.model", "mpicoll.cli",
         "mpicoll.parallel", "torch", "cupy", "matplotlib",
         *(f"mpicoll.coll.{m}" for m in BUILDERS))
print(sorted(m for m in sys.modules if m.startswith(heavy)))
"""
    assert run(code).strip() == "[]"


def test_algorithms_load_on_first_lookup_in_one_order():
    """The algorithm modules register on the first lookup of a hand-built
    algorithm, listed in one order whichever module was imported first."""
    code = """
import sys
import mpicoll.coll.torus  # registers its algorithms before the others
from mpicoll.coll import algorithms, lookup
from mpicoll.coll.registry import BUILDERS
assert lookup("allreduce", "native").native
print(algorithms("allreduce"), algorithms("alltoall"))
print(all(f"mpicoll.coll.{m}" in sys.modules for m in BUILDERS))
"""
    plain = "\n".join(line for line in code.splitlines()
                      if "coll.torus" not in line)
    assert run(code) == run(plain)
    assert run(code).splitlines()[1] == "True"
