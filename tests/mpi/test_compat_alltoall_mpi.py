"""Tier 2: the all-to-alls of ``mpicoll.Comm`` behave as mpi4py's.

Alltoall in every buffer form and Alltoallv in every vector form (on both
sides), in place too, each compared with the raw communicator under every
algorithm (tests/compatcases.py says how).
"""

from __future__ import annotations

import pytest

from compatcases import FormPlan, check_forms
from compatvectors import VFORMS, check_vector_forms

pytestmark = [pytest.mark.mpi, pytest.mark.interface]

FORM_PLANS = {"alltoall": FormPlan(2, (200,))}
# the vector forms the in-place calls are written in
VECTOR_INPLACE = {"alltoallv": VFORMS}


@pytest.mark.parametrize("name", FORM_PLANS)
def test_forms(h, name):
    check_forms(h, name, FORM_PLANS[name])


@pytest.mark.parametrize("name", VECTOR_INPLACE)
def test_vector_forms(h, name):
    check_vector_forms(h, name, VECTOR_INPLACE[name])
