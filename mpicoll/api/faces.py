"""Face methods that reach the replay gate without a Python frame.

Each blocking buffer collective of :class:`mpicoll.Comm` is a Python
method whose body is one offer to the engine's replay gate, ``if not
self._replayed(name, algorithm, buf, a, b, c): <full path>``
(:mod:`mpicoll.engine.gate`). Where the C twins were built
(:mod:`mpicoll.guard.twins`), :func:`accelerate` puts a
``mpicoll.engine._gate.Face`` in the class in place of each such method:
it binds the call's arguments as the method would, makes the same memo
and offers it to the gate itself, so that a replayed call (or one run by
likeness) runs no Python at all; on a miss it calls the method, which
goes on as ever (the gate answers its own offer False at once).

Which of a method's arguments make its memo is read from the method
itself, by calling it once on a stand-in communicator whose
``_replayed`` records its arguments (:func:`memo_sources`): a method
whose body does anything else first, or takes other keywords than
``algorithm``, is left as it is. ``MPICOLL_PURE=1`` leaves them all.
"""

from __future__ import annotations

import inspect

from mpicoll.engine.gate import FastFace, REQUIRED


class _Value:
    """Stands for the argument at ``index`` (the parameters', then
    ``algorithm``) while a method's memo is read."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class _Recorder:
    """A stand-in communicator: its ``_replayed`` records the memo it is
    offered and answers True (the call ran), as the gate does on a hit."""

    def __init__(self) -> None:
        self.memos: list[tuple] = []

    def _replayed(self, *memo) -> bool:
        self.memos.append(memo)
        return True


def memo_sources(function) -> tuple | None:
    """``(params, defaults, algorithm, sources)`` of a face method (see
    ``mpicoll.engine._gate.Face``): its positional parameters past
    ``self``, their defaults (:data:`REQUIRED` where none), the default of
    its keyword ``algorithm`` and, for each of the six items of the memo it
    offers, the index of the argument it is (``algorithm`` last) or a
    1-tuple of a constant. None where the method is not one offer and
    nothing else, or its parameters are not that plain."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    params = list(signature.parameters.values())[1:]
    positional = [p for p in params
                  if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    keywords = [p for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
    if len(positional) + len(keywords) != len(params) or \
            [p.name for p in keywords] != ["algorithm"]:
        return None
    values = [_Value(i) for i in range(len(positional) + 1)]
    stand_in = _Recorder()
    try:
        returned = function(stand_in, *values[:-1], algorithm=values[-1])
    except Exception:  # the body does more than offer its memo
        return None
    if returned is not None or len(stand_in.memos) != 1 or \
            not 3 <= len(stand_in.memos[0]) <= 6:
        return None
    memo = stand_in.memos[0] + (None,) * (6 - len(stand_in.memos[0]))
    sources = tuple(item.index if type(item) is _Value else (item,)
                    for item in memo)
    defaults = tuple(REQUIRED if p.default is inspect.Parameter.empty
                     else p.default for p in positional)
    return (tuple(p.name for p in positional), defaults,
            keywords[0].default, sources)


def accelerate(cls: type) -> None:
    """Put a ``Face`` in ``cls`` for each of its public methods (its own
    or inherited) that offers a memo to ``self._replayed`` and nothing
    else; nothing where the C twins are not running."""
    if FastFace is None:
        return
    for name in dir(cls):
        function = getattr(cls, name, None)
        code = getattr(function, "__code__", None)
        if name.startswith("_") or code is None or \
                "_replayed" not in code.co_names:
            continue
        sources = memo_sources(function)
        if sources is not None:
            setattr(cls, name, FastFace(function, *sources))
