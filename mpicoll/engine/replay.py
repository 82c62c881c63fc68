"""Replays: a repeated call on the very same objects runs again without
being parsed, checked and chosen again.

A face's blocking method first offers its *memo* ``(name, algorithm, buf,
a, b, c)`` (the face method's name and ``algorithm=``, the one buffer
every such call has, and up to three more arguments: buffers, op, root)
to ``Replays.replayed``, the engine's gate (:mod:`mpicoll.engine.gate`);
its nonblocking method to :meth:`Replays.restarted`. On a miss the call
takes the full path, and the engine keeps its run
(:meth:`Replays._remember`): for a blocking call the whole call, for a
nonblocking one its launch. Entries hold the objects, so their ids
cannot be reused while an entry lives; at most :data:`REPLAYS` per kind
are kept, the oldest dropped when full; the entry last kept or replayed
is tried before the table. An engine under the polled deadline replays
nothing; in check mode a replay makes check mode's exchange first
(``check_first``).

A message spec (a list or tuple: ``[buf, count, TYPE]``) is kept by what
it holds (:class:`_Frozen`: the same buffer, equal counts and datatypes),
so the same list reused over a loop (as mpi4py's demos do) and a new list
of the same items (``comm.Bcast([data, MPI.INT], 0)`` written in every
call, as mpi4py's tutorial does) both replay, and a list changed in place
is parsed again. A spec holding counts in an array is never kept.

A blocking call on *new* objects alike to a kept call's runs by its
likeness instead (:mod:`mpicoll.engine.likeness`).

Where the engine records calls (:mod:`mpicoll.guard.recorder`), a kept
run is wrapped once in the recorder's ``Stamped``, so that a replay is
numbered and stamped as a full call is.

Cost of a hit: the call last kept or replayed is compared first, by the
gate (identity comparisons; in C where it was built: no Python frame);
any other, after a tuple of two ids and a dict lookup, by
:meth:`Replays._replayed_by_table` (its name and algorithm by value); a
spec adds a check of its items. What a replayed
call adds to mpi4py's own, with the recorder's stamps and the face's
method call, is ``bench/wrap_cost.py forms``'s "same" column
(docs/performance.md).
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from mpicoll.engine.agreeing import Declined
from mpicoll.engine.gate import SPEC_TYPES, FastGate, items_key, spec_holds
from mpicoll.engine.likeness import Likeness
from mpicoll.engine.work import Work

REPLAYS = 32  # calls of each kind remembered per engine


class Replays(Likeness):
    """The engine's tables of repeated calls and their lookups: blocking
    calls' runs, nonblocking calls' launches, and (:class:`Likeness`)
    blocking calls kept by likeness."""

    def __init__(self, replay: bool, by_likeness: bool) -> None:
        Likeness.__init__(self)
        self._replays: dict = {}  # blocking calls' runs
        #: ``replayed(name, algorithm, buf, a, b, c)``: run a blocking
        #: call again if it was kept (True), else False; the gate tries
        #: its entry, the call last kept or replayed, before the tables
        #: (a loop repeating one call skips the lookup)
        self._gate = FastGate(self._replayed_by_table, Declined, _NO_ENTRY,
                              self)
        self.replayed = self._gate
        self._restarts: dict = {}  # nonblocking calls' launches
        #: run before each kept blocking call when it is replayed (check
        #: mode's exchange; nonblocking calls are then not kept); set by
        #: the engine while a call is launched
        self.check_first = None
        if not replay:  # every call bounded by a deadline: none replayed
            self.replayed = _never_replayed
            self.restarted = _never_restarted
        if not by_likeness:  # checked calls: none kept by likeness
            self.remember = _not_remembered

    def _replayed_by_table(self, name: str, algorithm, buf, a=None,
                           b=None, c=None) -> bool:
        """The gate's fallback (:class:`~mpicoll.engine.gate.Gate` has
        tried the entry last kept or replayed): run a blocking call again
        if this very call (face method ``name``, ``algorithm``) on these
        very objects (``buf``, the one buffer every such call has, and up
        to three more: buffers, op, root) was kept, or one alike to it
        (:meth:`~mpicoll.engine.likeness.Likeness.alike`); False if it
        must take the full path.

        An entry lives at the ids of ``buf`` and ``a`` and holds the
        objects, compared by identity, so while it lives no other object
        can pass for them. What can still change is an array's dtype
        (reassignable in place; its size and memory cannot change while
        the plan's views exist), so that is compared too, and what a
        message spec holds (:class:`_Frozen`). ``Comm`` calls then also
        skip mpi4py's inference of the datatype
        (:meth:`mpicoll.engine.engine.Engine.prepared`).
        """
        hot = self._gate.entry
        if (hot[0] is buf and hot[1] is a) or type(buf) in SPEC_TYPES or \
                type(a) in SPEC_TYPES or (id(buf), id(a)) in self._replays:
            e = self._found(self._replays, name, algorithm, buf, a, b, c)
            if e is not None:
                self._gate.entry = e
                try:
                    e[-1]()
                except Declined:
                    return False
                return True
        return self.alike(name, algorithm, buf, a, b, c)

    def restarted(self, name: str, algorithm, buf, a=None, b=None,
                  c=None) -> Work | None:
        """:meth:`replayed` for a nonblocking call (on the very same
        objects only): this very call launched again, its
        :class:`~mpicoll.engine.work.Work`; None if it must take the full
        path (also while a hand-built one's previous launch on these
        buffers is still in flight)."""
        e = self._found(self._restarts, name, algorithm, buf, a, b, c)
        return None if e is None else e[-1]()

    def _found(self, table: dict, name, algorithm, buf, a, b, c):
        """The entry of this call in ``table`` (its last item: the kept
        run), or None: at the ids of ``buf`` and ``a`` (where
        :meth:`replayed` looked first), at those of their items where they
        are message specs (a new list of the same items), or beside
        another call's entry at either."""
        key = (id(buf), id(a))
        if type(buf) in SPEC_TYPES or type(a) in SPEC_TYPES:
            items = items_key(buf, a)
            places = (items, key, (items, name, algorithm),
                      (key, name, algorithm))
        else:
            places = (key, (key, name, algorithm))
        for at in places:
            e = table.get(at)
            if e is None:
                continue
            buf0, a0, b0, c0, kept, alg, first, dtype1, second, dtype2, \
                _, specs, _ = e
            if kept == name and alg == algorithm and \
                    first.dtype is dtype1 and second.dtype is dtype2 and (
                        buf0 is buf and a0 is a and b0 is b and c0 is c
                        if specs is None else specs.match(buf, a, b, c)):
                return e
        return None

    def _remember(self, table: dict, memo, run, agreement=None) -> None:
        """Keep ``run`` (a blocking call's whole run, or a nonblocking
        call's launch) in ``table``: ``memo`` is its ``(name, algorithm,
        buf, a, b, c)``. It goes at the ids of ``buf`` and ``a`` and, where
        either is a message spec, also at the ids of their items; where a
        call of another method or algorithm holds that place, beside it
        (calls of two algorithms made in turn on the same arrays keep an
        entry each). A blocking call that agreed on counts is kept with its
        :class:`~mpicoll.engine.agreeing.Agreement`, made again before
        each replay (not in check mode, whose exchanges it would skip)."""
        name, algorithm, buf, a, b, c = memo
        if self.check_first is not None and table is self._restarts:
            return  # a relaunch may decline (plan busy) after checking
        if agreement is not None and (table is self._restarts or
                                      self.check_first is not None):
            return
        rec = self.recorder
        if rec is not None:  # numbered and stamped on each run
            run = rec.wrap(run, self.note) if table is self._replays \
                else _posting(rec, run, self.note)
        if self.check_first is not None:
            run = _after(self.check_first, run)
        if agreement is not None:  # before the call is numbered
            run = agreement.before(run)
        objects = (buf, a, b, c)
        arrays = [o for o in objects if hasattr(o, "dtype")]
        if len(arrays) > 2:
            return  # more arrays than an entry compares
        first, second = (*arrays, _NO_ARRAY, _NO_ARRAY)[:2]
        if not all(map(_frozen_counts, objects)):
            return  # counts in an array: could change in place unseen
        specs = _Specs.of(objects)
        held = None if specs is None else tuple(
            (i, f.first, f.copy, f.dtype) for i, f in specs.specs)
        entry = (buf, a, b, c, name, algorithm, first, first.dtype, second,
                 second.dtype, held, specs, run)
        places = [(id(buf), id(a))]
        if specs is not None and (type(buf) in SPEC_TYPES or
                                  type(a) in SPEC_TYPES):
            places.append(items_key(buf, a))
        for key in places:
            held = table.get(key)
            if held is not None and (held[4] != name or held[5] != algorithm):
                key = (key, name, algorithm)  # another call's: beside it
            if len(table) >= REPLAYS and key not in table:
                del table[next(iter(table))]  # the oldest
            table[key] = entry
        if table is self._replays:
            self._gate.entry = entry

    def forget_replays(self) -> None:
        """Drop every remembered call (the communicator is freed)."""
        self._replays.clear()
        self._restarts.clear()
        self._gate.entry = _NO_ENTRY
        self.forget()



def spec_copy(obj):
    """``obj``, or a copy of a message spec (nested lists and tuples
    too) holding the same items: what a kept native call passes mpi4py,
    so that a later change to the caller's list, which makes the call
    parsed again, cannot change what a kept entry sends."""
    kind = type(obj)
    if kind is list or kind is tuple:
        return kind([spec_copy(x) if type(x) in SPEC_TYPES else x
                     for x in obj])
    return obj


class _Specs:
    """An entry's check of its arguments where some are message specs:
    ``(position, object)`` of the others, kept to be compared by identity,
    and ``(position, _Frozen)`` of each spec."""

    __slots__ = ("others", "specs")

    def __init__(self, others: tuple, specs: tuple) -> None:
        self.others, self.specs = others, specs

    @classmethod
    def of(cls, objects: tuple) -> _Specs | None:
        """The check of ``objects`` (``buf, a, b, c``), or None where none
        is a spec (the entry then compares them by identity)."""
        specs = tuple((i, _Frozen(o)) for i, o in enumerate(objects)
                      if type(o) in SPEC_TYPES)
        others = tuple((i, o) for i, o in enumerate(objects)
                       if type(o) not in SPEC_TYPES)
        return cls(others, specs) if specs else None

    def match(self, buf, a, b, c) -> bool:
        """Whether ``buf, a, b, c`` are the kept objects, or specs (the
        same lists, or new ones) holding what the kept specs held."""
        objects = (buf, a, b, c)
        for i, kept in self.others:
            if objects[i] is not kept:
                return False
        for i, frozen in self.specs:
            if not frozen.holds(objects[i]):
                return False
        return True


class _Frozen:
    """What a message spec (a list or tuple) held when its call was kept,
    to tell whether the caller has changed it in place since: a copy of
    it (``copy``: every list and tuple in it copied, the other items
    held), its buffer (its first item) and that buffer's dtype where it
    has one.

    It holds as it was while its first item is the very same buffer, of
    the same dtype, and the spec is equal to the copy: a comparison made in
    C, item by item, which past the buffer only ever compares counts,
    displacements and datatypes, by value (:func:`_frozen_counts` keeps
    every other object out of a kept spec past its first item)."""

    __slots__ = ("copy", "dtype", "first", "kind")

    def __init__(self, spec) -> None:
        self.kind = type(spec)
        self.copy = _copied(spec)
        self.first = spec[0] if spec else None
        self.dtype = getattr(self.first, "dtype", None)

    def holds(self, spec) -> bool:
        """Whether ``spec`` is a list or tuple as this one was, holding
        what it held (about 0.1 us for three items)."""
        if type(spec) is not self.kind:
            return False
        try:
            return spec_holds(spec, self.first, self.copy, self.dtype)
        except Exception:  # an item that will not compare
            return False  # (an array put in place of a count)


def _copied(spec):
    """``spec`` with every list and tuple in it copied (the other items
    held as they are)."""
    return type(spec)(_copied(x) if type(x) in SPEC_TYPES else x for x in spec)


def _frozen_counts(obj, first: bool = True) -> bool:
    """Whether what a message spec holds past its buffer (counts,
    displacements, datatype) can only change by being replaced, which
    :class:`_Frozen` sees: ints, strings, datatypes and other plain
    objects, and lists or tuples of them; not an array of counts, whose
    values can change in place."""
    t = type(obj)
    if t is list or t is tuple:
        return all(_frozen_counts(x, first and i == 0 and
                                  type(x) not in SPEC_TYPES)
                   for i, x in enumerate(obj))
    return first or t in _IMMUTABLE or isinstance(obj, _IMMUTABLE_KINDS)


_IMMUTABLE = frozenset((int, str, bool, float, type(None)))
_IMMUTABLE_KINDS = (MPI.Datatype, np.generic)


class _NoArray:
    """Stands for a missing array in a replay entry (its dtype never
    changes)."""

    dtype = None


_NO_ARRAY = _NoArray()
_NO_ENTRY = (object(),) * 6 + (_NO_ARRAY, None) * 2 + (None,) * 3
# (matches nothing)


def _never_replayed(name, algorithm, buf, a=None, b=None, c=None):
    return False


def _not_remembered(memo, call, args, flat=False, agreement=None) -> None:
    return None


def _after(first, run):
    """``run`` with ``first()`` made before it; returns what ``run``
    returns."""
    def checked():
        first()
        return run()

    return checked


def _posting(rec, start, note):
    """A nonblocking call's kept launch ``start``, numbered and stamped
    as posted in ``rec`` (none if it declines: the full path then makes
    it under the same number)."""
    def posted():
        seq = rec.begin(note, False)
        work = start()
        if work is None:
            rec.undo(seq)
        else:
            work.stamp(rec, seq)
        return work

    return posted


def _never_restarted(name, algorithm, buf, a=None, b=None, c=None):
    return None
