"""The SimGrid side of :mod:`mpicoll.netsim.driver`: replay one program.

Run as ``python -I replay.py JOB OUT`` in a fresh process (SimGrid allows one
engine per process; as a plain script it imports neither mpicoll nor
mpi4py, and ``-I`` keeps this folder, whose ``platform.py`` would shadow the
standard library's, off ``sys.path``). ``JOB`` is a JSON object of plain
lists: the program's flows (``src``, ``dst``, ``nbytes``), per rank and
round the flows waited for (``ops``) and the reduction delays in seconds
(``delay``), the host of every rank (``hosts``), the platform file
(``xml``), SimGrid options (``cfg``) and the folder of the SimGrid build to
import (``simgrid``; null: the venv's). ``OUT`` gets a JSON object with
``finish`` (per rank), ``round_end`` (per round index, the latest rank's),
``wall``, ``maxrss_mb`` and ``version``, or ``error``: what stopped the
run. (JSON, not pickle: no file this package reads can run code.)

The controller posts rounds, starts each flow once its sender and its
receiver have both posted the rounds holding it, retires finished flows,
sleeps through reductions, and stops when every rank is done.

It runs on SimGrid 3.32 (Debian's, ``scripts/simgrid.sh``) and 4.x (4.1:
``scripts/simgrid41.sh``), whichever the job's ``simgrid`` folder (put
first on ``sys.path``) or the venv provides. The two differ in the calls
kept in :func:`wait_any` and :func:`add_actor`: 3.32 waits with
``Comm.wait_any(list)``, 4.x with an ``ActivitySet``; 3.32 starts actors
with ``Actor.create``, 4.x with ``Host.add_actor``. 4.x also keeps an
actor's activities in a set, where 3.32 removes each finished one from a
list in time linear in it (O(p²) per round of p flows).
"""

import heapq
import json
import resource
import sys
import time


def wait_any(sg, active: list, timeout: float | None) -> bool:
    """Block until one of the ``active`` comms is done (True) or ``timeout``
    simulated seconds pass (False; None waits without limit)."""
    if hasattr(sg, "ActivitySet"):  # SimGrid 4.x
        waiting = sg.ActivitySet(active)
        if timeout is None:
            waiting.wait_any()
            return True
        try:
            waiting.wait_any_for(timeout)
        except sg.TimeoutException:
            return False
        return True
    if timeout is None:  # SimGrid 3.32
        return sg.Comm.wait_any(active) >= 0
    return sg.Comm.wait_any_for(active, timeout) >= 0


def add_actor(sg, name: str, host, body) -> None:
    """Start an actor running ``body()`` on ``host``."""
    if hasattr(sg.Host, "add_actor"):  # SimGrid 4.x
        host.add_actor(name, body)
    else:  # SimGrid 3.32
        sg.Actor.create(name, host, body)


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

    def clock():
        return sg.Engine.clock

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
            flowed = False
        else:
            flowed = wait_any(sg, active, max(0.0, timers[0][0] - now)
                              if timers else None)
        now = clock()
        if flowed:
            # Every flow that ended at this instant, in one sweep: a
            # finished transfer has nothing left, and test() retires it
            # (the one the wait returned tests True again).
            done = []
            keep_c, keep_f = [], []
            for c, f in zip(active, active_flow):
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
    with open(job_path) as f:
        job = json.load(f)
    if job.get("simgrid"):  # another build than the venv's
        sys.path.insert(0, job["simgrid"])
    import simgrid as sg  # the optional extra (scripts/simgrid.sh)

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
    add_actor(sg, "controller", sg.Host.by_name("node0"), controller)
    engine.run()
    wall = time.perf_counter() - t0
    if failure:
        done = {"error": f"{type(failure[0]).__name__}: {failure[0]}"}
    else:
        done = dict(result, wall=wall, maxrss_mb=_peak_mb(),
                    version=sg.simgrid_version)
    with open(out_path, "w") as f:
        json.dump(done, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
