"""The fixture of the compatibility suite (``test_compat_*_mpi.py``)."""

import pytest

from compat import Harness


@pytest.fixture(scope="module")
def h(request):
    """The harness of one test file (tests/compat.py): the raw
    communicator, mpicoll's of it, and the differences found."""
    harness = Harness(request.config)
    yield harness
    harness.close()
