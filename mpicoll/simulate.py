"""``python -m mpicoll.simulate``: predicted times of the schedules at any
rank count, no MPI (:mod:`mpicoll.sim.predict`).

Also the data simulator's entry: ``from mpicoll.simulate import
simulate`` runs a whole collective on real arrays, every rank in one
process (:mod:`mpicoll.sim.data`).
"""

import sys

from mpicoll.sim.data import simulate

__all__ = ["simulate"]

if __name__ == "__main__":
    from mpicoll.sim.predict import main

    sys.exit(main())
