"""Tier 1: ``auto`` beyond two ranks orders its candidates by the cost
model (mpicoll.select.policy.BEYOND_PAIR, mpicoll.model.formulas.estimate), from a
calibration file (MPICOLL_CALIBRATION, or mpicoll's default)."""

from __future__ import annotations

import json

import pytest

from mpicoll.select import policy as select
from mpicoll.model.calibration import DEFAULT_CALIBRATION, load_calibration
from mpicoll.errors import InvalidArgumentError
from mpicoll.model.formulas import estimate, formula
from mpicoll.model.cost import Network, SizeRange
from mpicoll.select.policy import BEYOND_PAIR, CostModel, choose


def pick(collective, size, nbytes, network, commutative=True):
    return choose(collective, "auto", size=size, nbytes=nbytes,
                  commutative=commutative, overrides={}, where={},
                  model=CostModel(network, "test network"))


def test_latency_bound_prefers_few_rounds_bandwidth_bound_few_bytes():
    """With a large alpha, recursive doubling's lg p rounds win at 64 KiB
    on 8 ranks; with a small one Rabenseifner's halved bytes do; off a
    power of two a long vector goes round the ring (Rabenseifner's fold
    sends the whole vector twice more)."""
    slow_start = Network(alpha=1e-3, beta=1e-10, gamma=1e-10)
    fast_start = Network(alpha=1e-7, beta=1e-10, gamma=1e-10)
    assert pick("allreduce", 8, 64 << 10, slow_start).algorithm.name == \
        "recursive_doubling"
    assert pick("allreduce", 8, 64 << 10, fast_start).algorithm.name == \
        "rabenseifner"
    assert pick("allreduce", 6, 64 << 20, fast_start).algorithm.name == \
        "ring"
    assert pick("bcast", 8, 64 << 10, slow_start).algorithm.name == \
        "binomial"
    assert pick("bcast", 8, 64 << 20, fast_start).algorithm.name == \
        "scatter_allgather"


def test_the_reason_gives_every_candidates_prediction():
    net = Network(alpha=1e-6, beta=1e-10, gamma=1e-10)
    c = pick("allreduce", 8, 1 << 20, net)
    assert c.reason.startswith("cost model (test network): 1048576 B on "
                               "8 ranks predicted ")
    for name in BEYOND_PAIR["allreduce"]:
        t = formula("allreduce", name, 8, 1 << 20, net)
        assert f"{name} {t * 1e6:.4g} us" in c.reason
    # one candidate (allgather: the ring) or below 16 KiB: no model
    assert "cost model" not in pick("allgather", 8, 1 << 20, net).reason
    assert pick("allreduce", 8, 1024, net).algorithm.native


def test_ties_and_constraints_keep_the_listed_order():
    """Ring and pairwise reduce-scatter cost the same: the first listed
    wins; a non-commutative op skips what cannot run, by the model's
    order."""
    net = Network(alpha=1e-6, beta=1e-10, gamma=1e-10)
    assert pick("reduce_scatter", 8, 1 << 20, net).algorithm.name == "ring"
    c = pick("allreduce", 8, 1 << 20, net, commutative=False)
    assert c.algorithm.unmet(commutative=False) is None


def test_two_ranks_keep_the_measured_rules():
    net = Network(alpha=1.0, beta=0.0)  # would make anything by hand lose
    assert pick("allreduce", 2, 64 << 10, net).algorithm.name == \
        "recursive_doubling"


def test_estimate_prices_the_dominant_message_in_its_range():
    """On a network with size ranges, estimate() is the published form
    with the costs of the range holding the algorithm's dominant message:
    the ring's blocks (n/p), recursive doubling's whole vector; with no
    ranges it is formula()."""
    small = SizeRange(4096, 5e-6, 1e-9, 2e-9, 0.0)
    net = Network(alpha=1e-6, beta=1e-10, gamma=1e-10, ranges=(small,))
    n, p = 16384, 8  # ring blocks of 2 KiB, in the small range
    as_small = Network(alpha=5e-6, beta=1e-9, gamma=2e-9)
    assert estimate("allreduce", "ring", p, n, net) == pytest.approx(
        formula("allreduce", "ring", p, n, as_small))
    assert estimate("allreduce", "recursive_doubling", p, n, net) == \
        pytest.approx(formula("allreduce", "recursive_doubling", p, n,
                              Network(1e-6, 1e-10, 1e-10)))
    plain = Network(alpha=1e-6, beta=1e-10, gamma=1e-10)
    assert estimate("allreduce", "ring", p, n, plain) == \
        formula("allreduce", "ring", p, n, plain)
    assert estimate("allreduce", "torus", p, n, plain) is None


def test_the_default_calibration_loads_and_is_named(monkeypatch):
    monkeypatch.delenv(select.CALIBRATION_VAR, raising=False)
    model = select.environment_cost_model()
    cal = load_calibration(DEFAULT_CALIBRATION)
    assert model.network == cal.network()
    assert model.source == f"mpicoll's default, {cal.description}"


def test_a_calibration_file_named_by_the_environment(tmp_path, monkeypatch):
    cal = load_calibration(DEFAULT_CALIBRATION)
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(cal.to_json()))
    monkeypatch.setenv(select.CALIBRATION_VAR, str(path))
    assert select.environment_cost_model().source.startswith(
        f"MPICOLL_CALIBRATION={path}, ")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    monkeypatch.setenv(select.CALIBRATION_VAR, str(bad))
    with pytest.raises(InvalidArgumentError, match="MPICOLL_CALIBRATION"):
        select.environment_cost_model()
    monkeypatch.setenv(select.CALIBRATION_VAR, str(tmp_path / "none.json"))
    with pytest.raises(InvalidArgumentError, match="cannot read"):
        select.environment_cost_model()
