"""The C accelerators do what their Python twins do (mpicoll.guard.twins).

Each case runs on both twins of the replay gate
(:class:`mpicoll.engine.gate.Gate`), of a call's likeness key
(:class:`mpicoll.engine.likeness.Keys`) and of the flight recorder's
stamp (:class:`mpicoll.guard.recorder.Stamped`) and checks what each
answers, what it calls and what it leaves in the recorder. Where the package was
installed with a compiler, the C twins must have been built and be the
ones that run (unless ``MPICOLL_PURE`` asks for the Python ones).
"""

from __future__ import annotations

import array
import importlib
import inspect
import mmap
import sys
import sysconfig
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.engine import gate as gate_module
from mpicoll.engine import likeness as likeness_module
from mpicoll.engine.agreeing import Declined
from mpicoll.engine.replay import _NO_ARRAY
from mpicoll.guard import recorder as recorder_module
from mpicoll.guard.recorder import Recorder
from mpicoll.guard.twins import pure


def c_twin(module: str, name: str):
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:
        return None


C_GATE = c_twin("mpicoll.engine._gate", "Gate")
C_KEYS = c_twin("mpicoll.engine._likeness", "Keys")
C_STAMPED = c_twin("mpicoll.guard._stamp", "Stamped")
GATES = [pytest.param(gate_module.Gate, id="python"),
         pytest.param(C_GATE, id="c", marks=pytest.mark.skipif(
             C_GATE is None, reason="built without a compiler"))]
KEYS = [pytest.param(likeness_module.Keys, id="python"),
        pytest.param(C_KEYS, id="c", marks=pytest.mark.skipif(
            C_KEYS is None, reason="built without a compiler"))]
STAMPS = [pytest.param(recorder_module.Stamped, id="python"),
          pytest.param(C_STAMPED, id="c", marks=pytest.mark.skipif(
              C_STAMPED is None, reason="built without a compiler"))]


def test_the_c_twins_are_built_and_run():
    compiler = sysconfig.get_config_var("CC")
    source = Path(gate_module.__file__).with_name("_gate.c")
    if not compiler or not source.exists() or pure():
        pytest.skip("no compiler, no sources, or MPICOLL_PURE set")
    assert None not in (C_GATE, C_KEYS, C_STAMPED), \
        "pip install -e . built no C twin: see its build_ext warnings"
    assert gate_module.FastGate is C_GATE
    assert likeness_module.FastKeys is C_KEYS
    assert recorder_module.FastStamped is C_STAMPED


class Calls:
    """The fallback and the run of a gate, recording their calls."""

    def __init__(self, answer=False, raises=None):
        self.fallbacks, self.runs = [], 0
        self.answer, self.raises = answer, raises

    def fallback(self, *memo):
        self.fallbacks.append(memo)
        return self.answer

    def run(self):
        self.runs += 1
        if self.raises is not None:
            raise self.raises


def entry(calls, buf, a=None, b=None, c=None, *, name="Bcast",
          algorithm="auto", held=None):
    arrays = [o for o in (buf, a, b, c) if isinstance(o, np.ndarray)]
    first, second = (*arrays, _NO_ARRAY, _NO_ARRAY)[:2]
    return (buf, a, b, c, name, algorithm, first, first.dtype, second,
            second.dtype, held, None, calls.run)


def spec_entry(calls, spec, a=None):
    """An entry kept for ``spec`` (a message spec) as buf."""
    first = spec[0] if spec else None
    held = ((0, first, type(spec)(spec), getattr(first, "dtype", None)),)
    return entry(calls, spec, a, held=held)


@pytest.mark.parametrize("Gate", GATES)
def test_the_very_call_runs_again(Gate):
    calls = Calls()
    x = np.zeros(4)
    g = Gate(calls.fallback, Declined, entry(calls, x, 0))
    assert g("Bcast", "auto", x, 0) is True
    assert g("Bcast", "auto", x, 0, None, None) is True
    assert (calls.runs, calls.fallbacks) == (2, [])


@pytest.mark.parametrize("Gate", GATES)
@pytest.mark.parametrize("change", ["buf", "root", "name", "algorithm",
                                    "extra"])
