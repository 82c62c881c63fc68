"""Guarded faces: check mode and deadlines around every collective method.

A communicator in check mode (:mod:`mpicoll.guard.check_mode`) or with a deadline
(:mod:`mpicoll.guard.watchdog`) is an instance of a *guarded* subclass of its
face (``mpicoll.Comm``, ``mpicoll.ProcessGroup``), made once per class by
:func:`guarded_class`: each collective method is wrapped so that the call
gets its sequence number on the communicator, and a local error raised
before the call's first message meets the peers at the check exchange
they wait in, instead of leaving them there. Unguarded communicators keep
the plain class, so neither mode costs anything when off.

A deadline kept by the watch thread (:mod:`mpicoll.guard.deadline`: the
default) needs no guarded class: only check mode and the polled deadline
(``on_timeout="raise"``, or a deadline below ``MPI_THREAD_MULTIPLE``) do.

Settings: ``MPICOLL_CHECK`` (``1``/``0``), ``MPICOLL_TIMEOUT`` (seconds;
``0`` for none; unset: :data:`~mpicoll.guard.deadline.DEFAULT_TIMEOUT`
where the watch thread can keep it, else none) and ``MPICOLL_ON_TIMEOUT``
(``abort`` or ``raise``), overridden by the faces' keywords ``check=``,
``timeout=`` (``0``: none) and ``on_timeout=``.
"""

from __future__ import annotations

import functools
import math
import os
from typing import NamedTuple

from mpi4py import MPI

from mpicoll.errors import InvalidArgumentError
from mpicoll.guard.deadline import DEFAULT_TIMEOUT
from mpicoll.guard.watchdog import ACTIONS

CHECK_VAR = "MPICOLL_CHECK"
TIMEOUT_VAR = "MPICOLL_TIMEOUT"
ON_TIMEOUT_VAR = "MPICOLL_ON_TIMEOUT"


class Guard(NamedTuple):
    check: bool = False
    timeout: float | None = None  # seconds; None: no deadline
    on_timeout: str = "abort"
    threaded: bool = True  # MPI_THREAD_MULTIPLE: a watch thread may run

    @property
    def watched(self) -> bool:
        """The deadline is kept by the watch thread."""
        return self.timeout is not None and self.threaded and \
            self.on_timeout == "abort"

    @property
    def polled(self) -> bool:
        """The deadline is kept by polling each call."""
        return self.timeout is not None and not self.watched

    @property
    def on(self) -> bool:
        """Calls go through the guarded class and launch."""
        return self.check or self.polled


def guard_settings(check=None, timeout=None, on_timeout=None) -> Guard:
    """The guard a face is made with: each keyword, or its environment
    variable when the keyword is None; a bad value raises
    :class:`~mpicoll.errors.InvalidArgumentError` (local, at creation)."""
    if check is None:
        check = os.environ.get(CHECK_VAR, "").strip().lower() not in (
            "", "0", "false", "no", "off")
    if on_timeout is None:
        on_timeout = os.environ.get(ON_TIMEOUT_VAR, "").strip() or "abort"
    if on_timeout not in ACTIONS:
        raise InvalidArgumentError(
            f"on_timeout ({ON_TIMEOUT_VAR}) must be one of {ACTIONS}, got "
            f"{on_timeout!r}")
    threaded = MPI.Query_thread() == MPI.THREAD_MULTIPLE
    if timeout is None:
        text = os.environ.get(TIMEOUT_VAR, "").strip()
        if text:
            timeout = _seconds(text, TIMEOUT_VAR)
        elif threaded and on_timeout == "abort":
            timeout = DEFAULT_TIMEOUT
    else:
        timeout = _seconds(timeout, "timeout")
    return Guard(bool(check), timeout, on_timeout, threaded)


def _seconds(value, name: str) -> float | None:
    """A timeout in seconds; None for ``0`` (no deadline)."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if seconds == 0:
        return None
    if not (seconds > 0 and math.isfinite(seconds)):
        raise InvalidArgumentError(
            f"{name} must be a number of seconds (0: no deadline), got "
            f"{value!r}")
    return seconds


_CLASSES: dict[type, type] = {}


def guarded_class(cls: type, methods: dict[str, str]) -> type:
    """``cls`` with each method ``name`` of ``methods`` (name ->
    collective) guarded (``cls`` itself if it is); made once per class."""
    if getattr(cls, "guarded", False):
        return cls
    guarded = _CLASSES.get(cls)
    if guarded is None:
        namespace = {name: _guarded(getattr(cls, name), collective)
                     for name, collective in methods.items()}
        namespace.update(__module__=cls.__module__,
                         __qualname__=cls.__qualname__, __doc__=cls.__doc__,
                         guarded=True)  # the faces' class attribute
        guarded = _CLASSES[cls] = type(cls.__name__, (cls,), namespace)
    return guarded


def _guarded(method, collective: str):
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        engine = self._engine
        if engine.active is not None:  # a collective inside a collective
            return method(self, *args, **kwargs)
        engine.begin(collective)
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            engine.failed(exc)  # meets the peers if they may be waiting
            raise
        finally:
            engine.active = None

    return call
