"""mpicoll.sim.simgrid: schedules simulated on SimGrid networks.

Spec parsing and schedule-to-flow matching run everywhere; the simulations
skip unless SimGrid imports (``scripts/simgrid.sh`` installs it). Small rank
counts only: the whole file takes a few seconds.
"""

import math

import pytest

from mpicoll.coll import lookup
from mpicoll.sim.simgrid import PlatformError, parse, run_collective
from mpicoll.sim.simgrid.driver import simgrid_folder
from mpicoll.sim.simgrid.driver import run_program
from mpicoll.sim.simgrid.program import (
    EMPTY,
    Gap,
    Sig,
    align,
    build,
    check_closed,
    compress,
    cut_rounds,
    find_runs,
    sample_rounds,
    sig,
    symmetric_sigs,
)
from mpicoll.sim.simgrid.base_rank import merged

GAMMA = 2e-10  # s/byte: fixed, so expected times are exact


def alpha_beta(algorithm, p, nbytes, platform, gamma=GAMMA):
    """The α-β-γ cost on a flat network (α: two links' latency)."""
    alpha, beta = 2 * platform.latency, 1 / platform.bandwidth
    if algorithm == "ring":
        block = nbytes / p
        return 2 * (p - 1) * (alpha + block * beta) + (p - 1) * block * gamma
    return math.log2(p) * (alpha + nbytes * (beta + gamma))


# --- platform specs -------------------------------------------------------

@pytest.mark.parametrize("spec, kind, nodes, topology", [
    ("flat:8", "flat", 8, (None, "")),
    ("ring:16", "ring", 16, ("TORUS", "16")),
    ("torus:4x4x2", "torus", 32, ("TORUS", "4,4,2")),
    ("hypercube:3", "hypercube", 8, ("TORUS", "2,2,2")),
    ("fattree:2;4,4;1,2;1,2", "fattree", 16, ("FAT_TREE", "2;4,4;1,2;1,2")),
    ("dragonfly:2,2,3,2", "dragonfly", 24, ("DRAGONFLY", "2,1;2,1;3,1;2")),
])
def test_parse(spec, kind, nodes, topology):
    plat = parse(spec)
    assert (plat.kind, plat.nodes, plat.topology()) == (kind, nodes, topology)
    assert plat.spec == spec
    assert parse(plat.spec) == plat
    assert 'routing="Full"' in plat.xml()


def test_node_map_and_speeds():
    plat = parse("torus:2x2", ranks_per_node=3, bandwidth=1e9,
                 intra_bandwidth=1e10)
    assert plat.capacity == 12
    assert plat.node_map(7) == (0, 0, 0, 1, 1, 1, 2)
    assert 'bw="1000000000.0Bps"' in plat.xml()
    assert 'loopback_bw="10000000000.0Bps"' in plat.xml()
    with pytest.raises(PlatformError, match="13 ranks do not fit 4 nodes"):
        plat.node_map(13)


@pytest.mark.parametrize("spec, match", [
    ("mesh:4", "KIND one of"),
    ("ring", "KIND one of"),
    ("ring:2", "at least 3 nodes"),
    ("ring:x", "integers"),
    ("torus:4x0", "positive"),
    ("torus:4,4", "integers separated by 'x'"),
    ("hypercube:2,2", "expected 1 number"),
    ("dragonfly:4,2,2", "expected 4 numbers"),
    ("dragonfly:4,2,2,2", "groups \\(4\\) must not exceed routers"),
    ("fattree:2;4,4;1,2", "LEVELS;DOWN;UP;PARALLEL"),
    ("fattree:2;4,4,4;1,2;1,2", "expected 2 numbers"),
])
def test_bad_specs(spec, match):
    with pytest.raises(PlatformError, match=match):
        parse(spec)


def test_bad_options():
    with pytest.raises(PlatformError, match="ranks_per_node"):
        parse("flat:4", ranks_per_node=0)
    with pytest.raises(PlatformError, match="bandwidth must be positive"):
        parse("flat:4", bandwidth=0)
    with pytest.raises(TypeError, match="speed"):
        parse("flat:4", speed=1)


