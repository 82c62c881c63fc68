"""Build the optional C accelerators (the metadata is in setup.cfg).

``mpicoll.engine._gate``, ``mpicoll.engine._likeness`` and
``mpicoll.guard._stamp`` are twins of Python classes
(``mpicoll.engine.gate.Gate``, ``mpicoll.engine.likeness.Keys``,
``mpicoll.guard.recorder.Stamped``) that a repeated call goes through;
where a compiler is missing the build skips them and mpicoll runs the
Python twins (``MPICOLL_PURE=1`` does too).
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("mpicoll.engine._gate", ["mpicoll/engine/_gate.c",
                                       "mpicoll/engine/_alike.c",
                                       "mpicoll/engine/_face.c"],
              depends=["mpicoll/engine/_gate.h"], optional=True),
    Extension("mpicoll.engine._likeness", ["mpicoll/engine/_likeness.c"],
              optional=True),
    Extension("mpicoll.guard._stamp", ["mpicoll/guard/_stamp.c"],
              optional=True),
])