def test_any_other_call_goes_to_the_fallback(Gate, change):
    calls = Calls(answer=True)
    x, y = np.zeros(4), np.zeros(4)
    g = Gate(calls.fallback, Declined, entry(calls, x, 0))
    args = ["Bcast", "auto", x, 0]
    if change == "buf":
        args[2] = y
    elif change == "root":
        args[3] = 1
    elif change == "name":
        args[0] = "Ibcast"
    elif change == "algorithm":
        args[1] = "binomial"
    else:
        args.append(x)
    assert g(*args) is True  # the fallback's answer
    assert calls.runs == 0
    assert calls.fallbacks == [tuple(args) + (None,) * (6 - len(args))]




@pytest.mark.parametrize("Gate", GATES)
def test_a_dtype_changed_in_place_is_a_miss(Gate):
    calls = Calls()
    x = np.zeros(4)
    g = Gate(calls.fallback, Declined, entry(calls, x, 0))
    x.dtype = np.int64
    assert g("Bcast", "auto", x, 0) is False
    assert calls.runs == 0 and len(calls.fallbacks) == 1


@pytest.mark.parametrize("Gate", GATES)
@pytest.mark.parametrize("change", [None, "count", "buffer", "emptied",
                                    "array count", "dtype"])
def test_a_spec_is_checked_for_what_it_holds(Gate, change):
    calls = Calls()
    x = np.zeros(4, np.uint8)
    spec = [x, 4, MPI.BYTE]
    g = Gate(calls.fallback, Declined, spec_entry(calls, spec, 0))
    if change == "count":
        spec[1] = 2
    elif change == "buffer":
        spec[0] = np.zeros(4, np.uint8)
    elif change == "emptied":
        spec.clear()
    elif change == "array count":  # an item that will not compare
        spec[1] = np.array([4, 4])
    elif change == "dtype":
        x.dtype = np.int8
    hit = g("Bcast", "auto", spec, 0)
    assert hit is (change is None)
    assert calls.runs == (change is None)
    assert len(calls.fallbacks) == (change is not None)


@pytest.mark.parametrize("Gate", GATES)
def test_every_spec_of_a_call_is_checked(Gate):
    calls = Calls()
    s, r = bytearray(4), bytearray(8)
    send, recv = [s, 4, MPI.BYTE], (r, 4, MPI.BYTE)
    held = ((0, r, tuple(recv), None), (1, s, list(send), None))
    g = Gate(calls.fallback, Declined,
             entry(calls, recv, send, 0, held=held))
    assert g("Gather", "auto", recv, send, 0) is False  # kept as Bcast
    g.entry = entry(calls, recv, send, 0, name="Gather", held=held)
    assert g("Gather", "auto", recv, send, 0) is True
    send[1] = 3
    assert g("Gather", "auto", recv, send, 0) is False
    assert calls.runs == 1 and len(calls.fallbacks) == 2


@pytest.mark.parametrize("Gate", GATES)
@pytest.mark.parametrize("made", ["same items", "other count", "other buffer",
                                  "a tuple", "other root"])
def test_a_new_spec_is_the_kept_call_if_it_holds_the_same(Gate, made):
    """mpi4py's tutorial form: ``comm.Bcast([data, MPI.BYTE], 0)`` makes
    a new list on every call."""
    calls = Calls()
    x = np.zeros(4, np.uint8)
    g = Gate(calls.fallback, Declined,
             spec_entry(calls, [x, 4, MPI.BYTE], 0))
    spec, root = {"same items": ([x, 4, MPI.BYTE], 0),
                  "other count": ([x, 2, MPI.BYTE], 0),
                  "other buffer": ([x.copy(), 4, MPI.BYTE], 0),
                  "a tuple": ((x, 4, MPI.BYTE), 0),
                  "other root": ([x, 4, MPI.BYTE], 1)}[made]
    hit = g("Bcast", "auto", spec, root)
    assert hit is (made == "same items")
    assert calls.runs == hit and len(calls.fallbacks) == (not hit)


@pytest.mark.parametrize("Gate", GATES)
def test_a_declined_run_answers_false_and_others_raise(Gate):
    x = np.zeros(4)
    calls = Calls(raises=Declined())
    g = Gate(calls.fallback, Declined, entry(calls, x, 0))
    assert g("Bcast", "auto", x, 0) is False
    calls.raises = ValueError("boom")
    with pytest.raises(ValueError, match="boom"):
        g("Bcast", "auto", x, 0)
    assert calls.fallbacks == []


