"""DDP communication hooks that run DDP's gradient buckets through mpicoll,
for a model whose process group stays gloo's or NCCL's (needs PyTorch).

    ddp.register_comm_hook(None, mpicoll.torch.allreduce_hook)
    ddp.register_comm_hook(pg, mpicoll.torch.fp16_compress_hook)

``state`` is the :class:`mpicoll.ProcessGroup` to reduce over (None: one
on ``MPI.COMM_WORLD``, made on first use); its ranks must be the DDP
group's, in the same order. Each hook averages as torch's own hooks do
(divide by the group's size, then sum) and returns a completed
``torch.futures.Future`` holding the bucket: the allreduce is done when the
hook returns, so it does not overlap the rest of the backward pass. DDP
reads a hook's return annotation: it must be
``torch.futures.Future[torch.Tensor]`` itself, not a string (so no
``from __future__ import annotations`` here).
"""

import functools
from typing import Optional

import torch
from mpi4py import MPI

from mpicoll.api.process_group import ProcessGroup


@functools.cache
def _world() -> ProcessGroup:
    return ProcessGroup(MPI.COMM_WORLD)


def _done(tensor) -> torch.futures.Future[torch.Tensor]:
    future = torch.futures.Future()
    future.set_result(tensor)
    return future


def allreduce_hook(state: Optional[ProcessGroup],
                   bucket) -> torch.futures.Future[torch.Tensor]:
    """The bucket divided by the group's size, then summed in place by one
    :meth:`mpicoll.ProcessGroup.all_reduce` (no copy: the bucket's own
    memory is the message)."""
    pg = state or _world()
    buffer = bucket.buffer()
    buffer.div_(pg.size())
    pg.all_reduce(buffer)
    return _done(buffer)


def fp16_compress_hook(state: Optional[ProcessGroup],
                       bucket) -> torch.futures.Future[torch.Tensor]:
    """As torch's ``fp16_compress_hook``: the bucket cast to float16 (one
    copy, half the bytes on the wire), divided by the group's size, summed,
    and cast back into the bucket (a second copy)."""
    pg = state or _world()
    buffer = bucket.buffer()
    compressed = buffer.to(torch.float16).div_(pg.size())
    pg.all_reduce(compressed)
    buffer.copy_(compressed)
    return _done(buffer)