# --- schedules as flows ---------------------------------------------------

def ring_sigs(p, count=64):
    alg = lookup("allreduce", "ring")
    return [sig(alg.schedule(r, p, count), 4) for r in range(p)]


def test_build_matches_every_message():
    prog = build(ring_sigs(4))
    assert len(prog.src) == 4 * 6  # 2(p-1) messages per rank
    for rank, rounds in enumerate(prog.ops):
        assert [len(flows) for flows in rounds] == [2] * 6
        assert all(rank in (prog.src[f], prog.dst[f])
                   for flows in rounds for f in flows)
    assert prog.reduce_bytes[0] == [64] * 3 + [0] * 3


def test_build_rejects_unmatched_messages():
    lonely = [(Sig(((1, 8),), (), 0),), ()]
    with pytest.raises(ValueError, match="sends 1 messages to 1"):
        build(lonely)
    short = [(Sig(((1, 8),), (), 0),), (Sig((), ((0, 4),), 0),)]
    with pytest.raises(ValueError, match="4 bytes expected from 0"):
        build(short)


def test_runs_of_identical_rounds():
    sigs = ring_sigs(8)
    assert find_runs(sigs) == [(0, 7), (7, 7)]
    short, runs = compress(sigs, 3)
    assert [len(r) for r in short] == [6] * 8
    assert [tuple(r) for r in runs] == [(0, 3, 7), (3, 3, 7)]


def test_sampled_rounds():
    alg = lookup("alltoall", "pairwise")  # 30 rounds, all different
    sigs = [sig(alg.schedule(r, 31, 1), 4) for r in range(31)]
    short, gaps = sample_rounds(sigs, 4)
    assert [len(r) for r in short] == [8] * 31
    picks = [sigs[3].index(rnd) for rnd in short[3][::2]]
    assert picks[0] == 0 and picks[-1] == 28
    assert 2 <= picks[1] < 14 <= picks[2] < 28 - 1  # one pair per stratum
    assert gaps == tuple(Gap(2 * i + 1, b - a - 2) for i, (a, b)
                         in enumerate(zip(picks, picks[1:])) if b > a + 2)
    assert sum(g.rounds for g in gaps) == 30 - 8
    assert sample_rounds(sigs, 4) == (short, gaps)  # seeded
    assert sample_rounds(sigs, 15) == (sigs, ())
    check_closed(short)


def test_sampling_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="at least 2"):
        sample_rounds(ring_sigs(4), 1)
    uneven = [(Sig((), (), 0),), ()]
    with pytest.raises(ValueError, match="0 to 1 rounds"):
        sample_rounds(uneven, 2)
    late = [(Sig(((1, 8),), (), 0), Sig((), (), 0)),
            (Sig((), (), 0), Sig((), ((0, 8),), 0))]
    build(late)  # a message may span rounds; sampled rounds may not
    with pytest.raises(ValueError, match="round 0: the message of 8 bytes "
                       "from rank 0 to 1"):
        check_closed(late)
    with pytest.raises(ValueError, match="not both"):
        cut_rounds(ring_sigs(4), keep=2, sample=2)


# --- simulations ----------------------------------------------------------

@pytest.mark.parametrize("algorithm, p", [
    ("ring", 8), ("ring", 12), ("recursive_doubling", 8),
    ("recursive_doubling", 32),
])
def test_flat_network_is_alpha_beta(simgrid, algorithm, p):
    plat = parse(f"flat:{p}")
    count = 3 * 4096  # elements of 4 bytes; divisible by p
    res = run_collective("allreduce", algorithm, p, count, plat, gamma=GAMMA)
    assert res.time == pytest.approx(alpha_beta(algorithm, p, 4 * count,
                                                 plat), rel=1e-9)
    assert len(res.finish) == p and max(res.finish) == res.time
    assert res.rounds_cut == 0