@pytest.mark.parametrize("Gate", GATES)
def test_an_entry_is_a_tuple_of_thirteen(Gate):
    calls = Calls()
    g = Gate(calls.fallback, Declined, entry(calls, None))
    if Gate is C_GATE:
        with pytest.raises(TypeError):
            g.entry = (None,) * 12
    assert len(g.entry) == 13


@pytest.mark.parametrize("Stamped", STAMPS)
def test_a_stamped_call_is_numbered_and_stamped(Stamped):
    rec = Recorder(size=4)
    seen = []

    def run():
        seen.append((rec.seq, rec.blocked))
        return "result"

    note = ("bcast", "native", "blocking", np.dtype("uint8"), 8, None, 0)
    stamped = Stamped(run, note, rec)
    for expected in range(1, 6):
        assert stamped() == "result"
        i = expected % rec.slots
        assert (rec.seq, rec.blocked) == (expected, 0)
        assert rec.notes[i] is note
        assert 0 < rec.begun[i] <= rec.ended[i]
    assert seen == [(n, n) for n in range(1, 6)]
    assert [c["seq"] for c in rec.calls()] == [2, 3, 4, 5]


@pytest.mark.parametrize("Stamped", STAMPS)
def test_a_stamped_call_that_raises_is_ended(Stamped):
    rec = Recorder(size=4)

    def run():
        raise KeyError("no")

    stamped = Stamped(run, ("barrier", "native", "blocking", None, 0, None,
                            0), rec)
    with pytest.raises(KeyError, match="no"):
        stamped()
    assert (rec.seq, rec.blocked) == (1, 0)
    assert rec.begun[1] <= rec.ended[1]


class Seen:
    """Records how its method was called (its arguments)."""

    def __init__(self) -> None:
        self.seen: list = []

    def method(self, *args, **kwargs):
        self.seen.append((args, kwargs))
        return len(self.seen)


@pytest.mark.parametrize("Stamped", STAMPS)
@pytest.mark.parametrize("run", ["method", "partial", "partial-of-method",
                                 "keywords"])
def test_a_stamped_call_passes_its_arguments_on(Stamped, run):
    """A kept run is called as itself: a partial (the C twin calls its
    function with its arguments, the instance of a bound method first)
    gets its own arguments, then the call's, keywords last."""
    rec, calls = Recorder(size=4), Seen()
    kept = {"method": calls.method,
            "partial": partial(Seen.method, calls, 1),
            "partial-of-method": partial(calls.method, 1, 2),
            "keywords": partial(calls.method, 1, key="kept")}[run]
    bound = {"method": (), "partial": (1,), "partial-of-method": (1, 2),
             "keywords": (1,)}[run]
    stamped = Stamped(kept, ("barrier", "native", "blocking", None, 0,
                             None, 0), rec)
    assert stamped() == 1
    assert stamped("a", "b") == 2
    assert stamped(*range(9)) == 3  # (more than the C twin's stack)
    kwargs = {"key": "kept"} if run == "keywords" else {}
    assert calls.seen == [(bound, kwargs), ((*bound, "a", "b"), kwargs),
                          ((*bound, *range(9)), kwargs)]
    assert rec.seq == 3


def released():
    view = memoryview(bytearray(8))
    view.release()
    return view


class Other:
    """An object neither twin knows: its likeness is ``other``'s."""


# (argument, what its likeness holds past its type, or None: it has none)
ARGUMENTS = [
    (0, 0), (-3, -3), ("x", "x"), (None, id(None)),
    (MPI.SUM, id(MPI.SUM)), (MPI.DOUBLE, id(MPI.DOUBLE)),
    (MPI.IN_PLACE, id(MPI.IN_PLACE)), (MPI.BOTTOM, id(MPI.BOTTOM)),
    (np.zeros((2, 3), "f4"), (np.dtype("f4"), (2, 3))),
    (np.zeros(3)[::2], (np.dtype("f8"), (2,))),
    (bytearray(5), (5,)), (b"abc", (3,)), (mmap.mmap(-1, 7), (7,)),
    (memoryview(bytearray(8))[2:], ("B", 6)),
    (memoryview(np.zeros(2)), ("d", 16)), (released(), None),
    (array.array("i", [1, 2]), ("i", 2)),
    (True, None), (1.5, None), (Other(), "other"),
]


