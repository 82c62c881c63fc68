"""``python -m mpicoll.catalogue``: write (or ``--check``) docs/algorithms.md
and the pages of docs/algorithms/ from the registry and the builders'
docstrings (:mod:`mpicoll.model.catalogue`)."""

import sys

if __name__ == "__main__":
    from mpicoll.model.catalogue import main

    sys.exit(main())
