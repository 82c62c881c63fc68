"""mpicoll: collective communication on MPI, native and hand-built.

    from mpi4py import MPI
    import mpicoll

    comm = mpicoll.Comm(MPI.COMM_WORLD)      # an MPI.Intracomm, same handle
    comm.Allreduce(MPI.IN_PLACE, x, MPI.SUM, algorithm="ring")   # mpi4py face
    pg = mpicoll.ProcessGroup(comm)
    pg.all_reduce(x, op=mpicoll.ReduceOp.SUM, algorithm="auto")  # torch face
    pg.all_reduce(cupy_x, async_op=True).wait()       # CuPy, stream-ordered
    mpicoll.algorithms("allreduce")   # ['native', 'recursive_doubling', ...]

Every public name loads on first use (PEP 562): ``import mpicoll`` costs
next to nothing, and ``mpicoll.Comm`` loads the faces and the engine, not
the cost model, the benchmark or the simulators.
"""

from importlib import import_module

__version__ = "0.1.0"

#: Each public name and the module that defines it.
_PUBLIC = {
    "AlgorithmError": "mpicoll.errors",
    "BufferSpecError": "mpicoll.errors",
    "CollectiveCheckError": "mpicoll.errors",
    "CollectiveTimeoutError": "mpicoll.errors",
    "Comm": "mpicoll.api.comm",
    "ConstraintError": "mpicoll.errors",
    "GradientBucketer": "mpicoll.parallel.bucketing",
    "InvalidArgumentError": "mpicoll.errors",
    "Mesh": "mpicoll.parallel.mesh",
    "MpicollError": "mpicoll.errors",
    "Op": "mpicoll.schedule.ops",
    "OpTypeError": "mpicoll.errors",
    "P2POp": "mpicoll.api.process_group",
    "Persistent": "mpicoll.engine.persistent",
    "ProcessGroup": "mpicoll.api.process_group",
    "ReduceOp": "mpicoll.api.process_group",
    "UnknownAlgorithmError": "mpicoll.errors",
    "Work": "mpicoll.engine.work",
    "algorithms": "mpicoll.coll.registry",
    "cuda_aware": "mpicoll.device.cuda",
    "dump_trace": "mpicoll.guard.dump",
    "set_explain": "mpicoll.select.choices",
    "startall": "mpicoll.engine.persistent",
    "testall": "mpicoll.engine.work",
    "waitall": "mpicoll.engine.work",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'mpicoll' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__():
    return sorted([*globals(), *_PUBLIC])