def test_a_long_path_is_capped_by_the_tcp_window(simgrid):
    """SimGrid's TCP window bound stays on: one flow of 1 GiB over 2,000
    links of a ring (1 ms) moves at 4 MiB / (2 × 1 ms), not at the link's
    12.5 GB/s; over 100 links the bound is above the link and L + n/B
    holds."""
    plat = parse("ring:4096")
    for hops, capped in [(2000, True), (100, False)]:
        sigs = [(Sig((), (), 0),) for _ in range(plat.nodes)]
        sigs[0] = (Sig(((hops, 1 << 30),), (), 0),)
        sigs[hops] = (Sig((), ((0, 1 << 30),), 0),)
        lat = hops * plat.latency
        rate = 4 * 2**20 / (2 * lat) if capped else plat.bandwidth
        assert run_program(build(sigs), plat, gamma=0).time == \
            pytest.approx(lat + (1 << 30) / rate, rel=1e-6)


def test_contended_network_is_slower(simgrid):
    """Recursive doubling on a ring: distant partners share links."""
    count = 1 << 16
    ring = run_collective("allreduce", "recursive_doubling", 16, count, "ring:16",
                    gamma=GAMMA)
    flat = alpha_beta("recursive_doubling", 16, 4 * count, parse("flat:16"))
    assert ring.time > 1.5 * flat


@pytest.mark.parametrize("spec", ["torus:4x4", "fattree:2;4,4;1,2;1,1"])
def test_repeated_rounds_match_exact(simgrid, spec):
    count = 16 * 1024
    exact = run_collective("allreduce", "ring", 16, count, spec, gamma=GAMMA)
    short = run_collective("allreduce", "ring", 16, count, spec, gamma=GAMMA,
                     keep=4)
    sym = run_collective("allreduce", "ring", 16, count, spec, gamma=GAMMA, keep=4,
                   symmetric=True)
    assert short.rounds_cut == sym.rounds_cut == 2 * (15 - 4)
    assert short.flows < exact.flows
    assert short.time == pytest.approx(exact.time, rel=1e-9)
    assert sym.time == pytest.approx(exact.time, rel=1e-9)
    assert sym.symmetry == "shift"


def test_merged_sums_each_peers_messages():
    rnd = Sig(((3, 10), (5, 4), (3, 6)), ((5, 1), (5, 2)), 7)
    assert merged((rnd,)) == (Sig(((3, 16), (5, 4)), ((5, 3),), 7),)


@pytest.mark.parametrize("size", [12, 16])
def test_bruck_alltoall_is_symmetric_once_merged(simgrid, size):
    """Bruck's all-to-all sends its first round in two messages on ranks
    whose blocks wrap: no symmetry holds until each round's messages per
    peer are merged. On flat, where a pair's flows share no link with
    other pairs' in a round, the merged run is the exact one; on a torus
    it is an approximation (docs/simulation.md measures it)."""
    exact = run_collective("alltoall", "bruck", size, 64, f"flat:{size}",
                     gamma=GAMMA)
    with pytest.warns(UserWarning, match="merged: an approximation"):
        sym = run_collective("alltoall", "bruck", size, 64, f"flat:{size}",
                       gamma=GAMMA, symmetric=True)
    assert sym.symmetry == "shift+merged"
    assert sym.flows < exact.flows
    assert sym.time == pytest.approx(exact.time, rel=1e-9)
    with pytest.raises(ValueError, match="not symmetric"):  # a root
        run_collective("bcast", "binomial", size, 64, f"flat:{size}",
                 gamma=GAMMA, symmetric=True)


@pytest.mark.parametrize("collective", ["alltoall", "reduce_scatter_block"])
def test_sampled_rounds_exact_where_rounds_are_alike(simgrid, collective):
    """On flat every pairwise round costs the same: the interpolation
    charges the 9 rounds left out exactly."""
    exact = run_collective(collective, "pairwise", 16, 1024, "flat:16",
                     gamma=GAMMA)
    sym = run_collective(collective, "pairwise", 16, 1024, "flat:16", gamma=GAMMA,
                   sample=3, symmetric=True)
    assert (sym.rounds_cut, sym.flows, sym.symmetry) == (9, 96, "shift")
    assert sym.time == pytest.approx(exact.time, rel=1e-9)
    # on a torus the rounds differ (partners at other distances) and so
    # does the estimate; with every round sampled it is exact again
    torus = run_collective(collective, "pairwise", 16, 1024, "torus:4x4",
                     gamma=GAMMA)
    full = run_collective(collective, "pairwise", 16, 1024, "torus:4x4",
                    gamma=GAMMA, sample=8)
    assert full.rounds_cut == 0
    assert full.time == pytest.approx(torus.time, rel=1e-9)


