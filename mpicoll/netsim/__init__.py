"""Network simulation of schedules on SimGrid (optional: ``scripts/simgrid.sh``).

    from mpicoll.netsim import simulate
    simulate("allreduce", "ring", 64, 1 << 20, "dragonfly:4,2,4,2").time

:mod:`~mpicoll.netsim.platform` parses platform specs (``flat:N``,
``ring:P``, ``torus:AxBxC``, ``hypercube:d``, ``fattree:...``,
``dragonfly:G,C,R,N``, plus ranks per node); :mod:`~mpicoll.netsim.program`
turns schedules into flows (with the repeated-round and symmetry
approximations for large rank counts); :mod:`~mpicoll.netsim.driver` runs
them in SimGrid, in a child process (:mod:`~mpicoll.netsim.replay`), and
:mod:`~mpicoll.netsim.symmetry` finds the shift or xor under which one
rank's rounds stand for all. Without SimGrid, for rounds symmetric enough
that one number per class of flows stands for many:
:mod:`~mpicoll.netsim.ringflow` (rings, in closed form),
:mod:`~mpicoll.netsim.torusflow` (tori and hypercubes) and
:mod:`~mpicoll.netsim.dragonflyflow` (dragonflies) in the fluid model of
:mod:`~mpicoll.netsim.fluid`. Only the child imports SimGrid.
"""

from mpicoll.netsim.driver import Result, calibrate_gamma, run_program, simulate
from mpicoll.netsim.platform import Platform, PlatformError, parse

__all__ = ["Platform", "PlatformError", "Result", "calibrate_gamma", "parse",
           "run_program", "simulate"]
