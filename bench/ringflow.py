"""Symmetric schedules in closed form on ring, torus, hypercube, dragonfly.

    python bench/ringflow.py --ranks 65536 -c allreduce \\
        -a recursive_doubling,rabenseifner
    python bench/ringflow.py --ranks 1024 -c allreduce -a rabenseifner \\
        --compare --simgrid "$(scripts/simgrid41.sh --print-dir)"
    python bench/ringflow.py --ranks 65536 --ranks-per-node 8 \\
        -c allgather -a hierarchical
    python bench/ringflow.py --ranks 65536 -c alltoall -a linear \\
        --network torus:16x64x64 --spread even
    python bench/ringflow.py --ranks 65536 -c alltoall -a linear \\
        --network dragonfly:16,16,16,16

Prices each algorithm with :mod:`mpicoll.sim.simgrid.ringflow` (every round's
flows on a ring of nodes, SimGrid's routes, link model and max-min
shares, in closed form; ``--ranks-per-node N`` puts the ranks in blocks
of N on ``--ranks / N`` nodes, as the simulate command does, and a
Cartesian algorithm runs on the ring's grid) and, with ``--compare``,
runs the exact SimGrid simulation of the same schedules beside it
(:func:`mpicoll.sim.simgrid.run_collective`, no approximation), to show where they
agree. ``--network`` takes a ``torus:..`` or ``hypercube:d`` of
``--ranks`` nodes instead (or a ring the closed form cannot price round
by round): :mod:`mpicoll.sim.simgrid.torusflow` prices translation-invariant
rounds there, the half-way flows of even dimensions loaded as on the
busiest links or, with ``--spread even``, spread evenly (the two bracket
SimGrid's time); on a ``dragonfly:G,C,R,N`` of ``--ranks`` nodes
:mod:`mpicoll.sim.simgrid.dragonflyflow` prices all-pairs rounds (the linear
all-to-all) by the dragonfly's symmetries. One line per algorithm and
size: the network and ranks per node, the predicted µs, the rounds, the
symmetry that gave every rank's rounds (``all-pairs`` on a dragonfly;
``+merged``: a round's messages to one peer merged, an approximation
the exact run does not make), the seconds the closed form took, and with
``--compare`` SimGrid's µs, the ratio and SimGrid's wall time and peak
memory. γ as the simulate command's default (1e-10 s per byte), the
platform's default links.
Exit status 1 when an algorithm is not in closed form (printed).
"""

from __future__ import annotations

import argparse
import sys
import time

from mpicoll.cli.sizes import parse_size
from mpicoll.bench.specs import SPECS
from mpicoll.sim.simgrid import parse, run_collective, torusflow
from mpicoll.sim.predict import torus_dims

GAMMA = 1e-10  # s per byte reduced: python -m mpicoll.simulate's default
ITEMSIZE = 4  # float32


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-c", "--collective", default="allreduce",
                   choices=sorted(SPECS))
    p.add_argument("-a", "--algorithm", default="recursive_doubling",
                   help="comma list of hand-built algorithms")
    p.add_argument("--ranks", type=int, default=65536)
    p.add_argument("--ranks-per-node", type=int, default=1, metavar="N",
                   help="ranks per node, placed in blocks; default 1")
    p.add_argument("--size", default="1M",
                   help="comma list of sizes (the benchmark's bytes)")
    p.add_argument("--network", metavar="SPEC",
                   help="ring:P, torus:AxB.., hypercube:d or "
                        "dragonfly:G,C,R,N (default: a ring of --ranks / "
                        "--ranks-per-node nodes)")
    p.add_argument("--spread", choices=("busiest", "even"),
                   default="busiest",
                   help="even tori's half-way flows: as on the busiest "
                        "links (default) or spread evenly")
    p.add_argument("--compare", action="store_true",
                   help="also run the exact SimGrid simulation")
    p.add_argument("--simgrid", metavar="DIR",
                   help="folder of the SimGrid module (default: the venv's)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds for each SimGrid run; default 600")
    args = p.parse_args(argv)
    if args.ranks_per_node < 1 or args.ranks % args.ranks_per_node:
        p.error("--ranks-per-node must be positive and divide --ranks")
    plat = parse(args.network or f"ring:{args.ranks // args.ranks_per_node}",
                 ranks_per_node=args.ranks_per_node)
    dims = torus_dims(plat)
    spec = SPECS[args.collective]
    failed = 0
    print("collective algorithm network ranks_per_node ranks bytes "
          "predicted_us rounds symmetry closed_form_s"
          + (" simgrid_us ratio simgrid_wall_s simgrid_peak_mb"
             if args.compare else ""),
          flush=True)
    for algorithm in args.algorithm.split(","):
        for size in map(parse_size, args.size.split(",")):
            count = spec.count_for(size, args.ranks, ITEMSIZE)
            t0 = time.perf_counter()
            try:
                priced = torusflow.closed_form(
                    args.collective, algorithm, args.ranks, count, ITEMSIZE,
                    plat, GAMMA, busiest=args.spread == "busiest", dims=dims)
            except ValueError as e:
                print(f"# {algorithm}: {e}", file=sys.stderr)
                failed = 1
                continue
            line = (f"{args.collective} {algorithm} {plat.spec} "
                    f"{args.ranks_per_node} {args.ranks} "
                    f"{spec.nbytes(count, args.ranks, ITEMSIZE)} "
                    f"{priced.time * 1e6:.2f} {priced.rounds} "
                    f"{priced.symmetry} {time.perf_counter() - t0:.1f}")
            if args.compare:
                res = run_collective(args.collective, algorithm, args.ranks, count,
                               plat, itemsize=ITEMSIZE, gamma=GAMMA,
                               dims=dims, timeout=args.timeout,
                               simgrid=args.simgrid)
                line += (f" {res.time * 1e6:.2f} {priced.time / res.time:.6f}"
                         f" {res.wall:.1f} {res.maxrss_mb:.0f}")
            print(line, flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
