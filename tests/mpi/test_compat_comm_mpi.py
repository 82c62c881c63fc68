"""Tier 2: ``mpicoll.Comm`` is the communicator mpi4py's programs hold.

What the wrapped communicator is (its handle, identity, class, the methods
it keeps from mpi4py and the signatures of those it overrides), the
communicators made from it (Dup, Split, Create_cart, ...) and collectives
on them, and the requests its nonblocking collectives return, each compared
with the raw communicator (tests/compatcases.py says how).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.engine import grequests
from compat import SELFTEST
from compatcases import (BY_NAME, PLAIN, fixed_case, full, ids,
                         reduce_scatter_case)
from compatvectors import GENERAL, vector_case
from mpicoll.api.children import CONSTRUCTORS
from mpicoll.collectives import COLLECTIVES

pytestmark = [pytest.mark.mpi, pytest.mark.interface]

COLLECTIVE_METHODS = [row.method for row in COLLECTIVES.values()]


# ------------------------------------------------ the communicator itself


#: lowercase names mpicoll overrides on purpose (not behaviour changes)
DOCUMENTED_OVERRIDES = {
    "free": "also releases mpicoll's private duplicate "
            "(mpicoll/api/children.py)",
}
#: uppercase non-collective names mpicoll overrides (mpicoll/api/p2p.py: the
#: buffer point-to-point calls, for device buffers; Free: children.py)
P2P_OVERRIDES = {"Send", "Recv", "Isend", "Irecv", "Sendrecv",
                 "Sendrecv_replace", "Ssend", "Bsend", "Rsend", "Issend",
                 "Ibsend", "Irsend", "Send_init", "Recv_init", "Ssend_init",
                 "Bsend_init", "Rsend_init", "Free"}


def _public(cls):
    return [n for n in dir(cls) if not n.startswith("_")]


def _same(ours, theirs, name) -> bool:
    """``name`` on class ``ours`` resolves to the very attribute (function,
    classmethod, property) it resolves to on mpi4py's class ``theirs``."""
    try:
        return inspect.getattr_static(ours, name) is \
            inspect.getattr_static(theirs, name)
    except AttributeError:
        return False


def _owner(cls, name) -> str:
    for k in cls.__mro__:
        if name in vars(k):
            return f"{k.__module__}.{k.__qualname__}"
    return "nobody"


@pytest.mark.skipif(SELFTEST, reason="checks mpicoll's classes")
def test_lowercase_methods_are_mpi4pys(h):
    """Every lowercase method and property of mpi4py's communicator
    classes is mpi4py's own object on mpicoll's classes."""
    world = MPI.COMM_WORLD
    cart = world.Create_cart([world.Get_size()])
    try:
        pairs = [(type(mpicoll.Comm(world)), MPI.Intracomm),
                 (type(mpicoll.Comm(cart)), MPI.Cartcomm)]
        wrong = []
        for ours, theirs in pairs:
            for name in _public(theirs):
                if not name[0].islower() or name in DOCUMENTED_OVERRIDES:
                    continue
                if not _same(ours, theirs, name):
                    wrong.append(f"{ours.__name__}.{name} is "
                                 f"{_owner(ours, name)}'s, not mpi4py's "
                                 f"MPI.{theirs.__name__}.{name}")
        h.problems += [("lowercase methods", "-", w) for w in wrong]
    finally:
        cart.Free()
    h.finish()


@pytest.mark.skipif(SELFTEST, reason="checks mpicoll's classes")
def test_other_methods_are_mpi4pys(h):
    """Uppercase methods that are neither collectives (which take
    ``algorithm=``) nor mpicoll's documented point-to-point overrides and
    constructors (which return mpicoll communicators) are mpi4py's own
    (Get_rank, Get_coords, Shift, ...)."""
    allowed = set(COLLECTIVE_METHODS) | P2P_OVERRIDES | set(CONSTRUCTORS)
    allowed |= {"I" + n[0].lower() + n[1:] for n in COLLECTIVE_METHODS}
    allowed |= {n + "_init" for n in COLLECTIVE_METHODS}  # persistent
    world = MPI.COMM_WORLD
    cart = world.Create_cart([world.Get_size()])
    try:
        wrong = []
        for ours, theirs in ((type(mpicoll.Comm(world)), MPI.Intracomm),
                             (type(mpicoll.Comm(cart)), MPI.Cartcomm)):
            for name in _public(theirs):
                if name[0].islower() or name in allowed:
                    continue
                if not _same(ours, theirs, name):
                    wrong.append(f"{ours.__name__}.{name} "
                                 f"({_owner(ours, name)})")
        h.problems += [("other methods", "-", f"overridden: {w}")
                       for w in wrong]
    finally:
        cart.Free()
    h.finish()


