"""Schedule components run by a subset of the ranks.

Topology-aware algorithms are made of the usual parts (a ring
reduce-scatter inside a node, a recursive-doubling allreduce across nodes,
a binomial broadcast...) run by groups of ranks of the one flat
communicator. A :class:`Subgroup` is a view of a
:class:`~mpicoll.schedule.core.ScheduleBuilder` in which the group's
members are ranks ``0 .. len(members)-1``:

- any ``*_steps`` component runs on it unchanged, called with the
  member's index and the group's size: peers are translated to ranks of
  the communicator on the way, spans pass through untouched (the caller
  hands the component its own spans), scratch comes from the parent;
- :meth:`Subgroup.embed` replays a whole schedule built for the group
  (by any registered builder) with its ``send`` and ``recv`` buffers
  mapped onto spans of the parent's buffers and its scratch allocated
  from the parent.

Both append to the parent in order, so components compose in sequence. A
rank in several groups runs their parts one after another; every rank
must meet the groups it shares with others in the same order (then no
member ever waits on a part its peer has not reached), which callers
ensure by walking shared structures in one fixed order.
"""

from __future__ import annotations

from mpicoll.schedule.core import SYNC, Copy, Schedule, ScheduleBuilder, Span


class Subgroup:
    """The ranks ``members`` of a parent builder's communicator, renumbered
    ``0 .. len(members)-1`` (member ``i`` is rank ``members[i]``)."""

    def __init__(self, b: ScheduleBuilder, members) -> None:
        self.members = tuple(members)
        self._b = b

    def alloc(self, n: int) -> Span:
        return self._b.alloc(n)

    def exchange(self, sends=(), recvs=()) -> None:
        m = self.members
        self._b.exchange(sends=[(m[peer], span) for peer, span in sends],
                         recvs=[(m[peer], span) for peer, span in recvs])

    def copy(self, src: Span, dst: Span) -> None:
        self._b.copy(src, dst)

    def reduce(self, a: Span, b: Span, dst: Span) -> None:
        self._b.reduce(a, b, dst)

    def embed(self, schedule: Schedule, *, send: Span, recv: Span) -> None:
        """Append ``schedule``, a member's schedule for this group, reading
        its ``send`` buffer from the span ``send`` and writing its ``recv``
        buffer into ``recv``; its scratch is new scratch of the parent.

        A span of the schedule's buffer ``x`` becomes the same elements of
        the span ``x`` maps to, so the spans must be at least as long as
        the buffers the schedule was built for.
        """
        where = {"send": send, "recv": recv, "tmp": self.alloc(schedule.tmp),
                 "sync": SYNC}

        def at(span: Span) -> Span:
            base = where[span.buf]
            if span.stop > len(base):
                raise ValueError(f"{span} lies outside the {len(base)} "
                                 f"elements {base} it maps to")
            return base.sub(span.start, span.stop)

        for rnd in schedule.rounds:
            self.exchange(sends=[(s.peer, at(s.span)) for s in rnd.sends],
                          recvs=[(r.peer, at(r.span)) for r in rnd.recvs])
            for step in rnd.local:
                if isinstance(step, Copy):
                    self.copy(at(step.src), at(step.dst))
                else:
                    self.reduce(at(step.a), at(step.b), at(step.dst))
