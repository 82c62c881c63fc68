"""New communicators from an ``mpicoll.Comm``: groups and node awareness.

``split`` and ``new_group`` make communicators of some ranks; ``node``,
``leaders``, ``local_rank``, ``local_size`` and ``num_nodes`` say which
ranks share a machine (``MPICOLL_RANKS_PER_NODE`` makes one machine act as
several, see :mod:`mpicoll.engine.context`). Each new communicator is a collective
call that first agrees, in one small allgather, that every rank's
arguments are valid: a bad argument on one rank raises the same error on
every rank instead of leaving the others blocked in MPI's ``Split``.

:class:`Groups` is a mixin of :class:`mpicoll.Comm`; it expects
``self.rank``, ``self.size``, ``self.Split`` (which keeps mpicoll:
:mod:`mpicoll.api.children`), ``self._engine``, ``self._subcomms``,
``self._where`` and ``self._derived(mpi)`` (a new communicator made of an
mpi4py one).
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from mpicoll.guard import exchange
from mpicoll.errors import InvalidArgumentError


class Groups:
    """Groups and node awareness of :class:`mpicoll.Comm` (a mixin)."""

    def split(self, color, key=0) -> Groups | None:
        """The ranks passing the same ``color`` form a new ``Comm``, ranked
        by ``key`` then by rank here (``MPI_Comm_split``); a ``color`` of
        None or ``MPI.UNDEFINED`` gives None.

        Collective: every rank calls it. Cost: one small allgather (the
        argument check), one ``Split``, and the new Comm's ``Dup``. The new
        communicator is the caller's: ``sub.Free()`` releases it.
        """
        undefined = color is None or (_is_int(color)
                                      and color == MPI.UNDEFINED)
        problem = None
        if not undefined and not (_is_int(color) and color >= 0):
            problem = (f"passed color {color!r}: colors are non-negative "
                       f"ints (None or MPI.UNDEFINED: in no group)")
        elif not _is_int(key):
            problem = f"passed key {key!r}: keys are ints"
        self._agreed("split", problem)
        sub = self.Split(MPI.UNDEFINED if undefined else int(color),
                         int(key))
        return None if sub == MPI.COMM_NULL else sub

    def new_group(self, ranks) -> Groups | None:
        """A ``Comm`` of the listed ranks, its rank ``i`` being rank
        ``ranks[i]`` here (the order of ``MPI.Group.Incl``); None on the
        ranks not listed.

        Collective over this whole communicator, as torch's ``new_group``:
        every rank calls it, with the same list. Cost: one small allgather
        (every rank's list, checked for range, duplicates and agreement)
        and one ``Split``, plus the new Comm's ``Dup``. Release it with
        ``sub.Free()``.
        """
        members = problem = None
        if isinstance(ranks, (str, bytes)) or not hasattr(ranks, "__iter__"):
            problem = f"passed ranks {ranks!r}: a sequence of ints is needed"
        else:
            ranks = list(ranks)
            bad = [r for r in ranks if not (_is_int(r) and 0 <= r < self.size)]
            if bad:
                problem = (f"passed ranks {ranks}: {bad} are not ranks of "
                           f"this communicator (size {self.size})")
            elif len(set(ranks)) != len(ranks):
                twice = sorted({r for r in ranks if ranks.count(r) > 1})
                problem = f"passed ranks {ranks}: {twice} listed twice"
            else:
                members = tuple(int(r) for r in ranks)
        lists = self._agreed("new_group", problem, members)
        differ = [q for q, m in enumerate(lists) if m != lists[0]]
        if differ:
            raise InvalidArgumentError(
                "the lists differ between ranks: " + "; ".join(
                    f"rank {q} passed {list(lists[q])}" for q in [0, *differ]),
                **self._where("new_group"))
        inside = self.rank in members
        sub = self.Split(0 if inside else MPI.UNDEFINED,
                         members.index(self.rank) if inside else 0)
        return None if sub == MPI.COMM_NULL else sub

    def _agreed(self, call: str, problem: str | None, item=None) -> list:
        """Every rank's ``item``, once no rank has a ``problem``: one small
        allgather, after which the lowest rank's problem, if any, is raised
        on every rank (so none is left waiting in the next collective)."""
        ctx = self._engine.ctx
        with ctx.recorder.step(f"agreeing on the arguments of {call}"):
            rows = exchange.allgather(ctx.comm, (problem, item))
        for q, (bad, _) in enumerate(rows):
            if bad is not None:
                raise InvalidArgumentError(f"rank {q} {bad}",
                                           **self._where(call))
        return [got for _, got in rows]

    @property
    def node(self) -> Groups:
        """The ranks sharing this rank's node (memory), in rank order.

        Nodes are ``Split_type(COMM_TYPE_SHARED)``, or groups of
        ``MPICOLL_RANKS_PER_NODE`` consecutive ranks when that is set
        (read when this communicator's context was created). Collective on
        first use: a ``Split_type`` or ``Split`` and a small allgather (see
        :attr:`mpicoll.engine.context.Context.nodes`), and the ``Dup`` of the new
        Comm; then cached.
        """
        return self._cached_sub("node", lambda: self._engine.ctx.node_comm)

    @property
    def leaders(self) -> Groups | None:
        """One rank per node, its lowest (local rank 0), in rank order: the
        cross-node communicator; None on the other ranks. Collective on
        first use (one ``Split`` and a ``Dup``, after what :attr:`node`
        costs); then cached."""
        return self._cached_sub("leaders", lambda: self._engine.ctx.leader_comm)

    @property
    def local_rank(self) -> int:
        """This rank's place within its node (0 .. local_size - 1).
        Collective on first use of node information (see :attr:`node`)."""
        nodes = self._engine.ctx.nodes
        return nodes[:self.rank].count(nodes[self.rank])

    @property
    def local_size(self) -> int:
        """How many ranks share this rank's node. Collective on first use
        of node information (see :attr:`node`)."""
        nodes = self._engine.ctx.nodes
        return nodes.count(nodes[self.rank])

    @property
    def num_nodes(self) -> int:
        """How many nodes this communicator spans. Collective on first use
        of node information (see :attr:`node`)."""
        return max(self._engine.ctx.nodes) + 1

    def _cached_sub(self, name: str, make) -> Groups | None:
        if name not in self._subcomms:
            mpi = make()
            sub = self._derived(mpi)
            self._subcomms[name] = None if sub == MPI.COMM_NULL else sub
        return self._subcomms[name]


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)