def test_communicator_identity(h):
    world = MPI.COMM_WORLD

    def facts(c):
        comm = c.comm
        return {
            "isinstance Intracomm": isinstance(comm, MPI.Intracomm),
            "isinstance Comm": isinstance(comm, MPI.Comm),
            "== itself": comm == comm,
            "rank": (comm.rank, comm.Get_rank()),
            "size": (comm.size, comm.Get_size()),
            "is_inter/is_intra/is_topo": (comm.is_inter, comm.is_intra,
                                          comm.is_topo),
            "Is_inter/Is_intra": (comm.Is_inter(), comm.Is_intra()),
            "topology": comm.Get_topology(),
            "bool": bool(comm),
            "group": MPI.Group.Compare(comm.Get_group(),
                                       world.Get_group()),
            "Compare world": MPI.Comm.Compare(comm, world),
            "TAG_UB": comm.Get_attr(MPI.TAG_UB),
            "errhandler": comm.Get_errhandler() == MPI.ERRORS_RETURN,
        }
    h.check("facts about the communicator", facts)

    # the wrapped communicator is the caller's handle
    w = mpicoll.Comm(world)
    d = h.raw
    problems = []
    if not isinstance(w, MPI.Intracomm):
        problems.append("mpicoll.Comm(world) is not an MPI.Intracomm")
    if not w == world:
        problems.append("mpicoll.Comm(world) != world")
    if w != world:
        problems.append("mpicoll.Comm(world) != world (__ne__)")
    if MPI.Comm.Compare(w, world) != MPI.IDENT:
        problems.append("Compare(mpicoll.Comm(world), world) != IDENT")
    if w.py2f() != world.py2f() or w.handle != world.handle:
        problems.append("handle/py2f differ")
    if MPI.Comm.f2py(w.py2f()) != w:
        problems.append("Comm.f2py(w.py2f()) != w")
    if not SELFTEST and mpicoll.Comm(d) != d:
        problems.append("mpicoll.Comm(dup) != dup")
    if not SELFTEST:  # a name set through one face shows through the other
        h.wrapped.Set_name("compat-dup")
        if d.Get_name() != "compat-dup":
            problems.append("Set_name on the wrapped not seen on the raw")
    every = h.ctl.allgather(problems)
    if any(every):
        h.problems.append(("communicator identity", "-",
                           "; ".join(p for ps in every for p in ps)))
    h.finish()


def test_derived_communicators(h):
    """Dup, Clone, Idup, Split, Split_type, Create(group), Create_group,
    Create_cart made from the wrapped communicator work as mpi4py's."""
    def use(comm):
        """What a new communicator is like, and a collective on it."""
        x = np.array([comm.Get_rank() + 1], "i")
        y = full(1)
        comm.Allreduce(x, y, MPI.SUM)
        return (isinstance(comm, MPI.Intracomm), comm.Get_size(),
                comm.Get_rank(), comm.allreduce(comm.Get_rank()), y,
                MPI.Comm.Compare(comm, MPI.COMM_WORLD))

    def made(make):
        def case(c):
            new = make(c.comm)
            if new == MPI.COMM_NULL:
                return "COMM_NULL"
            try:
                return use(new)
            finally:
                new.Free()
        return case

    def idup(comm):
        new, req = comm.Idup()
        req.Wait()
        return new

    def cart_facts(c):
        cart = c.comm.Create_cart([c.size], periods=[True], reorder=False)
        try:
            sub = cart.Sub([False])
            out = (isinstance(cart, MPI.Cartcomm), cart.Get_coords(c.rank),
                   cart.Shift(0, 1), cart.Get_dim(), cart.Get_topo(),
                   sub.Get_size(), use(cart))
            sub.Free()
            return out
        finally:
            cart.Free()

    h.check("Dup()", made(lambda comm: comm.Dup()))
    h.check("Clone()", made(lambda comm: comm.Clone()))
    h.check("Idup()", made(idup))
    h.check("Split(rank % 2)", made(
        lambda comm: comm.Split(comm.Get_rank() % 2, -comm.Get_rank())))
    h.check("Split(UNDEFINED on rank 0)", made(
        lambda comm: comm.Split(MPI.UNDEFINED if comm.Get_rank() == 0
                                else 1)))
    h.check("Split_type(COMM_TYPE_SHARED)", made(
        lambda comm: comm.Split_type(MPI.COMM_TYPE_SHARED)))
    h.check("Create(group)", made(
        lambda comm: comm.Create(comm.Get_group().Incl(
            list(range(0, comm.Get_size(), 2))))))
    h.check("Create_group(group)", made(
        lambda comm: comm.Create_group(comm.Get_group().Excl([0]))
        if comm.Get_rank() != 0 else MPI.COMM_NULL))
    h.check("Create_cart facts", cart_facts)
    # bad arguments on every rank: mpi4py's exceptions, raised locally
    h.check("Split('red')", made(lambda comm: comm.Split("red")))
    h.check("Create_cart([size + 1])", made(
        lambda comm: comm.Create_cart([comm.Get_size() + 1])))
    h.finish()


