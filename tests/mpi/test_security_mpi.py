"""Tier 2: security, at every rank count.

(a) No pickle on library data paths. Unpickling bytes from another
process runs whatever they say, so mpicoll exchanges its own metadata
(agreed counts, argument problems, node maps, mesh and bucket layouts,
host names) as JSON in buffer collectives (:mod:`mpicoll.guard.exchange`),
never with mpi4py's pickling lowercase calls. While every library path
that communicates metadata runs, pickling and unpickling raise: mpi4py's
``MPI.pickle`` (and ``mpi4py.util.pkl5``'s) are re-initialised with
functions that raise, and ``pickle.loads``, ``pickle.load`` and
``pickle.Unpickler`` are replaced. Afterwards mpi4py's lowercase calls,
which a user makes on purpose, work again.

(b) The library opens no sockets: the same paths run with Python's
``socket.socket``, ``socket.create_connection``, ``socket.create_server``,
``socket.socketpair``, ``socket.fromfd`` and name lookups
(``socket.getaddrinfo``, ``socket.gethostbyname``) raising. Only
Python-level sockets are checked: the MPI library moves its messages
over its own C-level transports (shared memory, its network module, the
process manager's connection), which are not the library's doing and not
visible here.

(c) The benchmark writes only the files the user names: ``--json``,
``--csv`` and ``--emit-rules`` into one directory, with the working
directory, ``TMPDIR`` and ``HOME`` pointed at empty directories; after the
run only the named files exist, on rank 0, and the other directories are
still empty on every rank.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import tempfile

import numpy as np
import pytest
from mpi4py import MPI
from mpi4py.util import pkl5

import mpicoll
import mpicoll.bench
import mpicoll.guard.launch
from everycall import mpi4py_args, nonblocking, torch_call
from mpicoll import ProcessGroup as PG
from mpicoll.collectives import COLLECTIVES

pytestmark = [pytest.mark.mpi, pytest.mark.interface]
WORLD = MPI.COMM_WORLD


class Refused(AssertionError):
    """Raised by the patched pickle and socket functions."""


def _refuse(what):
    def refuse(*args, **kwargs):
        raise Refused(f"rank {WORLD.rank}: library code called {what}")
    return refuse


class _RefusedUnpickler:
    def __init__(self, *args, **kwargs):
        raise Refused(f"rank {WORLD.rank}: library code made a "
                      f"pickle.Unpickler")


@contextlib.contextmanager
def no_pickle():
    """Pickling and unpickling raise :class:`Refused` inside."""
    picklers = [MPI.pickle, pkl5.pickle]
    saved = [(p.PROTOCOL, p.THRESHOLD) for p in picklers]
    module = (pickle.loads, pickle.load, pickle.Unpickler)
    for p in picklers:
        p.__init__(_refuse("pickle's dumps (mpi4py's lowercase call)"),
                   _refuse("pickle's loads (mpi4py's lowercase call)"))
    pickle.loads = _refuse("pickle.loads")
    pickle.load = _refuse("pickle.load")
    pickle.Unpickler = _RefusedUnpickler
    try:
        yield
    finally:
        pickle.loads, pickle.load, pickle.Unpickler = module
        for p, (protocol, threshold) in zip(picklers, saved):
            p.__init__(None, None, protocol, threshold)  # mpi4py's defaults


SOCKET_CALLS = ("socket", "create_connection", "create_server", "socketpair",
                "fromfd", "getaddrinfo", "gethostbyname", "gethostbyname_ex")


@contextlib.contextmanager
def no_sockets():
    """Python's socket constructors and name lookups raise inside."""
    saved = {name: getattr(socket, name) for name in SOCKET_CALLS
             if hasattr(socket, name)}
    for name in saved:
        setattr(socket, name, _refuse(f"socket.{name}"))
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(socket, name, fn)


