"""``python -m mpicoll.trace DIR``: merge flight-recorder traces, say what went wrong.

Each MPI process's flight recorder dumps ``mpicoll-trace-rank<R>.json``
(the last calls on each of its communicators, the one it is blocked in).
This package reads them all (pure Python, no MPI) and says, per
communicator: the first call the members disagree on (who waits in it, in
which round of a hand-built algorithm and for which peer; who never joined
and where it is instead; who is at another collective under that number),
or that every rank is in one call, or that all completed; and which rank
arrives last (a straggler) over the calls every member recorded.

    from mpicoll.trace import load, analyse, render
    verdict = analyse(load(["traces/"]))   # a JSON-ready dict
    print(render(verdict))                 # the text report
    verdict["ok"]                          # nothing diverges, waits, is missing

Straggler times compare ``time.time()`` of different hosts: across nodes
they assume synchronised clocks.
"""

from mpicoll.trace.report import ranges, render, summary
from mpicoll.trace.verdict import TraceError, analyse, find, load

__all__ = ["TraceError", "analyse", "find", "load", "ranges", "render",
           "summary"]