#: mpi4py's constructors, each as (label, make(comm) -> new communicator)
CONSTRUCTOR_CASES = [
    ("Dup()", lambda comm: comm.Dup()),
    ("Dup_with_info(INFO_NULL)", lambda comm: comm.Dup_with_info(
        MPI.INFO_NULL)),
    ("Clone()", lambda comm: comm.Clone()),
    ("Idup()", lambda comm: _waited(comm.Idup())),
    ("Idup_with_info(INFO_NULL)", lambda comm: _waited(
        comm.Idup_with_info(MPI.INFO_NULL))),
    ("Split(rank % 2)", lambda comm: comm.Split(comm.rank % 2, -comm.rank)),
    ("Split(UNDEFINED on rank 0)", lambda comm: comm.Split(
        MPI.UNDEFINED if comm.rank == 0 else 1)),
    ("Split_type(COMM_TYPE_SHARED)", lambda comm: comm.Split_type(
        MPI.COMM_TYPE_SHARED)),
    ("Create(group of even ranks)", lambda comm: comm.Create(
        comm.Get_group().Incl(list(range(0, comm.size, 2))))),
    ("Create_group(all but rank 0)", lambda comm: comm.Create_group(
        comm.Get_group().Excl([0])) if comm.rank else MPI.COMM_NULL),
    ("Create_cart([size])", lambda comm: comm.Create_cart([comm.size])),
    ("Create_cart([size]).Sub([True])", lambda comm: _sub(comm)),
    ("Create_graph(ring)", lambda comm: comm.Create_graph(
        list(range(1, comm.size + 1)), [(q + 1) % comm.size
                                        for q in range(comm.size)])),
    ("Create_dist_graph_adjacent(self)", lambda comm:
        comm.Create_dist_graph_adjacent([comm.rank], [comm.rank])),
    ("Create_dist_graph(self)", lambda comm: comm.Create_dist_graph(
        [comm.rank], [1], [comm.rank])),
]


def _waited(made):
    comm, request = made
    request.Wait()
    return comm


def _sub(comm):
    cart = comm.Create_cart([comm.size])
    try:
        return cart.Sub([True])
    finally:
        cart.Free()


@pytest.mark.skipif(SELFTEST, reason="checks mpicoll's classes")
@pytest.mark.parametrize("check", [False, True], ids=["plain", "checked"])
def test_constructors_keep_mpicoll(h, check):
    """Each communicator mpi4py's constructors make from an
    ``mpicoll.Comm`` is one too, of mpi4py's class for the raw call's
    result, with the parent's guards, and takes ``algorithm=``;
    ``COMM_NULL`` is returned as mpi4py returns it."""
    parent = mpicoll.Comm(h.raw, check=check)
    problems = []
    for label, make in CONSTRUCTOR_CASES:
        raw, ours = make(h.raw), make(parent)
        try:
            if raw == MPI.COMM_NULL or ours == MPI.COMM_NULL:
                if not (raw == ours == MPI.COMM_NULL
                        and type(ours) is type(raw)):
                    problems.append(f"{label}: {ours!r}, mpi4py {raw!r}")
                continue
            if not (isinstance(ours, mpicoll.Comm)
                    and isinstance(ours, type(raw))):
                problems.append(f"{label}: a {type(ours).__mro__}, mpi4py "
                                f"a {type(raw).__name__}")
                continue
            if type(ours).guarded != check or \
                    ours._settings.guard != parent._settings.guard:
                problems.append(f"{label}: guard {ours._settings.guard}, "
                                f"parent's {parent._settings.guard}")
            x = np.arange(4.0) + ours.rank
            y, want = np.empty(4), np.empty(4)
            ours.Allreduce(x, y, MPI.SUM, algorithm="ring")
            raw.Allreduce(x, want, MPI.SUM)
            if not np.array_equal(y, want):
                problems.append(f"{label}: ring Allreduce {y}, mpi4py "
                                f"{want}")
        finally:
            for comm in (ours, raw):
                if comm != MPI.COMM_NULL:
                    comm.Free()
    h.problems += [("constructors", "-", p) for p in problems]
    h.finish()


