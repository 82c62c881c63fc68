"""``python -m mpicoll.launch check``: did the launcher start one MPI world,
or many worlds of one rank? (:mod:`mpicoll.guard.launch`).

In a program: ``mpicoll.launch.check_world()`` raises where a job of
several tasks runs as singletons, and ``mpicoll.launch.placement(comm)``
says which node each rank is on.
"""

import sys

from mpicoll.guard.launch import check_world, placement

__all__ = ["check_world", "placement"]

if __name__ == "__main__":
    from mpicoll.guard.launch import main

    sys.exit(main())
