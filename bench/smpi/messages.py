"""Message by message: SMPI's own algorithm against our schedule of it.

    python bench/smpi/messages.py allgather bruck dragonfly:2,2,2,2 16 64K
    python bench/smpi/messages.py bcast scatter_allgather flat:16 16 64K \\
        --detached 65536

Runs one call of SMPI's algorithm paired with ours in
``bench/smpi_crosscheck.py`` (``PAIRS``) under ``smpirun`` with the
cross-check's options and a Paje trace of SMPI's internal messages
(``tracing/smpi/internals``), and matches every message of the call with
one of our schedule's (:func:`mpicoll.sim.simgrid.program.build`): per pair of
ranks, in posting order, as MPI matches them. Prints, per message sorted
by our sender's round: that round, source, destination and bytes, then
when SMPI's sender posted it and when its receiver had it (µs from the
call's start); the header says whether both send the same messages
(source, destination, bytes, order per pair) and SMPI's time of the call.
``--detached BYTES``: SMPI's sends under BYTES return at once (SMPI's
default is 65536; the cross-check's is 0, rendezvous as netsim's flows).
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import smpi_crosscheck as crosscheck  # noqa: E402

from mpicoll.bench.cli import parse_size  # noqa: E402
from mpicoll.coll import lookup  # noqa: E402
from mpicoll.sim.simgrid import parse  # noqa: E402
from mpicoll.sim.simgrid.program import build, sig  # noqa: E402


def ours(collective: str, algorithm: str, spec: str, p: int, nbytes: int
         ) -> list[dict]:
    """Our schedule's messages: src, dst, bytes, the sender's round."""
    plat = parse(spec)
    alg = lookup(collective, algorithm)
    count = nbytes // 4 // (p if collective == "allgather" else 1)
    nodes = plat.node_map(p)
    prog = build([sig(alg.schedule(r, p, count, root=0, nodes=nodes), 4)
                  for r in range(p)])
    round_of = {}
    for r in range(p):
        for k, flows in enumerate(prog.ops[r]):
            for f in flows:
                if prog.src[f] == r:
                    round_of[f] = k
    return [dict(src=prog.src[f], dst=prog.dst[f], bytes=prog.nbytes[f],
                 round=round_of[f]) for f in range(len(prog.src))]


def trace_messages(path: str) -> list[dict]:
    """The messages of the timed call in SMPI's Paje trace: those posted
    after colltime.c's 0.1 s sleep with the tag of the first of them;
    src, dst, bytes, post and end (seconds from the call's start)."""
    rank_of, starts, ends = {}, {}, {}
    for line in Path(path).read_text().splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "6" and f[-1].startswith('"rank-'):
            rank_of[f[2]] = int(f[-1][6:-1])
        elif f[0] == "15":  # StartLink: time type container value from key size
            starts[f[6]] = (float(f[1]), f[5], int(f[7]))
        elif f[0] == "16":  # EndLink: time type container value to key
            ends[f[6]] = (float(f[1]), f[5])
    msgs = [dict(src=rank_of[s], dst=rank_of[ends[key][1]], bytes=n,
                 post=t, end=ends[key][0], tag=key.split("_")[2])
            for key, (t, s, n) in starts.items() if key in ends]
    posts = sorted(m["post"] for m in msgs)
    t0 = next((b for a, b in zip(posts, posts[1:]) if b - a > 0.05), None)
    if t0 is None:
        raise RuntimeError("no 0.1 s sleep before the call in the trace")
    tag = min((m for m in msgs if m["post"] >= t0),
              key=lambda m: m["post"])["tag"]
    call = [m for m in msgs if m["post"] >= t0 and m["tag"] == tag]
    for m in call:
        m["post"] -= t0
        m["end"] -= t0
    return call


def smpi(collective: str, algorithm: str, spec: str, p: int, nbytes: int,
         detached: int, folder: str) -> tuple[float, list[dict]]:
    """SMPI's time of the call and its messages (:func:`trace_messages`)."""
    exe = crosscheck.compile_program(folder)
    plat = parse(spec)
    xml, hosts = os.path.join(folder, "platform.xml"), os.path.join(folder,
                                                                    "hosts")
    trace = os.path.join(folder, "smpi.trace")
    Path(xml).write_text(plat.xml())
    Path(hosts).write_text("".join(f"node{n}\n" for n in plat.node_map(p)))
    proc = subprocess.run(
        ["smpirun", "-np", str(p), "-platform", xml, "-hostfile", hosts,
         f"--cfg=smpi/{collective}:{algorithm}", *crosscheck.SMPI_CFG,
         crosscheck.detached_cfg(detached), "--cfg=tracing:yes",
         "--cfg=tracing/smpi:yes", "--cfg=tracing/smpi/internals:yes",
         "--cfg=tracing/smpi/display-sizes:yes", "--cfg=tracing/precision:9",
         f"--cfg=tracing/filename:{trace}", exe, collective, str(nbytes)],
        capture_output=True, text=True, cwd=folder, timeout=600)
    if proc.returncode:
        raise RuntimeError(f"smpirun failed ({proc.returncode}):\n"
                           f"{proc.stderr[-2000:]}")
    seconds = float(proc.stdout.split()[-1])
    return seconds, trace_messages(trace)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("collective", choices=sorted(crosscheck.PAIRS))
    ap.add_argument("algorithm", help="ours, as in bench/smpi_crosscheck.py")
    ap.add_argument("network", help="platform spec, e.g. dragonfly:2,2,2,2")
    ap.add_argument("ranks", type=int)
    ap.add_argument("nbytes", help="the benchmark's bytes, e.g. 64K")
    ap.add_argument("--detached", type=int, default=0, metavar="BYTES",
                    help="SMPI detaches sends under BYTES (default 0)")
    args = ap.parse_args(argv)
    nbytes = parse_size(args.nbytes)
    smpi_name = crosscheck.PAIRS[args.collective][args.algorithm]
    mine = ours(args.collective, args.algorithm, args.network, args.ranks,
                nbytes)
    with tempfile.TemporaryDirectory(prefix="smpi-messages-") as folder:
        seconds, theirs = smpi(args.collective, smpi_name, args.network,
                               args.ranks, nbytes, args.detached, folder)
    queues = collections.defaultdict(collections.deque)
    for m in sorted(theirs, key=lambda m: m["post"]):
        queues[m["src"], m["dst"]].append(m)
    rows, same = [], len(mine) == len(theirs)
    for m in mine:  # ours in flow order: per pair, in posting order
        queue = queues[m["src"], m["dst"]]
        t = queue.popleft() if queue else None
        same = same and t is not None and t["bytes"] == m["bytes"]
        rows.append((m, t))
    print(f"# {args.collective} {args.algorithm} against SMPI's {smpi_name}, "
          f"{args.network}, {args.ranks} ranks, {nbytes} bytes, sends under "
          f"{args.detached} bytes detached: SMPI {seconds * 1e6:.4f} µs; "
          f"{len(mine)} messages ours, {len(theirs)} SMPI's, "
          f"{'the same' if same else 'NOT the same'}")
    print("round  src  dst     bytes  smpi_post_us  smpi_end_us")
    for m, t in sorted(rows, key=lambda r: (r[0]["round"], r[0]["src"])):
        post, end = (f"{t['post'] * 1e6:12.4f}", f"{t['end'] * 1e6:12.4f}") \
            if t else ("-", "-")
        print(f"{m['round']:5d} {m['src']:4d} {m['dst']:4d} {m['bytes']:9d}"
              f"  {post} {end}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
