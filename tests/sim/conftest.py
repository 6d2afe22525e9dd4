import pytest

from gpufe.sim.params import load


@pytest.fixture(scope="session")
def params():
    """The h200 parameter set with fewer syncpoints: a smaller RTL simulates faster."""
    return load("h200").with_overrides(syncpoints=16)


@pytest.fixture
def no_simulation(monkeypatch):
    """Fail the test if a simulation starts: every check comes before."""
    import gpufe.sim.run

    def simulate(*a, **kw):
        raise AssertionError("a simulation started")
    monkeypatch.setattr(gpufe.sim.run, "simulate", simulate)
