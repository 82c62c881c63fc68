"""Calls on new objects alike to an earlier call's: run without a parse.

A blocking call kept by its *likeness* (:meth:`Likeness.remember`) runs
again on any later arguments with the same :func:`likeness`: the same
face method and ``algorithm=``, the same non-buffer arguments (op, root,
``MPI.IN_PLACE``, datatypes, counts), and buffers of the same kind and
size (a NumPy array's dtype and shape; a ``bytearray``'s, ``bytes``'s or
``mmap``'s length; a ``memoryview``'s format and size; an
``array.array``'s typecode and length; a host DLPack exporter's type,
dtype and shape), in the same message specs
(``[buf, count, TYPE]``, ``[buf, (count, displ), TYPE]``, ...). Such a
call parses, checks and chooses exactly as the kept one did, except for
what only the new memory can tell, which is checked here: whether send
and receive buffers overlap, and for a hand-built call whether its arrays
are C-contiguous and writeable. Device buffers and objects mpicoll does
not know have no likeness.

What it runs:

- a call ``auto`` sent to the MPI library makes mpi4py's own call with the
  caller's new arguments, as the raw communicator would (mpi4py parses
  them, in C). If mpi4py refuses them (a ``TypeError``, ``ValueError`` or
  ``BufferError`` raised before any message moves: a non-contiguous view,
  a read-only receive buffer), the call takes the full path instead,
  whose error names the rank and the call;
- a hand-built call on plain NumPy arrays (:class:`Rerun`) binds the
  algorithm's plan again to the new arrays
  (:class:`~mpicoll.engine.rebind.Rebinding`, on scratch of its own) and
  runs it.

A call whose parse exchanges counts (Gatherv, Scatterv, Alltoallv) is
kept with its exchange (:mod:`mpicoll.engine.agreeing`), made again
before each call alike to it, so a rank that skips the parse still makes
the one exchange its peers make. A call run by its likeness holds
nothing of its buffers (holding them until the next call would keep the
allocator from reusing their memory for the next call's new arrays: at
512 KiB that made such calls 3x slower in ``bench/new_arrays.py``). A
:class:`Rerun` remembers the arrays of its last :data:`RECENT` calls
weakly: when the very same arrays come again (a second pair of buffers
used in turn with the first, double buffering), that call takes the full
path and is kept for replay (:mod:`mpicoll.engine.replay`), which costs
less than binding again.

Where the C twins were built (:mod:`mpicoll.guard.twins`), the key is
made in C (:class:`Keys`) and the replay gate (:mod:`mpicoll.engine.gate`)
looks it up and makes a kept library call itself, stamped: no Python runs
past the face method. Cost (``bench/wrap_instructions.py``, the ``-view``
and ``-new`` rows; ``bench/wrap_cost.py forms``, the "new" column): a few
tuples, one dict lookup and the stamps, against 10-30 us for a full
parse.
"""

from __future__ import annotations

import array
import mmap
import weakref
from operator import itemgetter
from typing import Callable

import numpy as np
from mpi4py import MPI

from mpicoll.args.getbuffer import is_dlpack, kDLCPU
from mpicoll.device.memory import address
from mpicoll.engine.agreeing import Declined
from mpicoll.engine.executor import run
from mpicoll.guard.twins import accelerated

KINDS = 32  # calls kept by likeness per engine
RECENT = 16  # arrays of a Rerun's last calls, remembered weakly
REFUSED = (TypeError, ValueError, BufferError, KeyError, OverflowError)
# what mpi4py raises while parsing arguments, before any message moves

_SIZED = frozenset((bytearray, bytes, mmap.mmap))  # format "B", len bytes
_BUFFERS = _SIZED | {np.ndarray, memoryview, array.array}
_PLAIN = frozenset((MPI.Op, MPI.Datatype, type(MPI.IN_PLACE),
                    type(MPI.BOTTOM), type(None)))  # compared by identity


