"""The SimGrid side of :mod:`mpicoll.netsim.driver`: replay one program.

Run as ``python -I replay.py JOB OUT`` in a fresh process (SimGrid allows one
engine per process; as a plain script it imports neither mpicoll nor
mpi4py, and ``-I`` keeps this folder, whose ``platform.py`` would shadow the
standard library's, off ``sys.path``). ``JOB`` is a JSON object of plain
lists: the program's flows (``src``, ``dst``, ``nbytes``), per rank and
round the flows waited for (``ops``) and the reduction delays in seconds
(``delay``), the host of every rank (``hosts``), the platform file
(``xml``) and SimGrid options (``cfg``). ``OUT`` gets a JSON object with
``finish`` (per rank), ``round_end`` (per round index, the latest rank's),
``wall`` and ``maxrss_mb``, or ``error``: what stopped the run. (JSON, not
pickle: no file this package reads can run code.)

The controller posts rounds, starts each flow once its sender and its
receiver have both posted the rounds holding it, retires finished flows,
sleeps through reductions, and stops when every rank is done.
"""

import heapq
import json
import resource
import sys
import time


def control(sg, job: dict, hosts: list, out: dict) -> None:
    """The controller actor's body (see the module docstring)."""
    src, dst, nbytes = job["src"], job["dst"], job["nbytes"]
    ops, delays = job["ops"], job["delay"]
    p = len(ops)
    need = [2] * len(src)  # ends (sender, receiver) not yet posted
    pending = [0] * p  # flows the rank's current round still waits for
    cursor = [0] * p
    finish = [0.0] * p
    round_end = [0.0] * max((len(r) for r in ops), default=0)
    active, active_flow = [], []  # comms in flight and their flows
    timers = []  # (when a reduction ends, rank)
    ready = list(range(p))  # ranks to post their next round
    clock = sg.Engine.get_clock

    def comm_done(rank, now):
        delay = delays[rank][cursor[rank]]
        if delay > 0:
            heapq.heappush(timers, (now + delay, rank))
        else:
            round_done(rank, now)

    def round_done(rank, now):
        k = cursor[rank]
        round_end[k] = max(round_end[k], now)
        cursor[rank] = k + 1
        ready.append(rank)

    while True:
        now = clock()
        while ready:
            rank = ready.pop()
            k = cursor[rank]
            if k == len(ops[rank]):
                finish[rank] = now
                continue
            flows = ops[rank][k]
            pending[rank] = len(flows)
            for f in flows:
                need[f] -= 1
                if not need[f]:
                    active.append(sg.Comm.sendto_async(
                        hosts[src[f]], hosts[dst[f]], nbytes[f]))
                    active_flow.append(f)
            if not flows:
                comm_done(rank, now)
        if not active and not timers:
            break
        if not active:
            sg.this_actor.sleep_until(timers[0][0])
            first = -1
        elif timers:
            first = sg.Comm.wait_any_for(active, max(0.0, timers[0][0] - now))
        else:
            first = sg.Comm.wait_any(active)
        now = clock()
        if first >= 0:
            # Every flow that ended at this instant, in one sweep: a
            # finished transfer has nothing left, and test() retires it.
            done = [active_flow[first]]
            keep_c, keep_f = [], []
            for i, (c, f) in enumerate(zip(active, active_flow)):
                if i == first:
                    continue
                if c.remaining == 0 and c.test():
                    done.append(f)
                else:
                    keep_c.append(c)
                    keep_f.append(f)
            active, active_flow = keep_c, keep_f
            for f in done:
                for rank in (src[f], dst[f]):
                    pending[rank] -= 1
                    if not pending[rank]:
                        comm_done(rank, now)
        else:  # a reduction timer is due (at least the first one)
            round_done(heapq.heappop(timers)[1], now)
        while timers and timers[0][0] <= now:
            round_done(heapq.heappop(timers)[1], now)
    stuck = [r for r in range(p) if cursor[r] < len(ops[r])]
    if stuck:
        raise RuntimeError(f"deadlock: ranks {stuck[:8]} never finish "
                           f"round {cursor[stuck[0]]}")
    out.update(finish=finish, round_end=round_end)


def _peak_mb():
    """This process's peak memory: VmHWM (ru_maxrss would count the parent
    it was forked from before exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(job_path: str, out_path: str) -> None:
    """Run the job file in this process and write the result file."""
    import simgrid as sg  # the optional extra (scripts/simgrid.sh)

    with open(job_path) as f:
        job = json.load(f)
    with open("platform.xml", "w") as f:
        f.write(job["xml"])
    # One Python actor only: "raw" contexts switch stacks under the
    # interpreter, which two Python actors would corrupt.
    engine = sg.Engine(["mpicoll-netsim", "--cfg=contexts/factory:raw",
                        "--log=root.thres:critical", *job["cfg"]])
    engine.load_platform("platform.xml")
    by_node = {}
    hosts = [by_node.setdefault(n, sg.Host.by_name(f"node{n}"))
             for n in job["hosts"]]
    result = {}
    failure = []

    def controller():
        try:
            control(sg, job, hosts, result)
        except Exception as e:  # SimGrid aborts on an escaping exception
            failure.append(e)

    t0 = time.perf_counter()
    sg.Actor.create("controller", sg.Host.by_name("node0"), controller)
    engine.run()
    wall = time.perf_counter() - t0
    if failure:
        done = {"error": f"{type(failure[0]).__name__}: {failure[0]}"}
    else:
        done = dict(result, wall=wall, maxrss_mb=_peak_mb())
    with open(out_path, "w") as f:
        json.dump(done, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
