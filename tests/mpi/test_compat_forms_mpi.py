"""Tier 2: every collective of ``mpicoll.Comm`` in every buffer form
behaves as mpi4py's.

Each collective with a fixed count in every buffer form and in-place
spelling (at every root where it has one), each v-collective in every
vector form, Reduce_scatter with every spelling of its counts, and
Barrier, blocking and nonblocking: each compared with the raw
communicator under every algorithm (tests/compatcases.py says how).
"""

from __future__ import annotations

import pytest

from compatcases import (FORMS, INPLACE, PLAIN, FormPlan, check_forms,
                         form_pairs, modes, reduce_scatter_case)
from compatvectors import VFORM_SAMPLE, VFORMS, check_vector_forms

pytestmark = [pytest.mark.mpi, pytest.mark.interface]

#: Each fixed-count collective's plan: how many rounds of values, the
#: counts tried (tests/compatcases.py).
FORM_PLANS = {
    "allreduce": FormPlan(5, (1, 1000), large_inplace=True),
    "reduce": FormPlan(5, (1000,)),
    "scan": FormPlan(5, (1000,), FORMS[:6]),
    "exscan": FormPlan(5, (1000,), FORMS[:6]),
    "reduce_scatter_block": FormPlan(3, (300,)),
    "bcast": FormPlan(5, (1000,)),
    "allgather": FormPlan(3, (500,)),
    "gather": FormPlan(3, (500,)),
    "scatter": FormPlan(3, (500,)),
    "alltoall": FormPlan(2, (200,)),
}
#: Each v-collective and the vector forms its in-place calls are written in.
VECTOR_INPLACE = {
    "allgatherv": VFORMS,
    "gatherv": VFORM_SAMPLE,
    "scatterv": VFORM_SAMPLE,
    "alltoallv": VFORMS,
}


@pytest.mark.parametrize("name", FORM_PLANS)
def test_forms(h, name):
    check_forms(h, name, FORM_PLANS[name])


@pytest.mark.parametrize("name", VECTOR_INPLACE)
def test_vector_forms(h, name):
    check_vector_forms(h, name, VECTOR_INPLACE[name])


def test_reduce_scatter_forms(h):
    for fs, fr in form_pairs():
        h.check(f"Reduce_scatter {fs.name} -> {fr.name} counts=list",
                reduce_scatter_case(fs, fr, 1), "reduce_scatter",
                modes=modes(fs, fr))
    for k in (0, 1):
        for counts_arg in ("list", "tuple", "ndarray", "None"):
            h.check(f"Reduce_scatter buf recvcounts={counts_arg} k={k}",
                    reduce_scatter_case(PLAIN, PLAIN, k, counts_arg),
                    "reduce_scatter", modes=(False, True))
    for f in FORMS:
        for inplace in INPLACE[1:]:
            h.check(f"Reduce_scatter {inplace} -> {f.name} counts=list",
                    reduce_scatter_case(None, f, 1, inplace=inplace),
                    "reduce_scatter", modes=modes(f))
    h.finish()


def test_barrier(h):
    def case(c):
        c("Barrier")
        return "done"
    h.check("Barrier", case, "barrier", modes=(False, True))
    h.finish()
