"""Tier 2: mpi4py programs run unchanged on ``mpicoll.Comm``.

The examples of mpi4py's tutorial, as written there (no ``algorithm=``)
and with every algorithm forced on their buffer collectives, and mpi4py's
pickle-based lowercase collectives, each compared with the raw
communicator (tests/compatcases.py says how).
"""

from __future__ import annotations

import operator

import numpy as np
import pytest
from mpi4py import MPI

from compatcases import ids

pytestmark = [pytest.mark.mpi, pytest.mark.interface]


# ------------------------------------------------ the mpi4py tutorial, wrapped


def tutorial_cases():
    """The examples of mpi4py's tutorial (docs/source/tutorial.rst), each
    a function of ``comm`` returning what the program ends up with."""

    def p2p_objects(c):
        comm = c.comm
        rank = comm.Get_rank()
        data = None
        if comm.Get_size() < 2:
            return "needs 2 ranks"
        if rank == 0:
            data = {'a': 7, 'b': 3.14}
            comm.send(data, dest=1, tag=11)
        elif rank == 1:
            data = comm.recv(source=0, tag=11)
        return data

    def p2p_nonblocking(c):
        comm = c.comm
        rank = comm.Get_rank()
        data = None
        if comm.Get_size() < 2:
            return "needs 2 ranks"
        if rank == 0:
            data = {'a': 7, 'b': 3.14}
            req = comm.isend(data, dest=1, tag=11)
            req.wait()
        elif rank == 1:
            req = comm.irecv(source=0, tag=11)
            data = req.wait()
        return data

    def p2p_numpy(c):
        comm = c.comm
        rank = comm.Get_rank()
        if comm.Get_size() < 2:
            return "needs 2 ranks"
        out = []
        # passing MPI datatypes explicitly
        if rank == 0:
            data = np.arange(1000, dtype='i')
            comm.Send([data, MPI.INT], dest=1, tag=77)
            out.append(data)
        elif rank == 1:
            data = np.empty(1000, dtype='i')
            comm.Recv([data, MPI.INT], source=0, tag=77)
            out.append(data)
        # automatic MPI datatype discovery
        if rank == 0:
            data = np.arange(100, dtype=np.float64)
            comm.Send(data, dest=1, tag=13)
            out.append(data)
        elif rank == 1:
            data = np.empty(100, dtype=np.float64)
            comm.Recv(data, source=0, tag=13)
            out.append(data)
        return out

    def bcast_dict(c):
        comm = c.comm
        rank = comm.Get_rank()
        if rank == 0:
            data = {'key1': [7, 2.72, 2 + 3j],
                    'key2': ('abc', 'xyz')}
        else:
            data = None
        data = comm.bcast(data, root=0)
        return data

    def scatter_objects(c):
        comm = c.comm
        size = comm.Get_size()
        rank = comm.Get_rank()
        if rank == 0:
            data = [(i + 1)**2 for i in range(size)]
        else:
            data = None
        data = comm.scatter(data, root=0)
        assert data == (rank + 1)**2
        return data

    def gather_objects(c):
        comm = c.comm
        size = comm.Get_size()
        rank = comm.Get_rank()
        data = (rank + 1)**2
        data = comm.gather(data, root=0)
        if rank == 0:
            for i in range(size):
                assert data[i] == (i + 1)**2
        else:
            assert data is None
        return data

    def bcast_numpy(c):
        comm = c.comm
        rank = comm.Get_rank()
        if rank == 0:
            data = np.arange(100, dtype='i')
        else:
            data = np.empty(100, dtype='i')
        comm.Bcast(data, root=0)
        for i in range(100):
            assert data[i] == i
        return data

    def scatter_numpy(c):
        comm = c.comm
        size = comm.Get_size()
        rank = comm.Get_rank()
        sendbuf = None
        if rank == 0:
            sendbuf = np.empty([size, 100], dtype='i')
            sendbuf.T[:, :] = range(size)
        recvbuf = np.empty(100, dtype='i')
        comm.Scatter(sendbuf, recvbuf, root=0)
        assert np.allclose(recvbuf, rank)
        return recvbuf

    def gather_numpy(c):
        comm = c.comm
        size = comm.Get_size()
        rank = comm.Get_rank()
        sendbuf = np.zeros(100, dtype='i') + rank
        recvbuf = None
        if rank == 0:
            recvbuf = np.empty([size, 100], dtype='i')
        comm.Gather(sendbuf, recvbuf, root=0)
        if rank == 0:
            for i in range(size):
                assert np.allclose(recvbuf[i, :], i)
        return recvbuf

    def matvec(c):
        comm = c.comm

        def matvec(comm, A, x):
            m = A.shape[0]  # local rows
            p = comm.Get_size()
            xg = np.zeros(m * p, dtype='d')
            comm.Allgather([x, MPI.DOUBLE],
                           [xg, MPI.DOUBLE])
            y = np.dot(A, xg)
            return y
        p, m, rank = comm.Get_size(), 3, comm.Get_rank()
        A = np.arange(m * m * p, dtype='d').reshape(m, m * p) + rank
        x = np.arange(m, dtype='d') + rank * m
        return matvec(comm, A, x)

    def allreduce_numpy(c):  # the GPU example, on host arrays
        comm = c.comm
        size = comm.Get_size()
        sendbuf = np.arange(10, dtype='i')
        recvbuf = np.empty_like(sendbuf)
        comm.Allreduce(sendbuf, recvbuf)
        assert np.allclose(recvbuf, sendbuf * size)
        return recvbuf

    def compute_pi(c):  # the spawn example's worker, on an intracomm
        comm = c.comm
        size = comm.Get_size()
        rank = comm.Get_rank()
        N = np.array(100 if rank == 0 else 0, dtype='i')
        comm.Bcast([N, MPI.INT], root=0)
        h = 1.0 / N
        s = 0.0
        for i in range(rank, N, size):
            x = h * (i + 0.5)
            s += 4.0 / (1.0 + x**2)
        PI = np.array(s * h, dtype='d')
        total = np.array(0.0, 'd') if rank == 0 else None
        comm.Reduce([PI, MPI.DOUBLE], None if rank else [total, MPI.DOUBLE],
                    op=MPI.SUM, root=0)
        return N, total

    return {
        "p2p Python objects": p2p_objects,
        "p2p Python objects, nonblocking": p2p_nonblocking,
        "p2p NumPy arrays": p2p_numpy,
        "bcast a dict": bcast_dict,
        "scatter Python objects": scatter_objects,
        "gather Python objects": gather_objects,
        "Bcast a NumPy array": bcast_numpy,
        "Scatter NumPy arrays": scatter_numpy,
        "Gather NumPy arrays": gather_numpy,
        "parallel matrix-vector product": matvec,
        "Allreduce NumPy arrays (default op)": allreduce_numpy,
        "compute pi (Bcast 0-d, Reduce to root)": compute_pi,
    }


