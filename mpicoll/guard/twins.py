"""Which twin runs: a C accelerator or its Python original.

Two classes that every replayed call goes through have a twin in C,
built with the package where a compiler is present
(``mpicoll.engine._gate.Gate`` of :class:`mpicoll.engine.gate.Gate`, and
``mpicoll.guard._stamp.Stamped`` of
:class:`mpicoll.guard.recorder.Stamped`). Each twin does what the other
does, check for check and stamp for stamp (tests/serial/test_twins.py
runs both on the same cases); the C one only runs no Python frame.
``MPICOLL_PURE=1`` runs the Python twins, as does an installation built
without a compiler, or one whose C modules were built for another
:data:`TWIN_VERSION` (reinstall to rebuild them).
"""

from __future__ import annotations

import importlib
import os

PURE_VAR = "MPICOLL_PURE"
#: the contract between the C twins and their Python callers; each C
#: module says which it was built for (its ``TWIN_VERSION``), and one
#: built for another (a stale build beside newer sources) is not used
TWIN_VERSION = 5


def pure() -> bool:
    """Whether ``MPICOLL_PURE`` asks for the Python twins."""
    return os.environ.get(PURE_VAR, "").strip() not in ("", "0")


def accelerated(module: str, name: str, twin):
    """The C twin ``name`` of the module ``module`` where it was built
    and :func:`pure` is False, else the Python ``twin``."""
    if pure():
        return twin
    try:
        built = importlib.import_module(module)
    except ImportError:  # built without a compiler
        return twin
    if getattr(built, "TWIN_VERSION", None) != TWIN_VERSION:
        return twin  # a stale build: pip install again to rebuild it
    return getattr(built, name)
