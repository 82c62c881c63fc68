"""Writing the flight recorder out: one trace file per process.

Every communicator's :class:`~mpicoll.guard.recorder.Recorder` is listed
here while its communicator lives (:func:`register`). :func:`dump` writes
them all to ``MPICOLL_TRACE_DIR`` (default: the current directory) as
``mpicoll-trace-rank<R>.json``, R the process's rank in
``MPI.COMM_WORLD``, replacing the file of an earlier dump. It is called
when a deadline expires (on the rank that finds it, and on every rank it
asks where it is), before mpicoll aborts the job, by
:func:`mpicoll.dump_trace`, when an exception leaves a program that made
collective calls (the hook chains ``sys.excepthook``), and on a signal
(``MPICOLL_TRACE_SIGNAL``, default ``USR1``; ``off`` installs nothing):
the handler chains the one the program or its batch system installed
before it. Python runs signal handlers in the main thread between
bytecodes, so while a rank is blocked inside an MPI call the watch thread
of :mod:`mpicoll.guard.deadline` writes the file instead: it listens on
Python's signal wakeup pipe (unless the program has set its own wakeup
fd, as an asyncio event loop does).

The file (``"format": "mpicoll-trace 1"``): ``rank``, ``world_size``,
``host``, ``pid``, ``time`` and ``reason`` of the dump, and per
communicator its ``id`` (the same string on every member: the world
ranks of its group and its number among this process's communicators
over that group), ``ranks`` (world rank of each communicator rank),
``rank``, ``name``, ``seq`` (the last call begun), ``blocked`` (the call
this rank is blocked in, 0: none) and ``calls``
(:meth:`~mpicoll.guard.recorder.Recorder.calls`, oldest first).
``python -m mpicoll.trace DIR`` reads them.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import threading
import time
import weakref

from mpi4py import MPI

from mpicoll.errors import spans

DIR_VAR = "MPICOLL_TRACE_DIR"
SIGNAL_VAR = "MPICOLL_TRACE_SIGNAL"
FORMAT = "mpicoll-trace 1"

_lock = threading.Lock()
_recorded: dict[int, tuple] = {}  # id(recorder) -> (weakref, facts)
_ordinals: dict[str, int] = {}  # group's world ranks -> communicators
_signal_done = False
#: this process's rank, the world's size and the host, read at the first
#: registration: a dump makes no MPI call (it may run in a forked child,
#: or while MPI is failing)
_process: dict = {}


def register(recorder, comm) -> str:
    """List ``recorder``, ``comm``'s (collective in effect: every member
    registers its communicators in the same order); its id."""
    world = MPI.COMM_WORLD.Get_group()
    group = comm.Get_group()
    try:
        ranks = group.Translate_ranks(list(range(group.Get_size())), world)
    finally:
        group.Free()
        world.Free()
    key = spans(ranks)
    if not _process:
        world = MPI.COMM_WORLD
        _process.update(rank=world.Get_rank(), world_size=world.Get_size(),
                        host=MPI.Get_processor_name())
    with _lock:
        _ordinals[key] = ordinal = _ordinals.get(key, 0) + 1
        ident = f"{key}#{ordinal}"
        _recorded[id(recorder)] = (weakref.ref(recorder), {
            "id": ident, "ranks": [int(r) for r in ranks],
            "rank": comm.Get_rank(), "name": comm.Get_name()})
    _install_signal()
    return ident


def unregister(recorder) -> None:
    with _lock:
        _recorded.pop(id(recorder), None)


def dump(reason: str, if_called: bool = False) -> str | None:
    """Write this process's trace file (``reason``: why); its path, or
    None when no communicator keeps calls (``if_called``: or none has
    made one) or the file cannot be written (a dump must never stop what
    called it)."""
    with _lock:
        entries = [(ref(), facts) for ref, facts in _recorded.values()]
    comms = [{**facts, "seq": rec.seq, "blocked": rec.blocked,
              "calls": rec.calls()}
             for rec, facts in entries if rec is not None and rec.size]
    if not comms or (if_called and not any(c["seq"] for c in comms)):
        return None
    folder = os.environ.get(DIR_VAR, "").strip() or "."
    path = os.path.join(folder, f"mpicoll-trace-rank{_process['rank']}.json")
    data = {"format": FORMAT, **_process, "pid": os.getpid(),
            "time": time.time(), "reason": reason, "communicators": comms}
    try:
        os.makedirs(folder, exist_ok=True)
        part = f"{path}.{os.getpid()}.{threading.get_ident()}.part"
        with open(part, "w") as out:
            json.dump(data, out)
        os.replace(part, path)
    except OSError:
        return None
    return path


def dump_trace() -> str | None:
    """Write this process's flight-recorder trace file now (every
    communicator's last calls, :mod:`mpicoll.guard.dump`); its path, or
    None if nothing is recorded or the file cannot be written. Local: call
    it on every rank for a full set."""
    return dump("dump_trace")


def _install_signal() -> None:
    """Dump on ``MPICOLL_TRACE_SIGNAL`` (once per process, from the main
    thread only, as Python requires), chaining the previous handler; and
    on an uncaught exception, chaining ``sys.excepthook``."""
    global _signal_done
    if _signal_done or threading.current_thread() is not \
            threading.main_thread():
        return
    _signal_done = True
    hook = sys.excepthook

    def on_exception(kind, value, traceback):
        dump("exception", if_called=True)
        hook(kind, value, traceback)

    sys.excepthook = on_exception
    name = os.environ.get(SIGNAL_VAR, "USR1").strip().upper()
    if name in ("", "0", "OFF", "NONE", "NO"):
        return
    signum = getattr(signal, name if name.startswith("SIG") else
                     f"SIG{name}", None)
    if not isinstance(signum, signal.Signals):
        return
    before = signal.getsignal(signum)

    def on_signal(number, frame):
        dump("signal")
        if callable(before):
            before(number, frame)

    signal.signal(signum, on_signal)
    _listen(signum)


_wakeup: tuple | None = None  # (read end, write end, signal number)


def _listen(signum: int) -> None:
    """Let the watch thread see ``signum`` at once: Python's C-level
    handler writes each signal's number to a wakeup pipe even while the
    main thread is blocked inside MPI, where the Python handler cannot
    run until the call returns. Only if no other wakeup fd is set (an
    event loop's, say); an event loop set later replaces this one."""
    global _wakeup
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    try:
        previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except ValueError:
        previous = None
    if previous != -1:  # another's (restored), or none possible
        if previous is not None:
            signal.set_wakeup_fd(previous)
        os.close(read)
        os.close(write)
        return
    _wakeup = (read, write, signum)


def listening() -> bool:
    """Whether :func:`wait_for_signal` can see the trace signal."""
    return _wakeup is not None


def wait_for_signal(seconds: float) -> bool:
    """Wait up to ``seconds`` (the watch thread, between its looks) for
    the trace signal, True if it came; False at once after :func:`wake`.
    Only where :func:`listening`."""
    read, _, signum = _wakeup
    ready, _, _ = select.select([read], [], [], seconds)
    if not ready:
        return False
    try:
        numbers = os.read(read, 512)
    except BlockingIOError:
        return False
    return signum in numbers


def wake() -> None:
    """End a :func:`wait_for_signal` now (the watch thread stops)."""
    if _wakeup is not None:
        try:
            os.write(_wakeup[1], b"\0")
        except OSError:
            pass
