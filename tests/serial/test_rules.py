"""Tier 1: rules files (MPICOLL_RULES): parsing, validation, range lookup,
emitting ranges from benchmark records, and their place in choose()."""

from __future__ import annotations

import json

import pytest

from mpicoll.errors import InvalidArgumentError
from mpicoll.select.policy import choose, load_rules, rule_for, rules_from_records

GOOD = {"nranks": 2, "rules": {"allreduce": [
    {"max_bytes": 100, "algorithm": "ring"},
    {"max_bytes": 4096, "algorithm": "native"},
    {"max_bytes": None, "algorithm": "recursive_doubling"}]}}


def write(tmp_path, data, name="r.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_load_and_lookup(tmp_path):
    rules = load_rules(write(tmp_path, GOOD))
    assert rules.nranks == 2
    assert rule_for(rules, "allreduce", 0) == (0, 100, "ring")
    assert rule_for(rules, "allreduce", 100) == (0, 100, "ring")
    assert rule_for(rules, "allreduce", 101) == (101, 4096, "native")
    assert rule_for(rules, "allreduce", 10**9) == (4097, None,
                                                  "recursive_doubling")
    assert rule_for(rules, "bcast", 8) is None


def test_bounded_last_range(tmp_path):
    rules = load_rules(write(tmp_path, {"nranks": 1, "rules": {
        "bcast": [{"max_bytes": 8, "algorithm": "binomial"}]}}))
    assert rule_for(rules, "bcast", 8) == (0, 8, "binomial")
    assert rule_for(rules, "bcast", 9) is None


@pytest.mark.parametrize("data, match", [
    ("{not json", "not JSON"),
    ([], "expected"),
    ({"rules": {}}, "expected"),
    ({"nranks": 0, "rules": {}}, "nranks"),
    ({"nranks": 2, "rules": []}, "rules must be"),
    ({"nranks": 2, "rules": {"allreduse": [
        {"max_bytes": None, "algorithm": "ring"}]}}, "unknown collective"),
    ({"nranks": 2, "rules": {"allreduce": []}}, "non-empty"),
    ({"nranks": 2, "rules": {"allreduce": [{"max_bytes": 8}]}},
     "range 0"),
    ({"nranks": 2, "rules": {"allreduce": [
        {"max_bytes": 8, "algorithm": "ring"},
        {"max_bytes": 8, "algorithm": "native"}]}}, "above 8"),
    ({"nranks": 2, "rules": {"allreduce": [
        {"max_bytes": None, "algorithm": "ring"},
        {"max_bytes": 8, "algorithm": "native"}]}}, "unbounded"),
    ({"nranks": 2, "rules": {"allreduce": [
        {"max_bytes": "8", "algorithm": "ring"}]}}, "max_bytes"),
])
def test_bad_files_name_the_file(tmp_path, data, match):
    path = write(tmp_path, data)
    with pytest.raises(InvalidArgumentError, match=match) as info:
        load_rules(path)
    assert path in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(InvalidArgumentError, match="cannot read"):
        load_rules(str(tmp_path / "nope.json"))


def pick(rules, nbytes, *, size=2, commutative=True, overrides=None):
    return choose("allreduce", "auto", size=size, nbytes=nbytes,
                  commutative=commutative, overrides=overrides or {},
                  where={"rank": 0, "collective": "allreduce"}, rules=rules)


def test_choose_precedence(tmp_path):
    path = write(tmp_path, GOOD)
    rules = load_rules(path)
    c = pick(rules, 50)
    assert c.algorithm.name == "ring"
    assert path in c.reason and "0..100 B" in c.reason
    assert pick(rules, 10**7).algorithm.name == "recursive_doubling"
    assert "inf" in pick(rules, 10**7).reason
    # the environment override wins over the file
    c = pick(rules, 50, overrides={"allreduce": "native"})
    assert c.algorithm.name == "native" and path not in c.reason
    # another communicator size: the file does not apply
    c = pick(rules, 50, size=4)
    assert c.reason.startswith("default rule")


def test_fallback_when_constraints_fail_or_unknown(tmp_path):
    rules = load_rules(write(tmp_path, GOOD))
    c = pick(rules, 50, commutative=False)  # ring needs a commutative op
    assert "cannot run" in c.reason and "default rule" in c.reason
    assert c.algorithm.unmet(commutative=False) is None
    bad = load_rules(write(tmp_path, {"nranks": 2, "rules": {"allreduce": [
        {"max_bytes": None, "algorithm": "warp_drive"}]}}, "b.json"))
    c = pick(bad, 50)
    assert "unknown algorithm 'warp_drive'" in c.reason
    # the default for 50 B on 2 ranks (at MPI_THREAD_MULTIPLE): by hand
    assert "default rule" in c.reason
    assert c.algorithm.name == "recursive_doubling"


def test_in_place_allreduce_on_two_ranks_halves_at_128_256_kib():
    """Measured (docs/performance.md): in place, recursive doubling was
    slower than the half-vector exchanges (Rabenseifner, the ring) at 128
    and 256 KiB on 2 ranks; out of place it was the fastest there."""
    def algorithm(nbytes, inplace, size=2):
        return choose("allreduce", "auto", size=size, nbytes=nbytes,
                      commutative=True, overrides={}, where={},
                      inplace=inplace).algorithm.name

    assert [algorithm(n, True) for n in (64 << 10, 128 << 10, 256 << 10,
                                         512 << 10)] == [
        "recursive_doubling", "rabenseifner", "rabenseifner",
        "recursive_doubling"]
    assert algorithm(128 << 10, False) == "recursive_doubling"
    assert algorithm(128 << 10, True, size=4) == "rabenseifner"


def test_small_allreduce_on_two_ranks_follows_the_thread_level():
    """Measured (docs/performance.md): at MPI_THREAD_MULTIPLE recursive
    doubling beats the library's small blocking allreduce on 2 ranks from
    32 B to 2 KiB, at MPI_THREAD_SINGLE the library wins; 8 B and 8 KiB
    stay native, as do other sizes and collectives, and the nonblocking
    and persistent forms."""
    def algorithm(nbytes, size=2, multiple=True, collective="allreduce"):
        return choose(collective, "auto", size=size, nbytes=nbytes,
                      commutative=True, overrides={}, where={},
                      thread_multiple=multiple).algorithm.name

    assert [algorithm(n) for n in (8, 32, 2048, 4096, 8192)] == [
        "native", "recursive_doubling", "recursive_doubling",
        "recursive_doubling", "native"]
    assert algorithm(64, multiple=False) == "native"
    for form in ("nonblocking", "persistent"):  # MPICH's own calls win
        assert choose("allreduce", "auto", size=2, nbytes=64,
                      commutative=True, overrides={}, where={},
                      form=form).algorithm.name == "native"
    assert algorithm(64, size=4) == "native"
    assert algorithm(64, collective="bcast") == "native"


def rec(collective, algorithm, count, avg, wrong=0, nranks=2,
        dtype="float32"):
    return {"collective": collective, "algorithm": algorithm, "count": count,
            "nbytes": count * 4, "dtype": dtype, "nranks": nranks,
            "wrong": wrong, "time_us": {"avg": avg}}


def test_rules_from_records_merges_ranges():
    records = []
    for count, times in [(2, {"native": 1, "ring": 5, "auto": 0.1}),
                         (4, {"native": 2, "ring": 6}),
                         (8, {"native": 9, "ring": 3}),
                         (16, {"native": 9, "ring": 1, "rabenseifner": 0.5}),
                         (32, {"native": 9, "rabenseifner": 0.5})]:
        records += [rec("allreduce", a, count, t) for a, t in times.items()]
    records.append(rec("allreduce", "native", 64, 9))
    records.append(rec("allreduce", "ring", 64, 1, wrong=3))  # not right
    records.append(rec("alltoall", "native", 2, 1))
    out = rules_from_records(records, 2)
    assert out["nranks"] == 2
    assert out["rules"]["allreduce"] == [
        {"max_bytes": 16, "algorithm": "native"},
        {"max_bytes": 32, "algorithm": "ring"},
        {"max_bytes": 128, "algorithm": "rabenseifner"},
        {"max_bytes": None, "algorithm": "native"}]
    # alltoall's send buffer holds one block per rank
    assert out["rules"]["alltoall"] == [{"max_bytes": None,
                                         "algorithm": "native"}]


def test_emitted_rules_load(tmp_path):
    records = [rec("allreduce", "native", 2, 1), rec("bcast", "binomial",
                                                     2, 1)]
    path = write(tmp_path, rules_from_records(records, 2))
    rules = load_rules(path)
    assert rule_for(rules, "bcast", 10**6) == (0, None, "binomial")


def test_simulated_rules_say_so(tmp_path):
    data = dict(GOOD, source="simulation, analytic model, dragonfly:4,4,4,4")
    path = write(tmp_path, data)
    rules = load_rules(path)
    assert rules.source == data["source"]
    c = pick(rules, 50)
    assert c.algorithm.name == "ring"
    assert c.reason == (f"rules file {path} (simulation, analytic model, "
                        "dragonfly:4,4,4,4): allreduce 0..100 B -> ring")
    assert "(" not in pick(load_rules(write(tmp_path, GOOD, "g.json")),
                           50).reason.split(":")[0]
    with pytest.raises(InvalidArgumentError, match="source"):
        load_rules(write(tmp_path, dict(GOOD, source=3), "s.json"))
