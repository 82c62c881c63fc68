"""docs/algorithms.md and docs/algorithms/ are what ``python -m
mpicoll.catalogue`` writes, list every registered algorithm, and the
builders' "Rounds:" claims hold.

A claim is a formula in a builder's docstring (``2(p-1)``,
``floor(log2 p) + 2``); the test reads it as Python and compares it with
:func:`mpicoll.model.rounds.depth`, the rounds along the deepest chain of
dependent messages of the schedules of all ranks, for the numbers of ranks
the claim is made for.
"""

from __future__ import annotations

import math
import re

import pytest

from mpicoll.model import catalogue
from mpicoll.coll import algorithms, lookup
from mpicoll.collectives import COLLECTIVES
from mpicoll.model.rounds import depth, main, render, schedules
from mpicoll.topo import square_grid

POW2 = (2, 4, 8, 16)
OTHER = (3, 5, 6, 7, 9, 12)
ANY = tuple(range(2, 13))


def registered():
    return [(c, a) for c in COLLECTIVES for a in algorithms(c)]


def test_pages_are_generated_from_the_code():
    docs = catalogue.DOCS
    for rel, text in catalogue.pages().items():
        assert (docs / rel).read_text() == text, (
            f"docs/{rel} is stale: run python -m mpicoll.catalogue")
    assert catalogue.main(["--check"]) == 0, "an extra page in docs/algorithms/"


def test_check_exit_status(tmp_path, capsys):
    assert catalogue.main(["--check", "--output", str(tmp_path)]) == 1
    assert catalogue.main(["--output", str(tmp_path)]) == 0
    assert catalogue.main(["--check", "--output", str(tmp_path)]) == 0
    page = tmp_path / "algorithms" / "allreduce.md"
    page.write_text(page.read_text() + "edited\n")
    assert catalogue.main(["--check", "--output", str(tmp_path)]) == 1
    extra = tmp_path / "algorithms" / "gone.md"
    extra.write_text("# a page no longer generated\n")
    assert catalogue.main(["--output", str(tmp_path)]) == 0
    assert not extra.exists()
    extra.write_text("# a page no longer generated\n")
    assert catalogue.main(["--check", "--output", str(tmp_path)]) == 1
    assert "algorithms/gone.md" in capsys.readouterr().err


def test_pages_hold_every_collective_once_and_stay_short():
    pages = catalogue.pages()
    on_pages = [c for members in catalogue.FAMILIES.values() for c in members]
    assert sorted(on_pages) == sorted(COLLECTIVES)
    for rel, text in pages.items():
        assert text.count("\n") <= 500, f"docs/{rel}: regroup FAMILIES"


@pytest.mark.parametrize("collective, name", registered())
def test_every_algorithm_has_an_entry(collective, name):
    pages = catalogue.pages()
    family = f"algorithms/{catalogue.family(collective)}.md"
    assert f"\n### {collective}: {name}\n" in pages[family]
    assert f"| [{name}]({family}#{collective}-{name}) |" in pages["algorithms.md"]
    alg = lookup(collective, name)
    if not alg.native:
        catalogue.docstring_fields(alg.build)  # raises if a field is missing


def test_a_shared_builder_has_one_entry():
    page = catalogue.pages()["algorithms/gather_scatter.md"]
    gatherv = page[page.index("### gatherv: linear"):]
    gatherv = gatherv[:gatherv.index("\n### ")]
    assert "[gather: linear](#gather-linear)" in gatherv
    assert "**Rounds**" not in gatherv
    assert page.count("(`mpicoll.coll.gather.linear`)") == 2


def test_docstring_block_is_parsed():
    def build():
        """Summary.

        Prose.

        Rounds: ``2(p-1)``, as the
        ring has.
        Bytes sent per rank: ``n``.
        Temp memory: none.
        Reference: Someone 2001.

        Trace: not a field.
        """

    fields = catalogue.docstring_fields(build)
    assert fields == {"rounds": "``2(p-1)``, as the ring has.", "bytes": "``n``.",
                      "label": "Bytes sent per rank", "temp": "none.",
                      "reference": "Someone 2001."}
    build.__doc__ = "Summary.\n\nRounds: 1.\nTemp memory: none.\n"
    with pytest.raises(ValueError, match="Bytes sent, Reference"):
        catalogue.docstring_fields(build)


