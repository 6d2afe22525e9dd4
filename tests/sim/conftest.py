import pytest

from gpufe.sim.params import load


@pytest.fixture(scope="session")
def params():
    """The h200 parameter set: its compiled model is the one every run uses (the syncpoint
    counters are a memory, so fewer of them would not simulate faster, only cost a second
    build)."""
    return load("h200")


@pytest.fixture
def no_simulation(monkeypatch):
    """Fail the test if a simulation starts: every check comes before."""
    import gpufe.sim.run

    def simulate(*a, **kw):
        raise AssertionError("a simulation started")
    monkeypatch.setattr(gpufe.sim.run, "simulate", simulate)