def test_sampling_needs_closed_rounds_of_one_length(simgrid):
    with pytest.raises(ValueError, match="rounds; sampling"):
        sample_rounds([(EMPTY,) * 6, (EMPTY,) * 5], 2)
    # a chain pads into rounds no rank takes part in throughout
    with pytest.raises(ValueError, match="not be aligned in step"):
        run_collective("bcast", "pipelined", 8, 64, "flat:8", sample=2)
    # the root posts every segment at once: its round meets two of rank 1's
    with pytest.raises(ValueError, match="different rounds of one rank"):
        run_collective("bcast", "pipelined", 8, 1 << 16, "flat:8", sample=2)


def test_leaders_and_members_aligned_for_sampling(simgrid):
    """The leader all-to-all on nodes of 4: leaders have a gather, 15
    exchanges and a scatter, members a send and a receive. Aligned, the
    members wait in empty rounds, the replay's time is unchanged, every
    rank has 17 closed rounds, and sampling takes it (node symmetry or
    not, alike)."""
    plat = parse("torus:4x4", ranks_per_node=4)
    size, nodes = 64, plat.node_map(64)
    alg = lookup("alltoall", "hierarchical")
    sigs = [sig(alg.schedule(r, size, 256, nodes=nodes), 4)
            for r in range(size)]
    assert (len(sigs[0]), len(sigs[1])) == (17, 2)
    aligned = align(sigs)
    assert {len(rounds) for rounds in aligned} == {17}
    assert aligned[1] == (sigs[1][0], *[EMPTY] * 15, sigs[1][1])
    check_closed(aligned)
    exact = run_program(build(sigs), plat, gamma=GAMMA)
    assert run_program(build(aligned), plat, gamma=GAMMA).time == exact.time
    every = run_collective("alltoall", "hierarchical", size, 256, plat,
                     gamma=GAMMA, sample=9)
    assert every.rounds_cut == 0 and every.time == pytest.approx(exact.time)
    short = run_collective("alltoall", "hierarchical", size, 256, plat,
                     gamma=GAMMA, sample=4)
    sym = run_collective("alltoall", "hierarchical", size, 256, plat,
                   gamma=GAMMA, sample=4, symmetric=True)
    assert sym.symmetry == "shift/4"
    assert (sym.rounds_cut, sym.time) == (short.rounds_cut, short.time) \
        and short.rounds_cut == 9


def test_symmetry_needs_a_symmetric_schedule(simgrid):
    with pytest.raises(ValueError, match="not symmetric"):
        run_collective("allreduce", "ring", 8, 13, "flat:8", gamma=GAMMA,
                 symmetric=True)


