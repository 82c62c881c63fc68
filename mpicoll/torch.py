"""``import mpicoll.torch``: the ``"mpicoll"`` torch.distributed backend and
the ``mpicoll://`` rendezvous, registered on import
(:mod:`mpicoll.parallel.torch_backend`), and DDP's communication hooks
(:mod:`mpicoll.parallel.ddp_hooks`). Needs PyTorch."""

from mpicoll.parallel.ddp_hooks import allreduce_hook, fp16_compress_hook
from mpicoll.parallel.torch_backend import MpicollBackend, register

register()

__all__ = ["MpicollBackend", "allreduce_hook", "fp16_compress_hook"]
