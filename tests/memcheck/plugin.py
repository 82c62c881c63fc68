"""pytest plugin of ``scripts/memcheck.sh``: NumPy's freed data held in
quarantine (``quarantine.c``) for the whole session, every held block
checked after each test, and the test named in the report file when a
check finds a block written after it was freed."""

from __future__ import annotations

import os

import quarantine

quarantine.install()
_reports = 0


def pytest_runtest_logfinish(nodeid, location):
    global _reports
    reports = quarantine.sweep()[1]
    if reports != _reports:
        _reports = reports
        log = os.environ.get("MPICOLL_MEMCHECK_LOG")
        if log:
            with open(f"{log}.{os.getpid()}", "a") as f:
                f.write(f"memcheck: found after {nodeid}\n")


def pytest_sessionfinish(session, exitstatus):
    if quarantine.sweep()[1] and session.exitstatus == 0:
        session.exitstatus = 1
