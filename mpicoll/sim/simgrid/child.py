"""The SimGrid side of :mod:`mpicoll.sim.simgrid.driver`: run one program.

Run as ``python -I child.py JOB OUT`` in a fresh process (SimGrid allows
one engine per process; as a plain script it imports neither mpicoll nor
mpi4py, and ``-I`` keeps this folder off ``sys.path``). ``JOB`` is a JSON
object of plain lists: the program's flows (``src``, ``dst``, ``nbytes``), per rank and
round the flows waited for (``ops``) and the reduction delays in seconds
(``delay``), the host of every rank (``hosts``), the platform file
(``xml``), SimGrid options (``cfg``), the folder of the SimGrid build to
import (``simgrid``; null: the venv's), the seconds a send costs its
sender (``send_overhead``; absent: 0), the seconds a received message
costs its receiver (``recv_overhead``; absent: 0) and the controller's
time quantum in seconds (``quantum``; absent: 0, event-driven). ``OUT``
gets a JSON object with ``finish`` (per rank), ``round_end`` (per round
index, the latest rank's), ``wall``, ``maxrss_mb`` and ``version``, or
``error``: what stopped the run. (JSON, not pickle: no file this package
reads can run code.)

The controller posts rounds, starts each flow once its sender and its
receiver have both posted the rounds holding it, retires finished flows,
sleeps through reductions, and stops when every rank is done.

A send overhead ``o > 0`` (LogP's o, SMPI's ``smpi/ois``/``smpi/os``)
makes the sender inject its messages of a round one after another, in the
schedule's order: the i-th (i = 0, 1, ...) counts as posted by the sender
``(i + 1)·o`` after the rank posted the round, as SMPI sleeps ``o`` before
each ``MPI_Isend`` posts. A receive overhead ``o_r > 0`` (LogP's o at
the receiver) makes the receiver handle each message that has arrived
for ``o_r``, one at a time in the order they arrive: a message ending at
``t`` counts as received at ``max(t, the rank's CPU free) + o_r``; its
sender is done with it at ``t``. Both overheads take the rank's one CPU,
as LogP's o does and as SMPI's sleeps do in the rank's thread: a message
that arrives while the rank still injects its round's sends is handled
after the last of them (the sends were posted first). Pending injections
and handlings wait in heaps beside the reduction timers, and the
controller waits for the next completion with a timeout until the next
of them. With both 0 none is queued and the run is the one without
overhead.

A time quantum ``q > 0`` (a stated approximation, for runs with many
flows in flight that end at many distinct instants) replaces the waits:
the controller sleeps to the next multiple of ``q``, or to an earlier due
reduction timer or injection, then retires in one sweep every comm that
has ended and lets the ranks whose rounds are done post their next round
at that instant. Its cost is (sweeps × comms in flight), the sweeps being
about the simulated time / q plus the timers and injections, whatever the
number of distinct instants at which flows end; event-driven waits cost
(distinct instants × comms in flight). A round's end is seen at most ``q``
late, so without contention (each flow's duration independent of the
others) the result is never earlier than the event-driven one and at most
(rounds on the critical path)·q later; where flows share links, starting
some later changes the sharing, and the difference is not bounded that
way (docs/simulation.md measures it). Timers, injections and handlings keep
their exact instants.

It runs on SimGrid 3.32 (Debian's, ``scripts/simgrid.sh``) and 4.x (4.1:
``scripts/simgrid41.sh``), whichever the job's ``simgrid`` folder (put
first on ``sys.path``) or the venv provides. The two differ in the calls
kept in :class:`InFlight` and :func:`add_actor`: 3.32 waits with
``Comm.wait_any(list)`` and then sweeps every comm in flight, 4.x keeps
one ``ActivitySet`` and is told which comm ended; 3.32 starts actors with
``Actor.create``, 4.x with ``Host.add_actor``. 4.x also keeps an actor's
activities in a set, where 3.32 removes each finished one from a list in
time linear in it (O(p²) per round of p flows).
"""

import heapq
import json
import math
import resource
import sys
import time


