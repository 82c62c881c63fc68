"""``python -m mpicoll.calibrate``: measure the cost model's α, β, γ and
copy on this machine, under MPI (:mod:`mpicoll.bench.calibrate`)."""

import sys

if __name__ == "__main__":
    from mpicoll.bench.calibrate import main

    sys.exit(main())