@pytest.mark.parametrize("collective, algorithm, name", [
    ("allgather", "hierarchical", "shift/4"),
    ("allreduce", "hierarchical", "xor/4"),
    ("allreduce", "hierarchical_reduce_bcast", "xor/4"),
    ("allreduce", "torus", "shift/4"),
    ("alltoall", "hierarchical", "shift/4"),
    ("alltoall", "hierarchical_2d", "shift/4"),
])
def test_schedules_that_repeat_from_node_to_node(collective, algorithm,
                                                  name):
    """On nodes of 4 ranks in blocks the hierarchical schedules are no
    rank's relabelled, but node ``n``'s ranks are node 0's shifted (or
    xor-ed) by ``4n``: the period's bases and a sample build every rank's
    rounds exactly, and fewer schedules are built than there are ranks."""
    size, nodes = 64, tuple(r // 4 for r in range(64))
    alg = lookup(collective, algorithm)
    built = []

    def rank_sig(rank):
        built.append(rank)
        return sig(alg.schedule(rank, size, 1024, nodes=nodes), 4)

    sigs, runs, gaps, symmetry = symmetric_sigs(rank_sig, size, period=4)
    assert runs == gaps == ()
    assert symmetry == name
    assert len(set(built)) < 20
    assert sigs == [rank_sig(r) for r in range(size)]
    with pytest.raises(ValueError, match="not symmetric under a shift or "
                       "xor of ranks or of nodes of 4"):  # a root
        symmetric_sigs(lambda r: sig(lookup("bcast", "hierarchical").schedule(
            r, size, 16, root=0, nodes=nodes), 4), size, period=4)


def test_node_symmetry_and_kept_rounds_match_exact(simgrid):
    """The hierarchical allgather on nodes of 4: its bases' repeated
    rounds cut to 4 and every rank generated from them give the exact
    run's time on a torus."""
    plat = parse("torus:4x4", ranks_per_node=4)
    exact = run_collective("allgather", "hierarchical", 64, 256, plat, gamma=GAMMA)
    short = run_collective("allgather", "hierarchical", 64, 256, plat, gamma=GAMMA,
                     keep=4, symmetric=True)
    assert short.symmetry == "shift/4"
    assert short.rounds_cut == 15 - 4 and short.flows < exact.flows
    assert short.time == pytest.approx(exact.time, rel=1e-9)


def test_ranks_per_node(simgrid):
    """Two ranks per node: intra-node messages take the loopback link."""
    count = 1 << 16
    slow = parse("flat:4", ranks_per_node=2, intra_bandwidth=1e9)
    fast = parse("flat:4", ranks_per_node=2, intra_bandwidth=1e12)
    times = [run_collective("allreduce", "hierarchical", 8, count, plat,
                      gamma=GAMMA).time for plat in (slow, fast)]
    assert times[0] > times[1]
    with pytest.raises(PlatformError, match="do not fit"):
        run_collective("allreduce", "ring", 9, count, fast)


def test_simgrid_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("MPICOLL_SIMGRID", raising=False)
    assert simgrid_folder() is None
    with pytest.raises(FileNotFoundError, match="no SimGrid module"):
        simgrid_folder(str(tmp_path))
    (tmp_path / "simgrid.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    monkeypatch.setenv("MPICOLL_SIMGRID", str(tmp_path))
    assert simgrid_folder() == str(tmp_path)
    assert simgrid_folder(str(tmp_path)) == str(tmp_path)


@pytest.mark.parametrize("algorithm, spec", [
    ("ring", "torus:4x4"), ("recursive_doubling", "dragonfly:2,2,4,2"),
    ("rabenseifner", "fattree:2;4,4;1,2;1,1")])
def test_simgrid41_predicts_what_332_does(simgrid, simgrid41, algorithm,
                                          spec):
    """The controller on both APIs: the same prediction, contention
    included (skips without scripts/simgrid41.sh's build)."""
    count = 16 * 1024
    old = run_collective("allreduce", algorithm, 16, count, spec, gamma=GAMMA)
    new = run_collective("allreduce", algorithm, 16, count, spec, gamma=GAMMA,
                   simgrid=simgrid41)
    assert new.version.startswith("4.1") and new.version != old.version
    assert new.time == pytest.approx(old.time, rel=1e-9)


def test_simulation_builds_outside_the_schedule_cache(simgrid):
    """The simulator builds each rank's schedule once: it leaves the
    registry's cache (kept for the MPI layer's repeated calls) empty, and
    what it builds is what the cache would give."""
    from mpicoll.coll import registry

    alg = lookup("allgather", "ring")
    assert alg.schedule(3, 37, 5, cached=False) == alg.schedule(3, 37, 5)
    registry._build.cache_clear()
    run_collective("allgather", "ring", 37, 5, "flat:37", gamma=GAMMA)
    run_collective("allgather", "ring", 37, 5, "flat:37", gamma=GAMMA, keep=2,
             symmetric=True)
    assert registry._build.cache_info().currsize == 0