TUTORIAL_COLLECTIVE = {
    "Bcast a NumPy array": "bcast", "Scatter NumPy arrays": "scatter",
    "Gather NumPy arrays": "gather",
    "parallel matrix-vector product": "allgather",
    "Allreduce NumPy arrays (default op)": "allreduce",
}


def test_tutorial(h):
    """Each example unchanged (no ``algorithm=``) on the wrapped
    communicator; the buffer ones also with every algorithm forced."""
    for label, case in tutorial_cases().items():
        h.check(f"tutorial: {label}", case)
        if label in TUTORIAL_COLLECTIVE:
            def forced(c, case=case, name=TUTORIAL_COLLECTIVE[label]):
                return case(_Forcing(c, name))
            h.check(f"tutorial: {label} (algorithm forced)", forced,
                    TUTORIAL_COLLECTIVE[label], approx=True)
    h.finish()


class _Forcing:
    """A Call whose ``comm`` passes ``algorithm=`` to one collective."""

    def __init__(self, c, collective):
        self.comm = _ForcedComm(c.comm, collective, c.kw)
        self.rank, self.size = c.rank, c.size


class _ForcedComm:
    def __init__(self, comm, collective, kw):
        self._comm, self._collective, self._kw = comm, collective, kw

    def __getattr__(self, name):
        attr = getattr(self._comm, name)
        if name.lower() == self._collective and name[0].isupper():
            return lambda *a, **k: attr(*a, **k, **self._kw)
        return attr


# ------------------------------------------------ lowercase object methods


def test_lowercase_collectives(h):
    """mpi4py's pickle-based collectives, unchanged."""
    cases = {}
    for root in range(h.size):
        cases[f"bcast dict root={root}"] = lambda c, root=root: \
            c.comm.bcast({"root": root, "x": [1, 2.5, "s"]}
                         if c.rank == root else None, root=root)
        cases[f"gather root={root}"] = lambda c, root=root: \
            c.comm.gather((c.rank, str(c.rank) * 2), root=root)
        cases[f"scatter root={root}"] = lambda c, root=root: \
            c.comm.scatter([{"to": i} for i in range(c.size)]
                           if c.rank == root else None, root=root)
        cases[f"reduce SUM root={root}"] = lambda c, root=root: \
            c.comm.reduce(c.rank + 1, op=MPI.SUM, root=root)
        cases[f"reduce callable (str concat) root={root}"] = \
            lambda c, root=root: c.comm.reduce(str(c.rank),
                                               op=operator.add, root=root)
    cases.update({
        "bcast default root": lambda c: c.comm.bcast(
            "hello" if c.rank == 0 else None),
        "bcast numpy array": lambda c: c.comm.bcast(
            ids(0, 5) if c.rank == 0 else None, root=0),
        "gather numpy arrays": lambda c: c.comm.gather(ids(c.rank, 3)),
        "allgather": lambda c: c.comm.allgather({"rank": c.rank}),
        "allgather numpy": lambda c: c.comm.allgather(ids(c.rank, 2)),
        "alltoall": lambda c: c.comm.alltoall(
            [(c.rank, j) for j in range(c.size)]),
        "allreduce SUM": lambda c: c.comm.allreduce(c.rank + 1),
        "allreduce MAX": lambda c: c.comm.allreduce(c.rank, op=MPI.MAX),
        "allreduce MAXLOC": lambda c: c.comm.allreduce(
            (c.rank % 2, c.rank), op=MPI.MAXLOC),
        "allreduce numpy SUM": lambda c: c.comm.allreduce(ids(c.rank, 3)),
        "allreduce callable": lambda c: c.comm.allreduce(
            [c.rank], op=operator.add),
        "scan SUM": lambda c: c.comm.scan(c.rank + 1),
        "scan callable": lambda c: c.comm.scan(str(c.rank),
                                               op=operator.add),
        "exscan SUM": lambda c: c.comm.exscan(c.rank + 1),
        "barrier": lambda c: c.comm.barrier(),
    })
    for label, case in cases.items():
        h.check(label, case)
    h.finish()
