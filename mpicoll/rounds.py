"""``python -m mpicoll.rounds``: who sends what to whom, round by round
(:mod:`mpicoll.model.rounds`)."""

import sys

if __name__ == "__main__":
    from mpicoll.model.rounds import main

    sys.exit(main())
