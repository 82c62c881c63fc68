"""Every reference in the docstrings of mpicoll/ and in the markdown pages
(README.md, docs/*.md, docs/algorithms/*.md) points at something that
exists.

What counts as a reference (the rule that keeps false positives out):

- a dotted name starting with ``mpicoll.`` anywhere in the text
  (``mpicoll.coll.allgather.ring``, ``python -m mpicoll.bench``): it must
  import and every further part must be an attribute;
- in a docstring, the target of a Sphinx role (``:func:`fold_bounds```,
  ``:meth:`~mpicoll.api.comm.Comm.explain```): ``mpicoll.`` targets as above,
  others looked up where Sphinx would look, in the docstring's class, its
  module and the ``mpicoll`` package; a target whose first part names
  something from outside mpicoll there (``MPI.Op``, ``np.ndarray``) is not
  checked;
- in a docstring, a double-backticked dotted name whose first part is bound
  in the module to something of mpicoll (``Schedule.tmp`` where ``Schedule``
  is imported); ``self.x``, ``MPI.X``, ``comm.Allreduce`` (a variable) are
  not references;
- a repository path naming a file or a folder (``mpicoll/schedule/ops.py``,
  ``scripts/venv*.sh``, ``docs/results/``: first part a top-level
  folder of the repository, last part with an extension or a trailing
  ``/``) must exist; a code span that is just a Python or markdown file
  name (``work.py``; not ``python app.py``, a command) must be some file
  of the repository;
- in markdown, the target of a relative link ``[text](path#anchor)``: it must
  exist and lie inside the repository.

An attribute counts when ``getattr`` finds it, or it is a class's annotated
field or an attribute its methods assign (``self.name = ...``); a function
or class a module (not a package) merely imports does not count as the
module's (``coll.allgather.fold_bounds`` lives in ``mpicoll.topo``), unless
the module lists it in ``__all__``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
import sys
from pathlib import Path

import pytest

import mpicoll

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "mpicoll"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
         *sorted((REPO / "docs" / "algorithms").glob("*.md"))]
TOP_LEVEL = sorted(p.name for p in REPO.iterdir()
                   if not p.name.startswith(".") and p.name != "mpicoll.egg-info")

NAME = r"[A-Za-z_]\w*"
MPICOLL_NAME = re.compile(rf"(?<![\w.])mpicoll(?:\.{NAME})+")
ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj):`~?\.?([^`]+)`")
DOUBLE_BACKTICKED = re.compile(rf"``({NAME}(?:\.{NAME})+)")
FOLDERS = "|".join(re.escape(t) for t in TOP_LEVEL if (REPO / t).is_dir())
PATH = re.compile(rf"(?<![\w./~-])((?:{FOLDERS})/(?:[\w*.-]+/)*(?:[\w*-]+\.\w+)?)"
                  r"(?![\w/-])")
CODE_FILE = re.compile(r"(?<!`)`{1,2}([\w-]+\.(?:py|md))`{1,2}(?!`)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
FILES = {*TOP_LEVEL, *(name for top in TOP_LEVEL
                       for _, _, names in os.walk(REPO / top) for name in names)}


def _has_attr(obj, name: str) -> bool:
    if hasattr(obj, name):
        return True
    if not inspect.isclass(obj):
        return False
    for cls in inspect.getmro(obj):
        if name in getattr(cls, "__annotations__", {}):
            return True
        try:
            source = inspect.getsource(cls)
        except (OSError, TypeError):
            continue
        if re.search(rf"\bself\.{name}\s*(?::[^=\n]*)?=[^=]", source):
            return True
    return False


def _imported(module, name: str) -> bool:
    """Whether ``module`` (not a package) only imports function or class
    ``name`` for its own use: defined elsewhere, not in its ``__all__``."""
    obj = getattr(module, name)
    origin = getattr(obj, "__module__", None)
    return (not hasattr(module, "__path__") and origin is not None
            and (inspect.isclass(obj) or inspect.isroutine(obj))
            and origin != module.__name__
            and name not in getattr(module, "__all__", ()))


def _resolve_from(obj, parts) -> bool:
    for part in parts:
        if not _has_attr(obj, part) or (inspect.ismodule(obj)
                                        and _imported(obj, part)):
            return False
        obj = getattr(obj, part, None)
    return True


def resolves(dotted: str) -> bool:
    """Whether ``mpicoll.a.b...`` names a module or an attribute chain."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:n]))
        except ImportError:
            continue
        return _resolve_from(module, parts[n:])
    return False


def _from_mpicoll(obj) -> bool:
    name = obj.__name__ if inspect.ismodule(obj) else getattr(obj, "__module__", "")
    return (name or "").split(".")[0] == "mpicoll"


def _scopes(module, qualname: str):
    """Where a relative name in a docstring is looked up: the enclosing
    classes (innermost first), the module, the package."""
    scopes, obj = [], module
    for part in qualname.split(".")[:-1] if qualname else ():
        obj = getattr(obj, part, None)
        if inspect.isclass(obj):
            scopes.insert(0, obj)
    return [*scopes, module, mpicoll]


