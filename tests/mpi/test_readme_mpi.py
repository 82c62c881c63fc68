"""The Python examples of README.md and of every docs/*.md page run, on
every rank, as written.

Every ```python block is run, one test per page and block (ids like
``README.md-0``, ``docs/api.md-2``). An ``...`` placeholder line stands for
the user's own work. A block right after a line
``<!-- not run: REASON -->`` is skipped with that reason: for the few that
cannot run here (one that would change process-wide state for the rest of
the session, say). The CuPy example skips without CuPy and a GPU."""

from __future__ import annotations

import pathlib
import re

import pytest

from mpicoll.bench.device import unavailable

pytestmark = [pytest.mark.mpi, pytest.mark.interface]

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# An optional "not run" comment on the line before the block (blank lines
# between allowed), then the block itself.
BLOCK = re.compile(
    r"(?:^<!--[ \t]*not run:[ \t]*([^\n]*?)[ \t]*-->[ \t]*\n(?:[ \t]*\n)*)?"
    r"^```python\n(.*?)^```", re.S | re.M)


def examples():
    for page in PAGES:
        name = page.relative_to(ROOT).as_posix()
        text = page.read_text()
        for i, m in enumerate(BLOCK.finditer(text)):
            # Blank lines in front: tracebacks give the page's line numbers.
            source = "\n" * text.count("\n", 0, m.start(2)) + m.group(2)
            yield pytest.param(page, source, m.group(1), id=f"{name}-{i}")


@pytest.mark.parametrize("page, source, not_run", list(examples()))
def test_example_runs(page, source, not_run):
    if not_run is not None:
        pytest.skip(f"marked not run: {not_run}")
    if "import cupy" in source and unavailable("cuda"):
        pytest.skip("the GPU example needs CuPy and a GPU")
    code = re.sub(r"^(\s*)\.\.\.(\s*#.*)?$", r"\1pass", source, flags=re.M)
    exec(compile(code, str(page), "exec"), {"__name__": "readme"})
