"""Network simulation of schedules on SimGrid (optional: ``scripts/simgrid.sh``).

    from mpicoll.sim.simgrid import run_collective
    run_collective("allreduce", "ring", 64, 1 << 20, "dragonfly:4,2,4,2").time

:mod:`~mpicoll.sim.simgrid.networks` parses platform specs (``flat:N``,
``ring:P``, ``torus:AxBxC``, ``hypercube:d``, ``fattree:...``,
``dragonfly:G,C,R,N``, plus ranks per node); :mod:`~mpicoll.sim.simgrid.program`
turns schedules into flows (with the repeated-round and symmetry
approximations for large rank counts); :mod:`~mpicoll.sim.simgrid.driver` runs
them in SimGrid, in a child process (:mod:`~mpicoll.sim.simgrid.child`), and
:mod:`~mpicoll.sim.simgrid.base_rank` finds the shift or xor under which one
rank's rounds stand for all. Without SimGrid, for rounds symmetric enough
that one number per class of flows stands for many:
:mod:`~mpicoll.sim.simgrid.ringflow` (rings, in closed form),
:mod:`~mpicoll.sim.simgrid.torusflow` (tori and hypercubes) and
:mod:`~mpicoll.sim.simgrid.dragonflyflow` (dragonflies) in the fluid model of
:mod:`~mpicoll.sim.simgrid.fluid`. Only the child imports SimGrid.
"""

from mpicoll.sim.simgrid.driver import (
    Result,
    calibrate_gamma,
    run_collective,
    run_program,
)
from mpicoll.sim.simgrid.networks import Platform, PlatformError, parse

__all__ = ["Platform", "PlatformError", "Result", "calibrate_gamma", "parse",
           "run_collective", "run_program"]
