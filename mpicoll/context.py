"""The library's private state for one user communicator.

Like mpi4py's ``commctx`` and mpi4jax: library traffic runs on a ``Dup`` of
the user's communicator, so it can never match a message of the user's, and
each hand-built collective call takes the next tag of a rolling counter, so
two nonblocking collectives in flight never match each other's messages.
(Every rank calls collectives in the same order, as MPI requires, so the
counters agree.)

The context is cached on the user's communicator as an MPI attribute: every
``mpicoll.Comm`` wrapping the same communicator shares one duplicate and one
tag counter.

It also caches compiled plans: a plan binds a schedule to the caller's
buffers (views, reduction callables and a scratch array), and rebinding
costs microseconds, which is the whole budget of a small message. Entries
are keyed by the identity of the caller's buffer objects and hold them, so
an entry can never point at freed memory; the cache is small (``PLANS``
entries), so at most that many dropped buffers stay alive.

When a buffer is big enough to hold a message over MPI's ``int`` count
limit (2**31 - 1 bytes: messages travel as bytes), the schedule's long
messages are split into chunks before binding
(:mod:`mpicoll.schedule.chunk`); smaller calls pay one comparison.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
from mpi4py import MPI

from mpicoll.schedule.chunk import MAX_MESSAGE_BYTES, element_limit, split_messages
from mpicoll.schedule.executor import Step, compile_plan
from mpicoll.schedule.plan import bind

PLANS = 16
_KEYVAL = MPI.Comm.Create_keyval()


class CompiledPlan:
    """Steps bound to specific buffers; ``busy`` while a nonblocking call
    runs them (a second concurrent call then binds its own)."""

    __slots__ = ("busy", "owners", "steps")

    def __init__(self, steps: tuple[Step, ...], owners: tuple) -> None:
        self.steps = steps
        self.owners = owners  # the caller's objects, identity-checked
        self.busy = False


class Context:
    def __init__(self, comm: MPI.Comm) -> None:
        self.comm = comm.Dup()
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self._tag_ub = min(int(self.comm.Get_attr(MPI.TAG_UB)), 1 << 30)
        self._tag = 0
        self._plans: OrderedDict = OrderedDict()

    def next_tag(self) -> int:
        self._tag = self._tag + 1 if self._tag < self._tag_ub else 1
        return self._tag

    def plan(self, alg, count, root, op, send: np.ndarray, recv: np.ndarray,
             owners: tuple) -> CompiledPlan:
        """The compiled plan of ``alg`` on these buffers, cached.

        ``owners`` are the caller's objects ``send`` and ``recv`` view (or
        the views themselves); their identities key the cache.
        """
        key = (alg, count, root, id(op), send.dtype.char,
               send.shape[0], recv.shape[0], *map(id, owners))
        entry = self._plans.get(key)
        if entry is not None and not entry.busy and all(
                a is b for a, b in zip(entry.owners, owners)):
            self._plans.move_to_end(key)
            return entry
        schedule = alg.schedule(self.rank, self.size, count, root=root,
                                commutative=op is None or op.commutative)
        itemsize = send.dtype.itemsize
        # No message is longer than the largest buffer it lives in.
        if max(send.shape[0], recv.shape[0],
               schedule.tmp) * itemsize > MAX_MESSAGE_BYTES:
            schedule = split_messages(schedule, element_limit(itemsize))
        arrays = {"send": send, "recv": recv,
                  "tmp": np.empty(schedule.tmp, send.dtype),
                  "sync": np.empty(0, np.uint8)}
        entry = CompiledPlan(compile_plan(bind(schedule, arrays, op)), owners)
        if key not in self._plans or not self._plans[key].busy:
            self._plans[key] = entry
            self._plans.move_to_end(key)
            while len(self._plans) > PLANS:
                self._plans.popitem(last=False)
        return entry

    def free(self) -> None:
        self._plans.clear()
        if self.comm != MPI.COMM_NULL:
            self.comm.Free()


def context_of(comm: MPI.Comm) -> Context:
    """The shared context of ``comm``, created on first use (collective:
    every rank of ``comm`` must get here the first time together)."""
    ctx = comm.Get_attr(_KEYVAL)
    if ctx is None:
        ctx = Context(comm)
        comm.Set_attr(_KEYVAL, ctx)
    return ctx


def forget(comm: MPI.Comm) -> None:
    """Free ``comm``'s context, if it has one."""
    ctx = comm.Get_attr(_KEYVAL)
    if ctx is not None:
        comm.Delete_attr(_KEYVAL)
        ctx.free()