def test_cartesian_wrapped(h):
    """``mpicoll.Comm(world.Create_cart([size]))`` keeps the Cartesian
    methods, and its collectives take ``algorithm=``."""
    raw = MPI.COMM_WORLD.Create_cart([h.size], periods=[True])
    wrapped = raw if SELFTEST else mpicoll.Comm(raw)
    try:
        def facts(c):
            comm = c.comm
            sub = comm.Sub([False])
            try:
                return (isinstance(comm, MPI.Cartcomm),
                        isinstance(comm, MPI.Intracomm),
                        comm.Get_coords(c.rank), comm.Shift(0, 1),
                        comm.Shift(0, -2), comm.Get_cart_rank([0]),
                        comm.Get_topo(), comm.dims, comm.periods,
                        comm.topology == MPI.CART, sub.Get_size(),
                        sub.Get_rank())
            finally:
                sub.Free()
        h.check("Cartcomm facts", facts, comms=(raw, wrapped))

        def shift_exchange(c):
            src, dest = c.comm.Shift(0, 1)
            s, r = ids(c.rank, 3), full(3)
            c.comm.Sendrecv(s, dest, 0, r, src, 0)
            return r
        h.check("Cartcomm Shift + Sendrecv", shift_exchange,
                comms=(raw, wrapped))

        def neighbor(c):
            s, r = ids(c.rank, 2), full(4)
            c.comm.Neighbor_allgather(s, r)
            return r
        h.check("Cartcomm Neighbor_allgather", neighbor,
                comms=(raw, wrapped))

        h.check("Cartcomm Allreduce",
                fixed_case("allreduce", PLAIN, PLAIN, 5), "allreduce",
                comms=(raw, wrapped), modes=(False, True))
        h.check("Cartcomm Bcast",
                fixed_case("bcast", PLAIN, PLAIN, 5, h.size - 1), "bcast",
                comms=(raw, wrapped))
        h.check("Cartcomm Allgatherv",
                vector_case("allgatherv", PLAIN, GENERAL), "allgatherv",
                comms=(raw, wrapped))
    finally:
        wrapped.Free()  # the raw communicator itself under SELFTEST
    h.finish()


