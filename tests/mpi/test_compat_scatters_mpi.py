"""Tier 2: the scatters of ``mpicoll.Comm`` behave as mpi4py's.

Scatter in every buffer form and Scatterv in every vector form, in place
and at every root, each compared with the raw communicator under every
algorithm (tests/compatcases.py says how).
"""

from __future__ import annotations

import pytest

from compatcases import FormPlan, check_forms
from compatvectors import VFORM_SAMPLE, check_vector_forms

pytestmark = [pytest.mark.mpi, pytest.mark.interface]

FORM_PLANS = {"scatter": FormPlan(3, (500,))}
# the vector forms the in-place calls are written in
VECTOR_INPLACE = {"scatterv": VFORM_SAMPLE}


@pytest.mark.parametrize("name", FORM_PLANS)
def test_forms(h, name):
    check_forms(h, name, FORM_PLANS[name])


@pytest.mark.parametrize("name", VECTOR_INPLACE)
def test_vector_forms(h, name):
    check_vector_forms(h, name, VECTOR_INPLACE[name])
