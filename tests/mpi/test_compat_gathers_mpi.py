"""Tier 2: the gathers of ``mpicoll.Comm`` behave as mpi4py's.

Allgather and Gather in every buffer form, Allgatherv and Gatherv in every
vector form, in place and at every root, each compared with the raw
communicator under every algorithm (tests/compatcases.py says how).
"""

from __future__ import annotations

import pytest

from compatcases import FormPlan, check_forms
from compatvectors import VFORM_SAMPLE, VFORMS, check_vector_forms

pytestmark = [pytest.mark.mpi, pytest.mark.interface]

FORM_PLANS = {
    "allgather": FormPlan(3, (500,)),
    "gather": FormPlan(3, (500,)),
}
# the vector forms the in-place calls are written in
VECTOR_INPLACE = {
    "allgatherv": VFORMS,
    "gatherv": VFORM_SAMPLE,
}


@pytest.mark.parametrize("name", FORM_PLANS)
def test_forms(h, name):
    check_forms(h, name, FORM_PLANS[name])


@pytest.mark.parametrize("name", VECTOR_INPLACE)
def test_vector_forms(h, name):
    check_vector_forms(h, name, VECTOR_INPLACE[name])
