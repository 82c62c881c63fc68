"""The engine: one :class:`~mpicoll.engine.engine.Call` record in, the
collective run.

``engine`` chooses (through :mod:`mpicoll.select`) and launches,
natively or hand-built, blocking, nonblocking, persistent
(``persistent``) or replayed (``replay``, ``rebind``);
``context`` keeps each communicator's private duplicate, tags and
compiled plans; ``executor`` runs compiled steps on MPI;
``progress`` advances them in the background; ``work`` is the
handle a nonblocking call returns. May import the guards, selection,
argument helpers, the device layer and everything below.
"""
