"""Metrics, on a hand-made timeline whose answers are known, and on a shipped trace against
the key figures of its README."""

import pytest

from gpufe.sim.analysis.metrics import metrics
from gpufe.sim.analysis.scenarios import HERE
from gpufe.sim.analysis.traces import read_trace


def kernel(corr, stream, start, end, channel=0, queued=None, submitted=None):
    return {"kind": "kernel", "name": "k", "corr": corr, "stream": stream, "channel": channel,
            "start": start, "end": end, "queued": queued or 0, "submitted": submitted or 0,
            "graph_id": 0}


def launch(corr, start, end):
    return {"kind": "runtime", "name": "cudaLaunchKernel_v7000", "corr": corr, "tid": 1,
            "start": start, "end": end}


def test_metrics_of_a_known_timeline():
    recs = [{"kind": "meta", "what": "header", "t": 0},
            {"kind": "meta", "what": "rep_begin", "t": 1000},
            launch(1, 1000, 6000), launch(2, 6000, 11000), launch(3, 11000, 200000),
            launch(5, 200000, 200100), launch(6, 200100, 200200),
            launch(7, 200200, 200300),
            kernel(1, 7, 8000, 9000, 0, 2000, 7000),
            kernel(2, 7, 12000, 14000, 0, 7000, 11000),
            kernel(3, 8, 13000, 20000, 1, 12000, 12500),
            kernel(5, 7, 21000, 23000, 0, 16000, 19000),
            kernel(6, 7, 24000, 26000, 0, 19000, 23000),
            kernel(7, 7, 28000, 30000, 0, 21000, 27000),
            {"kind": "meta", "what": "rep_end", "t": 201000},
            launch(4, 300000, 301000)]                  # outside the repetition: ignored
    m = metrics(recs)
    assert m["wall_per_rep_us"] == 200.0
    assert m["gpu_span_us"] == 22.0                     # 8000 .. 30000
    assert m["kernels"] == 6
    assert "median_gap_us" not in m                     # stream 7: 4 gaps, too few
    assert m["median_kernel_us"] == 2.0
    assert m["launch_api_us"] == 2.55                   # 5000, 5000, 189000, 100, 100, 100
    assert m["queued_to_submitted_us"] == 4.0           # 5000, 4000, 500, 3000, 4000, 6000
    assert m["submitted_to_start_us"] == 1.0            # 1000, 1000, 500, 2000, 1000, 1000
    assert m["max_concurrent"] == 2
    assert m["channels_used"] == 2
    assert m["launches_blocked"] == 1                   # the 189 us call


def test_copy_bandwidth_of_the_largest_copy():
    recs = [{"kind": "meta", "what": "header", "t": 0},
            {"kind": "memcpy", "copy_kind": 1, "bytes": 4096, "stream": 1, "channel": 2,
             "start": 0, "end": 1000},
            {"kind": "memcpy", "copy_kind": 1, "bytes": 1 << 20, "stream": 1, "channel": 2,
             "start": 2000, "end": 2000 + 20000}]
    assert metrics(recs)["copy_h2d_gbps"] == pytest.approx((1 << 20) / 20000)


def test_key_figures_of_the_reference_traces():
    # README: queued gap 2.37 us, empty kernel 608 ns, launch 5.65 us, graph gap 96 ns
    gate = metrics(read_trace(HERE / "h200" / "chain_stream_gate.jsonl.gz"))
    assert gate["median_gap_us"] == pytest.approx(2.37, abs=0.01)
    assert gate["median_kernel_us"] == pytest.approx(0.608, abs=0.002)
    stream = metrics(read_trace(HERE / "h200" / "chain_stream.jsonl.gz"))
    assert stream["launch_api_us"] == pytest.approx(5.65, abs=0.01)
    graph = metrics(read_trace(HERE / "h200" / "chain_graph.jsonl.gz"))
    assert graph["median_gap_us"] == pytest.approx(0.096, abs=0.001)
    fan = metrics(read_trace(HERE / "h200" / "fanout_c8_s256.jsonl.gz"))
    assert fan["max_concurrent"] == 128
