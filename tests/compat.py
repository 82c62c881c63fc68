"""Compatibility harness: one case, run on mpi4py and on ``mpicoll.Comm``.

A *case* is a function ``case(c) -> result``. ``c`` is a :class:`Call`:
``c.comm`` is the communicator under test, ``c.rank``/``c.size`` its rank
and size, and ``c("Allreduce", x, y, MPI.SUM)`` calls a collective on it
(``comm.Allreduce(x, y, MPI.SUM, **c.kw)`` in blocking mode;
``comm.Iallreduce(...).Wait()`` in nonblocking mode). ``c.kw`` is empty on
the raw communicator and ``{"algorithm": name}`` on mpicoll's, so one case
body serves both. The result is any nesting of NumPy arrays, bytes,
bytearray, array.array, memoryview, lists, tuples, dicts and plain Python
values; a case that raises has the exception as its outcome.

:meth:`Harness.check` runs the case on the raw communicator (a
``MPI.COMM_WORLD.Dup()``), then on ``mpicoll.Comm`` of that communicator
once per algorithm (``"auto"`` and every name of
``mpicoll.algorithms(collective)``; once with no ``algorithm=`` at all when
no collective is named), and compares on every rank:

* the raw call returned: equal results, array by array
  (``np.testing.assert_array_equal(..., strict=True)``: values, dtype,
  shape), including the receive buffers the case allocated and returned;
* the raw call raised: mpicoll raised too, an instance of the raw
  exception's type (for ``MPI.Exception``, the same ``Get_error_class()``).

After every run the ranks agree (on a communicator of the harness's own)
on who raised. A raw run that raised on some ranks only is a bug of the
case (the error cases must raise on every rank before any message moves);
an mpicoll run that did is an incompatibility, and the harness starts over
on fresh communicators, so that stale messages cannot leak into later
cases. A run that does not finish in ``COMPAT_CASE_TIMEOUT`` seconds
(default 60) aborts the job with the case's name: a hang.

Differences are collected, not raised at once: :meth:`Harness.finish` (the
last line of each test) gathers them from every rank and fails the test
with the whole list. Environment switches:

``COMPAT_SELFTEST=1``
    compare raw with raw (the "mpicoll" side is the raw communicator, with
    no ``algorithm=``): must pass everywhere, or a case is wrong.
``COMPAT_LOG=path``
    do not fail: append every difference to ``path`` (rank 0 writes) and
    mark the test xfailed, so one run lists every incompatibility (the
    test conftest aborts the whole job at the first failed test).
``COMPAT_STRICT=1``
    count an algorithm's ``mpicoll.ConstraintError`` ("this algorithm
    cannot run these arguments", raised only where an algorithm was forced)
    as a difference; by default it is listed as a refusal only.
``COMPAT_ALGORITHMS=a,b``
    run only these algorithms on the mpicoll side (``auto`` and ``native``
    are names too).
``COMPAT_CASE_TIMEOUT=s``
    the hang watchdog's limit per run.
``COMPAT_VERBOSE=1``
    name each run on stderr as it starts.
``COMPAT_HANGS=path``
    the watchdog appends the run that hung to ``path`` before aborting;
    runs listed there are not run again but reported as hangs, so that
    rerunning lists every difference even when some runs hang.

``python tests/compat.py N [pytest arguments]`` runs the suite at N ranks
with ``COMPAT_LOG`` and ``COMPAT_HANGS`` until no new run hangs, then prints
the list of differences (also left in ``$TMPDIR/mpicoll-compat-N.log``,
or ``COMPAT_LOG``).
"""

from __future__ import annotations

import array
import faulthandler
import os
import re
import sys
import threading
import time

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


SELFTEST = _flag("COMPAT_SELFTEST")
STRICT = _flag("COMPAT_STRICT")
LOG = os.environ.get("COMPAT_LOG") or None
ONLY = [a for a in os.environ.get("COMPAT_ALGORITHMS", "").split(",") if a]
CASE_TIMEOUT = float(os.environ.get("COMPAT_CASE_TIMEOUT", "60"))
VERBOSE = _flag("COMPAT_VERBOSE")
HANGS = os.environ.get("COMPAT_HANGS") or None

#: The most differences a failure message lists (all go to COMPAT_LOG).
SHOWN = 80


def _nonblocking_name(name: str) -> str:
    return "I" + name[0].lower() + name[1:]


