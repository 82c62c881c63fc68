"""Which twin runs: a C accelerator or its Python original.

Two classes that every replayed call goes through have a twin in C,
built with the package where a compiler is present
(``mpicoll.engine._gate.Gate`` of :class:`mpicoll.engine.gate.Gate`, and
``mpicoll.guard._stamp.Stamped`` of
:class:`mpicoll.guard.recorder.Stamped`). Each twin does what the other
does, check for check and stamp for stamp (tests/serial/test_twins.py
runs both on the same cases); the C one only runs no Python frame.
``MPICOLL_PURE=1`` runs the Python twins, as does an installation built
without a compiler.
"""

from __future__ import annotations

import importlib
import os

PURE_VAR = "MPICOLL_PURE"


def pure() -> bool:
    """Whether ``MPICOLL_PURE`` asks for the Python twins."""
    return os.environ.get(PURE_VAR, "").strip() not in ("", "0")


def accelerated(module: str, name: str, twin):
    """The C twin ``name`` of the module ``module`` where it was built
    and :func:`pure` is False, else the Python ``twin``."""
    if pure():
        return twin
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:  # built without a compiler
        return twin
