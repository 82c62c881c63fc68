"""The engine's choices: which algorithm a kind of call runs, chosen once
and remembered, and explain mode, which logs each new choice and why.

:class:`Choosing` is a base of :class:`mpicoll.engine.engine.Engine` (beside
:class:`~mpicoll.engine.replay.Replays`): it asks :func:`mpicoll.select.policy.choose`
once per kind of call (collective, requested algorithm, bytes, op kind,
form, in place) and keeps the answer in two bounded tables.
"""

from __future__ import annotations

import logging
import sys

import numpy as np

from mpicoll.collectives import COLLECTIVES
from mpicoll.errors import ConstraintError, InvalidArgumentError, OpTypeError
from mpicoll.select.policy import Choice, choose, hand_built

CHOICES = 1024  # choices and checked kinds of call remembered per engine
CALLABLE = ("a Python callable op would need an MPI.Op made for it "
            "(mpi4py allows few)")

log = logging.getLogger("mpicoll")
_explain_all: bool | None = None  # set_explain(); None: each engine's env


def log_to_stderr() -> None:
    """Make explain lines visible: a stderr handler on the ``mpicoll``
    logger at INFO, unless the application configured one."""
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
    if log.level == logging.NOTSET or log.level > logging.INFO:
        log.setLevel(logging.INFO)


def set_explain(on: bool | None = True) -> None:
    """Explain mode for every communicator in this process: each new
    choice (per collective, requested algorithm, message size and
    commutativity) is logged once at INFO on the ``mpicoll`` logger
    (stderr by default). ``None`` goes back to each communicator's
    ``MPICOLL_EXPLAIN`` setting."""
    global _explain_all
    _explain_all = None if on is None else bool(on)
    if on:
        log_to_stderr()


FORMS = ("blocking", "nonblocking", "persistent")  # how a call runs


class Choosing:
    """Selection for an engine; the engine sets ``rank``, ``size``,
    ``overrides``, ``rules``, ``model``, ``thread_multiple`` and
    ``explain`` (:class:`mpicoll.engine.engine.Settings`)."""

    def __init__(self) -> None:
        self._choices: dict[tuple, Choice] = {}
        # (collective, algorithm, bytes, dtype, op) -> Algorithm, for calls
        # whose op/type pair and choice were already checked.
        self._checked: dict[tuple, object] = {}

    def where(self, collective: str) -> dict:
        return {"rank": self.rank, "collective": collective}

    def explaining(self) -> bool:
        """Whether explain mode is on for this engine."""
        return _explain_all or (_explain_all is None and self.explain)

    def describe(self, collective: str, *, count: int = 1, dtype="float64",
                 op=None, algorithm: str = "auto", inplace: bool = False,
                 form: str = "blocking") -> Choice:
        """Which algorithm a call with these arguments runs, and why
        (``count`` as the call's own: per rank's block, or the vector;
        ``op``: the :class:`~mpicoll.schedule.ops.Op` of a reducing
        collective; ``form``: ``"blocking"``, ``"nonblocking"`` or
        ``"persistent"``)."""
        if form not in FORMS:
            raise InvalidArgumentError(
                f"form must be one of {', '.join(FORMS)}, got {form!r}",
                **self.where(collective))
        row = COLLECTIVES[collective]
        op = op if row.reducing else None
        if row.counts in ("per_rank", "matrix"):  # equal blocks of count
            count = (count,) * self.size
            if row.counts == "matrix":
                count = (count,) * self.size
        nbytes = row.selection_elements(count, self.size) * \
            np.dtype(dtype).itemsize
        return self.choose(collective, algorithm, nbytes, op,
                           self.where(collective), form=form,
                           inplace=inplace)

    def choose(self, collective, algorithm, nbytes, op, where,
               why_native=None, form: str = "blocking",
               inplace: bool = False) -> Choice:
        commutative = op is None or op.commutative
        callable_op = op is not None and op.mpi_op is None and \
            op.ufunc is None  # a Python callable: no MPI twin
        key = (collective, algorithm, nbytes, commutative, why_native,
               callable_op, form, inplace)
        choice = self._choices.get(key)
        if choice is None:
            if why_native is not None and algorithm == "auto":
                algorithm = "native"
            choice = choose(
                collective, algorithm, size=self.size, nbytes=nbytes,
                commutative=commutative, overrides=self.overrides,
                where=where, rules=self.rules,
                thread_multiple=self.thread_multiple, form=form,
                inplace=inplace, model=self.model)
            if why_native is not None and choice.algorithm.native:
                choice = Choice(choice.algorithm, why_native)
            elif callable_op and algorithm == "auto" and \
                    choice.algorithm.native:
                choice = hand_built(collective, size=self.size,
                                    nbytes=nbytes, commutative=commutative,
                                    why=f"{choice.reason}; but {CALLABLE}"
                                    ) or choice
            if len(self._choices) >= CHOICES:
                self._choices.clear()
            self._choices[key] = choice
            if self.explaining():
                log.info("[rank %d] %s %d B: %s (%s)", self.rank, collective,
                         nbytes, choice.algorithm.name, choice.reason)
        return choice

    def algorithm_for(self, call, form: str = "blocking"):
        """The algorithm ``call`` runs as a ``form`` call (``"blocking"``,
        ``"nonblocking"`` or ``"persistent"``): checked and chosen on the
        first call of its kind, looked up after."""
        send = call.send
        collective = call.collective
        nbytes = COLLECTIVES[collective].selection_elements(
            call.count, self.size) * send.dtype.itemsize
        op = call.op  # what a choice depends on, not the object itself
        inplace = call.inplace or send is call.recv
        key = (collective, call.algorithm, nbytes, send.dtype.char,
               op and (op.kinds, op.commutative, op.mpi_op is None and
                       op.ufunc is None), call.why_native, form, inplace)
        alg = self._checked.get(key)
        if alg is None:
            where = self.where(collective)
            op = call.op
            if op is not None and not op.supports(send.dtype):
                raise OpTypeError(f"operation {op.name!r} is not defined "
                                  f"for dtype {send.dtype}", **where)
            alg = self.choose(collective, call.algorithm, nbytes, op, where,
                              call.why_native, form, inplace).algorithm
            if call.why_native is not None and not alg.native:
                raise ConstraintError(
                    f"{alg.name} cannot run this call: {call.why_native}; "
                    f"use algorithm='native' or 'auto'",
                    **{**where, "algorithm": alg.name})
            if len(self._checked) >= CHOICES:
                self._checked.clear()
            self._checked[key] = alg
        return alg

