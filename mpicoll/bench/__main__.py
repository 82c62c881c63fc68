"""Entry point: ``mpiexec -n 4 python -m mpi4py -m mpicoll.bench``."""

import sys

from mpicoll.bench.cli import main

sys.exit(main())
