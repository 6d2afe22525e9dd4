"""Calibration: the shipped parameters are what the fit gives, and the profiler model
accounts for the difference between profiled and unprofiled runs."""

import json

import pytest

from gpufe.sim.analysis.calibrate import SIMULATED, _secant, direct_fit, rounded
from gpufe.sim.params import load, _HERE


def test_shipped_parameters_come_from_the_direct_fit():
    p = load("h200")
    fit = direct_fit()
    for name, value in fit.items():
        assert getattr(p, name) == pytest.approx(rounded(name, value)), name


def test_residuals_are_shipped_beside_the_parameters():
    res = json.loads((_HERE / "h200_residuals.json").read_text())
    fitted = {r["parameter"]: r for r in res["simulated"]}
    assert set(fitted) == {name for name, *_ in SIMULATED}
    p = load("h200")
    for name, r in fitted.items():
        assert getattr(p, name) == r["value"]
        assert abs(r["rel_error"]) < 0.02, r


def test_secant_finds_the_root_of_a_linear_response():
    x, y = _secant(lambda v: 3 * v + 10, 100.0, 0.0, 5.0)
    assert x == pytest.approx(30.0) and y == pytest.approx(100.0)


def test_on_a_staircase_the_fit_lands_on_the_step_closest_to_the_target():
    def stairs(v):
        return 0.88 if v < 1100 else 0.966 if v < 1290 else 1.07
    x, y = _secant(stairs, 1.0, 500.0, 1000.0)
    assert 1100 <= x < 1290 and y == 0.966


def test_a_probe_is_run_as_its_trace_was_recorded():
    """The probe traces' programs come from their headers and run with the settings they were
    recorded under: without latency timestamps the gap is the kernel records' alone (fitted:
    cupti_release_ns), with them each dependent kernel of the 100 waits for its stamp's round
    trip, more than 10 left behind it for most."""
    from gpufe.sim.analysis.calibrate import PROBES, probe_metrics
    p = load("h200")
    kern, nolat = (f"cupti_latency_timestamps/chain_gate_n100_{v}" for v in ("kern", "kern_nolat"))
    assert PROBES[nolat] == {"cupti_latency_timestamps": 0} and PROBES[kern] == {}
    on, off = probe_metrics(kern, p), probe_metrics(nolat, p)
    assert off["median_gap_us"] == pytest.approx(probe_metrics(nolat)["median_gap_us"], rel=0.02)
    stamp = on["median_gap_us"] - off["median_gap_us"]
    assert (p.stamp_hold_ns + p.stamp_fetch_ns) / 1e3 < stamp < (p.stamp_hold_ns + p.stamp_fetch_ns
                                                                 + 2 * p.dma_write_ns) / 1e3
    # and the model's stamped gap is the H200's within 5%
    assert on["median_gap_us"] == pytest.approx(probe_metrics(kern)["median_gap_us"], rel=0.05)


def test_the_hinge_fit_recovers_a_knee_and_leaves_out_a_negative_part():
    from gpufe.sim.analysis.calibrate import _hinge, _hinge_error
    pts = [(n, 500 + 100 * n + 150 * max(n - 160, 0)) for n in (10, 30, 100, 300, 3000)]
    assert _hinge(pts, 160) == pytest.approx((500, 100, 150), rel=1e-6)
    assert min(range(10, 3000, 10), key=lambda k: _hinge_error(pts, k)) == 160
    # a series that falls per node: no misses, and no fixed part where none is allowed
    falling = [(n, 1000 * n ** 0.9) for n in (10, 100, 1000)]
    a, b, c = _hinge(falling, 100, fixed=False)
    assert a == 0 and c == 0 and b > 0


def test_the_third_recordings_families_are_fitted_on_every_size_recorded():
    # issue 46: calibrate fits on the wider sizes too; --cv leaves them out in turn
    from gpufe.sim.analysis import crossval
    from gpufe.sim.analysis.calibrate import GUPDATE_FIT_SIZES, THREADS_FIT_SIZES
    from gpufe.sim.analysis.scenarios import scenario_names
    names = set(scenario_names())
    fits = {name: scenario for name, scenario, *_ in SIMULATED}
    for fam, also in (("pdl", ("cupti_flush_ns",)), ("body", ())):
        f = crossval.family(fam)
        for parameter in (q for q in f.parameters + also if q in fits):   # the simulated
            used = fits[parameter]
            assert isinstance(used, tuple) and set(used) <= names, parameter
            fitted_on = {s for s in f.sizes if f.scenarios(s, used)}
            assert fitted_on == set(f.sizes), (parameter, fitted_on)
    assert crossval.family("threads").sizes == THREADS_FIT_SIZES == (2, 3, 4, 6, 8, 12)
    assert crossval.family("gupdate").sizes == GUPDATE_FIT_SIZES == (10, 30, 100, 300, 3000)


def test_the_captured_call_fit_reads_the_slow_vcpus_records_only():
    """gupdate's profiled captures: a process on a fast vCPU records its captured launches
    at ~0.59 us and 0.30 us apart, one on a slow vCPU at ~1.06 and 0.52; the fit takes the
    slow ones (the set's vCPU), whatever their share."""
    import statistics
    from gpufe.sim.analysis.calibrate import _captured_launches, _trace, captured_call_fit
    from gpufe.sim.analysis.traces import read_fe_trace
    from gpufe.sim.analysis.validate import repeat_paths
    runs = [_trace("gupdate_n10"), *map(read_fe_trace, repeat_paths("gupdate_n10"))]
    gaps = sorted(statistics.median(g for _, g in _captured_launches(t)) for t in runs)
    assert gaps[0] < 350 < 450 < gaps[-1]          # both kinds of process are there
    fit = captured_call_fit(runs, 588.0, fast_scale=0.522)
    assert 380 <= fit["cupti_captured_call_ns"] <= 520
    assert 450 <= fit["cupti_captured_gap_ns"] <= 560