class InFlight:
    """The comms in flight, each with its flow, in the order they started.

    :meth:`wait` returns the flows that ended at the next instant at which
    any ends. On SimGrid 4.x one ``ActivitySet`` lives as long as the
    controller: comms are pushed as they start, and a wait returns the comm
    that ended, whose flow a dict gives. When a second comm ended at the
    same instant (``test_any``: a round whose flows all end together),
    every comm in flight is swept once and the set rebuilt from those left:
    one sweep per instant rather than one wait per flow, since each 4.x
    wait or test costs time linear in the set (in C++). SimGrid 3.32 takes
    a list per wait, so each wait there is followed by the sweep.
    Either way the flows come back in the order they started, so the
    simulation does not depend on the SimGrid version's bookkeeping.

    With ``polled=True`` (a time quantum: the controller only sweeps, at
    instants of its own) nothing is waited on and no set is kept.
    """

    def __init__(self, sg, polled: bool = False):
        self.sg = sg
        self.flow = {}  # comm -> flow, in start order
        self.set = (sg.ActivitySet() if hasattr(sg, "ActivitySet")
                    and not polled else None)

    def __bool__(self) -> bool:
        return bool(self.flow)

    def start(self, comm, flow: int) -> None:
        """Track ``comm``, which carries ``flow``."""
        self.flow[comm] = flow
        if self.set is not None:
            self.set.push(comm)

    def wait(self, timeout: float | None) -> list[int]:
        """Block until a comm ends; the flows that ended at that instant,
        or ``[]`` when ``timeout`` simulated seconds pass first (None waits
        without limit)."""
        sg = self.sg
        if self.set is None:  # SimGrid 3.32
            comms = list(self.flow)
            if timeout is None:
                ended = sg.Comm.wait_any(comms)
            else:
                ended = sg.Comm.wait_any_for(comms, timeout)
            return self.sweep() if ended >= 0 else []
        try:
            first = (self.set.wait_any() if timeout is None
                     else self.set.wait_any_for(timeout))
        except sg.TimeoutException:
            return []
        if self.set.test_any() is None:  # it ended alone
            return [self.flow.pop(first)]
        done = self.sweep()
        self.set = sg.ActivitySet(list(self.flow))
        return done

    def sweep(self) -> list[int]:
        """Retire every comm that has ended (``test()`` retires it; one a
        wait returned tests True again), in start order: time linear in
        the comms in flight."""
        ended = [c for c in self.flow if c.remaining == 0 and c.test()]
        return [self.flow.pop(c) for c in ended]


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
    quantum = float(job.get("quantum") or 0.0)
    tick = 0  # the next multiple of the quantum to wake at (q > 0 only)
    active = InFlight(sg, polled=quantum > 0)
    timers = []  # (when a reduction ends, rank)
    overhead = float(job.get("send_overhead") or 0.0)
    injections = []  # (when the sender has injected it, flow): o > 0 only
    receive_cost = float(job.get("recv_overhead") or 0.0)
    handled = []  # (when the receiver is done with it, rank): o_r > 0 only
    busy_until = [0.0] * p  # when each rank's CPU is done with overheads
    ready = list(range(p))  # ranks to post their next round

    def clock():
        return sg.Engine.clock

    def comm_done(rank, now):
        delay = delays[rank][cursor[rank]]
        if delay > 0:
            heapq.heappush(timers, (now + delay, rank))
        else:
            round_done(rank, now)

    def post(f):
        """One end of flow ``f`` posted; start it once both are."""
        need[f] -= 1
        if not need[f]:
            active.start(sg.Comm.sendto_async(
                hosts[src[f]], hosts[dst[f]], nbytes[f]), f)

    def arrived(rank, now):
        """One of the rank's messages of its round is over for it."""
        pending[rank] -= 1
        if not pending[rank]:
            comm_done(rank, now)

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
            if overhead:  # the rank's sends wait their turn (heap)
                sends = sorted(f for f in flows if src[f] == rank)
                for i, f in enumerate(sends):
                    heapq.heappush(injections, (now + (i + 1) * overhead, f))
                busy_until[rank] = now + len(sends) * overhead
                flows = [f for f in flows if src[f] != rank]
            for f in flows:
                post(f)
            if not pending[rank]:
                comm_done(rank, now)
        if not (active or timers or injections or handled):
            break
        due = min(heap[0][0] if heap else math.inf
                  for heap in (timers, injections, handled))
        if quantum:  # to the next tick, or a timer/injection due before
            wake = due
            if active:
                tick = max(tick, math.floor(now / quantum) + 1)
                wake = min(due, tick * quantum)
            sg.this_actor.sleep_until(wake)
            if wake == tick * quantum:
                tick += 1
            done = active.sweep()
        elif not active:
            sg.this_actor.sleep_until(due)
            done = []
        else:
            done = active.wait(None if due == math.inf
                               else max(0.0, due - now))
        now = clock()
        if quantum:  # the wake-up's instant (clock() may be an ulp short)
            now = max(now, wake)
        for f in done:
            arrived(src[f], now)
            if receive_cost:  # the receiver handles it, one at a time
                rank = dst[f]
                busy_until[rank] = max(now, busy_until[rank]) + receive_cost
                heapq.heappush(handled, (busy_until[rank], rank))
            else:
                arrived(dst[f], now)
        if not (quantum or done):  # a wait timed out: what was due
            # (clock() may be an ulp short of it)
            if timers and timers[0][0] == due:  # a reduction timer
                round_done(heapq.heappop(timers)[1], now)
            elif injections and injections[0][0] == due:  # an injection
                post(heapq.heappop(injections)[1])
            else:  # a received message handled
                arrived(heapq.heappop(handled)[1], now)
        while timers and timers[0][0] <= now:
            round_done(heapq.heappop(timers)[1], now)
        while injections and injections[0][0] <= now:
            post(heapq.heappop(injections)[1])
        while handled and handled[0][0] <= now:
            arrived(heapq.heappop(handled)[1], now)
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