def test_markdown_and_first_clause():
    text = catalogue.markdown(
        "``log2 p`` for a power of two, see :func:`~mpicoll.topo.fold_bounds`")
    assert text == "`log2 p` for a power of two, see `fold_bounds`"
    assert catalogue.first_clause(text) == "`log2 p` for a power of two"
    assert catalogue.first_clause("`f(a, b)` (never split in code)") == "`f(a, b)`"


def evaluate(formula: str, **variables) -> float:
    """A docstring's formula as Python: ``2(p-1)`` is ``2*(p-1)``,
    ``2 floor(log2 p)`` is ``2*floor(log2(p))``."""
    expr = re.sub(r"log2 (\w)", r"log2(\1)", formula)
    expr = re.sub(r"(?<![a-z\d])(\d+)\s*([a-z(])", r"\1*\2", expr)
    names = {"log2": math.log2, "floor": math.floor, "ceil": math.ceil}
    return eval(expr, names, variables)


def test_evaluate():
    assert evaluate("2(p-1)", p=4) == 6
    assert evaluate("2 floor(log2 p) + 2", p=5) == 6
    assert evaluate("ceil(log2 p) + floor(log2 p)", p=5) == 5


def _flat(*claims):
    """(collective, algorithm, formula, cases): each case ``(size,
    schedule arguments, formula variables)``, on one node."""
    return [(c, a, f, [(p, {}, {"p": p}) for p in ps]) for c, a, f, ps in claims]


