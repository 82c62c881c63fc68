"""Replays: a repeated call on the very same objects runs again without
being parsed, checked and chosen again.

A face's blocking method first offers its *memo* ``(name, algorithm, buf,
a, b, c)`` (the face method's name and ``algorithm=``, the one buffer
every such call has, and up to three more arguments: buffers, op, root)
to :meth:`Replays.replayed`; its nonblocking method to
:meth:`Replays.restarted`. On a miss the call takes the full path, and
the engine keeps its run (:meth:`Replays._remember`): for a blocking call
the whole call, for a nonblocking one its launch. Entries hold the
objects, so their ids cannot be reused while an entry lives; at most
:data:`REPLAYS` per kind are kept, the oldest dropped when full. Guarded
engines (check mode, deadlines) replay nothing.

A blocking call on plain NumPy arrays is also kept by its *likeness*
(:meth:`Replays._remember_alike`): the same method and ``algorithm=``,
the same non-array arguments (op, root, ``MPI.IN_PLACE``) and arrays of
the same dtype and shape, C-contiguous and writeable. A later call on
*new* arrays alike in every way (fresh views, a result computed anew each
step) parses, checks and chooses exactly as that call did, so it runs at
once (:meth:`Replays.replayed`): a native call makes the library's call on
its own arrays (3.7 us instead of 14.6 us at one rank,
``bench/call_overhead.py``, the new-views rows), a hand-built one
(:class:`Rerun`) binds the algorithm's plan again to them
(:class:`~mpicoll.engine.rebind.Rebinding`, on scratch of its own) and
runs it (5.3 us instead of a full parse, ``bench/call_overhead.py``).
Only calls whose parse moves no
message are kept (those that exchange counts, ``recvcounts=None``, are
never replayed), so a rank that skips the parse cannot leave its peers
waiting. A call run by its likeness holds nothing of its arrays (holding
them until the next call would keep the allocator from reusing their
memory for the next call's new arrays: at 512 KiB that made such calls
3x slower in ``bench/new_arrays.py``); the kind remembers them weakly.
When the very same arrays come again within the next :data:`RECENT`
calls of their kind run by likeness (a second pair of buffers used in
turn with the first, double buffering, equal gradient buckets), they
are alive in the caller's hands anyway, so that call takes the full
path and is kept for replay (run by likeness every time, such arrays
cost up to twice a replay: ``bench/call_overhead.py``'s "two pairs in
turn" rows, in ``docs/performance.md``).
"""

from __future__ import annotations

import weakref
from operator import is_
from typing import Callable

import numpy as np

from mpicoll.args.message import named
from mpicoll.engine.executor import run
from mpicoll.device.memory import address
from mpicoll.engine.work import Work

REPLAYS = 32  # calls of each kind remembered per engine
RECENT = 16  # arrays of calls run by likeness remembered weakly per kind