def likeness(obj, buffer: bool = True, other=None):
    """What a call's parse and choice read of ``obj`` (a memo argument),
    as a hashable value: an ``int`` or ``str`` itself; a buffer's kind and
    size; a message spec's likeness item by item; a plain argument (op,
    datatype, ``MPI.IN_PLACE``, None) by identity (its id: these are
    long-lived objects; :class:`Likeness` holds them); for any other
    object, what ``other`` (default :func:`_other_likeness`) says: a host
    DLPack exporter's kind and size, else None (no likeness: a device
    buffer, an unknown object); and None for a buffer anywhere in a spec
    but first (``buffer`` False): counts or displacements in an array,
    whose values are what the call reads."""
    t = type(obj)
    if t is int or t is str:
        return obj
    if t in _PLAIN:
        return id(obj)
    if t is list or t is tuple:
        parts = [t]
        for i, item in enumerate(obj):
            part = likeness(item, buffer and i == 0, other)
            if part is None:
                return None
            parts.append(part)
        return tuple(parts)
    if not buffer:
        return None
    if t is np.ndarray:
        return t, obj.dtype, obj.shape
    if t in _SIZED:
        return t, len(obj)
    if t is memoryview:
        try:
            return t, obj.format, obj.nbytes
        except ValueError:  # released
            return None
    if t is array.array:
        return t, obj.typecode, len(obj)
    return (other or _other_likeness)(obj)


class Keys:
    """``Keys(other)(name, algorithm, buf, a, b, c)``: the key of a call
    kept by its likeness, ``(name, algorithm)`` and the :func:`likeness`
    of each argument, or None where one has none. ``other`` is
    :func:`_other_likeness` (what the C twin asks of a buffer it does not
    know). The Python twin of ``mpicoll.engine._likeness.Keys``
    (:mod:`mpicoll.guard.twins`); :data:`FastKeys` is the one that
    runs."""

    __slots__ = ("other",)

    def __init__(self, other) -> None:
        self.other = other

    def __call__(self, name, algorithm, buf, a=None, b=None, c=None, /):
        other = self.other
        parts = (likeness(buf, True, other), likeness(a, True, other),
                 likeness(b, True, other), likeness(c, True, other))
        for part in parts:
            if part is None:
                return None
        return (name, algorithm, *parts)

    def fits(self, key, name, algorithm, buf, a=None, b=None, c=None, /):
        """Whether the call's key is ``key`` (the C twin finds out without
        making the call's key)."""
        return key is not None and self(name, algorithm, buf, a, b, c) == key


FastKeys = accelerated("mpicoll.engine._likeness", "Keys", Keys)


def _other_likeness(obj):
    """A host DLPack exporter's kind and size (a torch CPU tensor; about
    1.5 us); None for any other object, an exporter on a device or one
    that will not export (the full path says why)."""
    if not is_dlpack(obj):
        return None
    try:
        if obj.__dlpack_device__()[0] != kDLCPU:
            return None
        exported = np.from_dlpack(obj)
    except Exception:  # refused: parsed in full
        return None
    return type(obj), exported.dtype, exported.shape


def _plain_parts(obj, into: list) -> None:
    """The plain objects (see :func:`likeness`) in ``obj``, into ``into``."""
    if type(obj) is list or type(obj) is tuple:
        for item in obj:
            _plain_parts(item, into)
    elif type(obj) in _PLAIN:
        into.append(obj)


def _buffer(obj):
    """The buffer object of a memo argument (a message spec's first item),
    or None where it has none (``MPI.IN_PLACE``, None, an op, a root)."""
    if type(obj) is list or type(obj) is tuple:
        obj = obj[0] if obj else None
    return obj if type(obj) in _BUFFERS or is_dlpack(obj) else None


