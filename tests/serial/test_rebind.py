"""Tier 1: a compiled plan bound again to new arrays
(:class:`mpicoll.engine.rebind.Rebinding`) is the plan compiled on them.

For every hand-built algorithm of every collective, every rank of 1 to 8
ranks (and roots 0 and p-1), in place where the collective has an aliased
layout: the plan compiled on arrays A, rebound to new arrays B, must send
and receive the same bytes (address and length) from the same peers and
run the same local steps on the same memory as the plan compiled on B
directly. This is what lets a blocking hand-built call on new arrays alike
to an earlier one skip binding (:mod:`mpicoll.engine.likeness`).
"""

from __future__ import annotations

import weakref

import numpy as np
import pytest

from mpicoll.coll import algorithms, lookup
from mpicoll.collectives import COLLECTIVES
from mpicoll.schedule.ops import builtin_op
from mpicoll.engine.executor import compile_plan
from mpicoll.schedule.layout import buffer_lengths, inplace_send
from mpicoll.device.memory import address
from mpicoll.schedule.bind import Step, bind
from mpicoll.engine.rebind import Rebinding

SUM = builtin_op("sum")
HAND_BUILT = [(c, name) for c in COLLECTIVES for name in algorithms(c)
              if name != "native"]


def count_of(collective: str, p: int):
    if COLLECTIVES[collective].counts == "matrix":
        return tuple(tuple((i + 2 * j) % 3 for j in range(p))
                     for i in range(p))
    if COLLECTIVES[collective].counts == "per_rank":
        return tuple(range(1, p + 1))
    return 7


def arrays(collective, rank, p, count, root, inplace, tmp):
    n_send, n_recv = buffer_lengths(collective, rank, p, count, root)
    inplace = inplace and (rank == root or
                           not COLLECTIVES[collective].inplace_root_only)
    recv = np.arange(n_recv, dtype=np.int64)
    send = inplace_send(collective, recv, rank, p, count) if inplace else \
        np.arange(n_send, dtype=np.int64) + 100
    return {"send": send, "recv": recv,
            "tmp": np.zeros(tmp, np.int64), "sync": np.empty(0, np.uint8)}


def where(x) -> tuple:
    """A message's or an array argument's memory: (address, bytes)."""
    if isinstance(x, np.ndarray):
        return address(x), x.nbytes
    return x.address, len(x)


def same_steps(got: tuple[Step, ...], want: tuple[Step, ...]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for mine, theirs in ((g.sends, w.sends), (g.recvs, w.recvs)):
            assert [(where(spec[0]), spec[1], peer)
                    for spec, peer in mine] == \
                [(where(spec[0]), spec[1], peer) for spec, peer in theirs]
        assert len(g.local) == len(w.local)
        for f, h in zip(g.local, w.local):
            assert f.func is h.func
            assert [where(a) if isinstance(a, np.ndarray) else a
                    for a in f.args] == \
                [where(a) if isinstance(a, np.ndarray) else a
                 for a in h.args]


@pytest.mark.parametrize("collective,name", HAND_BUILT)
def test_rebound_plan_is_the_plan_compiled_on_the_new_arrays(collective,
                                                              name):
    alg = lookup(collective, name)
    row = COLLECTIVES[collective]
    for p in range(1, 9):
        count = count_of(collective, p)
        for root in sorted({0, p - 1} if row.rooted else {0}):
            for inplace in (False, True) if row.inplace == "aliased" and \
                    row.counts != "matrix" else (False,):
                for rank in range(p):
                    case = f"{collective}/{name} p={p} root={root} " \
                           f"rank={rank} inplace={inplace}"
                    s = alg.schedule(rank, p, count, root=root)
                    first = arrays(collective, rank, p, count, root,
                                   inplace, s.tmp)
                    op = SUM if row.reducing else None
                    rebinding = Rebinding(compile_plan(bind(s, first, op)),
                                          first["send"], first["recv"])
                    new = arrays(collective, rank, p, count, root, inplace,
                                 0)
                    new["tmp"], new["sync"] = first["tmp"], first["sync"]
                    try:
                        same_steps(rebinding.bind(new["send"], new["recv"]),
                                   compile_plan(bind(s, new, op)))
                    except AssertionError as e:
                        raise AssertionError(f"{case}: {e}") from e


def test_a_plan_that_cannot_be_followed_is_refused():
    s = np.zeros(4)
    step = Step((), (), (lambda: None,))
    with pytest.raises(ValueError, match="not a partial"):
        Rebinding((step,), s, s)


@pytest.mark.parametrize("collective,name", HAND_BUILT)
def test_a_rebinding_holds_no_reference_to_its_arrays(collective, name):
    """The arrays a rebinding was made on are freed when the caller drops
    them (mpicoll.engine.likeness keeps rebindings, not the arrays of the calls it
    ran by their likeness)."""
    alg = lookup(collective, name)
    row = COLLECTIVES[collective]
    p, rank, count = 4, 1, count_of(collective, 4)
    s = alg.schedule(rank, p, count, root=0)
    first = arrays(collective, rank, p, count, 0, False, s.tmp)
    rebinding = Rebinding(
        compile_plan(bind(s, first, SUM if row.reducing else None)),
        first["send"], first["recv"])
    held = [weakref.ref(first.pop(key)) for key in ("send", "recv")]
    assert [ref() for ref in held] == [None, None], rebinding
