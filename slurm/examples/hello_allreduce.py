"""A user's MPI program for slurm/run.sbatch: allreduce, checked.

    sbatch slurm/run.sbatch slurm/examples/hello_allreduce.py [--fail-rank R]

Every rank contributes ``rank + i`` at index ``i``; the sum over p ranks is
``p(p-1)/2 + p*i``, exact in int64, so a wrong schedule or a rank missing
from the world shows as a mismatch. ``--fail-rank R`` makes rank R raise
instead, to show that one rank's exception ends the whole job (under
``python -m mpi4py``) rather than leaving the others waiting.
"""

import argparse

import numpy as np
from mpi4py import MPI

import mpicoll
import mpicoll.launch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=1 << 16)
    parser.add_argument("--fail-rank", type=int, default=None,
                        help="this rank raises before the allreduce")
    args = parser.parse_args()

    mpicoll.launch.check_world()          # one world, not p singletons
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    p, rank = comm.size, comm.rank
    if rank == args.fail_rank:
        raise RuntimeError(f"rank {rank} fails on purpose (--fail-rank)")
    x = rank + np.arange(args.count, dtype=np.int64)
    for algorithm in ["auto", *mpicoll.algorithms("allreduce")]:
        y = np.empty_like(x)
        comm.Allreduce(x, y, MPI.SUM, algorithm=algorithm)
        expected = p * (p - 1) // 2 + p * np.arange(args.count, dtype=np.int64)
        if not np.array_equal(y, expected):
            raise AssertionError(f"rank {rank}: allreduce ({algorithm}) wrong")
    nodes = mpicoll.launch.placement(comm)
    if rank == 0:
        print(f"hello_allreduce: {p} ranks on {len(nodes)} node(s), "
              f"{len(mpicoll.algorithms('allreduce')) + 1} algorithms, "
              f"all right", flush=True)


if __name__ == "__main__":
    main()
