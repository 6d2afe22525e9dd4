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


#: rows known to be worse than 25%, and why (the model has one value where the H200 shows
#: several: see the closing note of the fidelity issue). A new row above 25%, or one of
#: these beyond 100%, fails.
KNOWN = {
    # launch and event-record calls are cheaper when the previous kernel is still running
    # or the host waits after each kernel (4.2-4.5 us against 5.65 us back to back)
    ("sync_h0", "launch_api_us"), ("sync_h2", "launch_api_us"), ("grid_1320", "launch_api_us"),
    ("fanout2_c8_s32", "launch_api_us"), ("sync_h2", "event_record_api_us"),
    # the same-stream queued gap is shorter behind big kernels (1.6-1.7 us) than behind empty
    # ones (2.37 us, the fitted value); with many streams per channel (fanout2: 32 streams on
    # 8 channels) longer than the PBDMA's switches make it (4.5 us against 2.8); with 8
    # streams on 8 channels (hyperq_c8_s8: 3.7 us measured) 2.7 us since the PBDMA fetches a
    # channel again at each switch and its context costs were refit (109 ns each, from 469):
    # one per-switch cost serves actgap's dependent chains, not both
    ("fanout2_c8_s32", "median_gap_us"), ("hyperq_c8_s8_o0", "median_gap_us"),
    ("grid_1320", "median_gap_us"), ("priority_p1", "median_gap_us"),
    # small graph replays: the per-node launch cost is fitted on 10 nodes, profiled and
    # unprofiled replays of 10-100 nodes do not fit one line
    ("graph_nodes10", "wall_per_rep_us"), ("graph_nodes100", "wall_per_rep_us"),
    ("nocupti_graph_nodes100", "wall_per_rep_us"),
}


def test_no_metric_is_worse_than_a_quarter_but_the_known_ones(rows):
    worst = [r for r in rows if abs(r["rel_error"]) > 0.25]
    assert {(r["scenario"], r["metric"]) for r in worst} <= KNOWN, worst
    assert all(abs(r["rel_error"]) <= 1.0 for r in rows)


def test_relative_error_definition():
    assert rel_error(110, 100) == pytest.approx(0.10)
    assert rel_error(0, 0) == 0.0 and rel_error(1, 0) == 1.0