def _relative_ok(target: str, scopes) -> bool | None:
    """True/False: a checked relative target that resolves or not; None:
    not checked (its first part names something from outside mpicoll)."""
    first, *rest = target.split(".")
    for scope in scopes:
        if _has_attr(scope, first):
            obj = getattr(scope, first, None)
            if obj is not None and not inspect.isclass(scope) and \
                    not _from_mpicoll(obj) and (inspect.ismodule(obj)
                                                or inspect.isclass(obj)):
                return None  # MPI.Op, np.ndarray: not ours to check
            return _resolve_from(obj, rest) if obj is not None else not rest
    return False


def _docstrings():
    """(module name, qualified name, line, docstring) of every docstring."""
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        tree = ast.parse(path.read_text())
        stack = [(tree, "")]
        while stack:
            node, qual = stack.pop()
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield name, qual, getattr(node, "lineno", 1), doc
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.ClassDef, ast.FunctionDef,
                                      ast.AsyncFunctionDef)):
                    stack.append((child, f"{qual}.{child.name}".lstrip(".")))


def _path_problems(text: str) -> list[str]:
    bad = [p for p in PATH.findall(text)
           if (p.endswith("/") or "." in p.rsplit("/", 1)[-1])
           and not any(REPO.glob(p.rstrip("/")))]
    bad += [f for f in CODE_FILE.findall(text) if f not in FILES]
    return bad


def docstring_problems() -> list[str]:
    problems = []
    for module_name, qual, line, doc in _docstrings():
        if module_name.endswith(".__main__"):  # a script: not imported
            module_name = module_name.rsplit(".", 1)[0]
        module = importlib.import_module(module_name)
        scopes = _scopes(module, f"{qual}.x" if qual else "")
        bad = [d for d in MPICOLL_NAME.findall(doc) if not resolves(d)]
        for target in ROLE.findall(doc):
            target = target.split("(")[0].strip()
            if target.startswith("mpicoll."):
                continue  # MPICOLL_NAME has it
            if _relative_ok(target, scopes) is False:
                bad.append(target)
        for dotted in DOUBLE_BACKTICKED.findall(doc):
            if dotted.startswith("mpicoll."):
                continue
            first = dotted.split(".")[0]
            obj = getattr(module, first, None)
            if obj is not None and _from_mpicoll(obj) and \
                    not _resolve_from(obj, dotted.split(".")[1:]):
                bad.append(dotted)
        bad += _path_problems(doc)
        where = f"{module_name}.{qual}".rstrip(".")
        problems += [f"{where} (line {line}): {b}" for b in dict.fromkeys(bad)]
    return problems


def slug(heading: str) -> str:
    """A markdown heading's anchor as GitHub makes it: links kept as their
    text, lower case, spaces to hyphens, every character but letters,
    digits, hyphens and underscores dropped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return "".join(c for c in text.replace(" ", "-")
                   if c in "-_" or c.isalnum())


def anchors(page: Path) -> set[str]:
    """The anchors of a markdown page's headings (outside code blocks); a
    heading met again gets ``-1``, ``-2``, ... as on GitHub."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = re.match(r"#+\s+(.*)", line)
        if heading and not fenced:
            name = slug(heading.group(1))
            n = seen.get(name, 0)
            seen[name] = n + 1
            found.add(f"{name}-{n}" if n else name)
    return found


def page_problems(page: Path) -> list[str]:
    text = page.read_text()
    bad = [d for d in MPICOLL_NAME.findall(text) if not resolves(d)]
    bad += _path_problems(text)
    for target in LINK.findall(text):
        path, _, anchor = target.partition("#")
        if re.match(r"[a-z]+:", path):
            continue  # a URL
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.is_relative_to(REPO) or not resolved.exists():
            bad.append(target)
        elif anchor and resolved.suffix == ".md" and \
                anchor not in anchors(resolved):
            bad.append(f"{target} (no such heading)")
    return [f"{page.relative_to(REPO)}: {b}" for b in dict.fromkeys(bad)]


def test_the_rule_catches_a_broken_reference():
    assert resolves("mpicoll.coll.allgather.ring")
    assert resolves("mpicoll.topo.blocks.fold_bounds")
    assert not resolves("mpicoll.coll.allgather.no_such_function")
    assert not resolves("mpicoll.no_such_module")
    reduce_scatter = importlib.import_module("mpicoll.coll.reduce_scatter")
    assert _relative_ok("ring_steps", _scopes(reduce_scatter, "")) is True
    assert _relative_ok("no_such_steps", _scopes(reduce_scatter, "")) is False
    simulate = importlib.import_module("mpicoll.sim.data")
    assert _relative_ok("np.ndarray", _scopes(simulate, "")) is None


def test_anchors_are_made_as_github_makes_them(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("# Simulation: schedules without MPI\n"
                    "## At 65,536 ranks\n```\n# not a heading\n```\n"
                    "### `--keep` and [SMPI](x.md), again\n"
                    "## At 65,536 ranks\n")
    assert anchors(page) == {"simulation-schedules-without-mpi",
                             "at-65536-ranks", "at-65536-ranks-1",
                             "--keep-and-smpi-again"}
    (tmp_path / "other.md").write_text("[a](page.md#at-65536-ranks-1) "
                                       "[b](page.md#no-such) [c](#nor-this)")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    problems = page_problems(tmp_path / "other.md")
    assert len(problems) == 2 and "no-such" in problems[0], problems


def test_docstring_references_resolve():
    problems = docstring_problems()
    assert not problems, "broken references in docstrings:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_references_resolve(page):
    problems = page_problems(page)
    assert not problems, "broken references:\n" + "\n".join(problems)