class Replays:
    """The engine's two tables of repeated calls and their lookups."""

    def __init__(self, guarded: bool) -> None:
        self._replays: dict[int, tuple] = {}  # blocking calls' runs
        self._restarts: dict[int, tuple] = {}  # nonblocking calls' launches
        self._alike: dict[tuple, _Alike] = {}  # blocking calls' kinds
        if guarded:  # every call checked or bounded, none replayed
            self.replayed = _never_replayed
            self.restarted = _never_restarted

    def replayed(self, name: str, algorithm, buf, a=None, b=None,
                 c=None) -> bool:
        """Run a blocking call again if this very call (face method
        ``name``, ``algorithm``) on these very objects (``buf``, the one
        buffer every such call has, and up to three more: buffers, op,
        root) was checked before; False if it must take the full path.

        The entry is found by :func:`_matching` and holds the objects,
        compared by identity, so while it lives no other object can pass
        for them. What can still change is an array's dtype (reassignable
        in place; its size and memory cannot change while the plan's views
        exist), so that is compared too, and what a message spec (a list
        or tuple: ``[buf, count, TYPE]``, reused over a loop as mpi4py's
        demos do) holds: its items, compared with what they were
        (:class:`_Frozen`). A hit costs a dict lookup and eight
        comparisons (about 0.3 us; a spec adds one per item) instead of
        parsing and choosing again (5-15 us); ``Comm`` calls then also
        skip mpi4py's inference of the datatype
        (:meth:`mpicoll.engine.engine.Engine.prepared`).
        """
        run = _matching(self._replays, name, algorithm, buf, a, b, c)
        if run is not None:
            run()
            return True
        alike = self._alike.get((name, algorithm, type(buf) is np.ndarray
                                 and buf.shape))
        return alike is not None and alike.made(buf, a, b, c)

    def restarted(self, name: str, algorithm, buf, a=None, b=None,
                  c=None) -> Work | None:
        """:meth:`replayed` for a nonblocking call: this very call
        launched again, its :class:`~mpicoll.engine.work.Work`; None if it must
        take the full path (also while a hand-built one's previous launch
        on these buffers is still in flight)."""
        start = _matching(self._restarts, name, algorithm, buf, a, b, c)
        return None if start is None else start()

    def _remember(self, table: dict, memo, run) -> None:
        """Keep ``run`` (a blocking call's whole run, or a nonblocking
        call's launch) in ``table`` for :func:`_matching`: ``memo`` is its
        ``(name, algorithm, buf, a, b, c)``."""
        name, algorithm, buf, a, b, c = memo
        objects = (buf, a, b, c)
        arrays = [o for o in objects if hasattr(o, "dtype")]
        if len(arrays) > 2:
            return  # more arrays than _matching compares
        kept = [_Frozen(o) if type(o) is list or type(o) is tuple else o
                for o in objects]
        first, second = (*arrays, _NO_ARRAY, _NO_ARRAY)[:2]
        key = _key(buf), _key(a)
        held = table.get(key)
        if held is not None and (held[0] != name or held[1] != algorithm):
            key = (key, name, algorithm)  # another call's: beside it
        _make_room(table, key)
        table[key] = (name, algorithm, *kept, first, first.dtype, second,
                      second.dtype, run)

    def _remember_alike(self, memo, call: Callable, args: tuple,
                        flat: bool = False) -> None:
        """Keep a blocking call that made ``call(*args)`` by its likeness,
        where every array in ``memo`` is a plain C-contiguous writeable
        NumPy array and every array in ``args`` is one of them (a view
        made from the caller's array would not follow a new one): the
        library's call (``args`` are mpi4py's arguments) or, ``flat``, a
        :class:`Rerun` (``args`` are the call's ``send`` and ``recv``,
        each the whole of a memo array, flattened)."""
        name, algorithm, *objects = memo
        kinds, arrays = [], []
        for i, obj in enumerate(objects):
            if type(obj) is np.ndarray:
                flags = obj.flags
                if not (flags.c_contiguous and flags.writeable) or \
                        obj.dtype.hasobject:
                    return
                kinds.append((obj.dtype, obj.shape))
                arrays.append(i)
            elif isinstance(obj, (list, tuple, np.ndarray)) or \
                    hasattr(obj, "__array_interface__") or \
                    hasattr(obj, "__cuda_array_interface__"):
                return  # a message spec or another kind of buffer
            else:
                kinds.append(obj)
        if not arrays or len(arrays) > 2:
            return
        slots = []
        for arg in args:
            where = [i for i, obj in enumerate(objects) if obj is arg]
            if flat:
                whole = where or [i for i in arrays
                                  if _whole(objects[i], arg)]
                if not whole:
                    return  # a part of a buffer (or scratch)
                slots.append((whole[0], None if objects[whole[0]].ndim == 1
                              else _FLAT))
            elif where and type(arg) is np.ndarray:
                spec = named(arg)
                slots.append((where[0], spec[1] if type(spec) is list
                              else None))
            elif isinstance(arg, (list, tuple, np.ndarray)) or \
                    hasattr(arg, "__array_interface__"):
                return  # derived from the caller's buffer: cannot follow
            else:
                slots.append((None, arg))
        key = (name, algorithm, kinds[arrays[0]][1] if arrays[0] == 0
               else False)
        kept = self._alike.get(key)
        if kept is not None and kept.kinds == tuple(kinds) and \
                kept.slots == tuple(slots) and _same_call(kept.call, call):
            return  # the same call: keep it, its rebinding and its recent
        _make_room(self._alike, key)
        self._alike[key] = _Alike(tuple(kinds), tuple(arrays), call,
                                  tuple(slots))

    def forget_replays(self) -> None:
        """Drop every remembered call (the communicator is freed)."""
        self._replays.clear()
        self._restarts.clear()
        self._alike.clear()


def _make_room(table: dict, key) -> None:
    """Drop ``table``'s oldest entry if it is full and ``key`` is new (so
    the entries still in use outlive those of calls made once long ago)."""
    if len(table) >= REPLAYS and key not in table:
        del table[next(iter(table))]


