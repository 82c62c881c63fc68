"""The data simulator: a whole collective, every rank in one process, no MPI.

    >>> import numpy as np
    >>> from mpicoll.simulate import simulate
    >>> xs = [np.arange(5) * (r + 1) for r in range(3)]
    >>> [list(y) for y in simulate("allreduce", "ring", xs)]
    [[0, 6, 12, 18, 24], [0, 6, 12, 18, 24], [0, 6, 12, 18, 24]]

Buffers are laid out exactly as the MPI layer lays them out
(:mod:`mpicoll.schedule.layout`), including in-place aliasing, and output and
scratch start out as garbage (``None`` for object arrays, so a schedule that
reads a value before writing it fails loudly). Object arrays of ``str`` with
``op=STR_CONCAT`` record the exact order of every reduction.
"""

from __future__ import annotations

import numpy as np

from mpicoll.coll import lookup
from mpicoll.collectives import COLLECTIVES
from mpicoll.schedule.ops import Op, builtin_op
from mpicoll.schedule.chunk import split_messages
from mpicoll.schedule.layout import buffer_lengths, inplace_recv, inplace_send
from mpicoll.schedule.bind import bind
from mpicoll.sim.matching import run_bound

#: Associative, not commutative: ``a (op) b`` is string concatenation on
#: object arrays, so a result spells out the order it was folded in.
STR_CONCAT = Op("str_concat", lambda a, b, dst: np.add(a, b, out=dst),
                commutative=False)


_NOISE = np.random.default_rng(0).integers(0, 256, 1 << 16, dtype=np.uint8)


def garbage(n: int, dtype) -> np.ndarray:
    """An array whose contents no correct schedule ever reads."""
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        return np.full(n, None, dtype=object)
    return np.resize(_NOISE, n * dtype.itemsize).view(dtype)


def simulate(collective: str, algorithm: str, inputs, *, count=None,
             op="sum", root: int = 0, inplace: bool = False,
             max_message: int | None = None, nodes=None,
             **params) -> list[np.ndarray]:
    """Run ``algorithm`` of ``collective`` on ``len(inputs)`` simulated ranks.

    ``inputs[r]`` is rank r's send buffer (for bcast: its buffer, read at the
    root only; for scatter: empty except at the root). ``count`` defaults to
    what the inputs imply: per-rank counts split the input evenly where it
    holds every rank's block (``reduce_scatter``, ``scatterv``) and must be
    passed otherwise (``allgatherv``, ``gatherv``; for ``alltoallv``: the
    matrix). ``inplace`` lays buffers out as an in-place call does
    (:mod:`mpicoll.schedule.layout`; at the root only for reduce, gather,
    scatter, gatherv and scatterv). Returns every rank's receive
    buffer (empty where the rank receives nothing). ``max_message``
    (elements) splits every longer message into chunks first, as the MPI
    layer does for messages over MPI's count limit
    (:func:`mpicoll.schedule.chunk.split_messages`); a tiny value exercises
    that path on small data. ``nodes`` gives the node of every rank
    (``(0, 0, 1, 1, 2)``: five ranks in nodes of two; default one node)
    to topology-aware algorithms such as ``"hierarchical"``, so their
    schedules can be studied for machines one does not have; the other
    algorithms ignore it.
    """
    size = len(inputs)
    alg = lookup(collective, algorithm)
    if alg is None or alg.native:
        raise KeyError(f"no hand-built {collective} algorithm {algorithm!r}")
    if isinstance(op, str):
        name, op = op, builtin_op(op)
        if op is None:
            raise KeyError(f"unknown operation {name!r}")
    row = COLLECTIVES[collective]
    if count is None:
        count = _implied_count(collective, size, len(inputs[root]))
    dtype = inputs[0].dtype
    if row.reducing and not op.supports(dtype):
        raise TypeError(f"operation {op.name!r} is not defined for {dtype}")
    bound, outputs = [], []
    for rank in range(size):
        n_send, n_recv = buffer_lengths(collective, rank, size, count, root)
        recv = garbage(n_recv, dtype)
        aliased = inplace and (rank == root or not row.inplace_root_only)
        if row.single_buffer:
            if rank == root:
                recv[...] = inputs[rank]
            send = recv[:0]
        elif aliased and row.inplace == "root_keeps":
            send = np.array(inputs[rank], copy=True)
            recv = inplace_recv(collective, send, rank, count)
        elif aliased:
            send = inplace_send(collective, recv, rank, size, count)
            send[...] = inputs[rank]
        else:
            send = np.array(inputs[rank], copy=True)
        if send.shape[0] != n_send:
            raise ValueError(f"rank {rank}: input has {send.shape[0]} "
                             f"elements, {collective} needs {n_send}")
        schedule = alg.schedule(rank, size, count, root=root,
                                commutative=op is None or op.commutative,
                                nodes=nodes, **params)
        if max_message is not None:
            schedule = split_messages(schedule, max_message)
        arrays = {"send": send, "recv": recv,
                  "tmp": garbage(schedule.tmp, dtype),
                  "sync": np.empty(0, dtype)}
        bound.append(bind(schedule, arrays, op))
        outputs.append(recv)
    run_bound(bound)
    return outputs


def _implied_count(collective: str, size: int, n_send: int):
    """``count`` from the length of the root's (or rank 0's) input: all of
    it, or its even split where it holds every rank's block."""
    row = COLLECTIVES[collective]
    split = row.all_blocks in ("send", "both")
    if row.counts == "matrix" or (row.counts == "per_rank" and not split):
        raise ValueError(f"pass count= (the per-rank counts) for {collective}")
    if not split:
        return n_send
    if n_send % size:
        raise ValueError(f"pass count= for uneven {collective}")
    block = n_send // size
    return (block,) * size if row.counts == "per_rank" else block