def _nodes(collective, algorithm, formula, ms, ls):
    """A claim on ``m`` nodes of ``L`` ranks, nodes of consecutive ranks."""
    return (collective, algorithm, formula,
            [(m * n, {"nodes": tuple(i // n for i in range(m * n))},
              {"m": m, "L": n}) for m in ms for n in ls])


CLAIMS = [
    *_flat(
        ("allreduce", "recursive_doubling", "log2 p", POW2),
        ("allreduce", "recursive_doubling", "floor(log2 p) + 2", OTHER),
        ("allreduce", "ring", "2(p-1)", ANY),
        ("allreduce", "rabenseifner", "2 log2 p", POW2),
        ("allreduce", "rabenseifner", "2 floor(log2 p) + 2", OTHER),
        ("allreduce", "reduce_bcast", "2 ceil(log2 p)", ANY),
        ("reduce", "linear", "p-1", ANY),
        ("reduce", "binomial", "ceil(log2 p)", ANY),
        ("reduce", "rabenseifner", "2 log2 p", POW2),
        ("bcast", "linear", "1", ANY),
        ("bcast", "binomial", "ceil(log2 p)", ANY),
        ("bcast", "scatter_allgather", "ceil(log2 p) + p-1", ANY),
        ("allgather", "ring", "p-1", ANY),
        ("allgather", "recursive_doubling", "log2 p", POW2),
        ("allgather", "recursive_doubling", "floor(log2 p) + 2", OTHER),
        ("allgather", "bruck", "ceil(log2 p)", ANY),
        ("allgatherv", "ring", "p-1", ANY),
        ("allgatherv", "recursive_doubling", "log2 p", POW2),
        ("allgatherv", "recursive_doubling", "floor(log2 p) + 2", OTHER),
        ("barrier", "dissemination", "ceil(log2 p)", ANY),
        ("barrier", "binomial", "2 floor(log2 p)", ANY),
        ("alltoall", "linear", "1", ANY),
        ("alltoall", "pairwise", "p-1", ANY),
        ("alltoall", "bruck", "ceil(log2 p)", ANY),
        ("alltoallv", "linear", "1", ANY),
        ("alltoallv", "pairwise", "p-1", ANY),
        ("scan", "linear", "p-1", ANY),
        ("scan", "recursive_doubling", "ceil(log2 p)", ANY),
        ("exscan", "linear", "p-1", ANY),
        ("exscan", "recursive_doubling", "ceil(log2 p)", ANY),
    ),
    *_flat(*[(c, "ring", "p-1", ANY) for c in ("reduce_scatter",
                                               "reduce_scatter_block")],
           *[(c, "pairwise", "p-1", ANY) for c in ("reduce_scatter",
                                                   "reduce_scatter_block")],
           *[(c, "recursive_halving", f, ps)
             for c in ("reduce_scatter", "reduce_scatter_block")
             for f, ps in (("log2 p", POW2), ("floor(log2 p) + 2", OTHER))],
           *[(c, a, f, ANY) for c in ("gather", "gatherv", "scatter", "scatterv")
             for a, f in (("linear", "1"),
                          ("binomial", "floor(log2 p)" if c.startswith("gather")
                           else "ceil(log2 p)"))]),
    ("bcast", "scatter_allgather", "2 log2 p",
     [(p, {"allgather": "recursive_doubling"}, {"p": p}) for p in POW2]),
    ("bcast", "pipelined", "p-2+k",
     [(p, {"count": 10, "segment": 3}, {"p": p, "k": 4}) for p in range(3, 9)]),
    ("allreduce", "torus", "2(a-1) + 2(b-1)",
     [(a * b, {"dims": (a, b)}, {"a": a, "b": b})
      for a in (1, 2, 3, 4) for b in (1, 2, 3, 5)]
     + [(p, {}, dict(zip("ab", square_grid(p)))) for p in (4, 6, 8, 10, 16)]),
    _nodes("allreduce", "hierarchical", "2(L-1) + 2 floor(log2 m)",
           (1, 2, 4), (1, 2, 3, 4)),
    _nodes("allreduce", "hierarchical_reduce_bcast",
           "2 ceil(log2 L) + floor(log2 m)", (1, 2, 4), (1, 2, 3, 5)),
    _nodes("bcast", "hierarchical", "ceil(log2 m) + ceil(log2 L)",
           (1, 2, 3, 5), (1, 2, 3, 5)),
    _nodes("allgather", "hierarchical", "(m-1) + (L-1)", (1, 2, 3), (1, 2, 3, 4)),
    *[_nodes(c, "hierarchical", "m+1", (1, 2, 3, 4), (2, 3, 4))
      for c in ("alltoall", "alltoallv")],
    *[_nodes(c, "hierarchical_2d", "m", (1, 2, 3, 4), (2, 3, 4))
      for c in ("alltoall", "alltoallv")],
]


def test_every_hand_built_algorithm_has_a_checked_claim():
    checked = {(c, a) for c, a, _, _ in CLAIMS}
    assert checked == {(c, a) for c, a in registered() if a != "native"}


@pytest.mark.parametrize("collective, name, formula, cases", CLAIMS,
                         ids=[f"{c}-{a}-{f}" for c, a, f, _ in CLAIMS])
def test_rounds_claim(collective, name, formula, cases):
    rounds = catalogue.docstring_fields(lookup(collective, name).build)["rounds"]
    claimed = f"``{formula}``" in rounds or re.match(
        rf"{re.escape(formula)}(?![\w(])", rounds)
    assert claimed, (
        f"the docstring no longer claims {formula}: {rounds}")
    for size, kwargs, variables in cases:
        kwargs = dict(kwargs)
        count = kwargs.pop("count", None)
        got = depth(schedules(collective, name, size, count, **kwargs))
        assert got == evaluate(formula, **variables), (size, kwargs)


def test_render_matches_the_schedules():
    text = render("allreduce", "ring", 3)
    assert text.splitlines()[:3] == [
        "allreduce ring, 3 ranks, count 3",
        "scratch (tmp elements): 0: 1, 1: 1, 2: 1",
        "round 1  0→1 send[2]→tmp  1→2 send[0]→tmp  2→0 send[1]→tmp",
    ]
    assert text.count("\nround ") == 4  # 2(p-1)
    assert "start    0: recv[0] ← send" in render("allgather", "ring", 2)


def test_rounds_command(capsys):
    assert main(["bcast", "binomial", "--ranks", "4", "--root", "1"]) == 0
    out = capsys.readouterr().out
    assert "round 1  1→3 recv→recv\nround 2  1→2 recv→recv  3→0 recv→recv" in out
    with pytest.raises(SystemExit):
        main(["bcast", "native"])