def other(obj):
    return ("other",) if type(obj) is Other else None


@pytest.mark.parametrize("Keys", KEYS)
@pytest.mark.parametrize("arg, held", ARGUMENTS,
                         ids=[type(a).__name__ for a, _ in ARGUMENTS])
def test_a_key_holds_each_arguments_likeness(Keys, arg, held):
    keys = Keys(other)
    key = keys("Bcast", "auto", arg, 0)
    if held is None:
        assert key is None
        return
    assert key[:2] == ("Bcast", "auto") and key[3:] == (0, id(None),
                                                        id(None))
    part = key[2]
    if held == "other":
        assert part == ("other",)
    elif isinstance(held, tuple):
        assert part == (type(arg), *held)
    else:
        assert part == held


def specs_of(arg) -> list:
    """``arg`` as itself and in message specs, first and past first."""
    return [arg, [arg, 1, MPI.BYTE], (arg,), [bytearray(2), arg], []]


@pytest.mark.parametrize("Keys", KEYS)
def test_a_key_fits_exactly_the_calls_it_is_the_key_of(Keys):
    """``fits(key, *memo)`` is ``key == Keys(*memo)``, for every pair of
    arguments, alone and in specs (the C twin answers without making the
    call's key)."""
    keys = Keys(other)
    args = [spec for arg, _ in ARGUMENTS for spec in specs_of(arg)]
    args += [0.0, 1 << 70, -(1 << 70), id(MPI.SUM)]  # ints like ids
    for x in args:
        key = keys("Bcast", "auto", x, 0)
        for y in args:
            fits = keys.fits(key, "Bcast", "auto", y, 0)
            assert fits is (key is not None and
                            keys("Bcast", "auto", y, 0) == key), (x, y)
        assert not keys.fits(key, "Bcast", "ring", x, 0)
        assert not keys.fits(key, "Bcast", "auto", x, 1)


@pytest.mark.parametrize("Keys", KEYS)
def test_a_spec_is_keyed_item_by_item(Keys):
    keys = Keys(other)
    x = np.zeros(4, "i4")
    assert keys("Gatherv", "ring", [x, (4, 0), MPI.INT], None, 0) == (
        "Gatherv", "ring", (list, (np.ndarray, np.dtype("i4"), (4,)),
                            (tuple, 4, 0), id(MPI.INT)),
        id(None), 0, id(None))
    # a buffer past a spec's first item (counts in an array): no likeness
    assert keys("Gatherv", "ring", [x, np.array([4]), MPI.INT]) is None
    assert keys("Gatherv", "ring", (x, [Other()], MPI.INT)) is None
    assert keys("Bcast", "auto", [], 0)[2] == (list,)


@pytest.mark.parametrize("Keys", KEYS)
def test_both_twins_key_alike(Keys):
    """Every argument of ARGUMENTS, alone and in specs, keyed the same by
    the Python twin (the reference)."""
    mine, reference = Keys(other), likeness_module.Keys(other)
    for arg, _ in ARGUMENTS:
        for memo in (("Bcast", "auto", arg, 0), ("X", None, [arg, 1], arg),
                     ("Y", "r", (arg,), [0, (arg, 2)], arg, MPI.SUM)):
            assert mine(*memo) == reference(*memo), memo


def a_gate(Gate):
    calls = Calls()
    return Gate(calls.fallback, Declined, entry(calls, None))


def a_key(Keys):
    return Keys(other)


@pytest.mark.parametrize("made, twin", [
    *(pytest.param(a_gate, twin.values[0], id=f"gate-{twin.id}",
                   marks=twin.marks) for twin in GATES),
    *(pytest.param(a_key, twin.values[0], id=f"keys-{twin.id}",
                   marks=twin.marks) for twin in KEYS)])
def test_a_memo_is_three_to_six_positional_arguments(made, twin):
    """A gate and a key take a memo: (name, algorithm, buf, a, b, c)."""
    memo_of = made(twin)
    for args in (("Bcast", "auto"), ("Bcast",) + (0,) * 6):
        with pytest.raises(TypeError):
            memo_of(*args)
    with pytest.raises(TypeError):
        memo_of("Bcast", "auto", None, a=0)


