"""Tier 2, with PyTorch (skipped otherwise), at 2 and 3 ranks only: the
``"mpicoll"`` torch.distributed backend and mpicoll's DDP hooks
(``mpicoll.torch``) against gloo on the same ranks.

There is one default group at a time, so the module runs in two phases
(the ``results`` fixture): first gloo is the default group (on 127.0.0.1,
a port rank 0 found free), then, after it is destroyed, mpicoll's
(``init_method="mpicoll://"``). Each phase runs every *scenario* once:
the same torch.distributed calls on the default group (all_reduce,
broadcast, reduce, all_gather, all_gather_into_tensor, reduce_scatter
and reduce_scatter_tensor, all_to_all and all_to_all_single with splits,
gather, scatter, barrier, send/recv,
batch_isend_irecv, new_group, a 2-D DeviceMesh, an all_reduce left in
flight, bad arguments) and
trainings of ``examples/ddp.py``'s MLP (DDP with no hook, with mpicoll's hooks, with
torch's fp16 hook; FSDP's ``fully_shard``), on float64 data whose sums
are exact. The tests compare the two phases' results: equal tensors
(``torch.equal``), and for a call gloo refuses, mpicoll's exception an
instance of gloo's type (gloo's generic RuntimeError: any
``mpicoll.MpicollError``). While mpicoll's phase runs, Python's socket
calls raise and no socket may appear among the process's descriptors.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import pathlib
import socket

import pytest
from mpi4py import MPI

import mpicoll

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
WORLD = MPI.COMM_WORLD
TIMEOUT = 60  # seconds: gloo's timeout (mpicoll's is its default deadline)
# Training steps compared. The first step's gradients are small multiples
# of the world size with few bits, so any order of summing them is exact;
# later steps' have more bits than a double holds, and a sum of three may
# round differently in another order (gloo's ring against MPI's). A sum
# of two rounds once whatever the order, so 2 ranks compare 3 steps.
STEPS = 3 if WORLD.size == 2 else 1

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.interface,
    pytest.mark.timeout(300),
    pytest.mark.skipif(WORLD.size not in (2, 3),
                       reason="the torch backend is compared at 2 and 3 "
                              "ranks only"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "ddp.py"


@functools.cache
def example():
    """``examples/ddp.py`` as a module (it imports mpicoll.torch)."""
    spec = importlib.util.spec_from_file_location("ddp_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------- scenarios
# Each takes (rank, size) and returns what to compare: a list of tensors
# and plain values, made with torch.distributed's functions on the default
# group.

def ramp(rank, n=6, dtype=torch.float32):
    return torch.arange(n, dtype=dtype) + 10 * rank


def all_reduce(r, n):
    out = []
    for op, dtype in (("SUM", torch.float64), ("PRODUCT", torch.int64),
                      ("MIN", torch.float32), ("MAX", torch.int32),
                      ("BAND", torch.uint8), ("BOR", torch.int64),
                      ("BXOR", torch.int8), ("AVG", torch.float32),
                      ("AVG", torch.float16)):
        t = ramp(r, 7, dtype)
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        out.append(t)
    t = ramp(r)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    out += [t, work.is_completed(), work.get_future().wait()[0]]
    many = [ramp(r), ramp(r + 1, 3)]
    dist.all_reduce_coalesced(many)
    return out + many


def broadcast(r, n):
    out = []
    for src in range(n):
        t = ramp(r, 5)
        dist.broadcast(t, src=src)
        out.append(t)
    return out


def reduce(r, n):
    t = ramp(r)
    dist.reduce(t, dst=n - 1, op=dist.ReduceOp.MAX)
    return [t] if r == n - 1 else []  # elsewhere: unspecified (gloo's
    # scratch)


def all_gather(r, n):
    out = [torch.empty(4) for _ in range(n)]
    dist.all_gather(out, ramp(r, 4))
    whole = torch.empty(3 * n, dtype=torch.int64)
    dist.all_gather_into_tensor(whole, ramp(r, 3, torch.int64))
    return [*out, whole]


def reduce_scatter(r, n):
    block = torch.empty(2)
    dist.reduce_scatter_tensor(block, ramp(r, 2 * n))
    listed = torch.empty(3)
    dist.reduce_scatter(listed, [ramp(r, 3) + q for q in range(n)])
    return [block, listed]


def all_to_all(r, n):
    equal = torch.empty(2 * n)
    dist.all_to_all_single(equal, ramp(r, 2 * n))
    # rank r sends r+q+1 rows of 2 to rank q and receives as many from q
    splits = [r + q + 1 for q in range(n)]
    x = ramp(r, 2 * sum(splits)).reshape(-1, 2)
    y = torch.empty_like(x)
    dist.all_to_all_single(y, x, output_split_sizes=splits,
                           input_split_sizes=splits)
    listed = [torch.empty(2) for _ in range(n)]
    dist.all_to_all(listed, [ramp(r, 2) + q for q in range(n)])
    return [equal, y, *listed]


def gather_scatter(r, n):
    root = n - 1
    got = [torch.empty(3) for _ in range(n)] if r == root else None
    dist.gather(ramp(r, 3), got, dst=root)
    into = torch.empty(3)
    dist.scatter(into, [ramp(q, 3) for q in range(n)] if r == 0 else None,
                 src=0)
    return (got or []) + [into]


def barrier(r, n):
    return [dist.barrier(), dist.barrier(async_op=True).wait()]


def point_to_point(r, n):
    right, left = (r + 1) % n, (r - 1) % n
    into = torch.empty(4)
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, ramp(r, 4), right),
                                    dist.P2POp(dist.irecv, into, left)])
    for w in works:
        w.wait()
    out = [into, [w.is_completed() for w in works]]
    if r == 0:
        dist.send(ramp(r, 2), dst=1, tag=7)
        any_source = torch.empty(3)
        out += [dist.recv(any_source), any_source]
    elif r == 1:
        t = torch.empty(2)
        dist.recv(t, src=0, tag=7)
        dist.send(ramp(r, 3), dst=0)
        out.append(t)
    return out


def sub_groups(r, n):
    first_two = dist.new_group([0, 1])
    t = ramp(r)
    dist.all_reduce(t, group=first_two)  # a no-op on rank 2
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (n, 1), mesh_dim_names=("dp", "tp"))
    u, v = ramp(r), ramp(r)
    dist.all_reduce(u, group=mesh.get_group("dp"))
    dist.all_reduce(v, group=mesh.get_group("tp"))  # a group of one rank
    return [t, u, v, mesh.get_local_rank("dp"), mesh.get_local_rank("tp")]


def bad_arguments(r, n):
    """Each bad call's exception (the same mistake on every rank; gloo
    logs a "Check failed" line for the reduce_scatter_tensor one, raises
    and carries on). Not here: all_to_all_single with splits that do not
    sum to the input, and AVG on integers, after which gloo's group at 3
    ranks fails its next call now and then (its error arrives from its
    worker thread)."""
    calls = {
        "all_gather_into_tensor output of the wrong size": lambda:
            dist.all_gather_into_tensor(torch.empty(2 * n + 1),
                                        torch.empty(2)),
        "all_gather outputs of another dtype": lambda:
            dist.all_gather([torch.empty(2, dtype=torch.int64)] * n,
                            torch.empty(2)),
        "reduce_scatter_tensor input of the wrong size": lambda:
            dist.reduce_scatter_tensor(torch.empty(2), torch.empty(2 * n - 1)),
        "all_reduce BAND on floats": lambda:
            dist.all_reduce(torch.ones(2), op=dist.ReduceOp.BAND),
        "broadcast from a rank outside the group": lambda:
            dist.broadcast(torch.ones(2), src=n),
        "send to itself": lambda: dist.send(torch.ones(1), dst=r),
    }
    out = []
    for what, call in calls.items():
        try:
            call()
            out.append((what, None))
        except Exception as exc:  # compared with the other phase's
            out.append((what, exc))
    return out


def overlap(r, n):
    """A large ``async_op=True`` all_reduce returns before it is complete:
    rank 1 makes its own only once rank 0 has looked (a message on
    COMM_WORLD), so a backend that completed the call inside it would
    never get that far (the module's timeout ends the test)."""
    t = torch.ones(1 << 16) * (r + 1)  # 256 KiB: run on the group's thread
    note = [bytearray(1), MPI.BYTE]
    if r == 1:
        WORLD.Recv(note, source=0, tag=42)
    work = dist.all_reduce(t, async_op=True)
    looked = work.is_completed()
    if r == 0:
        WORLD.Send(note, dest=1, tag=42)
    work.wait()
    return [t, looked if r == 0 else None, work.is_completed()]


def ddp_trainings(r, n):
    """Parameters after :data:`STEPS` steps of the example's MLP under DDP:
    no hook, mpicoll's allreduce hook, and at 2 ranks torch's and mpicoll's
    fp16 hooks (1 step; at 3, the hooks' division by 3 in float16 rounds,
    and the sum of the rounded values depends on the order)."""
    ex = example()
    out = {}
    hooks = [("none", STEPS), ("allreduce", STEPS)]
    if n == 2:
        hooks += [("fp16", 1), ("torch-fp16", 1)]
    for name, steps in hooks:
        ddp = torch.nn.parallel.DistributedDataParallel(ex.model(width=8))
        if ex.HOOKS[name] is not None:
            ddp.register_comm_hook(None, ex.HOOKS[name])
        out[name] = ex.train(ddp, steps, batch=4)
    return out


def fsdp_training(r, n):
    """Parameters after :data:`STEPS` steps of the example's MLP under
    FSDP2's ``fully_shard`` (each Linear a unit), gathered whole."""
    from torch.distributed.fsdp import fully_shard
    ex = example()
    net = ex.model(width=8)
    for layer in net:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(net)
    g = torch.Generator().manual_seed(r)
    optimizer = torch.optim.SGD(net.parameters(), lr=ex.LR)
    for _ in range(STEPS):
        x = torch.randint(-2, 3, (4, 6), generator=g).double()
        optimizer.zero_grad()
        (net(x).square().sum() * (n / 2)).backward()
        optimizer.step()
    return [p.full_tensor() for p in net.parameters()]


# bad_arguments last: a group that refused a call is left to be destroyed
SCENARIOS = [all_reduce, broadcast, reduce, all_gather, reduce_scatter,
             all_to_all, gather_scatter, barrier, point_to_point, sub_groups,
             overlap, ddp_trainings, fsdp_training, bad_arguments]


# ---------------------------------------------------------------- phases

def sockets() -> set:
    """The inodes of this process's open sockets."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:"):
                found.add(target)
    return found


@contextlib.contextmanager
def no_python_sockets():
    """Python's socket constructors raise inside."""
    names = ("socket", "create_connection", "create_server", "socketpair")
    saved = {name: getattr(socket, name) for name in names}

    def refuse(*args, **kwargs):
        raise AssertionError("the mpicoll backend opened a socket")

    for name in names:
        setattr(socket, name, refuse)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(socket, name, fn)


def run_all() -> dict:
    """Every scenario's result (or the exception it raised)."""
    r, n = dist.get_rank(), dist.get_world_size()
    out = {}
    for scenario in SCENARIOS:
        try:
            out[scenario.__name__] = scenario(r, n)
        except Exception as exc:  # reported by the scenario's test
            out[scenario.__name__] = exc
    return out


@pytest.fixture(scope="module")
def results():
    """``{"gloo": ..., "mpicoll": ...}``: each phase's results, and the
    sockets that appeared during mpicoll's phase."""
    ex = example()
    ex.init("gloo", TIMEOUT)
    try:
        gloo = run_all()
    finally:
        dist.destroy_process_group()
    before = sockets()
    with no_python_sockets():
        ex.init("mpicoll", TIMEOUT)
        try:
            ours = run_all()
            backend = dist.get_backend()
            world = dist.group.WORLD
        finally:
            dist.destroy_process_group()
    return {"gloo": gloo, "mpicoll": ours, "backend": backend,
            "new sockets": sockets() - before,
            "freed": world.pg.comm == MPI.COMM_NULL}


def same(a, b) -> list[str]:
    """How ``a`` (gloo's) and ``b`` (mpicoll's) differ, in words."""
    if isinstance(a, dict):
        return [f"{k}: {d}" for k in a for d in same(a[k], b[k])]
    if isinstance(a, (list, tuple)):
        if not isinstance(b, (list, tuple)) or len(a) != len(b):
            return [f"{a!r} != {b!r}"]
        return [d for x, y in zip(a, b) for d in same(x, y)]
    if isinstance(a, BaseException) or isinstance(b, BaseException):
        if isinstance(a, BaseException) and isinstance(b, BaseException):
            if isinstance(b, type(a)) or (
                    type(a) in (RuntimeError, dist.DistBackendError)
                    and isinstance(b, mpicoll.MpicollError)):
                return []
        return [f"gloo {a!r}, mpicoll {b!r}"]
    if isinstance(a, torch.Tensor):
        if isinstance(b, torch.Tensor) and torch.equal(a, b) and \
                a.dtype == b.dtype:
            return []
        return [f"gloo {a}, mpicoll {b}"]
    return [] if a == b else [f"gloo {a!r}, mpicoll {b!r}"]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_same_as_gloo(results, scenario):
    name = scenario.__name__
    assert not isinstance(results["gloo"][name], Exception), \
        results["gloo"][name]
    differences = same(results["gloo"][name], results["mpicoll"][name])
    everyone = WORLD.allgather(differences)
    assert not any(everyone), everyone


def test_default_group_is_mpicoll_and_opens_no_socket(results):
    assert results["backend"] == "mpicoll"
    assert not results["new sockets"]


def test_destroy_frees_the_communicator(results):
    assert results["freed"]


def test_ddp_hooks_match_gloo_without_hook(results):
    """mpicoll's allreduce hook on gloo gives DDP's own result."""
    ddp = results["gloo"]["ddp_trainings"]
    assert not same(ddp["none"], ddp["allreduce"])
    if WORLD.size == 2:
        assert not same(ddp["torch-fp16"], ddp["fp16"])


def test_check_mode_refuses_a_mismatch_on_every_rank(results):
    """Under check mode (``MPICOLL_CHECK=1``: the suite's 3 ranks), an
    all_reduce whose size differs between ranks raises on every rank
    instead of hanging: in the caller's thread for a small call, at
    ``wait`` for one run on the group's thread; the group goes on."""
    if not mpicoll.Comm(WORLD)._settings.guard.check:
        pytest.skip("check mode is off (MPICOLL_CHECK=1 turns it on)")
    example().init("mpicoll", TIMEOUT)
    try:
        r = WORLD.rank
        with pytest.raises(mpicoll.CollectiveCheckError):
            dist.all_reduce(torch.ones(2 + r))
        work = dist.all_reduce(torch.ones((1 << 15) + r), async_op=True)
        with pytest.raises(mpicoll.CollectiveCheckError):
            work.wait()
        t = torch.ones(3)
        dist.all_reduce(t)
        assert torch.equal(t, torch.full((3,), float(WORLD.size)))
    finally:
        dist.destroy_process_group()
