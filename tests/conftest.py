"""Shared test set-up.

The tests live in folders by what they need (docs/testing.md): serial/, jobs/,
mpi/, gpu/, slurm/. The helper modules they import as top-level modules
(``from mpidata import values``) stay here in tests/, which is put on
``sys.path`` below, whichever folder or file pytest is given.

Under ``mpiexec`` a rank that fails a test would leave the other ranks
blocked in the next collective. The hook below prints the failure at once
and aborts the whole job, so a bug shows as a failed run, never a hang
(pytest-timeout's thread method, configured in setup.cfg, catches a rank
stuck inside an MPI call; ``MPIEXEC_TIMEOUT`` in tests/run-all.sh is the
last backstop).

The flight recorder writes its trace files (mpicoll.guard.dump) where
``MPICOLL_TRACE_DIR`` says: a test run's go to a folder of its own, not
to the working tree, unless the variable is set.
"""

import os
import sys
import tempfile

import pytest

import mpicoll

HELPERS = os.path.dirname(os.path.abspath(__file__))
if HELPERS not in sys.path:
    sys.path.insert(0, HELPERS)

os.environ.setdefault("MPICOLL_TRACE_DIR",
                      tempfile.mkdtemp(prefix="mpicoll-test-traces-"))


_with_mpi = False  # pytest-mpi's --with-mpi: run under mpiexec


def _world_size() -> int:
    """The world's size under ``--with-mpi`` (or once something has
    initialized MPI); 1 otherwise, without initializing MPI."""
    if not _with_mpi and "mpi4py.MPI" not in sys.modules:
        return 1
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_size()


def pytest_configure(config):
    """Give each rank its own --basetemp (ranks race on cleanup otherwise)."""
    global _with_mpi
    _with_mpi = bool(config.getoption("with_mpi", default=False))
    if config.option.basetemp and _world_size() > 1:
        from mpi4py import MPI

        rank = MPI.COMM_WORLD.Get_rank()
        # pytest creates only the last level of --basetemp.
        os.makedirs(config.option.basetemp, exist_ok=True)
        config.option.basetemp = f"{config.option.basetemp}/rank{rank}"


# Tests marked ``interface`` (setup.cfg) check what wraps the algorithms:
# buffer forms and exceptions against mpi4py, torch.distributed's face,
# the device path, the benchmark's harness, the docs' examples. None of
# that changes with the rank count past the odd, even, power-of-two and
# unequal-halves cases 1 to 4 ranks give (CI runs 1 to 3, 3 in check
# mode; tests/run-all.sh says why not 4), while 5 and 8
# ranks on CI's 2 cores make each call several times slower; the
# algorithms' own tests run at every count.
INTERFACE_RANKS = 4


def pytest_collection_modifyitems(config, items):
    """Skip ``interface`` tests above :data:`INTERFACE_RANKS` ranks."""
    size = _world_size()
    if size <= INTERFACE_RANKS:
        return
    skip = pytest.mark.skip(
        reason=f"an interface test: runs at 1 to {INTERFACE_RANKS} ranks; "
               f"the algorithms' own tests run at {size}")
    for item in items:
        if item.get_closest_marker("interface"):
            item.add_marker(skip)


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    if report.failed and _world_size() > 1:
        from mpi4py import MPI

        rank = MPI.COMM_WORLD.Get_rank()
        sys.stderr.write(f"\n[rank {rank}] FAILED {report.nodeid} "
                         f"({report.when}):\n{report.longreprtext}\n")
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)


@pytest.fixture(scope="module", params=["world", "dup", "split"])
def comm(request):
    """A world, a Dup and Split halves (unequal for odd sizes), wrapped."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    if request.param == "world":
        base = world
    elif request.param == "dup":
        base = world.Dup()
    else:  # halves; unequal when the world size is odd
        base = world.Split(world.Get_rank() % 2, world.Get_rank())
    return mpicoll.Comm(base)