def _same_call(x: Callable, y: Callable) -> bool:
    """Whether two calls kept by likeness make the same call: the same
    library method, or a :class:`Rerun` of the same plan."""
    if type(x) is Rerun and type(y) is Rerun:
        return x.plan == y.plan
    return x == y


def _matching(table: dict, name, algorithm, buf, a, b, c):
    """The kept run of this call on these objects in ``table``, or None.
    An entry lives at ``(_key(buf), _key(a))`` (not the XOR of two ids:
    arrays made one after another lie close, and the XOR of two such
    pairs' ids came out equal, so they took each other's entry), or,
    where a call of another method or algorithm holds that place, at that
    key with its method and algorithm (:meth:`Replays._remember`): calls
    of two algorithms made in turn on the same arrays keep an entry each
    (one would otherwise run by its likeness every time), and the common
    case costs one lookup. A message spec matches a kept one that holds
    the same items, the same list or a new one (:class:`_Frozen`)."""
    key = (tuple(map(id, buf)) if type(buf) is list or type(buf) is tuple
           else id(buf),
           tuple(map(id, a)) if type(a) is list or type(a) is tuple
           else id(a))  # _key, inlined: every call makes it
    e = table.get(key)
    if e is None:
        return None
    if e[0] != name or e[1] != algorithm:
        e = table.get((key, name, algorithm))
        if e is None:
            return None
    kept, alg, buf0, a0, b0, c0, first, dtype1, second, dtype2, run = e
    if first.dtype is not dtype1 or second.dtype is not dtype2 or \
            kept != name or alg != algorithm:
        return None
    # The key holds the ids of buf's and a's items where they are specs.
    if buf0 is not buf and not (type(buf0) is _Frozen
                                and buf0.holds_inside(buf)):
        return None
    if a0 is not a and not (type(a0) is _Frozen and a0.holds_inside(a)):
        return None
    if b0 is not b and not (type(b0) is _Frozen and b0.holds(b)):
        return None
    if c0 is not c and not (type(c0) is _Frozen and c0.holds(c)):
        return None
    return run


def _key(obj):
    """A memo object's part of its entry's key: its id, or for a message
    spec (a list or tuple) the ids of its items, so that a new list of the
    same items (``comm.Bcast([data, MPI.INT], 0)`` written in every call)
    finds the entry of the first."""
    if type(obj) is list or type(obj) is tuple:
        return tuple(map(id, obj))
    return id(obj)


def spec_copy(obj):
    """``obj``, or a copy of a message spec (nested lists and tuples
    too) holding the same items: what a kept native call passes mpi4py,
    so that a later change to the caller's list, which makes the call
    parsed again, cannot change what a kept entry sends."""
    if type(obj) is list or type(obj) is tuple:
        return type(obj)(spec_copy(x) for x in obj)
    return obj


class _Frozen:
    """What a message spec (a list or tuple) held when its call was kept,
    to tell whether the caller has changed it in place since: its items
    (held, and compared by identity), the dtype of each NumPy array among
    them, and a nested list or tuple (counts, displacements) as a
    :class:`_Frozen` of its own. An item replaced by an equal one (a new
    int of the same value) counts as a change: the call then takes the
    full path and is kept anew."""

    __slots__ = ("array", "dtype", "items", "kind", "rest")

    def __init__(self, spec) -> None:
        self.kind = type(spec)
        self.items = tuple(spec)
        arrays = [x for x in spec if type(x) is np.ndarray]
        self.array = arrays[0] if arrays else _NO_ARRAY
        self.dtype = self.array.dtype
        nested = tuple((i, _Frozen(x)) for i, x in enumerate(spec)
                       if type(x) is list or type(x) is tuple)
        more = tuple((x, x.dtype) for x in arrays[1:])
        self.rest = (nested, more) if nested or more else None

    def holds(self, spec) -> bool:
        """Whether ``spec`` (a list or tuple) holds what it held when
        frozen (about 0.3 us for three items)."""
        return (type(spec) is list or type(spec) is tuple) and \
            len(spec) == len(self.items) and \
            all(map(is_, spec, self.items)) and self.holds_inside(spec)

    def holds_inside(self, spec) -> bool:
        """:meth:`holds` for a spec whose items are known to be the frozen
        ones (an entry's key holds their ids): whether it is the same kind
        of sequence, and its arrays' dtypes and nested lists are as they
        were."""
        if type(spec) is not self.kind or self.array.dtype is not self.dtype:
            return False
        if self.rest is not None:
            nested, more = self.rest
            for i, frozen in nested:
                if not frozen.holds(spec[i]):
                    return False
            for x, dtype in more:
                if x.dtype is not dtype:
                    return False
        return True

