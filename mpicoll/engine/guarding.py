"""Check mode and the polled deadline on the engine (a mixin of
:class:`~mpicoll.engine.engine.Engine`): a guarded engine launches every
call through :meth:`Guarding._guarded_launch`, which agrees on the call's
fingerprint first (:mod:`mpicoll.guard.check_mode`) and, under a polled
deadline, bounds every wait by the watchdog
(:mod:`mpicoll.guard.watchdog`)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from mpicoll.engine.persistent import PERSISTENT, form_of, prepare
from mpicoll.guard import check_mode

if TYPE_CHECKING:
    from mpicoll.engine.engine import Call


class Guarding:
    """``begin``/``failed`` for the guarded faces, ``complete`` for
    mpicoll's own exchanges, and the guarded launch (a mixin: it expects
    the engine's ``recorder``, ``check``, ``checker``, ``watchdog``,
    ``where`` and ``algorithm_for``)."""

    def begin(self, collective: str) -> check_mode.Active:
        """A guarded face starts a collective call: its sequence number
        (the one the recorder gives it when it runs)."""
        self.active = check_mode.Active(self.recorder.seq + 1, collective)
        return self.active

    def failed(self, error: Exception) -> None:
        """A guarded call raised ``error`` on this rank: in check mode, if
        the peers may be waiting at a check exchange for this rank, meet
        them there so that they raise too."""
        active = self.active
        if self.check and active.open:
            self.checker.verify(active, {"stage": "arguments",
                                         "collective": active.collective},
                                error)

    def complete(self, request) -> None:
        """Wait for a request of the library's own (an exchange of
        mpicoll's before a call), under the polled deadline."""
        seq, collective = (0, "exchange") if self.active is None else \
            (self.active.seq, self.active.collective)
        self.watchdog.complete(request, seq, collective,
                               self.where(collective))

    def _guarded_launch(self, call: Call, async_op: bool):
        """:meth:`~mpicoll.engine.engine.Engine.launch` in check mode or
        under a deadline: agree on the call's fingerprint, then run it as
        a nonblocking call that the watchdog waits for (blocking) or that
        carries the deadline (its ``wait``). In check mode alone the call
        is remembered for replay with its fingerprint
        (:meth:`_check_again`); under a deadline nothing is."""
        own = self.active is None  # not called through a guarded face
        active = self.begin(call.collective) if own else self.active
        try:
            # the form launch (below) will run it as
            alg = self.algorithm_for(call, form_of(
                async_op or self.watchdog is not None))
            if self.check:
                fields = check_mode.fingerprint(call, alg.name)
                code = check_mode.digest(fields)
                self.checker.verify(active, fields, None, code)
            active.open = False
            if async_op is PERSISTENT:
                return prepare(self, call._replace(memo=None),
                               self.watchdog and (self.watchdog, active.seq))
            if self.watchdog is None:  # check mode alone
                self.check_first = partial(self._check_again, fields, code,
                                           call.collective)
                try:
                    return type(self).launch(self, call, async_op)
                finally:
                    self.check_first = None
            work = type(self).launch(self, call._replace(memo=None),
                                 async_op or True)
            work.watch(self.watchdog, active.seq)
            if async_op:
                return work
            work.wait()
            return None
        finally:
            if own:
                self.active = None

    def _check_again(self, fields: dict, code: int, collective: str):
        """Check mode's exchange for a replayed call: its kept
        ``fields`` and their digest ``code``, under the sequence number
        the guarded face gave this call."""
        active = self.active
        own = active is None  # not called through a guarded face
        if own:
            active = self.begin(collective)
        try:
            self.checker.verify(active, fields, None, code)
        finally:
            if own:
                self.active = None

