"""Calibration: the shipped parameters are what the fit gives, and the profiler model
accounts for the difference between profiled and unprofiled runs."""

import json

import pytest

from gpufe.sim.analysis.calibrate import SIMULATED, _secant, direct_fit
from gpufe.sim.params import load, _HERE


def test_shipped_parameters_come_from_the_direct_fit():
    p = load("h200")
    fit = direct_fit()
    fit.pop("graph_launch_per_node_profiled_ns")
    for name, value in fit.items():
        assert getattr(p, name) == pytest.approx(round(value, 1)), name


def test_residuals_are_shipped_beside_the_parameters():
    res = json.loads((_HERE / "h200_residuals.json").read_text())
    fitted = {r["parameter"]: r for r in res["simulated"]}
    assert set(fitted) == {name for name, *_ in SIMULATED}
    p = load("h200")
    for name, r in fitted.items():
        assert getattr(p, name) == r["value"]
        # CUPTI's launch hold moves actgap's period in steps (whether a completion reaches
        # the PBDMA before or after its hold ends): the closest step, within 5%
        assert abs(r["rel_error"]) < (0.05 if name == "cupti_launch_hold_ns" else 0.02), r


def test_secant_finds_the_root_of_a_linear_response():
    x, y = _secant(lambda v: 3 * v + 10, 100.0, 0.0, 5.0)
    assert x == pytest.approx(30.0) and y == pytest.approx(100.0)


def test_on_a_staircase_the_fit_lands_on_the_step_closest_to_the_target():
    def stairs(v):
        return 0.88 if v < 1100 else 0.966 if v < 1290 else 1.07
    x, y = _secant(stairs, 1.0, 500.0, 1000.0)
    assert 1100 <= x < 1290 and y == 0.966