class _Alike:
    """A blocking call kept by its likeness: per memo object its
    ``(dtype, shape)`` (an array) or itself; the memo positions of its one
    or two arrays; what it calls (mpi4py's method on the private
    communicator, or a :class:`Rerun`) and its arguments: for an array
    ``(memo position, how)``, ``how`` a datatype (passed with it), None
    (the array itself; mpi4py infers its datatype) or ``_FLAT`` (the array
    flattened); else ``(None, the argument itself)``. ``recent`` holds weak
    references to the arrays of the last :data:`RECENT` calls it made, by
    the id of the first."""

    __slots__ = ("arrays", "call", "kinds", "recent", "slots")

    def __init__(self, kinds: tuple, arrays: tuple, call: Callable,
                 slots: tuple) -> None:
        self.kinds, self.arrays, self.call, self.slots = \
            kinds, arrays, call, slots
        self.recent: dict[int, tuple] = {}

    def made(self, *objects) -> bool:
        """Make the call on ``objects`` (the memo's ``buf, a, b, c``) if
        they are alike to the kept ones and not the very arrays of one of
        the calls it made lately; False if not (nothing made: the caller
        takes the full path, which keeps arrays that come again)."""
        kinds = self.kinds
        for i, kind in enumerate(kinds):
            obj = objects[i]
            if type(kind) is tuple:
                if type(obj) is not np.ndarray or obj.dtype is not kind[0] \
                        or obj.shape != kind[1]:
                    return False
                flags = obj.flags
                if not (flags.c_contiguous and flags.writeable):
                    return False
            elif obj is not kind:
                return False
        if len(self.arrays) == 2:  # the full parse refuses overlap
            x, y = (objects[i] for i in self.arrays)
            lo, hi = address(x), address(y)
            if lo < hi + y.nbytes and hi < lo + x.nbytes and x.nbytes and \
                    y.nbytes:
                return False
        recent = self.recent
        key = id(objects[self.arrays[0]])
        refs = recent.get(key)
        if refs is not None and all(ref() is objects[i]
                                    for ref, i in zip(refs, self.arrays)):
            return False  # the same arrays again: kept by the full path
        if len(recent) >= RECENT:
            del recent[next(iter(recent))]  # the oldest
        recent[key] = tuple([weakref.ref(objects[i]) for i in self.arrays])
        self.call(*[arg if i is None else
                    objects[i] if arg is None else
                    objects[i].reshape(-1) if arg is _FLAT else
                    [objects[i], arg]
                    for i, arg in self.slots])
        return True


class Rerun:
    """A hand-built blocking call kept by its likeness: ``alg``'s plan
    (``count``, ``root``, ``op`` as the call had them) bound again to each
    alike call's ``send`` and ``recv``
    (:class:`~mpicoll.engine.rebind.Rebinding`, made on the first such
    call, on scratch of its own) and run on the next tag."""

    __slots__ = ("ctx", "plan", "rebinding")

    def __init__(self, ctx, alg, count, root, op) -> None:
        self.ctx = ctx
        self.plan = (alg, count, root, op)
        self.rebinding = None

    def __call__(self, send: np.ndarray, recv: np.ndarray) -> None:
        ctx = self.ctx
        rebinding = self.rebinding
        if rebinding is None:
            rebinding = self.rebinding = ctx.rebinding(*self.plan, send,
                                                       recv)
        run(rebinding.bind(send, recv), ctx.comm, ctx.next_tag())


def _whole(obj, view) -> bool:
    """Whether the flat ``view`` is all of the array ``obj``."""
    return type(obj) is np.ndarray and type(view) is np.ndarray and \
        obj.dtype == view.dtype and obj.nbytes == view.nbytes and \
        view.ndim == 1 and address(obj) == address(view)


class _Flat:
    """In an :class:`_Alike`'s slots: the memo array flattened
    (``reshape(-1)``, a view of a C-contiguous array)."""


_FLAT = _Flat()


class _NoArray:
    """Stands for a missing array in a replay entry (its dtype never
    changes)."""

    dtype = None


_NO_ARRAY = _NoArray()


def _never_replayed(name, algorithm, buf, a=None, b=None, c=None):
    return False


def _never_restarted(name, algorithm, buf, a=None, b=None, c=None):
    return None
