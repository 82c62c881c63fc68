"""Cross-check the SimGrid model's predictions against SMPI's own algorithms.

    python bench/smpi_crosscheck.py          # docs/results/validation-smpi.txt
    python bench/smpi_crosscheck.py -c allreduce --ranks 16 --network flat -b 1M -e 1M
    python bench/smpi_crosscheck.py -c alltoall,allreduce --network flat \
        --ranks 16,64 -b 16K -e 1M -f 64 --send-overhead 0,1e-6

SMPI (SimGrid's MPI, ``apt-get install libsimgrid-dev``: ``smpicc``,
``smpirun``, SimGrid 3.32) runs a C MPI program (``bench/smpi/colltime.c``)
whose collective is one of SMPI's built-in algorithms, picked by name
(``--cfg=smpi/allreduce:lr``); ``python -m mpicoll.simulate --model
simgrid`` replays our schedule of the same algorithm. Both run on the same
platform file (:meth:`mpicoll.sim.simgrid.networks.Platform.xml`), one rank per
node, with SimGrid's correction factors off (:mod:`mpicoll.sim.simgrid`'s
``EXACT`` options, and ``smpi/bw-factor:0:1``, ``smpi/lat-factor:0:1``) and
with no time for reductions (SMPI charges none: the simulation gets
``--gamma 0``). SMPI's sends are rendezvous like our flows: a transfer
starts once both ends have posted (``smpi/async-small-thresh:0``: no eager
copy) and a send is done when its transfer is
(``smpi/send-is-detached-thresh:0``). SMPI's default detaches every send
under 64 KiB (a blocking send returns at once), so a rank posts its next
round before its own last send has arrived and a root posts all its
scatter sends at once (``--detached 65536`` runs SMPI so). Each line: our
time, SMPI's and our difference from SMPI in percent; a summary table then
gives the range of the differences per collective, algorithm and kind of
network. Where both send the same messages in the same order they agree
within 0.5%, SMPI's messages carrying 16 bytes more (its envelope, 1.28 ns
on a 12.5 GB/s link); a larger difference means the two implementations
differ (which rank pairs with which, or when a send is posted).

Networks (``--network``, comma list), per rank count p (a power of two):
``flat`` (flat:p), ``ring`` (ring:p), ``torus`` (4x4, 4x4x4, 4x8x8, ...),
``hypercube`` (log2 p dimensions), ``fattree`` (two levels, sqrt(p) leaf
switches of sqrt(p) nodes, non-blocking; p an even power of two) and
``dragonfly`` (16: 2,2,2,2; 64: 4,2,4,2; 256: 4,4,4,4).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "bench" / "smpi" / "colltime.c"

#: our algorithm -> SMPI's of the same name in its catalogue (SimGrid 3.32)
PAIRS = {
    "allreduce": {"ring": "lr", "recursive_doubling": "rdb",
                  "rabenseifner": "rab_rdb"},
    "bcast": {"binomial": "binomial_tree",
              "scatter_allgather": "scatter_LR_allgather"},
    # NTSLR passes blocks to rank + 1, as ours; SMPI's "ring" allgather
    # sends to rank + i in step i, a different algorithm
    "allgather": {"ring": "NTSLR", "recursive_doubling": "rdb",
                  "bruck": "bruck"},
    # basic_linear posts its p-1 receives, then its p-1 sends to r-1,
    # r-2, ...: on ``flat`` the mirror of ours; ring is our pairwise
    "alltoall": {"linear": "basic_linear", "pairwise": "ring"},
}

#: SMPI options: α-β links as mpicoll.sim.simgrid's EXACT, no compute, rendezvous
#: (no eager copy; the detached-send threshold comes from ``detached``).
SMPI_CFG = ("--cfg=smpi/bw-factor:0:1", "--cfg=smpi/lat-factor:0:1",
            "--cfg=network/weight-S:0", "--cfg=network/crosstraffic:0",
            "--cfg=smpi/simulate-computation:no", "--cfg=smpi/wtime:0",
            "--cfg=smpi/async-small-thresh:0", "--log=root.thres:warning")


def send_cfg(detached: int, overhead: float) -> list[str]:
    """SMPI's options for sends: those under ``detached`` bytes return at
    once (SMPI's default 65536; 0 makes every send wait for its transfer,
    as our flows do), and each costs its sender ``overhead`` seconds
    before it posts (``smpi/ois`` for ``MPI_Isend``, ``smpi/os`` for
    ``MPI_Send``, in their ``size:offset:factor`` form: the same for every
    size), as ``python -m mpicoll.simulate --send-overhead`` charges."""
    cfg = [f"--cfg=smpi/send-is-detached-thresh:{detached}"]
    if overhead:
        cfg += [f"--cfg=smpi/ois:0:{overhead!r}:0",
                f"--cfg=smpi/os:0:{overhead!r}:0"]
    return cfg

NETWORKS = ("flat", "ring", "torus", "hypercube", "fattree", "dragonfly")
DRAGONFLY = {16: "2,2,2,2", 64: "4,2,4,2", 256: "4,4,4,4"}


def network_spec(name: str, p: int) -> str:
    """The platform spec of network ``name`` for ``p`` ranks (see the
    module docstring); ValueError when none is defined for ``p``."""
    d = p.bit_length() - 1
    if p < 4 or p != 1 << d:
        raise ValueError(f"{p} ranks: the networks need a power of two >= 4")
    if name in ("flat", "ring"):
        return f"{name}:{p}"
    if name == "hypercube":
        return f"hypercube:{d}"
    if name == "torus":
        dims = [4] * (d // 2) if d <= 4 else [4] + [2 ** ((d - 2) // 2)] * 2
        dims[-1] *= p // math.prod(dims)
        return "torus:" + "x".join(map(str, dims))
    if name == "fattree" and d % 2 == 0:
        k = 1 << d // 2
        return f"fattree:2;{k},{k};1,{k};1,1"
    if name == "dragonfly" and p in DRAGONFLY:
        return f"dragonfly:{DRAGONFLY[p]}"
    raise ValueError(f"no {name} network of {p} ranks here")


def compile_program(folder: str) -> str:
    """``colltime.c`` built with smpicc in ``folder``; its path."""
    exe = os.path.join(folder, "colltime")
    subprocess.run(["smpicc", "-O2", str(SOURCE), "-o", exe], check=True,
                   capture_output=True, text=True)
    return exe


def smpi_times(exe: str, collective: str, algorithm: str, spec: str, p: int,
               sizes: list[int], folder: str, detached: int = 0,
               overhead: float = 0.0) -> dict[int, float]:
    """SMPI's simulated seconds per size for its ``algorithm``; sends
    under ``detached`` bytes detached, each costing ``overhead`` seconds
    (:func:`send_cfg`)."""
    from mpicoll.sim.simgrid import parse

    plat = parse(spec)
    xml, hosts = os.path.join(folder, "platform.xml"), os.path.join(folder,
                                                                    "hosts")
    Path(xml).write_text(plat.xml())
    Path(hosts).write_text("".join(f"node{n}\n" for n in plat.node_map(p)))
    proc = subprocess.run(
        ["smpirun", "-np", str(p), "-platform", xml, "-hostfile", hosts,
         f"--cfg=smpi/{collective}:{algorithm}", *SMPI_CFG,
         *send_cfg(detached, overhead), exe, collective,
         *map(str, sizes)], capture_output=True, text=True, cwd=folder)
    times = {}
    for line in proc.stdout.splitlines():
        name, nbytes, seconds = line.split()
        if name == collective:
            times[int(nbytes)] = float(seconds)
    if proc.returncode or len(times) != len(sizes):
        raise RuntimeError(f"smpirun failed ({proc.returncode}):\n"
                           f"{proc.stderr[-2000:]}")
    return times


def simgrid_times(collective: str, algorithms: list[str], spec: str, p: int,
                 sizes: tuple[str, str, str], folder: str,
                 overhead: float = 0.0) -> dict[tuple[str, int], float]:
    """``python -m mpicoll.simulate --model simgrid``'s seconds per
    (algorithm, bytes), through its ``--json`` records, each send costing
    ``overhead`` seconds (``--send-overhead``)."""
    out = os.path.join(folder, "ours.json")
    b, e, f = sizes
    subprocess.run(
        [sys.executable, "-m", "mpicoll.simulate", "-c", collective, "-a",
         ",".join(algorithms), "--model", "simgrid", "--network", spec,
         "--ranks", str(p), "-b", b, "-e", e, "-f", f, "--gamma", "0",
         "--quiet", "--json", out, "--send-overhead", repr(overhead)],
        check=True, cwd=ROOT)
    with open(out) as fh:
        records = json.load(fh)["records"]
    return {(r["algorithm"], r["nbytes"]): r["time_us"]["avg"] * 1e-6
            for r in records}


def compare(collective: str, network: str, p: int,
            sizes: tuple[str, str, str], exe: str, folder: str,
            detached: int = 0, overhead: float = 0.0) -> list[dict]:
    """One row per (algorithm, size): ours, SMPI's, difference
    (``detached``, ``overhead``: see :func:`send_cfg`)."""
    spec = network_spec(network, p)
    ours = simgrid_times(collective, list(PAIRS[collective]), spec, p, sizes,
                        folder, overhead)
    rows = []
    for algorithm, smpi_name in PAIRS[collective].items():
        wanted = sorted(n for a, n in ours if a == algorithm)
        theirs = smpi_times(exe, collective, smpi_name, spec, p, wanted,
                            folder, detached, overhead)
        for nbytes in wanted:
            t, s = ours[algorithm, nbytes], theirs[nbytes]
            rows.append({"collective": collective, "algorithm": algorithm,
                         "smpi": smpi_name, "network": spec, "ranks": p,
                         "nbytes": nbytes, "overhead_us": overhead * 1e6,
                         "ours_us": t * 1e6,
                         "smpi_us": s * 1e6,
                         "diff_pct": 100 * (t - s) / s if s else 0.0})
    return rows


def markdown(rows: list[dict]) -> str:
    """The rows as the docs' table."""
    sends = any(r["overhead_us"] for r in rows)  # a column for o
    lines = ["| collective | algorithm (SMPI's) | network | ranks | bytes "
             + ("| o (µs) " if sends else "")
             + "| ours (µs) | SMPI (µs) | difference |",
             "|---|---|---|---|---|---|---|---|" + ("---|" if sends else "")]
    for r in rows:
        lines.append(
            f"| {r['collective']} | {r['algorithm']} ({r['smpi']}) "
            f"| {r['network']} | {r['ranks']} | {r['nbytes']} "
            + (f"| {r['overhead_us']:g} " if sends else "")
            + f"| {r['ours_us']:.4f} | {r['smpi_us']:.4f} "
            f"| {r['diff_pct']:+.2f}% |")
    return "\n".join(lines)