class Likeness:
    """The engine's table of blocking calls kept by likeness."""

    refused = REFUSED  # (read by the C replay gate)

    def __init__(self) -> None:
        self._kinds: dict[tuple, _Alike] = {}
        self._key = FastKeys(_other_likeness)  # a call's key in _kinds
        #: the flight recorder calls are stamped in (None: not stamped),
        #: and the note of the call being launched (set by the engine)
        self.recorder = None
        self.note: tuple | None = None

    def alike(self, name, algorithm, buf, a, b, c) -> bool:
        """Run this call if one alike to it was kept; False if it must take
        the full path (nothing has moved)."""
        kinds = self._kinds
        if not kinds:
            return False
        kept = kinds.get(self._key(name, algorithm, buf, a, b, c))
        if kept is None:
            return False
        agreement = kept.agreement
        if agreement is not None:
            if not kept.ready((buf, a, b, c)):
                return False  # the full path refuses it before exchanging
            try:
                agreement.exchange()
            except Declined:
                return False
        made = kept.made((buf, a, b, c))
        if not made and agreement is not None:
            agreement.refused()
        return made  # refused before any message: the full path makes it

    def remember(self, memo, call: Callable, args: tuple,
                 flat: bool = False, agreement=None) -> None:
        """Keep a blocking call that made ``call(*args)`` by the likeness
        of its ``memo`` ``(name, algorithm, buf, a, b, c)``: the library's
        call (``args``: the caller's own arguments to mpi4py, each a memo
        object) or, ``flat``, a :class:`Rerun` (``args`` are the call's
        ``send`` and ``recv``, each the whole of a memo array, flattened;
        every memo buffer must then be a C-contiguous writeable NumPy
        array). ``agreement``: the count exchange the call made first
        (:class:`~mpicoll.engine.agreeing.Agreement`), made again by each
        call alike to it."""
        objects = memo[2:]
        key = self._key(*memo)
        if key is None:
            return
        buffers = [i for i, obj in enumerate(objects)
                   if _buffer(obj) is not None]
        if flat and not all(_plain_array(objects[i]) for i in buffers):
            return
        slots = []
        for arg in args:
            where = [i for i, obj in enumerate(objects) if obj is arg]
            if flat:
                where = where or [i for i in buffers
                                  if _whole(objects[i], arg)]
                if not where:
                    return  # a part of a buffer (or scratch)
                slots.append((where[0], objects[where[0]].ndim != 1))
            elif where:
                slots.append(where[0])
            else:
                return  # not the caller's own argument: cannot follow
        held: list = []
        for obj in objects:
            _plain_parts(obj, held)
        kept = self._kinds.get(key)
        if kept is not None and kept.slots == tuple(slots) and \
                _same_call(kept.call, call):
            kept.agreed(agreement)  # the latest counts seen
            return  # the same call: keep it, its rebinding and its recent
        if kept is not None:
            kept.dropped()
        if len(self._kinds) >= KINDS and key not in self._kinds:
            self._kinds.pop(next(iter(self._kinds))).dropped()  # the oldest
        self._kinds[key] = _Alike(call, tuple(slots), flat, tuple(buffers),
                                  tuple(held), self.recorder, self.note,
                                  agreement)

    def forget(self) -> None:
        for kept in self._kinds.values():
            kept.dropped()
        self._kinds.clear()


