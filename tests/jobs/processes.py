"""What the job tests share: ending a job whose ranks they signalled."""

from __future__ import annotations

import os
import signal
import subprocess


def end_job(proc: subprocess.Popen, pids: dict[int, int]) -> None:
    """Kill every rank in ``pids`` (rank: pid) and the launcher ``proc``,
    and reap the launcher: no rank outlives a test, passed or failed."""
    for pid in pids.values():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.kill()
    proc.wait()
