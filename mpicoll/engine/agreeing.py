"""Count agreements: the v-collectives' counts seen alike by every rank.

A mixin of :class:`~mpicoll.engine.engine.Engine`: it expects ``ctx``,
``check``, ``checker``, ``active``, ``bounded``, ``rank`` and ``where``.

A blocking v-collective kept for replay (:mod:`mpicoll.engine.replay`)
keeps its :class:`Agreement` with it: each replay exchanges this rank's
row of counts again (one ``Allgather`` of ``3p + 4`` int64 per rank, on
the private communicator) and runs the kept call only if every rank's row
is what it was, so that a rank whose counts changed still meets the same
verdict on every rank. Where a row changed, the replay is declined and
the full path reads the rows already gathered (:meth:`Agreeing.agree`),
so every rank makes exactly one exchange per call either way. A call on
new objects alike to a kept one (:mod:`mpicoll.engine.likeness`) makes
the kept call's exchange the same way: its likeness fixes its counts.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from mpicoll.args.message import named
from mpicoll.errors import InvalidArgumentError
from mpicoll.guard import exchange


class Declined(Exception):
    """A kept call declined to run before anything of it moved: its count
    agreement found another rank's counts changed. The caller takes the
    full path."""


class Agreeing:
    """:meth:`agree` and :meth:`disagree` (a mixin; see the module
    docstring)."""

    #: rows gathered by a declined replay, for the full path that follows
    gathered: np.ndarray | None = None

    def agree(self, collective: str, mine, theirs_from=None, root: int = 0):
        """``(every rank's mine, root's theirs_from, Agreement)`` for
        counts (:func:`~mpicoll.guard.exchange.count_row`): one
        small allgather on the private communicator, so that all ranks see
        the same counts and reach the same verdict on them (a count error
        raised on one rank alone would leave the others waiting in the
        collective). The :class:`Agreement` goes with the call
        (``Call.agreement``) for its replays."""
        active = self.active
        if self.check and active is not None:
            self.checker.verify(active, {"stage": "counts",
                                         "collective": collective}, None)
        row = exchange.count_row(self.size, mine, theirs_from)
        rows, self.gathered = self.gathered, None
        if rows is None or not np.array_equal(rows[self.rank], row):
            with self.ctx.recorder.step(_doing(collective)):
                rows = exchange.gather_count_rows(self.ctx.comm, row,
                                                  self.bounded)
        if active is not None:  # messages moved: a later error must meet
            active.open = True  # the peers at the collective's exchange
        got = exchange.from_count_rows(rows)
        self.disagree(collective, [
            f"rank {q} has more counts than the communicator has ranks"
            for q, counts in enumerate(got) if counts is None])
        return [m for m, _ in got], got[root][1], \
            Agreement(self, collective, row, rows)

    def disagree(self, collective: str, bad) -> None:
        """Raise, on every rank, the count disagreements ``bad`` found."""
        if bad:
            raise InvalidArgumentError(
                "counts disagree between ranks: " + "; ".join(bad),
                **self.where(collective))


class Agreement:
    """A call's count exchange, to be made again before each replay of
    it: this rank's ``row`` and the bytes of every rank's rows as they
    were (memory: two copies of the ``p x (3p + 4)`` int64 rows)."""

    __slots__ = ("allgather", "doing", "engine", "row", "rows", "seen")

    def __init__(self, engine, collective: str, row: np.ndarray,
                 rows: np.ndarray) -> None:
        self.engine = engine
        self.doing = _doing(collective)
        self.row = row
        self.seen = rows.tobytes()
        self.rows = np.empty_like(rows)
        #: the exchange, its messages named (parsed faster by mpi4py)
        self.allgather = partial(engine.ctx.comm.Allgather, named(row),
                                 named(self.rows))

    def exchange(self) -> None:
        """Make the exchange again; :class:`Declined` where a row is not
        what it was (the engine then holds the rows for the full path's
        :meth:`Agreeing.agree`). Cost: one ``Allgather`` and a
        comparison of the rows' bytes."""
        with self.engine.ctx.recorder.step(self.doing):  # under a deadline
            self.allgather()
        if self.rows.tobytes() != self.seen:
            self.refused()
            raise Declined

    def refused(self) -> None:
        """The call is not made after the exchange: its full path reads
        the rows gathered instead of exchanging them again."""
        self.engine.gathered = self.rows.copy()

    def before(self, run):
        """``run`` (a kept call) after the exchange (:meth:`exchange`)."""
        exchange = self.exchange

        def agreed():
            exchange()
            return run()

        return agreed


def _doing(collective: str) -> str:
    return f"agreeing on the counts of {collective}"