@pytest.mark.parametrize("Keys", KEYS)
def test_a_closed_mmap_raises_as_len_does(Keys):
    m = mmap.mmap(-1, 4)
    m.close()
    with pytest.raises(ValueError):
        Keys(other)("Bcast", "auto", m, 0)


class Kept(likeness_module.Likeness):
    """An engine's likeness tables, with an (empty) replay table and a
    flight recorder, keeping ``call`` for ``memo`` as the engine does."""

    def __init__(self, memo, raises=None):
        super().__init__()
        self._replays = {}
        self.recorder = Recorder(size=4)
        self.note = ("bcast", "native", "blocking", None, 8, None, 0)
        self.made, self.raises = [], raises
        # the library's call on the memo's own objects (here: its buf, a)
        self.remember(memo, self.call, tuple(memo[2:4]))

    def call(self, *args):
        self.made.append(args)
        if self.raises is not None:
            raise self.raises


def a_likeness_gate(Gate, memo, raises=None):
    calls, kept = Calls(), Kept(memo, raises)
    return Gate(calls.fallback, Declined, entry(calls, None), kept), calls, \
        kept


@pytest.mark.parametrize("Gate", GATES)
def test_new_objects_alike_make_the_kept_call(Gate):
    g, calls, kept = a_likeness_gate(Gate, ("Bcast", "auto",
                                            np.zeros(4), 0, None, None))
    y = np.ones(4)
    assert g("Bcast", "auto", y, 0) is True
    assert kept.made == [(y, 0)] and calls.fallbacks == []
    assert kept.recorder.seq == 1 and kept.recorder.blocked == 0
    assert g("Bcast", "auto", np.ones(5), 0) is False  # another size
    assert g("Bcast", "auto", y, 1) is False  # another root
    assert len(kept.made) == 1 and calls.fallbacks == []


@pytest.mark.parametrize("Gate", GATES)
def test_a_kind_out_of_the_table_is_not_made(Gate):
    """The C gate tries the kind it made last first: one replaced in the
    table (kept again), given an agreement, or forgotten is not made
    again from there."""
    memo = ("Bcast", "auto", np.zeros(4), 0, None, None)
    g, _, kept = a_likeness_gate(Gate, memo)
    first = kept._kinds[kept._key(*memo)]
    assert g("Bcast", "auto", np.ones(4), 0) is True
    made = []
    kept.remember(memo, lambda *args: made.append(args), memo[2:4])
    y = np.ones(4)
    assert g("Bcast", "auto", y, 0) is True
    assert made == [(y, 0)] and len(kept.made) == 1  # the new kept call
    assert first.direct is None
    exchanges = []

    class Agreement:
        def exchange(self):
            exchanges.append(len(made))

    kept._kinds[kept._key(*memo)].agreed(Agreement())
    assert g("Bcast", "auto", y, 0) is True  # by Likeness.alike: exchanged
    assert exchanges == [1] and made == [(y, 0)] * 2
    kept.forget()
    assert g("Bcast", "auto", y, 0) is False  # none kept
    assert len(made) == 2


@pytest.mark.parametrize("Gate", GATES)
def test_kept_objects_and_items_go_to_the_fallback(Gate):
    x = np.zeros(4)
    g, calls, kept = a_likeness_gate(Gate, ("Bcast", "auto", x, 0, None,
                                            None))
    kept._replays[(id(x), id(0))] = "an entry"
    assert g("Bcast", "auto", x, 0) is False  # the fallback's answer
    y = np.ones(4)
    kept._replays[(id(y), id(0), (list, tuple))] = "an entry by items"
    spec = [y, 4, MPI.DOUBLE]
    assert g("Bcast", "auto", spec, 0) is False
    assert [memo[2] for memo in calls.fallbacks] == [x, spec]
    # a spec of other items: looked up by likeness (none kept: False)
    assert g("Bcast", "auto", [np.ones(4), 4, MPI.DOUBLE], 0) is False
    assert len(calls.fallbacks) == 2 and kept.made == []


