import pytest

from gpufe.sim.params import load


@pytest.fixture(scope="session")
def params():
    """The h200 parameter set with fewer syncpoints: a smaller RTL simulates faster."""
    return load("h200").with_overrides(syncpoints=16)
