"""Binding a compiled host plan again, to new send and receive arrays.

A blocking hand-built call on *new* arrays alike to an earlier call's
(same dtype and length, in place or not as before, send and receive not
overlapping: :mod:`mpicoll.engine.likeness` checks that) runs the same schedule on
other memory. Binding it anew (:func:`~mpicoll.schedule.bind.bind` and
:func:`~mpicoll.engine.executor.compile_plan`: every span sliced, checked
for overlap and turned into a message) costs microseconds, as much as a
small exchange; a :class:`Rebinding` made once from a compiled plan moves
only what lies in the send and receive arrays: each such message is
rebuilt from the new array's address (one ``MPI.buffer.fromaddress``) and
each local step on them is the same function on new views, while messages
and steps on the scratch array are kept as they are. At one rank a
recursive-doubling call on new views costs 1.5 us more than a native one
(``bench/call_overhead.py``, the new-views rows).

The scratch array belongs to the rebinding (its plan was compiled on
scratch of its own), so a rebinding never shares memory with a cached plan
that a nonblocking call may be running.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from mpi4py import MPI

from mpicoll.device.memory import address
from mpicoll.schedule.bind import Step


class Rebinding:
    """``steps`` (a compiled host plan: messages ``[MPI.buffer, MPI.BYTE]``,
    local steps ``functools.partial`` of array arguments, as
    :func:`~mpicoll.schedule.bind.bind` makes them) compiled on ``send``
    and ``recv`` (1-D; the same array in place), made ready to be bound to
    any other pair alike to them (:meth:`bind`). Holds no reference to
    ``send`` or ``recv``. Raises ``ValueError`` for steps it cannot
    follow (a local step that is not a partial of positional arguments)."""

    __slots__ = ("_bases", "_steps")

    def __init__(self, steps: tuple[Step, ...], send: np.ndarray,
                 recv: np.ndarray) -> None:
        if any(s.ready is not None or s.call is not None or s.prepared
               for s in steps):
            raise ValueError("only host plans of messages and local steps "
                             "can be bound again")
        ranges = [(address(a), a.nbytes, a.itemsize) for a in (send, recv)]
        self._steps = tuple(
            (_messages(s.sends, ranges), _messages(s.recvs, ranges),
             _locals(s.local, ranges))
            for s in steps)
        # which arrays' addresses a call needs: those messages lie in
        self._bases = tuple(
            any(type(m) is list and any(e[0] == which for e in m)
                for step in self._steps for m in step[:2])
            for which in (0, 1))

    def bind(self, send: np.ndarray, recv: np.ndarray) -> tuple[Step, ...]:
        """The plan's steps on ``send`` and ``recv`` (alike to the arrays
        it was made for; not checked here)."""
        arrays = (send, recv)
        need_send, need_recv = self._bases
        bases = (address(send) if need_send else 0,
                 address(recv) if need_recv else 0)
        return tuple([_step((
            sends if type(sends) is tuple else _moved(sends, bases),
            recvs if type(recvs) is tuple else _moved(recvs, bases),
            local if type(local) is tuple else tuple(
                [fn if args is None else
                 partial(fn, *[a if which < 0 else
                               arrays[which] if whole else
                               arrays[which][lo:hi]
                               for which, lo, hi, whole, a in args])
                 for fn, args in local]),
            None, None, ())) for sends, recvs, local in self._steps])


def _step(fields: tuple) -> Step:
    """A :class:`Step` of all six fields, without its keyword handling."""
    return tuple.__new__(Step, fields)


def _owner(start: int, length: int, ranges) -> tuple[int, int]:
    """``(which, byte offset)`` of the ``length`` bytes at ``start`` inside
    the send (0) or receive (1) array, or ``(-1, 0)``: elsewhere (the
    scratch array)."""
    for which, (base, nbytes, _) in enumerate(ranges):
        if base <= start and start + length <= base + nbytes and (
                nbytes or start == base):
            return which, start - base
    return -1, 0


def _messages(messages: tuple, ranges) -> tuple | list:
    """``messages`` as they are (a tuple) if none lies in send or receive,
    else a list of ``(which, offset, nbytes, peer, message)``, ``message``
    None where it lies in them (rebuilt by :func:`_moved`)."""
    moved = []
    for message in messages:
        spec, peer = message
        which, offset = _owner(spec[0].address, len(spec[0]), ranges)
        moved.append((which, offset, len(spec[0]), peer,
                      message if which < 0 else None))  # holds no array
    if all(m[0] < 0 for m in moved):
        return messages
    return moved


def _moved(entries: list, bases: tuple) -> tuple:
    fromaddress = MPI.buffer.fromaddress
    byte = MPI.BYTE
    return tuple([message if which < 0 else
                  ([fromaddress(bases[which] + offset, nbytes), byte], peer)
                  for which, offset, nbytes, peer, message in entries])


def _locals(local: tuple, ranges) -> tuple | list:
    """``local`` as it is (a tuple) if no step touches send or receive,
    else a list of ``(function, args)``: ``args`` None (the step as it is)
    or per argument ``(which, start, stop, whole, argument)``."""
    out, moved = [], False
    for fn in local:
        if type(fn) is not partial or fn.keywords:
            raise ValueError(f"local step {fn!r}: not a partial of "
                             "positional arguments")
        args = []
        for a in fn.args:
            which, offset = _owner(address(a), a.nbytes, ranges) \
                if type(a) is np.ndarray else (-1, 0)
            if which < 0:
                args.append((-1, 0, 0, False, a))
                continue
            itemsize = ranges[which][2]
            if a.ndim != 1 or a.itemsize != itemsize or offset % itemsize:
                raise ValueError(f"local step {fn!r}: an argument is not "
                                 "a 1-D block of its buffer")
            lo = offset // itemsize
            whole = lo == 0 and a.nbytes == ranges[which][1]
            args.append((which, lo, lo + a.shape[0], whole, None))
        if all(w < 0 for w, *_ in args):
            out.append((fn, None))
        else:
            moved = True
            out.append((fn.func, tuple(args)))
    return out if moved else local