@pytest.mark.parametrize("Gate", GATES)
def test_refused_arguments_are_undone_and_others_raise(Gate):
    memo = ("Bcast", "auto", np.zeros(4), 0, None, None)
    g, _, kept = a_likeness_gate(Gate, memo, raises=BufferError("no"))
    assert g("Bcast", "auto", np.ones(4), 0) is False
    assert len(kept.made) == 1
    assert (kept.recorder.seq, kept.recorder.blocked) == (0, 0)
    g, _, kept = a_likeness_gate(Gate, memo, raises=RuntimeError("x"))
    with pytest.raises(RuntimeError, match="x"):
        g("Bcast", "auto", np.ones(4), 0)
    assert kept.recorder.seq == 1


@pytest.mark.parametrize("Gate", GATES)
def test_overlapping_buffers_are_not_made(Gate):
    memo = ("Allreduce", "auto", np.zeros(4), np.ones(4), None, None)
    g, calls, kept = a_likeness_gate(Gate, memo)
    z = np.zeros(8)
    assert g("Allreduce", "auto", z[:4], z[2:6]) is False
    assert kept.made == [] and kept.recorder.seq == 0
    x, y = z[:4], z[4:]
    assert g("Allreduce", "auto", x, y) is True
    assert kept.made == [(x, y)] and calls.fallbacks == []


def python_frames(call) -> list[str]:
    """The Python functions ``call()`` runs (their qualified names)."""
    seen = []

    def profile(frame, event, arg):
        if event == "call":
            seen.append(frame.f_code.co_qualname)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen[1:]  # past call itself


@pytest.mark.skipif(C_GATE is None or C_KEYS is None or C_STAMPED is None
                    or pure(), reason="the Python twins run")
@pytest.mark.parametrize("form", ["same", "relisted", "tutorial", "new"])
def test_a_repeated_call_runs_no_python(form):
    """With the C twins, a replayed call (the same objects; a new list of
    the kept items, reused or made in every call) and one run by likeness
    (new objects alike) run no Python at all (the face method is a
    ``Face``), flight recorder stamps included."""
    comm = mpicoll.Comm(MPI.COMM_SELF)
    x, y, data = np.ones(4), np.zeros(4), bytearray(8)
    if form == "same":  # (one list over the loop, as mpi4py's demos)
        msg = [data, 8, MPI.BYTE]
        calls = (lambda: comm.Allreduce(x, y, MPI.SUM),
                 lambda: comm.Bcast(msg, 0))
    elif form == "relisted":  # (a demo's next size, of the same count)
        comm.Allreduce([x, 4, MPI.DOUBLE], [y, 4, MPI.DOUBLE], MPI.SUM)
        comm.Bcast([data, 8, MPI.BYTE], 0)
        s, r, msg = [x, 4, MPI.DOUBLE], [y, 4, MPI.DOUBLE], \
            [data, 8, MPI.BYTE]
        calls = (lambda: comm.Allreduce(s, r, MPI.SUM),
                 lambda: comm.Bcast(msg, 0))
    elif form == "tutorial":  # a new list in every call
        calls = (lambda: comm.Bcast([data, MPI.BYTE], 0),
                 lambda: comm.Allreduce([x, MPI.DOUBLE], [y, MPI.DOUBLE],
                                        MPI.SUM))
    else:
        calls = (lambda: comm.Allreduce(x[:4], y[:4], MPI.SUM),
                 lambda: comm.Bcast(memoryview(data)[:8], 0),
                 lambda: comm.Bcast([memoryview(data)[:8], 8, MPI.BYTE], 0))
    for call in calls:
        call()
        call()
        assert python_frames(call) == []


FACES = ["Allgather", "Allgatherv", "Allreduce", "Alltoall", "Alltoallv",
         "Barrier", "Bcast", "Exscan", "Gather", "Gatherv", "Reduce",
         "Reduce_scatter", "Reduce_scatter_block", "Scan", "Scatter",
         "Scatterv"]
c_faces = pytest.mark.skipif(gate_module.FastFace is None,
                             reason="the Python twins run")


@c_faces
def test_every_blocking_collective_is_a_face():
    faces = [name for name in dir(mpicoll.Comm)
             if type(getattr(mpicoll.Comm, name)) is gate_module.FastFace]
    assert faces == FACES
    bcast = mpicoll.Comm.Bcast
    assert bcast.__name__ == "Bcast" and bcast.__qualname__ == "Comm.Bcast"
    assert str(inspect.signature(bcast)) == \
        "(self, buf, root=0, *, algorithm='auto')"


