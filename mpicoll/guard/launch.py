"""Did the launcher start one MPI world, or many worlds of one rank?

A launcher that does not hand MPI its process-management interface starts
every task as a singleton: ``srun -n 4 python app.py`` without
``--mpi=pmi2`` (on a site whose ``MpiDefault`` is ``none``) runs four
separate worlds of size 1, each happily computing alone. Nothing fails;
the results are just wrong. ``check_world`` compares the world size with
the number of processes the launcher says it started, and raises
``LaunchError`` when they differ:

    srun --mpi=pmi2 python -m mpi4py -m mpicoll.launch check   # Slurm jobs
    mpicoll.guard.launch.check_world()                  # or first thing in a code

The launcher's count comes from the environment it gives each process,
the MPI launcher's own variable first (``PMI_SIZE`` from MPICH's hydra or
Slurm's PMI-2, ``OMPI_COMM_WORLD_SIZE`` from Open MPI), then Slurm's
``SLURM_STEP_NUM_TASKS``. That order matters: ``mpiexec`` inside a Slurm
allocation starts one proxy per node with ``srun``, so its ranks see the
proxies' step size, not the world's. Outside any launcher there is nothing
to compare and the check passes.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Mapping

from mpicoll.guard import exchange
from mpicoll.errors import MpicollError

#: Variables naming how many processes the launcher started, most direct first.
SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS")


class LaunchError(MpicollError, RuntimeError):
    """The MPI world is not the one the launcher started."""


def launched_size(environ: Mapping[str, str] = os.environ
                  ) -> tuple[int, str] | None:
    """``(count, variable)``: how many processes the launcher started, and
    the variable that says so; None when no launcher variable is set."""
    for name in SIZE_VARIABLES:
        value = environ.get(name, "").strip()
        if value.isdigit():
            return int(value), name
    return None


def check_world(size: int | None = None,
                environ: Mapping[str, str] = os.environ) -> None:
    """Raise ``LaunchError`` if the MPI world's size (``size``, default
    ``MPI.COMM_WORLD``'s) differs from the launcher's count."""
    if size is None:
        from mpi4py import MPI

        size = MPI.COMM_WORLD.Get_size()
    launched = launched_size(environ)
    if launched is None or launched[0] == size:
        return
    count, name = launched
    hint = ("each process is alone in its own world: the launcher did not "
            "give MPI a process-management interface it speaks. With srun, "
            "pass --mpi=pmi2 (MPICH) or --mpi=pmix (an MPI built with "
            "PMIx), or launch with mpiexec inside the allocation"
            if size == 1 else "the launcher and MPI disagree")
    raise LaunchError(f"MPI world has {size} rank{'s' * (size != 1)} but the "
                      f"launcher started {count} ({name}={count}): {hint}")


def node_name() -> str:
    """This process's node: Slurm's name for it (``SLURMD_NODENAME``, which
    tells apart test nodes sharing one host), else MPI's processor name."""
    name = os.environ.get("SLURMD_NODENAME")
    if name:
        return name
    from mpi4py import MPI

    return MPI.Get_processor_name()


def placement(comm) -> Counter:
    """Ranks per node of ``comm`` (collective: every rank must call it)."""
    return Counter(exchange.allgather(comm, node_name()))


def main(argv=None) -> int:
    """``python -m mpicoll.launch check``: 1 with the reason on stderr if
    the world is wrong, else 0, rank 0 printing the ranks per node.

    A wrong world ends MPI with ``MPI_Finalize``, not an abort (which
    ``python -m mpi4py`` makes of any non-zero exit): nothing was sent yet,
    and an aborted MPICH singleton leaves its shared-memory segment in
    /dev/shm under a name from its pid, on which a later process with that
    pid fails ``MPI_Init``."""
    parser = argparse.ArgumentParser(
        prog="python -m mpicoll.launch",
        description="Check that the launcher started one MPI world.")
    parser.add_argument("command", choices=["check"],
                        help="compare the world size with the launcher's")
    parser.parse_args(argv)
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    try:
        check_world(world.Get_size())
    except LaunchError as e:
        print(f"mpicoll.launch: {e}", file=sys.stderr, flush=True)
        MPI.Finalize()
        return 1
    nodes = placement(world)
    if world.Get_rank() == 0:
        where = ", ".join(f"{n}: {c}" for n, c in sorted(nodes.items()))
        vendor, version = MPI.get_vendor()
        size = world.Get_size()
        print(f"mpicoll.launch: {size} rank{'s' * (size != 1)} on {len(nodes)} "
              f"node{'s' * (len(nodes) != 1)} ({where}); "
              f"{vendor} {'.'.join(map(str, version))}", flush=True)
    return 0

