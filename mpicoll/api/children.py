"""Communicators made the mpi4py way from an ``mpicoll.Comm`` stay mpicoll's;
``Free``/``free`` release mpicoll's state with the communicator.

mpi4py's constructors (``Dup``, ``Dup_with_info``, ``Clone``, ``Idup``,
``Idup_with_info``, ``Split``, ``Split_type``, ``Create``,
``Create_group``, ``Create_cart``, ``Create_graph``, ``Create_dist_graph``,
``Create_dist_graph_adjacent``, and ``Cartcomm.Sub``) run as mpi4py's own
call on the same handle, with the same arguments, results and exceptions;
the communicator they return is then an ``mpicoll.Comm`` of the matching
topology class (``MPI.COMM_NULL`` stays mpi4py's object) with the parent's
guards (check mode, deadline) and the other settings read from the
environment then, as ``mpicoll.Comm(child)`` would. So ``algorithm=``
works on a row communicator made with ``Split``, and check mode and
deadlines still apply there.

Cost: mpi4py's call, plus, on a guarded parent, the child's private
duplicate made at once (collective over the child, as the constructor is;
an ``Idup``'s child makes it on first use, once the request is complete),
so that the child's first collective is under the deadline too.
"""

from __future__ import annotations

import functools

from mpi4py import MPI

from mpicoll.engine.context import forget

#: mpi4py's methods that make an intracommunicator of this one's ranks
CONSTRUCTORS = ("Dup", "Dup_with_info", "Clone", "Idup", "Idup_with_info",
                "Split", "Split_type", "Create", "Create_group",
                "Create_cart", "Create_graph", "Create_dist_graph",
                "Create_dist_graph_adjacent", "Sub")


def constructors(mpi4py_class: type, own: bool = False) -> dict:
    """``{name: method}`` of :data:`CONSTRUCTORS` for a class deriving
    from ``mpi4py_class``: every one it has, or with ``own`` only those it
    defines itself (``Sub`` of ``MPI.Cartcomm``)."""
    names = [n for n in CONSTRUCTORS
             if (n in vars(mpi4py_class) if own else hasattr(mpi4py_class, n))]
    return {n: _keeping_mpicoll(getattr(mpi4py_class, n)) for n in names}


def _keeping_mpicoll(method):
    """``method`` (mpi4py's) run on an mpi4py view of the same handle,
    its communicator made a child of the caller (``self._derived``)."""

    @functools.wraps(method)
    def make(self, *args, **kwargs):
        made = method(self._mpi4py_view(), *args, **kwargs)
        if type(made) is tuple:  # Idup: (communicator, request)
            comm, request = made
            return self._derived(comm, now=False), request
        return self._derived(made)

    return make


class Children:
    """mpi4py's communicator constructors on :class:`mpicoll.Comm`, and
    its release (a mixin; it expects ``self._derived``)."""

    def Free(self) -> None:
        """Free the private duplicate, then the communicator (collective)."""
        self._release()
        super().Free()

    def free(self) -> None:
        """Release the private duplicate, then mpi4py's ``free``: the
        communicator is freed unless it is null or predefined (collective
        when mpicoll made a duplicate)."""
        self._release()
        super().free()

    def _release(self) -> None:
        """Drop this object's engine; free the private duplicate unless
        the handle is null or predefined (mpi4py's ``free`` leaves those,
        and every other wrapper of ``COMM_WORLD`` shares the duplicate)."""
        engine = self.__dict__.pop("_engine", None)
        self.__dict__.pop("_replayed", None)
        self.__dict__.pop("_restarted", None)
        if engine is not None:
            engine.forget_replays()
        if self not in (MPI.COMM_NULL, MPI.COMM_WORLD, MPI.COMM_SELF):
            forget(self)

    def _mpi4py_view(self) -> MPI.Comm:
        """This communicator as mpi4py's own class of it (the same
        handle, as ``MPI.Intracomm(comm)`` gives)."""
        return mpi4py_class_of(type(self))(self)


for _name, _method in constructors(MPI.Intracomm).items():
    setattr(Children, _name, _method)


@functools.cache
def mpi4py_class_of(cls: type) -> type:
    """The mpi4py class ``cls`` derives from (``MPI.Intracomm``,
    ``MPI.Cartcomm``, ...)."""
    return next(k for k in cls.__mro__ if k.__module__ == "mpi4py.MPI")