def test_split_communicator(h):
    """A wrapped Split (unequal halves at odd sizes) against the raw one."""
    world = MPI.COMM_WORLD
    raw = world.Split(world.Get_rank() % 2, world.Get_rank())
    wrapped = raw if SELFTEST else mpicoll.Comm(raw)
    try:
        pair = (raw, wrapped)
        for f in (PLAIN, BY_NAME["[buf, count, displ, TYPE]"]):
            for name, n, modes in (("allreduce", 5, (False, True)),
                                   ("allgather", 3, (False,)),
                                   ("alltoall", 2, (False,)),
                                   ("reduce_scatter_block", 2, (False,))):
                h.check(f"split: {COLLECTIVES[name].method} {f.name}",
                        fixed_case(name, f, f, n), name, comms=pair,
                        modes=modes)
        # every world rank makes the same checks (the harness agrees on
        # outcomes over the world): roots modulo each half's size
        for root in range((h.size + 1) // 2):
            def at(make, root=root):
                return lambda c: make(root % c.size)(c)
            h.check(f"split: Bcast root={root}",
                    at(lambda r: fixed_case("bcast", PLAIN, PLAIN, 5, r)),
                    "bcast", comms=pair)
            h.check(f"split: Reduce root={root}",
                    at(lambda r: fixed_case("reduce", PLAIN, PLAIN, 5, r)),
                    "reduce", comms=pair)
            h.check(f"split: Gatherv root={root}",
                    at(lambda r: vector_case("gatherv", PLAIN, GENERAL, r)),
                    "gatherv", comms=pair)
            h.check(f"split: Scatter root={root}",
                    at(lambda r: fixed_case("scatter", PLAIN, PLAIN, 3, r)),
                    "scatter", comms=pair)
        h.check("split: Allgatherv",
                vector_case("allgatherv", PLAIN, GENERAL), "allgatherv",
                comms=pair)
        h.check("split: Alltoallv",
                vector_case("alltoallv", GENERAL, GENERAL), "alltoallv",
                comms=pair)
        h.check("split: Reduce_scatter",
                reduce_scatter_case(PLAIN, PLAIN, 1), "reduce_scatter",
                comms=pair)
        h.check("split: Scan", fixed_case("scan", PLAIN, PLAIN, 4), "scan",
                comms=pair)
        h.check("split: Barrier", lambda c: c("Barrier"), "barrier",
                comms=pair, modes=(False, True))
    finally:
        wrapped.Free()  # the raw communicator itself under SELFTEST
    h.finish()


@pytest.mark.skipif(SELFTEST, reason="checks mpicoll's classes")
def test_signatures(h):
    """Each mpicoll collective takes mpi4py's parameters (names, kinds and
    defaults, in order) plus keyword-only ``algorithm``."""
    wrong = []
    for name in COLLECTIVE_METHODS:
        for n in (name, "I" + name[0].lower() + name[1:]):
            theirs = inspect.signature(getattr(MPI.Intracomm, n))
            ours = inspect.signature(getattr(mpicoll.Comm, n))
            want = [(p.name, p.kind, p.default)
                    for p in theirs.parameters.values()]
            got = [(p.name, p.kind, p.default)
                   for p in ours.parameters.values() if p.name != "algorithm"]
            if got != want:
                wrong.append(f"{n}{ours} vs mpi4py's {n}{theirs}")
            alg = ours.parameters.get("algorithm")
            if alg is None or alg.kind != inspect.Parameter.KEYWORD_ONLY:
                wrong.append(f"{n}: no keyword-only algorithm=")
    h.problems += [("signatures", "-", w) for w in wrong]
    h.finish()


# ------------------------------------------------- nonblocking request API


def _finish_all(reqs):
    for r in reqs:
        try:
            r.Wait()
        except Exception:  # already complete
            pass


def test_nonblocking_wait(h):
    """The promise: what a nonblocking collective returns has ``Wait()``
    (every form test runs nonblocking too) and ``wait()``."""
    def lower_wait(c):
        s, r = ids(c.rank, 3), full(3)
        req = c.comm.Iallreduce(s, r, MPI.SUM, **c.kw)
        got = req.wait()
        return r, got
    h.check("Iallreduce(...).wait()", lower_wait, "allreduce")

    def lower_wait_bcast(c):
        b = ids(0, 4) if c.rank == 0 else full(4)
        req = c.comm.Ibcast(b, 0, **c.kw)
        got = req.wait()
        return b, got
    h.check("Ibcast(...).wait()", lower_wait_bcast, "bcast")
    h.finish()


# (last in the file: a documented difference, docs/compatibility.md
# "What still differs"; the test conftest stops the run at the first
# failed test)


#: the algorithms whose requests mpi4py's functions take: native ones
#: always, hand-built ones with generalized requests (docs/api.md#limits)
MIXED = None if grequests.usable() else ("auto", "native")


def test_nonblocking_request_interop(h):
    """Beyond ``Wait``/``wait``: what mpi4py programs also do with the
    request of a nonblocking collective (``Test()`` until done,
    ``MPI.Request.Waitall/Waitany/Testall``, ``Wait(status)``,
    ``isinstance(req, MPI.Request)``)."""
    finish_all = _finish_all

    def test_loop(c):
        s, r = ids(c.rank, 3), full(3)
        req = c.comm.Iallreduce(s, r, MPI.SUM, **c.kw)
        try:
            while not req.Test():
                pass
        except Exception:
            finish_all([req])
            raise
        return r
    h.check("Iallreduce(...): while not req.Test()", test_loop, "allreduce",
            algorithms=MIXED)

    def waitall(c):
        s, r = ids(c.rank, 3), full(3)
        b = ids(0, 4) if c.rank == 0 else full(4)
        reqs = [c.comm.Iallreduce(s, r, MPI.SUM, **c.kw),
                c.comm.Ibcast(b, 0)]
        try:
            MPI.Request.Waitall(reqs)
        except Exception:
            finish_all(reqs)
            raise
        return r, b
    h.check("MPI.Request.Waitall([Iallreduce, Ibcast])", waitall,
            "allreduce", algorithms=MIXED)

    def waitany(c):
        s, r = ids(c.rank, 3), full(3)
        reqs = [c.comm.Iallreduce(s, r, MPI.SUM, **c.kw)]
        try:
            index = MPI.Request.Waitany(reqs)
        except Exception:
            finish_all(reqs)
            raise
        return r, index
    h.check("MPI.Request.Waitany([Iallreduce])", waitany, "allreduce",
            algorithms=MIXED)

    def testall(c):
        s, r = ids(c.rank, 3), full(3)
        reqs = [c.comm.Iallreduce(s, r, MPI.SUM, **c.kw)]
        try:
            while not MPI.Request.Testall(reqs):
                pass
        except Exception:
            finish_all(reqs)
            raise
        return r
    h.check("MPI.Request.Testall([Iallreduce])", testall, "allreduce",
            algorithms=MIXED)

    def wait_status(c):
        s, r = ids(c.rank, 3), full(3)
        req = c.comm.Iallreduce(s, r, MPI.SUM, **c.kw)
        status = MPI.Status()
        try:
            req.Wait(status)
        except Exception:
            finish_all([req])
            raise
        return r, status.Get_error()
    h.check("Iallreduce(...).Wait(status)", wait_status, "allreduce",
            algorithms=MIXED)

    def is_request(c):
        req = c.comm.Ibarrier(**c.kw)
        req.Wait()
        return isinstance(req, MPI.Request)
    h.check("isinstance(Ibarrier(), MPI.Request)", is_request, "barrier",
            algorithms=MIXED)

    def mixed(c):  # a collective's request beside point-to-point ones
        s, r = ids(c.rank, 3), full(3)
        got = full(2)
        right, left = (c.rank + 1) % c.size, (c.rank - 1) % c.size
        reqs = [c.comm.Irecv(got, left, 7),
                c.comm.Iallreduce(s, r, MPI.SUM, **c.kw),
                c.comm.Isend(ids(c.rank, 2), right, 7)]
        try:
            done = []
            while len(done) < len(reqs):
                done += MPI.Request.Waitsome(reqs) or []
        except Exception:
            finish_all(reqs)
            raise
        return r, got, sorted(done), [q == MPI.REQUEST_NULL for q in reqs]
    h.check("MPI.Request.Waitsome([Irecv, Iallreduce, Isend])", mixed,
            "allreduce", algorithms=MIXED)
    h.finish()


def test_persistent_request_interop(h):
    """What mpi4py programs do with a persistent collective's request:
    ``Start`` it, wait on it among others with ``MPI.Request.Waitall``,
    ``Wait(status)``, ``Test`` it while inactive, ``Free`` it; and
    ``MPI.Prequest.Startall`` (the MPI library's own persistent requests:
    a hand-built one starts only with its own ``Start``)."""
    def start_waitall(c):
        s, r = ids(c.rank, 3), full(3)
        req = c.comm.Allreduce_init(s, r, MPI.SUM, **c.kw)
        out = []
        for k in range(2):
            s[...] = ids(c.rank + k, 3)
            req.Start()
            barrier = c.comm.Ibarrier()
            MPI.Request.Waitall([barrier, req])
            out.append(r.copy())
        req.Start()
        status = MPI.Status()
        req.Wait(status)
        out.append((status.Get_error(), req.Test()))
        req.Free()
        return out, req == MPI.REQUEST_NULL
    h.check("Allreduce_init: Start, MPI.Request.Waitall, Wait(status), "
            "Free", start_waitall, "allreduce", algorithms=MIXED)

    def startall(c):
        b = ids(0, 4) if c.rank == 0 else full(4)
        reqs = [c.comm.Bcast_init(b, 0, **c.kw), c.comm.Barrier_init()]
        MPI.Prequest.Startall(reqs)
        MPI.Request.Waitall(reqs)
        for req in reqs:
            req.Free()
        return b
    h.check("MPI.Prequest.Startall([Bcast_init, Barrier_init])", startall,
            "bcast", algorithms=("native",))
    h.finish()