X = "the buffer"  # stands for it in BINDINGS
BINDINGS = [  # (args, kwargs, refused)
    ((), {}, True), ((X,), {}, False), ((X, 0, 1), {}, True),
    ((X,), {"rot": 0}, True), ((X, 0), {"root": 0}, True),
    ((), {"buf": X, "algorithm": "auto"}, False),
    ((X, 0), {"algorithm": "auto", "extra": 1}, True)]


@pytest.mark.parametrize("args, kwargs, refused", BINDINGS)
def test_a_face_refuses_what_its_method_refuses(args, kwargs, refused):
    """Missing, extra, unknown and repeated arguments: the same error as
    the Python method's (which the Face calls for them)."""
    comm = mpicoll.Comm(MPI.COMM_SELF)
    x = np.zeros(4)
    args = tuple(x if a is X else a for a in args)
    kwargs = {k: x if v is X else v for k, v in kwargs.items()}
    function = getattr(mpicoll.Comm.Bcast, "__wrapped__",
                       mpicoll.Comm.Bcast)
    errors = []
    for call in (comm.Bcast, lambda *a, **k: function(comm, *a, **k)):
        for _ in range(2):  # (and once kept)
            try:
                call(*args, **kwargs)
                errors.append(None)
            except TypeError as e:
                errors.append(str(e))
    assert errors[:2] == errors[2:]
    assert (errors[0] is not None) is refused


def test_keywords_bind_as_positions():
    comm, raw = mpicoll.Comm(MPI.COMM_SELF), MPI.COMM_SELF
    x, y = np.arange(4.0), np.zeros(4)
    for _ in range(3):  # parsed, replayed, replayed
        y[:] = 0
        comm.Allreduce(recvbuf=y, sendbuf=x, op=MPI.MAX, algorithm="auto")
        assert (y == x).all()
        comm.Bcast(buf=x, root=0)
        comm.Reduce(x, y, root=0, op=MPI.SUM)
    z = np.zeros(4)
    raw.Reduce(x, z, root=0, op=MPI.SUM)
    assert (y == z).all()


def test_each_call_is_numbered_once():
    """A Face's miss calls the method, whose own offer the gate answers
    at once: a first call and a replay each take one number."""
    comm = mpicoll.Comm(MPI.COMM_SELF)
    x, y = np.ones(4), np.zeros(4)
    rec = comm._engine.recorder
    before = rec.seq
    for n in range(1, 4):
        comm.Allreduce(x, y, MPI.SUM)
        assert rec.seq == before + n


def test_a_method_that_does_more_keeps_its_python():
    from mpicoll.api.faces import memo_sources

    def offers(self, buf, root=0, *, algorithm="auto"):
        if not self._replayed("Bcast", algorithm, buf, root):
            pass

    def more(self, buf, root=0, *, algorithm="auto"):
        self._where("bcast")
        self._replayed("Bcast", algorithm, buf, root)

    def other_keyword(self, buf, *, algorithm="auto", stream=None):
        self._replayed("Bcast", algorithm, buf)

    def returns(self, buf, *, algorithm="auto"):
        return self._replayed("Bcast", algorithm, buf)

    assert memo_sources(offers)[1:] == (
        (gate_module.REQUIRED, 0), "auto",
        (("Bcast",), 2, 0, 1, (None,), (None,)))
    assert memo_sources(more) is None
    assert memo_sources(other_keyword) is None
    assert memo_sources(returns) is None



@pytest.mark.skipif(C_GATE is None, reason="built without a compiler")
def test_a_stale_build_is_not_used(monkeypatch):
    """A C module built for another TWIN_VERSION (sources newer than the
    build) leaves the Python twin in place."""
    from mpicoll.guard import twins

    built = importlib.import_module("mpicoll.engine._gate")
    monkeypatch.delenv(twins.PURE_VAR, raising=False)
    assert twins.accelerated("mpicoll.engine._gate", "Gate", None) is C_GATE
    monkeypatch.setattr(built, "TWIN_VERSION", twins.TWIN_VERSION + 1)
    assert twins.accelerated("mpicoll.engine._gate", "Gate", None) is None
