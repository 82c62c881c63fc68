"""Tier 1: security, without MPI ranks.

tests/mpi/test_security_mpi.py runs the library with pickle and sockets
refused; these are the static halves: no mpicoll module imports a
serializer that runs code on load, or a networking module, and the
metadata exchange (:mod:`mpicoll.guard.exchange`) takes only JSON, so bytes a
peer sends cannot make it run anything.
"""

from __future__ import annotations

import ast
import pathlib
import pickle

import pytest

from mpicoll.guard import exchange

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "mpicoll"
# serializers that can run code when loading, and networking
REFUSED = {"pickle", "_pickle", "cPickle", "dill", "cloudpickle", "marshal",
           "shelve", "copyreg", "socket", "_socket", "socketserver", "ssl",
           "http", "urllib", "ftplib", "smtplib", "xmlrpc", "requests",
           "asyncio", "multiprocessing"}


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and \
                not node.level:
            names.add(node.module)
        elif isinstance(node, ast.Call) and getattr(
                node.func, "id", getattr(node.func, "attr", None)) in (
                    "__import__", "import_module") and node.args and \
                isinstance(node.args[0], ast.Constant):
            names.add(str(node.args[0].value))
    return {n.split(".")[0] for n in names}


def test_no_module_imports_pickle_or_networking():
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) > 40
    found = {str(p.relative_to(PACKAGE.parent)): sorted(_imports(p) & REFUSED)
             for p in sources}
    assert not {p: names for p, names in found.items() if names}


class _Exploit:
    """Unpickling this runs ``exec``: what a hostile peer could send to a
    process that unpickles what it receives."""

    def __reduce__(self):
        return (exec, ("import builtins; builtins.PWNED = True",))


def test_exchange_decodes_json_only():
    import builtins

    payload = pickle.dumps(_Exploit())
    with pytest.raises(ValueError):  # UnicodeDecodeError or JSONDecodeError
        exchange.decode(payload)
    assert not hasattr(builtins, "PWNED")
    item = ("rank 3 passed color 'x'", [1, 2.5, None, True, [3]])
    assert exchange.decode(exchange.encode(item)) == (
        "rank 3 passed color 'x'", (1, 2.5, None, True, (3,)))


@pytest.mark.parametrize("obj", [object(), {1, 2}, b"bytes", _Exploit()])
def test_exchange_encodes_plain_data_only(obj):
    with pytest.raises(TypeError):
        exchange.encode(obj)