def run_every_metadata_path(world) -> None:
    """Every library path that communicates metadata, on fresh
    communicators (Dup), so that nothing is already cached: each
    collective on both faces (v-collectives, Reduce_scatter with
    recvcounts=None, all_gather of uneven sizes, all_to_all with split
    sizes), each algorithm once, nonblocking and persistent too (check
    mode and deadlines, which exchange fingerprints through the same
    JSON path, are left to their own tests); the node map
    (node, num_nodes, leaders, local_rank, local_size, and a
    topology-aware algorithm that plans with it); split and new_group
    and their argument checks; Mesh; GradientBucketer; launch.placement.
    """
    comm = mpicoll.Comm(world.Dup())
    p, r = comm.size, comm.rank
    pg = PG(comm)
    for c in COLLECTIVES:
        algs = dict.fromkeys(["auto", *mpicoll.algorithms(c)])
        for i, alg in enumerate(algs):
            name, args = mpi4py_args(c, p, r, i)
            try:
                getattr(comm, name)(*args, algorithm=alg)
            except mpicoll.ConstraintError:
                continue
            getattr(comm, nonblocking(name))(
                *mpi4py_args(c, p, r, i + 1)[1], algorithm=alg).wait()
            request = getattr(comm, name + "_init")(
                *mpi4py_args(c, p, r, i)[1], algorithm=alg)
            request.Start()
            request.Wait()
            request.Free()
            torch_call(pg, c, alg, bool(i % 2), i)
            torch_call(pg, c, alg, not i % 2, i + 1)
    # counts that disagree: the error, agreed on, raised on every rank
    cs = [3] * p
    with pytest.raises(mpicoll.InvalidArgumentError, match="disagree"):
        comm.Gatherv(np.ones(3 + (r == p - 1)), [np.empty(3 * p), cs], 0)

    nodes = mpicoll.Comm(world.Dup())  # no node map yet
    assert nodes.num_nodes >= 1
    assert 0 <= nodes.local_rank < nodes.local_size <= p
    assert nodes.node.size == nodes.local_size
    leaders = nodes.leaders
    assert (leaders is not None) == (nodes.local_rank == 0)
    fresh = mpicoll.Comm(world.Dup())
    fresh.Allreduce(MPI.IN_PLACE, np.ones(4), algorithm="hierarchical")

    half = comm.split(r % 2, -r)
    assert half.size == len(range(r % 2, p, 2))
    group = comm.new_group(list(range(p - 1, -1, -1)))
    assert group.rank == p - 1 - r
    with pytest.raises(mpicoll.InvalidArgumentError, match="color"):
        comm.split("red" if r == 0 else 0)
    if p > 1:
        with pytest.raises(mpicoll.InvalidArgumentError, match="differ"):
            comm.new_group([0] if r == 0 else list(range(p)))

    mesh = mpicoll.Mesh(comm, shape=(-1, 1), names=("dp", "tp"))
    mesh.comm.Allreduce(MPI.IN_PLACE, np.ones(2))
    mesh.sub(("dp", "tp")).Barrier()
    with pytest.raises(mpicoll.InvalidArgumentError):
        mpicoll.Mesh(comm, shape=(-1,) if r else (p + 1,))

    grads = [np.full((2, 3), r + 1.0), np.ones(5, np.float32)]
    bucketer = mpicoll.GradientBucketer(comm, grads, bucket_bytes=32,
                                        average=True)
    for g in grads:
        bucketer.mark_ready(g)
    bucketer.wait()
    np.testing.assert_allclose(grads[1], 1.0)

    assert sum(mpicoll.guard.launch.placement(comm).values()) == p
    assert sum(mpicoll.guard.launch.placement(world).values()) == p

    for made in (mesh, group, half, fresh, nodes, comm):
        made.free()


def test_library_paths_never_pickle():
    with no_pickle():
        with pytest.raises(Refused):  # the guard works
            WORLD.allgather(WORLD.rank)
        run_every_metadata_path(WORLD)
        records = mpicoll.bench.run(mpicoll.bench.parse_args(
            ["-c", "allgather,reduce,barrier", "-a", "native,ring,auto",
             "-b", "8", "-e", "16", "-n", "2", "-w", "1", "--quiet"],
            WORLD.rank, WORLD.size), mpicoll.Comm(WORLD))
        assert records and not any(r["wrong"] for r in records)
    # restored: mpi4py's own lowercase calls, which users make on purpose
    assert WORLD.allgather({"rank": WORLD.rank}) == [
        {"rank": q} for q in range(WORLD.size)]
    assert WORLD.bcast(("x", 1.5), root=WORLD.size - 1) == ("x", 1.5)
    assert mpicoll.Comm(WORLD).allreduce(1) == WORLD.size
    assert pickle.loads(pickle.dumps([1, "a"])) == [1, "a"]


def test_library_opens_no_sockets():
    with no_sockets():
        with pytest.raises(Refused):  # the guard works
            socket.socket()
        run_every_metadata_path(WORLD)
    socket.socket().close()


def test_benchmark_writes_only_the_named_files(tmp_path, monkeypatch):
    out, cwd, tmp, home = (tmp_path / d for d in ("out", "cwd", "tmp",
                                                  "home"))
    for d in (out, cwd, tmp, home):
        d.mkdir()
    # every rank writes where rank 0 says (only rank 0 writes)
    base = WORLD.bcast(str(out), root=0)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    named = {"b.json", "b.csv", "rules.json"}
    code = mpicoll.bench.main(
        ["-c", "allreduce,bcast", "-a", "native,ring,auto", "-b", "8",
         "-e", "64", "-n", "2", "-w", "1", "--quiet",
         "--json", f"{base}/b.json", "--csv", f"{base}/b.csv",
         "--emit-rules", f"{base}/rules.json"], WORLD)
    assert code == 0
    WORLD.Barrier()
    assert {f.name for f in out.iterdir()} == (named if WORLD.rank == 0
                                               else set())
    for d in (cwd, tmp, home):
        assert not list(d.iterdir()), f"rank {WORLD.rank} wrote in {d}"
    assert set(os.listdir(tmp_path)) == {"out", "cwd", "tmp", "home"}