class Call:
    """What a case receives: the communicator and how to call it."""

    def __init__(self, comm, kw: dict, nonblocking: bool, label: str):
        self.comm = comm
        self.kw = kw
        self.nonblocking = nonblocking
        self.label = label
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()

    def __call__(self, name: str, *args, **kwargs):
        """``comm.<name>(*args, **kwargs, **self.kw)``; in nonblocking mode
        ``comm.I<name>(...)`` and ``.Wait()`` on what it returns."""
        if not self.nonblocking:
            return getattr(self.comm, name)(*args, **kwargs, **self.kw)
        request = getattr(self.comm, _nonblocking_name(name))(
            *args, **kwargs, **self.kw)
        request.Wait()
        return None


# ---------------------------------------------------------------- comparing


def _short(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + " ..."


def _describe(x) -> str:
    if isinstance(x, BaseException):
        return f"raised {type(x).__module__}.{type(x).__qualname__}: " \
               f"{_short(x, 200)}"
    return f"returned {type(x).__name__}"


def _exception_difference(expected: BaseException, got) -> str | None:
    if not isinstance(got, BaseException):
        return f"returned normally; mpi4py {_describe(expected)}"
    if not isinstance(got, type(expected)):
        return f"{_describe(got)}; mpi4py {_describe(expected)}"
    if isinstance(expected, MPI.Exception):
        try:
            got_class = got.Get_error_class()
        except Exception as e:
            return f"Get_error_class() on mpicoll's exception raised {e!r}"
        if got_class != expected.Get_error_class():
            return (f"MPI error class {got_class}, mpi4py's "
                    f"{expected.Get_error_class()} ({_describe(expected)})")
    return None


def differences(expected, got, path: str = "result",
                approx: bool = False) -> list[str]:
    """How ``got`` differs from ``expected`` (empty: the same)."""
    if isinstance(expected, BaseException):
        d = _exception_difference(expected, got)
        return [d] if d else []
    if isinstance(got, BaseException):
        return [f"{_describe(got)}; mpi4py returned normally"]
    if isinstance(expected, np.ndarray):
        if not isinstance(got, np.ndarray):
            return [f"{path}: {type(got).__name__}, mpi4py's is ndarray"]
        try:
            if approx and expected.dtype.kind in "fc":
                np.testing.assert_allclose(got, expected, rtol=1e-12,
                                           strict=True)
            else:
                np.testing.assert_array_equal(got, expected, strict=True)
        except AssertionError as e:
            return [f"{path}: {_short(e)}"]
        return []
    if type(got) is not type(expected):
        return [f"{path}: {type(got).__name__} {_short(repr(got), 120)}, "
                f"mpi4py's is {type(expected).__name__} "
                f"{_short(repr(expected), 120)}"]
    if isinstance(expected, (list, tuple)):
        if len(got) != len(expected):
            return [f"{path}: length {len(got)}, mpi4py's {len(expected)}"]
        out = []
        for i, (e, g) in enumerate(zip(expected, got)):
            out += differences(e, g, f"{path}[{i}]", approx)
        return out
    if isinstance(expected, dict):
        if set(got) != set(expected):
            return [f"{path}: keys {sorted(map(str, got))}, mpi4py's "
                    f"{sorted(map(str, expected))}"]
        out = []
        for k in expected:
            out += differences(expected[k], got[k], f"{path}[{k!r}]", approx)
        return out
    if isinstance(expected, memoryview):
        same = (got.format, got.shape, got.tobytes()) == \
            (expected.format, expected.shape, expected.tobytes())
    elif isinstance(expected, array.array):
        same = (got.typecode, got.tobytes()) == \
            (expected.typecode, expected.tobytes())
    elif approx and isinstance(expected, float):
        same = got == expected or abs(got - expected) <= 1e-12 * abs(expected)
    else:
        try:
            same = bool(got == expected)
        except Exception:  # e.g. arrays nested in objects
            same = repr(got) == repr(expected)
    if same:
        return []
    return [f"{path}: {_short(repr(got), 200)}, mpi4py's "
            f"{_short(repr(expected), 200)}"]


# ------------------------------------------------------------------ harness


class Harness:
    """The raw communicator, mpicoll's of it, and the differences found."""

    def __init__(self, config=None) -> None:
        self._config = config  # pytest's, to show the watchdog's message
        self.ctl = MPI.COMM_WORLD.Dup()  # agreement traffic only
        self.rank = self.ctl.Get_rank()
        self.size = self.ctl.Get_size()
        self._make_pair()
        self.problems: list[tuple[str, str, str]] = []  # label, alg, text
        self.refusals: list[tuple[str, str, str]] = []
        self.runs = 0
        self._running: tuple[float, str, str] | None = None
        self.hung = set()
        if HANGS and os.path.exists(HANGS):
            with open(HANGS) as f:
                self.hung = {line.rstrip("\n") for line in f}
        self._stop = threading.Event()
        self._watchdog = threading.Thread(target=self._watch, daemon=True,
                                          name="compat-watchdog")
        self._watchdog.start()

    def _make_pair(self) -> None:
        self.raw = MPI.COMM_WORLD.Dup()
        self.wrapped = self.raw if SELFTEST else mpicoll.Comm(self.raw)

    def close(self) -> None:
        self._stop.set()
        self.ctl.Free()
        if not SELFTEST:
            self.wrapped.Free()  # mpicoll's private duplicate, then raw's
        else:
            self.raw.Free()

    # -- watchdog: a hang becomes an abort that names the case
    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            running = self._running
            if running is not None and time.monotonic() > running[0]:
                capture = self._config and \
                    self._config.pluginmanager.getplugin("capturemanager")
                if capture:
                    capture.suspend_global_capture(in_=True)
                sys.stderr.write(
                    f"\n[rank {self.rank}] compat: {running[1]} still "
                    f"running after {CASE_TIMEOUT:g} s: a hang (do the ranks "
                    f"disagree on raising?). Aborting.\n")
                faulthandler.dump_traceback(all_threads=True)
                sys.stderr.flush()
                if HANGS:
                    with open(HANGS, "a") as f:
                        f.write(running[2] + "\n")
                MPI.COMM_WORLD.Abort(3)

    def _guard(self, what: str | None, key: str = "") -> None:
        self._running = None if what is None else \
            (time.monotonic() + CASE_TIMEOUT, what, key)

    def algorithms(self, collective: str | None) -> list[str | None]:
        if collective is None:
            return [None]
        names = ["auto", *mpicoll.algorithms(collective)]
        if ONLY:
            names = [n for n in names if n in ONLY]
        return names

    def _run(self, case, comm, kw, nonblocking, what, key):
        if VERBOSE:
            sys.stderr.write(f"[rank {self.rank}] {what}\n")
            sys.stderr.flush()
        self._guard(what, key)
        try:
            out = case(Call(comm, kw, nonblocking, what))
        except Exception as e:
            out = e
        self._guard(what + " (agreeing on the outcome)", key)
        raised = self.ctl.allgather(
            type(out).__name__ if isinstance(out, Exception) else None)
        self._guard(None)
        self.runs += 1
        return out, [r for r, x in enumerate(raised) if x is not None]

    def check(self, label: str, case, collective: str | None = None, *,
              modes=(False,), comms=None, approx: bool = False,
              algorithms=None) -> None:
        """Run ``case`` on both sides; note every difference.

        ``collective``: the algorithm family (mpicoll side runs ``auto`` and
        each algorithm of it), or None (one run without ``algorithm=``).
        ``modes``: False blocking, True nonblocking (``c(...)`` picks
        ``I<name>``). ``comms``: a (raw, wrapped) pair other than the
        harness's own. ``approx``: floating-point outputs of a forced
        hand-built algorithm may differ in the last bits (reduction order).
        """
        for nonblocking in modes:
            tag = f"{label} [{'nonblocking' if nonblocking else 'blocking'}]"
            raw, wrapped = comms or (self.raw, self.wrapped)
            if SELFTEST:
                wrapped = raw
            if f"{tag} | mpi4py" in self.hung:
                self.problems.append((tag, "mpi4py", "CASE BUG: hung on "
                                      "mpi4py in an earlier run"))
                continue
            expected, raised = self._run(case, raw, {}, nonblocking,
                                         f"{tag} on mpi4py",
                                         f"{tag} | mpi4py")
            if raised and len(raised) != self.size:
                self.problems.append((tag, "mpi4py", (
                    f"CASE BUG: mpi4py raised on ranks {raised} only "
                    f"({_describe(expected)}); error cases must raise on "
                    f"every rank")))
                if comms is None:
                    self._make_pair()
                continue
            for name in algorithms or self.algorithms(collective):
                kw = {} if name is None or SELFTEST else {"algorithm": name}
                shown = "(no algorithm=)" if name is None else name
                key = f"{tag} | {shown}"
                if key in self.hung:
                    self.problems.append((tag, shown, "HANG: did not finish "
                                          "in an earlier run (not rerun)"))
                    continue
                got, raised = self._run(case, wrapped, kw, nonblocking,
                                        f"{tag} on mpicoll ({shown})", key)
                if (not isinstance(expected, BaseException)
                        and isinstance(got, mpicoll.ConstraintError)
                        and name not in (None, "auto", "native")
                        and not STRICT):
                    self.refusals.append((tag, shown, _short(got, 200)))
                    continue
                loose = approx and name not in (None, "auto", "native")
                found = differences(expected, got, approx=loose)
                if raised and len(raised) != self.size:
                    found.insert(0, f"raised on ranks {raised} only "
                                    f"(this rank: {_describe(got)})")
                self.problems += [(tag, shown, d) for d in found]
                if raised and len(raised) != self.size and comms is None:
                    self._make_pair()  # stale messages stay behind

    def finish(self) -> None:
        """End of a test: gather every rank's differences; fail (or, with
        COMPAT_LOG, log and xfail) when there are any."""
        mine, self.problems = self.problems, []
        refused, self.refusals = self.refusals, []
        every = self.ctl.allgather((mine, refused))
        merged: dict[tuple, list[int]] = {}
        refusals: dict[tuple, list[int]] = {}
        for rank, (problems, refs) in enumerate(every):
            for p in problems:
                merged.setdefault(_general(p), []).append(rank)
            for p in refs:
                refusals.setdefault(_general(p), []).append(rank)
        lines = [f"{label} | {alg} | ranks {_ranks(rs, self.size)}: {text}"
                 for (label, alg, text), rs in merged.items()]
        if LOG and self.rank == 0 and (lines or refusals):
            test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
            with open(LOG, "a") as f:
                for line in lines:
                    f.write(f"np={self.size} FAIL {test} | {line}\n")
                for (label, alg, text), rs in refusals.items():
                    f.write(f"np={self.size} REFUSED {test} | {label} | "
                            f"{alg} | ranks {_ranks(rs, self.size)}: "
                            f"{text}\n")
        if not lines:
            return
        shown = lines[:SHOWN]
        more = len(lines) - len(shown)
        message = (f"{len(lines)} difference(s) from mpi4py:\n  "
                   + "\n  ".join(shown)
                   + (f"\n  ... and {more} more (COMPAT_LOG=file lists all)"
                      if more else ""))
        if LOG:
            pytest.xfail(message)
        pytest.fail(message, pytrace=False)


def _general(problem: tuple) -> tuple:
    """A problem without what differs between ranks only in name (the rank
    in mpicoll's messages, addresses), so that the ranks' copies merge."""
    label, algorithm, text = problem
    text = re.sub(r"\[rank \d+\] ", "", text)
    text = re.sub(r"0x[0-9a-fA-F]+", "0x...", text)
    return label, algorithm, text


def _ranks(ranks: list[int], size: int) -> str:
    if len(ranks) == size:
        return "all"
    return ",".join(map(str, ranks))


def _main(argv: list[str]) -> int:
    """Rerun ``tests/mpi/test_compat_*_mpi.py`` at ``argv[0]`` ranks until no
    new run hangs; print every difference."""
    import glob
    import subprocess
    import tempfile

    ranks = argv[0] if argv else "4"
    here = os.path.dirname(os.path.abspath(__file__))
    log = os.environ.get("COMPAT_LOG") or os.path.join(
        tempfile.gettempdir(), f"mpicoll-compat-{ranks}.log")
    hangs = tempfile.NamedTemporaryFile(prefix="compat-hangs-", delete=False)
    hangs.close()
    env = dict(os.environ, COMPAT_LOG=log, COMPAT_HANGS=hangs.name,
               MPIR_CVAR_ENABLE_HEAVY_YIELD="1")
    env.setdefault("COMPAT_CASE_TIMEOUT", "20")
    command = ["mpiexec", "-n", ranks, sys.executable, "-m", "mpi4py", "-m",
               "pytest", "-q", "--with-mpi", "-m", "mpi", *argv[1:],
               *sorted(glob.glob(os.path.join(here, "mpi",
                                              "test_compat_*_mpi.py")))]
    for attempt in range(1, 50):
        if os.path.exists(log):
            os.remove(log)
        with open(hangs.name) as f:
            before = len(set(f))
        run = subprocess.run(command, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        with open(hangs.name) as f:
            after = len(set(f))
        print(f"run {attempt}: exit {run.returncode}, {after} hung run(s) "
              f"known", file=sys.stderr)
        if after == before:
            if run.returncode != 0:  # a failure outside the harness
                sys.stderr.write("\n".join(
                    run.stdout.splitlines()[-60:]) + "\n")
            break
    os.remove(hangs.name)
    if os.path.exists(log):
        with open(log) as f:
            sys.stdout.write(f.read())
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
