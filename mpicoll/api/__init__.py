"""The two faces: ``mpicoll.Comm`` (mpi4py's calls) and
``mpicoll.ProcessGroup`` (torch.distributed's), on one engine.

Each face parses its arguments (with :mod:`mpicoll.args`) into a
:class:`~mpicoll.engine.engine.Call` and hands it to the engine:
``comm`` and its mixins (``nonblocking_calls``, ``vector_calls``,
``persistent_calls``, ``p2p``, ``groups``, ``children``),
``process_group`` and ``torch_p2p``; ``calls`` builds the records both
faces share.
May import the engine and everything below it.
"""
