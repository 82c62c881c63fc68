"""Is this MPI library CUDA-aware? What its build and its query say.

    python bench/cuda_aware.py

Prints the library's version, the answer of its own query
(``MPIX_Query_cuda_support``, or MPICH's ``MPIX_GPU_query_support``:
:func:`mpicoll.device.cuda.library_says_cuda_aware`), and what its build
says: MPICH's configure line (``mpichversion``), or Open MPI's configure
line and accelerator components (``ompi_info``), from the tools beside
this Python. No GPU needed: the build decides whether device pointers can
be handed to the library at all. (Open MPI as root: set
``OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1``.)
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from mpi4py import MPI

from mpicoll.device.cuda import library_says_cuda_aware


def tool(name: str, *args: str) -> list[str]:
    """The lines ``name`` (beside this Python, else on PATH) prints."""
    path = Path(sys.executable).parent / name
    found = str(path) if path.exists() else shutil.which(name)
    if found is None:
        return [f"({name} not found)"]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    run = subprocess.run([found, *args], capture_output=True, text=True,
                         env=env, timeout=60)
    return run.stdout.splitlines()


version = MPI.Get_library_version().replace("\0", "")  # Open MPI's ends in one
print(version.splitlines()[0].strip())
print("its query says CUDA-aware:", library_says_cuda_aware())
if "Open MPI" in version:
    for line in tool("ompi_info"):
        if any(k in line for k in ("Configure command", "accelerator",
                                   "MPI extensions")):
            print(line.strip())
else:
    for line in tool("mpichversion"):
        if any(k in line for k in ("configure", "Device")):
            print(line.strip())
