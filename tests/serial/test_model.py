"""The α-β-γ model (:mod:`mpicoll.model.cost`) against the published formulas.

Pure Python, no MPI. For every algorithm with a published closed form
(:data:`mpicoll.model.formulas.PUBLISHED`), the cost derived from its schedules
equals the form for p in {2, 4, 8, 16, 64} and p in {3, 6, 12} where the
form covers other p (the folds' extra steps), for counts that the blocks
divide. Each coefficient is checked on its own, on networks where only α,
only β or only γ costs anything, and all together on a mixed network, so
one wrong term fails. Beyond that:

- counts the blocks do not divide: the ring follows its largest block
  (the form with ``n`` rounded up to ``p`` blocks), the others lie
  between the form at ``n`` and at that rounded-up ``n``;
- where mpicoll's schedule differs from the published algorithm, the
  difference, pinned down (Rabenseifner's reduce for p not a power of
  two, a non-commutative binomial reduce off rank 0), and where it
  differs but costs the same (Bruck's alltoall: its first round's two
  messages to one peer are a train);
- rounds and bytes against the builders' docstrings, via :func:`profile`;
- intra- and inter-node links on node maps, computed by hand;
- the rank-0 shortcut (:data:`~mpicoll.model.cost.FULL_WALK`) against the walk
  over every rank, for every registered algorithm, and at 2,048 and
  4,096 ranks, where only the shortcut is fast.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from mpicoll.coll import algorithms
from mpicoll.collectives import COLLECTIVES
from mpicoll.model.formulas import PUBLISHED, formula
from mpicoll.model.cost import Network, predict, profile
from mpicoll.topo import floor_pow2

ALPHA, BETA, GAMMA = Network(1, 0, 0), Network(0, 1, 0), Network(0, 0, 1)
MIXED = Network(3e-6, 1e-9, 4e-10)
NETWORKS = (ALPHA, BETA, GAMMA, MIXED)
POWERS = (2, 4, 8, 16, 64)
OTHERS = (3, 6, 12)
ITEMSIZE = 4



def differs(collective: str, name: str, size: int) -> bool:
    """Where mpicoll's schedule is not the published algorithm (tested
    below): Rabenseifner's reduce for p not a power of two, Bruck's
    alltoall from 3 ranks."""
    if (collective, name) == ("reduce", "rabenseifner"):
        return size != floor_pow2(size)
    return (collective, name) == ("alltoall", "bruck") and size > 2


def shaped(collective: str, size: int, count: int):
    """``count`` as the collective takes it (every rank's block alike)."""
    shape = COLLECTIVES[collective].counts
    if shape == "per_rank":
        return (count,) * size
    if shape == "matrix":
        return ((count,) * size,) * size
    return 0 if shape == "none" else count


def published_n(collective: str, size: int, count: int) -> int:
    """The ``n`` of the formulas, in bytes (see :func:`formula`)."""
    shape = COLLECTIVES[collective].counts
    if shape == "whole":
        return count * ITEMSIZE
    return 0 if shape == "none" else size * count * ITEMSIZE


def derived(collective, name, size, count, net, **kw) -> float:
    return predict(collective, name, size, shaped(collective, size, count),
                   ITEMSIZE, net, **kw)


def same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def check(collective, name, size, count, **kw) -> list:
    """The networks on which the derived cost differs from the form."""
    n = published_n(collective, size, count)
    return [(net, derived(collective, name, size, count, net, **kw),
             formula(collective, name, size, n, net))
            for net in NETWORKS
            if not same(derived(collective, name, size, count, net, **kw),
                        formula(collective, name, size, n, net))]


def root_for(collective: str, name: str, size: int) -> dict:
    """Root 0, but for Rabenseifner's reduce a root in the power-of-two
    core, as MPICH's form assumes (p-1 always is)."""
    if not COLLECTIVES[collective].rooted:
        return {}
    return {"root": size - 1 if name == "rabenseifner" else 0}


CASES = [(c, name, p) for (c, name) in PUBLISHED for p in (*POWERS, *OTHERS)]


@pytest.mark.parametrize("collective,name,size", CASES)
def test_derived_cost_is_the_published_one(collective, name, size):
    n = published_n(collective, size, 1)
    if formula(collective, name, size, n, MIXED) is None:
        pytest.skip("no published form for this p")
    if differs(collective, name, size):
        pytest.skip("not the published algorithm (tested below)")
    kw = root_for(collective, name, size)
    whole = size * floor_pow2(size)  # blocks of p and of p' divide it
    counts = (whole, 3 * whole) if COLLECTIVES[collective].counts == "whole" \
        else (1, 5)
    for count in counts:
        assert check(collective, name, size, count, **kw) == []


def test_published_table_covers_the_classic_algorithms():
    for key in [("allreduce", "ring"), ("allreduce", "recursive_doubling"),
                ("allreduce", "rabenseifner"), ("allreduce", "reduce_bcast"),
                ("bcast", "binomial"), ("bcast", "scatter_allgather"),
                ("allgather", "ring"), ("allgather", "recursive_doubling"),
                ("allgather", "bruck"), ("reduce_scatter", "ring"),
                ("reduce_scatter", "pairwise"),
                ("reduce_scatter", "recursive_halving"),
                ("alltoall", "pairwise"), ("alltoall", "bruck"),
                ("reduce", "binomial"), ("gather", "binomial"),
                ("scatter", "binomial"), ("barrier", "dissemination")]:
        assert key in PUBLISHED
        assert key[1] in algorithms(key[0])
        assert PUBLISHED[key].expression and PUBLISHED[key].source


def test_a_wrong_formula_fails_the_check():
    """The comparison has teeth: each term off by a little is caught."""
    p, count = 8, 64
    n = count * ITEMSIZE
    wrong = [
        lambda net: 2 * p * net.alpha + 2 * (p - 1) / p * n * net.beta
        + (p - 1) / p * n * net.gamma,  # 2p α instead of 2(p-1) α
        lambda net: 2 * (p - 1) * net.alpha + 2 * n * net.beta
        + (p - 1) / p * n * net.gamma,  # 2n β instead of 2((p-1)/p) n β
        lambda net: 2 * (p - 1) * net.alpha + 2 * (p - 1) / p * n * net.beta,
    ]  # γ left out
    for form in wrong:
        assert not all(same(derived("allreduce", "ring", p, count, net),
                            form(net)) for net in NETWORKS)
    # and the algorithms' forms are not interchangeable
    assert not same(derived("allreduce", "ring", p, count, MIXED),
                    formula("allreduce", "rabenseifner", p, n, MIXED))


@pytest.mark.parametrize("size", (3, 4, 6, 8, 12))
def test_uneven_blocks(size):
    for count in (5 * size + 1, 5 * size + size // 2, 6 * size - 1):
        rounded = math.ceil(count / size) * size * ITEMSIZE
        for net in NETWORKS:
            # the ring's critical path carries the largest block each step
            assert same(derived("allreduce", "ring", size, count, net),
                        formula("allreduce", "ring", size, rounded, net))
            # the others: between the form at n and at n rounded up to
            # whole blocks (p' of them for Rabenseifner, p for van de Geijn)
            for c, name, parts in [("allreduce", "rabenseifner", floor_pow2(size)),
                                   ("bcast", "scatter_allgather", size)]:
                up = math.ceil(count / parts) * parts * ITEMSIZE
                cost = derived(c, name, size, count, net)
                assert formula(c, name, size, count * ITEMSIZE, net) - 1e-12 \
                    <= cost <= formula(c, name, size, up, net) + 1e-12


@pytest.mark.parametrize("size", POWERS)
def test_van_de_geijn_with_recursive_doubling(size):
    count = 4 * size
    for net in NETWORKS:
        assert same(derived("bcast", "scatter_allgather", size, count, net,
                            allgather="recursive_doubling"),
                    formula("bcast", "scatter_allgather", size,
                            count * ITEMSIZE, net, allgather="recursive_doubling"))
    assert formula("bcast", "scatter_allgather", 6, 24, MIXED,
                   allgather="recursive_doubling") is None


@pytest.mark.parametrize("size", (4, 8, 16))
def test_bruck_alltoall_first_round_is_a_train(size):
    """MPICH rotates the blocks locally first; mpicoll sends the first
    round's blocks straight from ``send``, as two messages to one peer on
    the ranks where they wrap past the last block: a train, whose second
    message pays no α (the model's docstring), so the form's cost; with
    α charged per message it would be one α more."""
    n = size * 3 * ITEMSIZE
    for net in NETWORKS:
        assert same(derived("alltoall", "bruck", size, 3, net),
                    formula("alltoall", "bruck", size, n, net))
    assert any(len(sent) == 2 for rank in profile("alltoall", "bruck", size, 3)
               for sent in rank.sent)
    assert same(derived("alltoall", "bruck", 2, 3, MIXED),
                formula("alltoall", "bruck", 2, 2 * 3 * ITEMSIZE, MIXED))


@pytest.mark.parametrize("size", OTHERS)
def test_rabenseifner_reduce_off_a_power_of_two(size):
    """mpicoll cuts the vector into p blocks (a folded pair's two merged),
    MPICH into p' = floor_pow2(p): the core's halves are uneven, so more
    bytes cross and are reduced; the α term is MPICH's. Root 0 is folded
    out (even ranks fold into odd ones, as in MPICH's allreduce), which
    costs one more message."""
    count = 8 * size
    n = count * ITEMSIZE
    root = {"root": size - 1}
    assert same(derived("reduce", "rabenseifner", size, count, ALPHA, **root),
                formula("reduce", "rabenseifner", size, n, ALPHA))
    for net in (BETA, GAMMA):
        assert derived("reduce", "rabenseifner", size, count, net, **root) > \
            formula("reduce", "rabenseifner", size, n, net)
    assert same(derived("reduce", "rabenseifner", size, count, ALPHA, root=0),
                formula("reduce", "rabenseifner", size, n, ALPHA) + 1)


@pytest.mark.parametrize("size", (3, 4, 6, 8))
def test_order_keeping_reduce_off_rank_0_adds_a_step(size):
    """A non-commutative binomial reduce roots its tree at rank 0 and sends
    the result on to the root: one more α + nβ."""
    count = 16
    for net in NETWORKS:
        assert same(derived("reduce", "binomial", size, count, net,
                            root=size - 1, commutative=False),
                    formula("reduce", "binomial", size, count * ITEMSIZE, net)
                    + net.alpha + count * ITEMSIZE * net.beta)


@pytest.mark.parametrize("size", (3, 5, 8))
@pytest.mark.parametrize("segments", (1, 4))
def test_pipelined_bcast_takes_p_minus_2_plus_k_segment_steps(size, segments):
    segment = 6
    for net in NETWORKS:
        assert same(derived("bcast", "pipelined", size, segments * segment, net,
                            segment=segment),
                    (size - 2 + segments)
                    * (net.alpha + segment * ITEMSIZE * net.beta))


@pytest.mark.parametrize("segments", (1, 4))
def test_pipelined_bcast_on_two_ranks_is_one_train(segments):
    """On 2 ranks the root posts every segment in one round and the other
    rank every receive: a train, α once; with ``trains=False`` the
    published form's p - 2 + k segment steps, α each."""
    segment = 6
    for net in NETWORKS:
        assert same(derived("bcast", "pipelined", 2, segments * segment, net,
                            segment=segment),
                    net.alpha + segments * segment * ITEMSIZE * net.beta)
        assert same(derived("bcast", "pipelined", 2, segments * segment,
                            replace(net, trains=False), segment=segment),
                    segments * (net.alpha + segment * ITEMSIZE * net.beta))


@pytest.mark.parametrize("size", (2, 5, 8))
def test_linear_scans_are_chains(size):
    n = 10 * ITEMSIZE
    for net in NETWORKS:
        hop = net.alpha + n * net.beta
        assert same(derived("scan", "linear", size, 10, net),
                    (size - 1) * (hop + n * net.gamma))
        assert same(derived("exscan", "linear", size, 10, net),
                    (size - 1) * hop + (size - 2) * n * net.gamma)


def test_copies_cost_what_the_network_says():
    copying = Network(0, 0, 0, copy=1)
    # ring: the own block into place; Bruck: it into scratch, then the
    # rotation of all p blocks
    assert derived("allgather", "ring", 6, 7, copying) == 7 * ITEMSIZE
    assert derived("allgather", "bruck", 6, 7, copying) == 7 * 7 * ITEMSIZE
    assert derived("allgather", "ring", 6, 7, MIXED) == \
        formula("allgather", "ring", 6, 6 * 7 * ITEMSIZE, MIXED)


@pytest.mark.parametrize("size", (2, 4, 8))
def test_reductions_out_of_place_cost_their_own_gamma(size):
    """Recursive doubling's first reduction writes ``recv = incoming op
    send``, a third buffer; its later ones ``recv = incoming op recv``, in
    place. Each costs its own γ; without ``gamma_out_of_place``, γ."""
    count, rounds = 10, size.bit_length() - 1
    n = count * ITEMSIZE
    profiles = per_rank("allreduce", "recursive_doubling", size, count)
    for prof in profiles:
        assert prof.reduced == (n,) * rounds
        assert prof.reduced_out_of_place == (n,) + (0,) * (rounds - 1)
    apart = Network(0, 0, gamma=1, gamma_out_of_place=3)
    assert same(derived("allreduce", "recursive_doubling", size, count,
                        apart), n * (3 + (rounds - 1)))
    assert same(derived("allreduce", "recursive_doubling", size, count,
                        GAMMA), n * rounds)
    # a reduce-scatter's reductions all land in place
    assert same(derived("reduce_scatter_block", "recursive_halving", size,
                        count, apart),
                derived("reduce_scatter_block", "recursive_halving", size,
                        count, GAMMA))


# -- rounds and bytes, against the builders' docstrings -------------------

def per_rank(collective, name, size, count, **kw):
    return profile(collective, name, size, shaped(collective, size, count),
                   ITEMSIZE, **kw)


@pytest.mark.parametrize("size", (*POWERS, *OTHERS))
def test_allreduce_rounds_and_bytes(size):
    count = 4 * size
    n = count * ITEMSIZE
    lg, q = size.bit_length() - 1, floor_pow2(size)
    rem = size - q
    for r in per_rank("allreduce", "ring", size, count):
        assert r.rounds == 2 * (size - 1)
        assert r.bytes_sent == r.bytes_received == 2 * (size - 1) * n // size
        assert r.bytes_reduced == (size - 1) * n // size
    for r in per_rank("allreduce", "recursive_doubling", size, count):
        folded = r.rank < 2 * rem
        rounds = (2 if r.rank % 2 == 0 else lg + 2) if folded else lg
        assert r.rounds == rounds
        assert r.bytes_sent == (n if folded and r.rank % 2 == 0 else
                                n * (lg + folded))
    for r in per_rank("allreduce", "rabenseifner", size, count):
        folded = r.rank < 2 * rem
        if folded and r.rank % 2 == 0:
            assert r.rounds == 2
            assert r.bytes_sent == r.bytes_received == n
        else:
            assert r.rounds == 2 * lg + 2 * folded
            assert r.bytes_sent == 2 * n * (q - 1) // q + n * folded


@pytest.mark.parametrize("size", (*POWERS, *OTHERS))
def test_other_rounds_and_bytes(size):
    lg = (size - 1).bit_length()  # ceil(log2 p)
    block = 3 * ITEMSIZE
    for r in per_rank("allgather", "bruck", size, 3):
        assert r.rounds == lg and r.bytes_sent == (size - 1) * block
    for r in per_rank("alltoall", "bruck", size, 3):
        assert r.rounds == lg
        assert r.bytes_sent == block * sum(bin(i).count("1")
                                           for i in range(1, size))
    for r in per_rank("reduce_scatter", "ring", size, 3):
        assert r.rounds == size - 1
        assert r.bytes_sent == r.bytes_reduced == (size - 1) * block
    for r in per_rank("barrier", "dissemination", size, 0):
        assert r.rounds == lg and r.messages == lg and r.bytes_sent == 0
    for r in per_rank("barrier", "binomial", size, 0):
        leaf = r.rank % 2 == 1 or r.rank == size - 1
        assert r.rounds == (2 if r.rank == 0 else 1 if leaf else 3)
    root = per_rank("bcast", "binomial", size, 5)[0]
    assert root.rounds == lg and root.bytes_sent == lg * 5 * ITEMSIZE
    gather = per_rank("gather", "binomial", size, 3)[0]
    assert gather.bytes_received == (size - 1) * block


# -- node maps: intra- and inter-node links ---------------------------------

AI, BI, AX, BX, G = 1.0, 0.01, 100.0, 1.0, 1000.0
TWO_NODES = (0, 0, 1, 1)
LINKS = Network(AX, BX, G, alpha_intra=AI, beta_intra=BI)


def test_hierarchical_allreduce_by_hand():
    """4 elements (bytes) on two nodes of two: a ring reduce-scatter of
    halves inside, Rabenseifner of two across on each half (quarters out
    and back), a ring allgather inside."""
    hand = 2 * (AI + 2 * BI) + 2 * (AX + BX) + (2 + 1) * G
    assert same(predict("allreduce", "hierarchical", 4, 4, 1, LINKS,
                        nodes=TWO_NODES), hand)
    assert same(predict("allreduce", "torus", 4, 4, 1, LINKS,
                        nodes=TWO_NODES), hand)
    # node labels of any kind name the same machine
    assert same(predict("allreduce", "hierarchical", 4, 4, 1, LINKS,
                        nodes=("b", "b", "a", "a")), hand)


def test_leader_based_algorithms_by_hand():
    # reduce to the leader inside, leaders swap and reduce, broadcast inside
    hand = 2 * (AI + 4 * BI) + (AX + 4 * BX) + 2 * 4 * G
    assert same(predict("allreduce", "hierarchical_reduce_bcast", 4, 4, 1,
                        LINKS, nodes=TWO_NODES), hand)
    # root 1: to node 1's leader across, then to rank 0 and rank 3 inside
    assert same(predict("bcast", "hierarchical", 4, 4, 1, LINKS,
                        nodes=TWO_NODES, root=1), AX + 4 * BX + AI + 4 * BI)


def test_messages_one_way_take_their_own_costs():
    """A message whose sender receives nothing and whose receiver sends
    nothing in their rounds costs the one-way α and β (inside a node the
    intra-node one-way ones, else the intra-node exchange's where those
    are given);
    an exchange's messages keep α and β, and None prices one way as an
    exchange."""
    one_way = Network(AX, BX, G, alpha_intra=AI, beta_intra=BI,
                      alpha_one_way=AX / 2, beta_one_way=BX / 4,
                      alpha_one_way_intra=AI / 2, beta_one_way_intra=BI / 4)
    n = 8
    # binomial broadcast, 4 ranks: two rounds one way
    assert same(predict("bcast", "binomial", 4, n, 1, one_way),
                2 * (AX / 2 + BX / 4 * n))
    assert same(predict("bcast", "binomial", 4, n, 1, one_way,
                        nodes=(0, 0, 0, 0)), 2 * (AI / 2 + BI / 4 * n))
    assert same(predict("bcast", "binomial", 4, n, 1, LINKS,
                        nodes=(0, 0, 0, 0)), 2 * (AI + BI * n))
    # recursive doubling exchanges; every rank of a ring sends and
    # receives in each round: neither is one way
    for name in ("recursive_doubling", "ring"):
        assert same(predict("allreduce", name, 4, n, 1, one_way),
                    predict("allreduce", name, 4, n, 1, LINKS))
    # intra-node one way not given: the intra-node exchange's costs
    inside = Network(AX, BX, G, alpha_intra=AI, beta_intra=BI,
                     alpha_one_way=AX / 2, beta_one_way=BX / 4)
    assert same(predict("bcast", "binomial", 2, n, 1, inside, nodes=(0, 0)),
                AI + BI * n)
    # no intra-node costs at all: one way between nodes, inside too
    flat = Network(AX, BX, G, alpha_one_way=AX / 2, beta_one_way=BX / 4)
    assert same(predict("bcast", "binomial", 2, n, 1, flat, nodes=(0, 0)),
                AX / 2 + BX / 4 * n)


def test_flat_ring_on_two_nodes_waits_for_the_slow_link():
    """Each round has intra-node and inter-node messages; the inter-node
    ones set the pace. Without a node map every link is the inter-node one."""
    hand = 6 * (AX + BX) + 3 * G
    assert same(predict("allreduce", "ring", 4, 4, 1, LINKS,
                        nodes=TWO_NODES), hand)
    assert same(predict("allreduce", "ring", 4, 4, 1, LINKS), hand)
    fast = 6 * (AI + BI) + 3 * G
    assert same(predict("allreduce", "ring", 4, 4, 1, LINKS,
                        nodes=(0, 0, 0, 0)), fast)


# -- the rank-0 shortcut, speed, errors ------------------------------------

HAND_BUILT = [(c, name) for c in COLLECTIVES for name in algorithms(c)
              if name != "native"]


@pytest.mark.parametrize("collective,name", HAND_BUILT)
def test_shortcut_agrees_with_the_walk_over_every_rank(collective, name):
    for size in (4, 6, 8):
        for count in (2 * size, 7):
            for net in (ALPHA, MIXED):
                assert same(derived(collective, name, size, count, net,
                                    exhaustive=True),
                            derived(collective, name, size, count, net,
                                    exhaustive=False))


@pytest.mark.parametrize("name,size", [("ring", 2048),
                                       ("recursive_doubling", 4096),
                                       ("rabenseifner", 4096)])
def test_thousands_of_ranks(name, size):
    """Only rank 0's schedule is walked (a walk over every rank of the
    ring would take minutes)."""
    count = 16 * size
    assert check("allreduce", name, size, count) == []


def test_errors():
    with pytest.raises(KeyError, match="native"):
        predict("allreduce", "native", 4, 8, 4, MIXED)
    with pytest.raises(KeyError):
        profile("allreduce", "no_such_thing", 4, 8)
    with pytest.raises(ValueError, match="commutative"):
        predict("allreduce", "ring", 4, 8, 4, MIXED, commutative=False)
    with pytest.raises(ValueError, match="alpha"):
        Network(-1, 0)
    with pytest.raises(ValueError, match="nodes"):
        predict("allreduce", "hierarchical", 4, 8, 4, MIXED, nodes=(0, 1))
    assert formula("allreduce", "hierarchical", 4, 8, MIXED) is None
    assert formula("allgather", "recursive_doubling", 6, 48, MIXED) is None