def summary(rows: list[dict]) -> str:
    """Per collective, algorithm and kind of network: the range of the
    differences over rank counts and sizes."""
    spans: dict[tuple[str, str, str], list[float]] = {}
    for r in rows:
        key = (r["collective"], f"{r['algorithm']} ({r['smpi']})",
               r["network"].split(":")[0]
               + (f", o = {r['overhead_us']:g} µs" if r["overhead_us"]
                  else ""))
        spans.setdefault(key, []).append(r["diff_pct"])
    lines = ["| collective | algorithm (SMPI's) | network | difference, "
             "min to max |", "|---|---|---|---|"]
    for (collective, algorithm, network), diffs in spans.items():
        lines.append(f"| {collective} | {algorithm} | {network} "
                     f"| {min(diffs):+.2f}% to {max(diffs):+.2f}% |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-c", "--collective", default="allreduce,bcast,allgather",
                   help="comma list of " + ", ".join(PAIRS))
    p.add_argument("--network", default="flat,torus,fattree,dragonfly",
                   help="comma list of " + ", ".join(NETWORKS))
    p.add_argument("--ranks", default="16,64,256",
                   help="comma list of powers of two")
    p.add_argument("-b", default="64K", help="smallest size; default 64K")
    p.add_argument("-e", default="1M", help="largest size; default 1M")
    p.add_argument("-f", default="16", help="step factor; default 16")
    p.add_argument("--detached", type=int, default=0, metavar="BYTES",
                   help="SMPI detaches sends under BYTES (they return at "
                   "once); default 0, rendezvous as ours; SMPI's own "
                   "default is 65536")
    p.add_argument("--send-overhead", default="0", metavar="SECONDS",
                   help="comma list: each send costs its sender SECONDS "
                   "on both sides (the simulate command's --send-overhead, "
                   "SMPI's smpi/ois and smpi/os); default 0")
    p.add_argument("--json", metavar="FILE", help="the rows as JSON")
    args = p.parse_args(argv)
    missing = [t for t in ("smpicc", "smpirun") if not shutil.which(t)]
    if missing:
        p.error(f"{' and '.join(missing)} not found: apt-get install "
                "libsimgrid-dev")
    rows = []
    with tempfile.TemporaryDirectory(prefix="smpi-crosscheck-") as folder:
        exe = compile_program(folder)
        for collective in args.collective.split(","):
            for network in args.network.split(","):
                for ranks in map(int, args.ranks.split(",")):
                    try:
                        network_spec(network, ranks)
                    except ValueError as e:
                        print(f"skipped: {e}", file=sys.stderr)
                        continue
                    for overhead in map(float,
                                        args.send_overhead.split(",")):
                        rows += compare(collective, network, ranks,
                                        (args.b, args.e, args.f), exe,
                                        folder, args.detached, overhead)
    print(markdown(rows))
    print()
    print(summary(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
