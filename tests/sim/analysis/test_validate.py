"""Fidelity bounds on a fast subset of the calibration scenarios (the full set runs with
``gpufe validate``): the model against the H200, metric by metric."""

import statistics

import pytest

from gpufe.sim.params import load
from gpufe.sim.analysis.validate import rel_error, validate

#: quick scenarios (default connections: one compiled model), one or more per program
FAST = ["graph_nodes10", "graph_nodes100", "chain_graph_gate", "events_t0_g50000000",
        "events_t1_g50000000", "sync_h0", "sync_h2", "grid_1320", "xstream_t0",
        "hyperq_c8_s8_o0", "fanout2_c8_s32", "copy_busy0", "priority_p1",
        "nocupti_chain_gate_g0", "nocupti_graph_nodes100"]


@pytest.fixture(scope="module")
def rows():
    return validate(load("h200"), FAST)


def test_every_fast_scenario_is_compared(rows):
    assert {r["scenario"] for r in rows} == set(FAST)
    assert len(rows) >= 8 * len(FAST) // 2


def test_median_error_is_within_ten_percent(rows):
    assert statistics.median(abs(r["rel_error"]) for r in rows) <= 0.10


#: rows known to be worse than 25%, and why (see the closing notes of the fidelity issue). A
#: new row above 25%, or one of these beyond 100%, fails.
KNOWN = {
    # with many streams per channel (fanout2: 32 streams on 8 channels) the same-stream gap is
    # longer than the PBDMA's switches make it (4.5 us against 6.0)
    ("fanout2_c8_s32", "median_gap_us"),
    # sync_h2 ran on a fast vCPU: its event records take 0.39 us, half the 0.78 us of
    # events_t0's on a slow one (more than the vCPUs' 0.72)
    ("sync_h2", "event_record_api_us"),
}


def test_no_metric_is_worse_than_a_quarter_but_the_known_ones(rows):
    worst = [r for r in rows if abs(r["rel_error"]) > 0.25]
    assert {(r["scenario"], r["metric"]) for r in worst} <= KNOWN, worst
    assert all(abs(r["rel_error"]) <= 1.0 for r in rows)


def test_relative_error_definition():
    assert rel_error(110, 100) == pytest.approx(0.10)
    assert rel_error(0, 0) == 0.0 and rel_error(1, 0) == 1.0


def test_a_trace_is_run_at_the_speed_of_the_vcpu_it_ran_on():
    """Two speeds: launches nearer the set's fast-vCPU time than its own (the geometric
    midpoint between them) ran on a fast vCPU; an unprofiled trace (no launch records) keeps
    the set's speed. The trace's own launch time is not taken: 4.0 and 4.6 us give the same."""
    from gpufe.sim.analysis.validate import recorded_host_scale, scenario_params
    p = load("h200")
    slow = p.launch_call_ns(1.0) / 1e3
    fast = p.host_fast_cpu_scale
    assert 0.45 < fast < 0.65
    # the kickoff does not follow the CPU: a fast vCPU's launch is 0.72 of a slow one's
    # (probe run_to_run: 3.93 and 5.44 us), its driver and CUPTI code about half
    assert p.launch_call_ns(fast) / 1e3 / slow == pytest.approx(0.72, abs=0.02)
    mid = (slow * p.launch_call_ns(fast) / 1e3) ** 0.5
    assert recorded_host_scale(p, slow) == recorded_host_scale(p, mid * 1.01) == 1.0
    assert recorded_host_scale(p, mid * 0.99) == recorded_host_scale(p, 0.9 * mid) == fast
    assert recorded_host_scale(p, None) == 1.0
    # chain_stream_ns2000 ran on a fast vCPU (launch 4.32 us, the loop's own code 0.36 us
    # between calls), chain_stream on a slow one (5.65 and 0.54 us)
    assert scenario_params("chain_stream_ns2000", p).host_cpu_scale == fast
    assert scenario_params("chain_stream", p) is p
    assert scenario_params("nocupti_chain_g0", p) is p


def test_a_trace_without_plain_launches_is_run_at_the_speed_its_graph_launches_tell():
    """The 300-node PDL graphs launched in 189 us in one process (the model: 374 on a slow
    vCPU, 195 on a fast one) and 491 in another: the first is run on a fast vCPU, and its
    launch then lands within 5%; the second stays on a slow one. A trace with plain launches
    is told by those (a graph launch says nothing more)."""
    from gpufe.sim.analysis.validate import (graph_host_scale, run_scenario_at,
                                             measured_metrics)
    p = load("h200")
    fast = p.host_fast_cpu_scale
    assert graph_host_scale(p, 0.99 * 374 * fast ** 0.5, 374) == fast
    assert graph_host_scale(p, 1.01 * 374 * fast ** 0.5, 374) == 1.0
    assert graph_host_scale(p, None, 374) == graph_host_scale(p, 200, None) == 1.0
    model, _, ran = run_scenario_at("pdl_stamp_p0_t0_ns2000_g1", p)
    assert ran.host_cpu_scale == fast
    measured = measured_metrics("pdl_stamp_p0_t0_ns2000_g1")["graph_launch_api_us"]
    assert model["graph_launch_api_us"] == pytest.approx(measured, rel=0.05)
    model, _, ran = run_scenario_at("pdl_stamp_p1_t1_ns50000_g1", p)
    assert ran is p
    assert model["graph_launch_api_us"] > 350
    _, _, ran = run_scenario_at("dl_host_b1_m100_gate", p)   # its gate kernel's launch tells
    assert ran is p
