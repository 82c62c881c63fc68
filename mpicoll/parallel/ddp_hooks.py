"""DDP communication hooks that run DDP's gradient buckets through mpicoll,
for a model whose process group stays gloo's or NCCL's (needs PyTorch).

    ddp.register_comm_hook(None, mpicoll.torch.allreduce_hook)
    ddp.register_comm_hook(pg, mpicoll.torch.fp16_compress_hook)

``state`` is the :class:`mpicoll.ProcessGroup` to reduce over (None: one
on ``MPI.COMM_WORLD``, made on first use); its ranks must be the DDP
group's, in the same order. Each hook averages as torch's own hooks do
(divide by the group's size, then sum) and returns the future of its
call, run in the background on a thread of the group's own
(:class:`~mpicoll.parallel.torch_worker.Worker`, as the ``"mpicoll"``
backend's calls are), so that it overlaps the rest of the backward pass;
the future holds the bucket. DDP reads a hook's return annotation: it
must be ``torch.futures.Future[torch.Tensor]`` itself, not a string (so
no ``from __future__ import annotations`` here).
"""

import functools
import weakref
from typing import Optional

import torch
from mpi4py import MPI

from mpicoll.api.process_group import ProcessGroup
from mpicoll.parallel.torch_worker import Worker


@functools.cache
def _world() -> ProcessGroup:
    return ProcessGroup(MPI.COMM_WORLD)


_WORKERS = weakref.WeakKeyDictionary()  # ProcessGroup -> its Worker


def _worker(pg: ProcessGroup) -> Worker:
    """The thread ``pg``'s bucket calls run on, made on first use and
    stopped once ``pg`` is gone."""
    worker = _WORKERS.get(pg)
    if worker is None:
        worker = _WORKERS[pg] = Worker()
        weakref.finalize(pg, worker.stop)
    return worker


def allreduce_hook(state: Optional[ProcessGroup],
                   bucket) -> torch.futures.Future[torch.Tensor]:
    """The bucket divided by the group's size, then summed in place by one
    :meth:`mpicoll.ProcessGroup.all_reduce` (no copy: the bucket's own
    memory is the message)."""
    pg = state or _world()
    buffer = bucket.buffer()

    def call():
        buffer.div_(pg.size())
        pg.all_reduce(buffer)
    return _worker(pg).run(call, buffer, [buffer]).get_future()


def fp16_compress_hook(state: Optional[ProcessGroup],
                       bucket) -> torch.futures.Future[torch.Tensor]:
    """As torch's ``fp16_compress_hook``: the bucket cast to float16 (one
    copy, half the bytes on the wire), divided by the group's size, summed,
    and cast back into the bucket (a second copy)."""
    pg = state or _world()
    buffer = bucket.buffer()

    def call():
        compressed = buffer.to(torch.float16).div_(pg.size())
        pg.all_reduce(compressed)
        buffer.copy_(compressed)
    return _worker(pg).run(call, buffer, [buffer]).get_future()
