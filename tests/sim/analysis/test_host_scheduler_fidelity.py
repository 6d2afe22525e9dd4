"""The host scheduler against the H200 (fe_trace2 `actgap` and `procs`): channel switches of
the PBDMA and context switches between processes, model against measured."""

import pytest

from gpufe.sim.analysis.metrics import scenario_metrics
from gpufe.sim.analysis.scenarios import scenario_paths
from gpufe.sim.analysis.validate import measured_metrics, run_scenario
from gpufe.sim.host.workload import load_workload
from gpufe.sim.params import load
from gpufe.sim.run import simulate


@pytest.mark.parametrize("busy", [1, 2, 4, 8] + [pytest.param(a, marks=pytest.mark.slow)
                                                 for a in (16, 32)])
@pytest.mark.parametrize("profiled", [False, True])
def test_dependent_kernels_on_busy_channels_take_turns_as_on_the_h200(busy, profiled):
    # (profiled, A = 16 missed by 25% while a stamp's round trip switched its channel out:
    # two switches a kernel)
    # as the traces ran: 32 connections (the one compiled model serves them), and h200's
    # syncpoints (33 streams at A = 32)
    params = load("h200")
    name = (f"actgap_c32_A{busy}_g100" if profiled
            else f"nocupti_actgap_stamp_c32_A{busy}_g100")
    w = load_workload(scenario_paths(name)[0])
    r = simulate(w, params, backend="compiled", profiler="cupti" if profiled else "off")
    model = scenario_metrics(r.records, "actgap")["stream_period_us"]
    measured = measured_metrics(name)["stream_period_us"]
    assert model == pytest.approx(measured, rel=0.20 if profiled else 0.15)


@pytest.mark.slow
def test_eight_busy_channels_resolve_about_one_kernel_a_microsecond(params):
    w = load_workload(scenario_paths("nocupti_actgap_stamp_c32_A8_g100")[0])
    r = simulate(w, params, backend="compiled")
    # the H200: 1.006 kernels/us in all (one stream alone: 0.73)
    assert 0.85 <= scenario_metrics(r.records, "actgap")["kernels_per_us"] <= 1.15


def test_two_processes_time_slice_as_on_the_h200(params):
    model, _ = run_scenario("procs_long_P2", params, backend="compiled")
    measured = measured_metrics("procs_long_P2")
    for metric in ("timeslice_run_us", "switch_us", "switched_out_us", "kernel_span_us"):
        assert model[metric] == pytest.approx(measured[metric], rel=0.15), metric


@pytest.mark.parametrize("profiler", ["cupti", "off"])
def test_a_stream_waiting_on_another_is_served_between_its_kernels(profiler):
    """xstream (timing event): stream b waits on a's event after each of a's 20 us kernels.
    On the H200 b's empty kernel runs about a microsecond into a's next kernel, every time;
    channel a, with its next kernel and its time stamps to process, must not keep the one
    PBDMA while b is ready (it once kept it through every timestamp's round trip, and b ran
    only after a's 200 kernels)."""
    name = "xstream_t1"
    r = simulate(load_workload(scenario_paths(name)[0]), load("h200"), backend="compiled",
                 profiler=profiler)
    ks = sorted((k for k in r.records if k["kind"] == "kernel"), key=lambda k: k["start"])
    spins = [k for k in ks if k["name"] == "k_spin"]
    empties = [k for k in ks if k["name"] == "k_empty"][2:]        # (the two warm-up kernels)
    assert len(spins) == len(empties) == 200
    for a, a_next, b in zip(spins, spins[1:], empties):
        assert a["end"] <= b["start"] < a_next["end"]
