"""The README's Python examples run, on every rank, as written (an
``...`` placeholder line stands for the user's own work)."""

from __future__ import annotations

import pathlib
import re

import pytest

from mpicoll.bench.device import unavailable

pytestmark = pytest.mark.mpi

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


@pytest.mark.parametrize("source", EXAMPLES,
                         ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_readme_example_runs(source):
    if "import cupy" in source and unavailable("cuda"):
        pytest.skip("the GPU example needs CuPy and a GPU")
    code = re.sub(r"^(\s*)\.\.\.(\s*#.*)?$", r"\1pass", source, flags=re.M)
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})
