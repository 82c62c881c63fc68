"""Build the optional C accelerators (the metadata is in setup.cfg).

``mpicoll.engine._gate``, ``mpicoll.engine._likeness`` and
``mpicoll.guard._stamp`` are twins of Python classes
(``mpicoll.engine.gate.Gate``, ``mpicoll.engine.likeness.Keys``,
``mpicoll.guard.recorder.Stamped``) that a repeated call goes through;
where a compiler is missing the build skips them and mpicoll runs the
Python twins (``MPICOLL_PURE=1`` does too).
"""

from __future__ import annotations

import re
from pathlib import Path

from setuptools import Extension, setup

# the C twins' contract with their Python callers, written once
TWINS = Path(__file__).parent / "mpicoll" / "guard" / "twins.py"
VERSION = re.search(r"^TWIN_VERSION = (\d+)$", TWINS.read_text(),
                    re.MULTILINE).group(1)


def twin(name: str, sources: list[str], **options) -> Extension:
    return Extension(name, sources, optional=True,
                     define_macros=[("TWIN_VERSION", VERSION)], **options)


setup(ext_modules=[
    twin("mpicoll.engine._gate", ["mpicoll/engine/_gate.c",
                                  "mpicoll/engine/_alike.c",
                                  "mpicoll/engine/_face.c"],
         depends=["mpicoll/engine/_gate.h"]),
    twin("mpicoll.engine._likeness", ["mpicoll/engine/_likeness.c"]),
    twin("mpicoll.guard._stamp", ["mpicoll/guard/_stamp.c"]),
])