class _Alike:
    """One kept call: what it calls (mpi4py's method on the private
    communicator, or a :class:`Rerun`), the memo position of each of its
    arguments (``flat``: ``(position, reshape)`` of its send and receive
    arrays), the memo positions of its buffers (``pair``: of its send and
    receive buffers where it has two, checked for overlap), the plain
    objects whose ids its key holds, and its count exchange
    (``agreement``, or None). ``stamped`` is ``call`` numbered and
    stamped in the flight recorder (where there is one) under the kept
    call's note, and ``undo`` (None without a recorder) takes its number
    back when mpi4py refuses the arguments. A :class:`Rerun`'s
    ``recent`` holds weak references to the arrays of its last
    :data:`RECENT` calls, by the id of the first.

    The C replay gate (:mod:`mpicoll.engine.gate`) makes a kept library
    call itself, as :meth:`made` does, where ``flat`` is False and
    ``agreement`` None: it reads them all at once, as ``direct``
    (``(stamped, slots, pair, undo)``, else None)."""

    __slots__ = ("agreement", "buffers", "call", "direct", "flat", "held",
                 "one", "pair", "pick", "recent", "slots", "stamped", "undo")

    def __init__(self, call, slots, flat, buffers, held, recorder, note,
                 agreement=None) -> None:
        self.call, self.slots, self.flat, self.buffers, self.held = \
            call, slots, flat, buffers, held
        self.pair = buffers if len(buffers) == 2 else None
        self.stamped = call if recorder is None else \
            recorder.wrap(call, note)
        self.undo = None if recorder is None else recorder.undo_last
        self.agreed(agreement)
        self.pick = itemgetter(*slots) if slots and not flat else _none
        self.one = len(slots) == 1
        self.recent: dict[int, tuple] = {}

    def agreed(self, agreement) -> None:
        """Keep ``agreement`` (or None), made again before each call."""
        self.agreement = agreement
        self.direct = None if self.flat or agreement is not None else (
            self.stamped, self.slots, self.pair, self.undo)

    def dropped(self) -> None:
        """Out of the table: the C gate, which may hold it as the kind it
        ran last, no longer makes it (``direct`` None)."""
        self.direct = None

    def made(self, objects: tuple) -> bool:
        """Make the call on ``objects`` (the memo's ``buf, a, b, c``);
        False if it must take the full path instead: buffers that
        overlap, mpi4py refusing the arguments, or a :class:`Rerun`'s
        arrays that are not C-contiguous and writeable or that are the
        very arrays of one of its last calls."""
        if self.pair is not None and self.agreement is None and \
                not self._apart(objects):
            return False  # (checked by ready() where there is an agreement)
        if self.flat:
            return self._rerun(objects)
        try:
            if self.one:
                self.stamped(self.pick(objects))
            else:
                self.stamped(*self.pick(objects))
        except REFUSED:
            if self.undo is not None:
                self.undo()
            return False
        return True

    def ready(self, objects: tuple) -> bool:
        """Whether a call on ``objects`` passes, before any message, what
        its full path would check before its count exchange: every buffer
        a C-contiguous writeable NumPy array (anything else, that path
        parses), send and receive apart."""
        return all(_plain_array(_buffer(objects[i])) for i in self.buffers) \
            and (self.pair is None or self._apart(objects))

    def _apart(self, objects: tuple) -> bool:
        """The send and receive buffers do not overlap (where they do, or
        mpi4py refuses them, the full parse says why)."""
        i, j = self.pair
        x, y = objects[i], objects[j]
        if type(x) is not np.ndarray or type(y) is not np.ndarray:
            x, y = _buffer(x), _buffer(y)  # a message spec's buffer
        if type(x) is np.ndarray and type(y) is np.ndarray:
            # their extents, compared in C (a third of two _span calls)
            return not np.may_share_memory(x, y)
        try:
            (lo, m), (hi, n) = _span(x), _span(y)
        except REFUSED:
            return False
        return not (lo < hi + n and hi < lo + m)

    def _rerun(self, objects: tuple) -> bool:
        arrays = [objects[i] for i, _ in self.slots]
        for x in arrays:
            if not _plain_array(x):
                return False
        recent = self.recent
        key = id(arrays[0])
        refs = recent.get(key)
        if refs is not None and all(ref() is x
                                    for ref, x in zip(refs, arrays)):
            return False  # the same arrays again: kept by the full path
        if len(recent) >= RECENT:
            del recent[next(iter(recent))]  # the oldest
        recent[key] = tuple([weakref.ref(x) for x in arrays])
        self.stamped(*[x.reshape(-1) if reshape else x
                    for x, (_, reshape) in zip(arrays, self.slots)])
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


def _none(objects: tuple) -> tuple:
    """No arguments (a call without buffers: ``Barrier``)."""
    return ()


def _same_call(x: Callable, y: Callable) -> bool:
    """Whether two kept calls make the same call: the same library
    method, or a :class:`Rerun` of the same plan."""
    if type(x) is Rerun and type(y) is Rerun:
        return x.plan == y.plan
    return x == y


def _span(x) -> tuple:
    """``(address, bytes)`` of a buffer (a DLPack exporter's as NumPy
    sees it: mpi4py's buffer of one costs several times as much)."""
    if type(x) in _BUFFERS:
        x = MPI.buffer(x)
        return x.address, x.nbytes
    x = np.from_dlpack(x)
    return address(x), x.nbytes


def _plain_array(x) -> bool:
    """A host NumPy array a plan can be bound to again."""
    if type(x) is not np.ndarray or x.dtype.hasobject:
        return False
    flags = x.flags
    return flags.c_contiguous and flags.writeable


def _whole(obj, view) -> bool:
    """Whether the flat ``view`` is all of the array ``obj``."""
    return type(obj) is np.ndarray and type(view) is np.ndarray and \
        obj.dtype == view.dtype and obj.nbytes == view.nbytes and \
        view.ndim == 1 and address(obj) == address(view)
