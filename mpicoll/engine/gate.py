"""The replay gate: the first thing a face method's call goes through.

A face's blocking method offers its memo ``(name, algorithm, buf, a, b,
c)`` to its engine's :class:`Gate` (``Engine.replayed``). The gate holds
the *entry* of the call last kept or replayed
(:mod:`mpicoll.engine.replay` lays it out and sets it); if this call is
that very call on those very objects, the gate runs the entry's kept run
and answers True. Otherwise, where neither ``buf`` and ``a`` nor their
items (message specs) are in the replay table, the call may be one kept
by its likeness (:mod:`mpicoll.engine.likeness`): the gate asks the
engine's ``Likeness.alike`` (the C twin makes a simple kept library call
itself: no count agreement, send and receive buffers apart). Else it
hands the memo to its ``fallback`` (the replay tables, in Python), whose
answer it returns. An exception the run raises propagates, except
``declined`` (another rank's counts changed: the call takes the full
path), which answers False.

The checks, in order: identity of the name and algorithm (literals of
the face methods) and of ``buf``, ``a``, ``b``, ``c``, where they are not
message specs; each kept array's ``dtype`` still the one it was kept
with (the one property an array can change in place); each message spec
among them, the kept list or a new one (``comm.Bcast([data, MPI.INT],
0)`` written in every call, as mpi4py's tutorial does), holding what the
kept spec held (:func:`spec_holds`). A check that raises counts as a
miss.

Two twins (:mod:`mpicoll.guard.twins`): :class:`Gate` here, and
``mpicoll.engine._gate.Gate`` in C; :data:`FastGate` is the one that
runs. What the C twin saves is the Python frames: a
replayed call, or one on new objects run by likeness, then runs no Python
between the face method and mpi4py's own call
(``bench/wrap_instructions.py``; docs/performance.md, "Wrapping an mpi4py
program"). On a miss the C twin first tries the kind of call it made
last by likeness, before the replay table (a library call kept in both
is the same call on the same objects either way).
"""

from __future__ import annotations

from mpicoll.guard.twins import accelerated


class Gate:
    """The replay gate (see the module docstring): ``fallback(name,
    algorithm, buf, a, b, c)`` answers a miss, or, where ``likeness``
    (the engine's :class:`~mpicoll.engine.likeness.Likeness`) is given
    and neither ``buf`` and ``a`` nor their items (message specs) are in
    its replay table (``_replays``), ``likeness.alike`` does (the C twin
    makes a simple kept library call itself); ``entry`` is the 13-tuple
    of the call last kept or replayed: ``buf, a, b, c, name, algorithm,
    first, dtype1, second, dtype2, held, specs, run`` (the kept arrays
    and their dtypes, or a stand-in whose dtype is None; ``held``: None,
    or ``(position, first, copy, dtype)`` of each message spec among
    ``buf, a, b, c``, see :func:`spec_holds`; ``specs``: the replay
    table's own check; ``run``: the kept run)."""

    __slots__ = ("declined", "entry", "fallback", "likeness")

    def __init__(self, fallback, declined, entry: tuple,
                 likeness=None) -> None:
        self.fallback, self.declined, self.entry = fallback, declined, entry
        self.likeness = likeness

    def __call__(self, name, algorithm, buf, a=None, b=None, c=None, /):
        buf0, a0, b0, c0, kept, alg, first, dtype1, second, dtype2, held, \
            _, run = self.entry
        if kept is name and alg is algorithm and (
                (buf0 is buf and a0 is a and b0 is b and c0 is c) or
                (held is not None and _same_but_specs(
                    held, (buf0, a0, b0, c0), (buf, a, b, c)))):
            try:
                same = (dtype1 is None or first.dtype is dtype1) and \
                    (dtype2 is None or second.dtype is dtype2)
                if same and held is not None:
                    objects = (buf, a, b, c)
                    for i, spec_first, copy, dtype in held:
                        if not spec_holds(objects[i], spec_first, copy,
                                          dtype):
                            same = False
                            break
            except Exception:  # an item that will not compare
                same = False
            if same:
                try:
                    run()
                except self.declined:
                    return False
                return True
        lk = self.likeness
        if lk is None or (id(buf), id(a)) in lk._replays or (
                (type(buf) in SPEC_TYPES or type(a) in SPEC_TYPES) and
                items_key(buf, a) in lk._replays):
            return self.fallback(name, algorithm, buf, a, b, c)
        return lk.alike(name, algorithm, buf, a, b, c)


#: the types of a message spec (``[buf, count, TYPE]``, ``(buf, TYPE)``)
SPEC_TYPES = (list, tuple)


def items_key(buf, a) -> tuple:
    """A replay entry's second key, where ``buf`` or ``a`` is a message
    spec (a list or tuple): the id of each one's first item (its buffer)
    in place of its own, so that a new list of the same items finds the
    entry of the first (the entry's check then compares every item)."""
    if type(buf) in SPEC_TYPES and buf:
        buf = buf[0]
    if type(a) in SPEC_TYPES and a:
        a = a[0]
    return id(buf), id(a), SPEC_TYPES


def _same_but_specs(held, kept: tuple, objects: tuple) -> bool:
    """Whether each of ``objects`` is the ``kept`` one, message specs
    aside (``held``'s positions: compared by what they hold)."""
    specs = [h[0] for h in held]
    for i in range(4):
        if objects[i] is not kept[i] and i not in specs:
            return False
    return True


def spec_holds(spec, first, copy, dtype) -> bool:
    """Whether the message spec ``spec`` (a list or tuple) holds what a
    kept one held: the very object ``first`` first (None: it was empty),
    items equal to those of ``copy`` and, where ``dtype`` is not None,
    its first item's dtype still ``dtype``. May raise where an item will
    not compare."""
    if not spec:
        return not copy
    return spec[0] is first and spec == copy and \
        (dtype is None or spec[0].dtype is dtype)


FastGate = accelerated("mpicoll.engine._gate", "Gate", Gate)

#: ``mpicoll.engine._gate.Face`` (a face method that offers its memo to the
#: gate itself, :mod:`mpicoll.api.faces`) and its marker of a parameter
#: without a default; None where the Python twins run
FastFace = accelerated("mpicoll.engine._gate", "Face", None)
REQUIRED = accelerated("mpicoll.engine._gate", "REQUIRED", None)
