"""mpicoll.sim.simgrid at large rank counts: one program, every network family.

    python bench/netsim_scale.py --ranks 65536 --keep 4 --symmetric \\
        --simgrid "$(scripts/simgrid41.sh --print-dir)" \\
        --network ring:65536 --network torus:16x64x64 --network hypercube:16 \\
        --network "fattree:2;256,256;1,256;1,1" --network dragonfly:16,16,16,16
    python bench/netsim_scale.py --ranks 65536 --ranks-per-node 8 \\
        -c allreduce -a hierarchical,torus --network torus:16x16x32

``python -m mpicoll.simulate --model simgrid`` builds the schedules again
for every network; at 65,536 ranks building them takes about as long as
simulating them (a ring's 131,070 rounds, for rank 0 and the sampled
ranks that ``--symmetric`` checks). This builds each algorithm's program
once per size (:mod:`mpicoll.sim.simgrid.program`, the same calls as
:func:`mpicoll.sim.simgrid.simulate`) and replays it on each ``--network``
(:func:`mpicoll.sim.simgrid.run_program`), one after another. One line per
run: the predicted time, the flows simulated and the rounds charged
without being simulated, the symmetry used (``exact``: none), the peer
offsets kept (``--sample-peers``; ``all``), the seconds it took to build
the program (once per algorithm and size, repeated on each of its
lines), the SimGrid child's wall time and peak memory, the controller's
time quantum (``--quantum``, seconds; 0: exact, event-driven) and the
SimGrid version
(exit status 1 when an algorithm was skipped, ``--sample-rounds`` or
``--symmetric`` not fitting its schedules, or a run went over
``--timeout``). Rank ``r`` sits on node ``r // N`` (``--ranks-per-node
N``, default 1), as in the simulate command, so that the hierarchical
algorithms run on nodes of several ranks; a Cartesian algorithm (the
``torus`` allreduce) is built once per network, on that network's
dimensions where it has them (ring, torus, hypercube: the simulate
command's ``torus_dims``). γ as the simulate command's default (1e-10 s
per byte), α and β the platforms' defaults.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

from mpicoll.cli.sizes import parse_size
from mpicoll.bench.specs import SPECS
from mpicoll.coll import lookup
from mpicoll.coll.registry import Phase
from mpicoll.sim.simgrid import parse, run_program
from mpicoll.sim.simgrid.driver import one_after_another
from mpicoll.sim.simgrid.program import build, network_sigs, sig
from mpicoll.sim.predict import torus_dims

GAMMA = 1e-10  # s per byte reduced: python -m mpicoll.simulate's default
ITEMSIZE = 4  # float32


def program(collective: str, algorithm: str, size: int, count: int,
            keep: int | None, sample: int | None, symmetric: bool,
            nodes: tuple, dims: tuple | None = None,
            peers: int | None = None, params=None):
    """The flows of ``algorithm`` on ``size`` ranks (rank r on node
    ``nodes[r]``; ``dims``: a Cartesian algorithm's grid; ``peers``: the
    sampled offsets kept; ``params``: the builder's, ``root=`` included)
    and the symmetry used, as :func:`mpicoll.sim.simgrid.simulate` builds them."""
    alg = lookup(collective, algorithm)

    def rank_sig(rank):
        return sig(alg.schedule(rank, size, count, nodes=nodes, dims=dims,
                                cached=False, **(params or {})), ITEMSIZE)

    sigs, runs, gaps, symmetry = network_sigs(
        rank_sig, size, keep=keep, sample=sample, symmetric=symmetric,
        period=nodes.count(0),  # ranks per node: the map is in blocks
        peers=peers)
    return build(sigs, runs, gaps), symmetry


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-c", "--collective", default="allreduce",
                   choices=sorted(SPECS))
    p.add_argument("-a", "--algorithm",
                   default="ring,recursive_doubling,rabenseifner",
                   help="comma list of hand-built algorithms")
    p.add_argument("--ranks", type=int, default=65536)
    p.add_argument("--size", default="1M",
                   help="comma list of sizes (the benchmark's bytes)")
    p.add_argument("--network", action="append", required=True,
                   help="a platform spec (repeat the option for more)")
    p.add_argument("--ranks-per-node", type=int, default=1, metavar="N",
                   help="ranks per node, in blocks (rank r on node r // N); "
                        "default 1")
    p.add_argument("--keep", type=int, metavar="K",
                   help="simulate K rounds of each run of identical rounds")
    p.add_argument("--sample-rounds", type=int, metavar="N",
                   help="simulate N pairs of consecutive rounds, "
                        "interpolate the others (rounds that all differ)")
    p.add_argument("--symmetric", action="store_true",
                   help="build rank 0's schedule and a sample only")
    p.add_argument("--sample-peers", type=int, metavar="N",
                   help="keep the messages of N sampled peer offsets, each "
                        "carrying its stratum's bytes (the linear "
                        "algorithms' one round of many messages)")
    p.add_argument("--phases", action="store_true",
                   help="an algorithm declared as collectives run one after "
                        "the other (scatter_allgather), phase by phase, "
                        "--symmetric for the unrooted ones; times added")
    p.add_argument("--simgrid", metavar="DIR",
                   help="folder of the SimGrid module (default: the venv's)")
    p.add_argument("--quantum", type=float, default=0.0, metavar="SECONDS",
                   help="the controller looks for ended messages every "
                        "SECONDS simulated (default 0: at each instant one "
                        "ends, exact)")
    p.add_argument("--timeout", type=float, default=600.0)
    args = p.parse_args(argv)
    if args.sample_rounds is not None and args.keep is not None:
        p.error("--keep and --sample-rounds: use one")
    if args.sample_rounds is not None and args.sample_rounds < 2:
        p.error("--sample-rounds must be >= 2 (the first and last pairs)")
    if args.sample_peers is not None and args.sample_peers < 1:
        p.error("--sample-peers must be >= 1")
    if not math.isfinite(args.quantum) or args.quantum < 0:
        p.error("--quantum must be a finite number >= 0")
    if args.ranks_per_node < 1:
        p.error("--ranks-per-node must be >= 1")
    platforms = [parse(spec, ranks_per_node=args.ranks_per_node)
                 for spec in args.network]
    for plat in platforms:
        plat.node_map(args.ranks)  # PlatformError if the ranks do not fit
    nodes = platforms[0].node_map(args.ranks)  # in blocks: every network's
    spec = SPECS[args.collective]
    failed = 0
    print("collective algorithm network ranks bytes predicted_us flows "
          "rounds_cut symmetry peers build_s simgrid_wall_s simgrid_peak_mb "
          "quantum_s simgrid", flush=True)
    for algorithm in args.algorithm.split(","):
        alg = lookup(args.collective, algorithm)
        if alg is None or alg.native:
            print(f"# {algorithm} skipped: no hand-built {args.collective} "
                  "algorithm of that name", file=sys.stderr)
            failed = 1
            continue
        grids: dict = {}  # a Cartesian algorithm runs on each network's grid
        for plat in platforms:
            dims = torus_dims(plat) if alg.cartesian else None
            grids.setdefault(dims, []).append(plat)
        for size in map(parse_size, args.size.split(",")):
            count = spec.count_for(size, args.ranks, ITEMSIZE)
            for dims, on in grids.items():
                failed |= run(args, algorithm, count, nodes, dims, on)
    return failed


def run(args, algorithm: str, count: int, nodes: tuple, dims, platforms
        ) -> int:
    """Build ``algorithm``'s program once and replay it on each of
    ``platforms``, a line each; 1 if it was skipped or a run timed out."""
    spec, failed = SPECS[args.collective], 0
    alg = lookup(args.collective, algorithm)
    parts = alg.phases_of(args.ranks, count) if args.phases else None
    t0 = time.perf_counter()
    try:
        programs = [program(
            part.collective, part.algorithm, args.ranks, part.count,
            args.keep, args.sample_rounds,
            args.symmetric and not (parts and part.rooted),
            nodes, dims, args.sample_peers, part.params)
            for part in parts or [Phase(args.collective, algorithm, count,
                                        {})]]
    except ValueError as e:
        print(f"# {algorithm} skipped: {e}", file=sys.stderr)
        return 1
    built = time.perf_counter() - t0
    for plat in platforms:
        try:
            ran = [run_program(prog, plat, gamma=GAMMA, itemsize=ITEMSIZE,
                               quantum=args.quantum, timeout=args.timeout,
                               simgrid=args.simgrid)._replace(symmetry=sym)
                   for prog, sym in programs]
        except TimeoutError as e:
            print(f"# {algorithm} on {plat.spec}: {e}", file=sys.stderr)
            failed = 1
            continue
        res = one_after_another(ran) if parts else ran[0]
        print(f"{args.collective} {algorithm} {plat.spec} {args.ranks} "
              f"{spec.nbytes(count, args.ranks, ITEMSIZE)} "
              f"{res.time * 1e6:.2f} {res.flows} {res.rounds_cut} "
              f"{res.symmetry or 'exact'} {args.sample_peers or 'all'} "
              f"{built:.1f} {res.wall:.1f} {res.maxrss_mb:.0f} "
              f"{res.quantum:g} {res.version}", flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
