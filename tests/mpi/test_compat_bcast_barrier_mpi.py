"""Tier 2: Bcast and Barrier of ``mpicoll.Comm`` behave as mpi4py's.

Bcast in every buffer form and from every root, and Barrier, blocking and
nonblocking, each compared with the raw communicator under every algorithm
(tests/compatcases.py says how).
"""

from __future__ import annotations

import pytest

from compatcases import FormPlan, check_forms

pytestmark = [pytest.mark.mpi, pytest.mark.interface]

FORM_PLANS = {"bcast": FormPlan(5, (1000,))}


@pytest.mark.parametrize("name", FORM_PLANS)
def test_forms(h, name):
    check_forms(h, name, FORM_PLANS[name])


def test_barrier(h):
    def case(c):
        c("Barrier")
        return "done"
    h.check("Barrier", case, "barrier", modes=(False, True))
    h.finish()
