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


class Controller:
    """The controller actor (see the module docstring) and its state.

    Per flow: how many of its ends (sender, receiver) are not yet posted.
    Per rank: its current round (``cursor``), the flows that round still
    waits for (``pending``), when its CPU is done with overheads
    (``busy_until``) and when it finished. Then the comms in flight
    (:class:`InFlight`), the ranks ready to post their next round, and
    three heaps of ``(instant, item)``: reduction timers (rank), pending
    injections (flow, ``o > 0`` only) and pending handlings (rank, ``o_r >
    0`` only).
    """

    def __init__(self, sg, job: dict, hosts: list):
        self.sg, self.hosts = sg, hosts
        self.src, self.dst, self.nbytes = job["src"], job["dst"], job["nbytes"]
        self.ops, self.delays = job["ops"], job["delay"]
        p = len(self.ops)
        self.need = [2] * len(self.src)
        self.pending = [0] * p
        self.cursor = [0] * p
        self.finish = [0.0] * p
        self.round_end = [0.0] * max((len(r) for r in self.ops), default=0)
        self.quantum = float(job.get("quantum") or 0.0)
        self.tick = 0  # the next multiple of the quantum to wake at (q > 0)
        self.active = InFlight(sg, polled=self.quantum > 0)
        self.send_overhead = float(job.get("send_overhead") or 0.0)
        self.recv_overhead = float(job.get("recv_overhead") or 0.0)
        self.timers = []  # (when a reduction ends, rank)
        self.injections = []  # (when the sender has injected it, flow)
        self.handled = []  # (when the receiver is done with it, rank)
        self.busy_until = [0.0] * p
        self.ready = list(range(p))

    def run(self) -> dict:
        """Run every rank's rounds to the end: ``finish`` (per rank) and
        ``round_end`` (per round index, the latest rank's). RuntimeError
        on a deadlock."""
        engine = self.sg.Engine
        while True:
            now = engine.clock
            self.post_ready(now)
            if not (self.active or self.timers or self.injections
                    or self.handled):
                break
            due = min(heap[0][0] if heap else math.inf
                      for heap in (self.timers, self.injections, self.handled))
            if self.quantum:
                done, now = self.sleep_to_tick(now, due)
            else:
                done, now = self.wait_for_event(now, due)
            self.retire(done, now)
            if not (self.quantum or done):  # a wait timed out: what was due
                self.fire_due(due, now)
            self.fire_past(now)
        stuck = [r for r in range(len(self.ops))
                 if self.cursor[r] < len(self.ops[r])]
        if stuck:
            raise RuntimeError(f"deadlock: ranks {stuck[:8]} never finish "
                               f"round {self.cursor[stuck[0]]}")
        return {"finish": self.finish, "round_end": self.round_end}

    def post_ready(self, now: float) -> None:
        """Let every ready rank post its next round at ``now`` (or finish):
        its flows' ends posted, its sends queued for injection one after
        another with a send overhead."""
        ops, src, pending, cursor = self.ops, self.src, self.pending, self.cursor
        overhead = self.send_overhead
        while self.ready:
            rank = self.ready.pop()
            k = cursor[rank]
            if k == len(ops[rank]):
                self.finish[rank] = now
                continue
            flows = ops[rank][k]
            pending[rank] = len(flows)
            if overhead:  # the rank's sends wait their turn (heap)
                sends = sorted(f for f in flows if src[f] == rank)
                for i, f in enumerate(sends):
                    heapq.heappush(self.injections, (now + (i + 1) * overhead, f))
                self.busy_until[rank] = now + len(sends) * overhead
                flows = [f for f in flows if src[f] != rank]
            for f in flows:
                self.post(f)
            if not pending[rank]:
                self.comm_done(rank, now)

    def sleep_to_tick(self, now: float, due: float) -> tuple[list, float]:
        """With a time quantum: sleep to the next multiple of it (while
        comms are in flight), or to ``due`` if that comes first, then sweep
        the comms that ended. The flows that ended, and the wake-up's
        instant (the clock may be an ulp short of it)."""
        wake = due
        if self.active:
            self.tick = max(self.tick, math.floor(now / self.quantum) + 1)
            wake = min(due, self.tick * self.quantum)
        self.sg.this_actor.sleep_until(wake)
        if wake == self.tick * self.quantum:
            self.tick += 1
        done = self.active.sweep()
        return done, max(self.sg.Engine.clock, wake)

    def wait_for_event(self, now: float, due: float) -> tuple[list, float]:
        """Event-driven: wait for the next comm to end, at most until
        ``due``. The flows that ended (none when ``due`` came first), and
        the clock."""
        if not self.active:
            self.sg.this_actor.sleep_until(due)
            done = []
        else:
            done = self.active.wait(None if due == math.inf
                                    else max(0.0, due - now))
        return done, self.sg.Engine.clock

    def retire(self, done: list, now: float) -> None:
        """The flows ``done`` ended at ``now``: over for their senders; for
        their receivers too, or queued to be handled one at a time with a
        receive overhead."""
        src, dst, cost = self.src, self.dst, self.recv_overhead
        for f in done:
            self.arrived(src[f], now)
            if cost:  # the receiver handles it, one at a time
                rank = dst[f]
                self.busy_until[rank] = max(now, self.busy_until[rank]) + cost
                heapq.heappush(self.handled, (self.busy_until[rank], rank))
            else:
                self.arrived(dst[f], now)

    def fire_due(self, due: float, now: float) -> None:
        """After a wait that timed out: the event due at ``due`` (the clock
        may be an ulp short of it), a reduction timer, an injection or a
        handled message, in that order of precedence."""
        if self.timers and self.timers[0][0] == due:
            self.round_done(heapq.heappop(self.timers)[1], now)
        elif self.injections and self.injections[0][0] == due:
            self.post(heapq.heappop(self.injections)[1])
        else:
            self.arrived(heapq.heappop(self.handled)[1], now)

    def fire_past(self, now: float) -> None:
        """Every timer, injection and handling due by ``now``."""
        timers, injections, handled = self.timers, self.injections, self.handled
        while timers and timers[0][0] <= now:
            self.round_done(heapq.heappop(timers)[1], now)
        while injections and injections[0][0] <= now:
            self.post(heapq.heappop(injections)[1])
        while handled and handled[0][0] <= now:
            self.arrived(heapq.heappop(handled)[1], now)

    def post(self, f: int) -> None:
        """One end of flow ``f`` posted; start it once both are."""
        self.need[f] -= 1
        if not self.need[f]:
            self.active.start(self.sg.Comm.sendto_async(
                self.hosts[self.src[f]], self.hosts[self.dst[f]],
                self.nbytes[f]), f)

    def arrived(self, rank: int, now: float) -> None:
        """One of the rank's messages of its round is over for it."""
        self.pending[rank] -= 1
        if not self.pending[rank]:
            self.comm_done(rank, now)

    def comm_done(self, rank: int, now: float) -> None:
        """The rank's messages of its round are over: the round ends now,
        or after its reductions' delay (a timer)."""
        delay = self.delays[rank][self.cursor[rank]]
        if delay > 0:
            heapq.heappush(self.timers, (now + delay, rank))
        else:
            self.round_done(rank, now)

    def round_done(self, rank: int, now: float) -> None:
        """The rank's round ended at ``now``: it is ready for the next."""
        k = self.cursor[rank]
        self.round_end[k] = max(self.round_end[k], now)
        self.cursor[rank] = k + 1
        self.ready.append(rank)


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
            result.update(Controller(sg, job, hosts).run())
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
