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


# -- one definition, gathered record by record ----------------------------------------------------

def _digest(records):
    from gpufe.sim.analysis.metrics import TimelineDigest
    d = TimelineDigest()
    for r in records:
        d.add(r)
    return d


def test_the_streamed_digest_is_metrics_of_the_list_in_any_order():
    """metrics() puts a list in timeline order and feeds TimelineDigest, the one
    implementation; a shuffled list gives the same figures, and a digest may be read midway
    without changing what it gives at the end."""
    import random
    trace = read_trace(HERE / "h200" / "sync_h0.jsonl.gz")
    want = metrics(trace)
    assert want["sync_return_us"] > 0 and want["repetitions"] == 1
    shuffled = list(trace)
    random.Random(5).shuffle(shuffled)
    assert metrics(shuffled) == want
    ordered = sorted(trace, key=lambda r: (r.get("t", r.get("start")), r["kind"] != "meta"))
    d = _digest(ordered[:len(ordered) // 2])
    d.metrics()
    for r in ordered[len(ordered) // 2:]:
        d.add(r)
    assert d.metrics() == want


def test_counts_sizes_and_trace_time():
    recs = [{"kind": "meta", "what": "header", "t": 100},
            launch(1, 200, 300),
            {"kind": "runtime", "name": "cudaMemcpyAsync_v3020", "corr": 2, "tid": 1,
             "start": 300, "end": 400},
            kernel(1, 13, 500, 700),
            {"kind": "memcpy", "copy_kind": 2, "bytes": 8192, "stream": 13, "channel": 9,
             "channel_type": 2, "start": 800, "end": 1800},
            {"kind": "memcpy", "copy_kind": 2, "bytes": 4096, "stream": 13, "channel": 9,
             "channel_type": 2, "start": 1900, "end": 2000},
            {"kind": "meta", "what": "footer", "t": 5100}]
    m = metrics(recs)
    assert (m["api_calls"], m["kernels"], m["copies"]) == (2, 1, 2)
    assert m["copy_d2h_bytes"] == 8192 and m["copy_d2h_gbps"] == 8.192
    assert "copy_h2d_bytes" not in m and "repetitions" not in m
    assert m["trace_us"] == 5.0                         # header 100 .. footer 5100
    assert m["gpu_span_us"] == 1.5                      # 500 .. 2000, kernels and copies
    assert m["channels_used"] == 2                      # the kernel's 0, the copies' 9


def test_repetitions_count_what_starts_inside_them_ends_included():
    mark = lambda what, t: {"kind": "meta", "what": what, "t": t}
    recs = [mark("header", 0),
            kernel(1, 7, 0, 50),                        # before any repetition
            mark("rep_begin", 100), kernel(2, 7, 100, 150), kernel(3, 7, 200, 400),
            mark("rep_end", 400),
            kernel(4, 7, 400, 420),                     # at the end mark: inside
            kernel(5, 7, 401, 500),                     # after it: outside
            mark("rep_begin", 1000), kernel(6, 7, 1000, 1010), mark("rep_end", 2000),
            mark("rep_end", 2500),                      # none open: ignored
            mark("rep_begin", 3000), kernel(7, 7, 3100, 3200)]   # open at the end
    m = metrics(recs)
    assert m["repetitions"] == 2
    assert m["wall_per_rep_us"] == 0.65                 # 300 and 1000 ns
    assert m["kernels"] == 5                            # 2, 3, 4, 6, 7
    assert m["gpu_span_us"] == 0.1                      # spans 320, 10, 100 ns
    assert m["max_concurrent"] == 1


def test_a_process_repetition_takes_only_that_process_records():
    mark = lambda what, t, pid: {"kind": "meta", "what": what, "t": t, "pid": pid}
    of = lambda rec, pid: dict(rec, pid=pid)
    recs = [mark("rep_begin", 100, "p0"), mark("rep_begin", 100, "p1"),
            of(kernel(1, 7, 200, 300, channel=1), "p0"),
            of(kernel(2, 7, 300, 400, channel=1), "p1"),
            mark("rep_end", 400, "p0"),
            # p0's copy after its own end, while p1's repetition is still open: outside
            of({"kind": "memcpy", "copy_kind": 2, "bytes": 64, "corr": 3, "stream": 7,
                "channel": 12, "start": 500, "end": 600}, "p0"),
            of(kernel(4, 7, 700, 800, channel=1), "p1"),
            mark("rep_end", 900, "p1")]
    m = metrics(recs)
    assert m["kernels"] == 3
    assert m["channels_used"] == 2                      # (p0, 1) and (p1, 1): no copy
    assert m["gpu_span_us"] == 0.3                      # p0 200..300 (0.1), p1 300..800 (0.5)


def test_sync_return_waits_for_kernels_that_start_after_the_call():
    """A synchronize call's figure is the latest kernel end before it returns, though that
    kernel starts after the call (it is fed later)."""
    sync = lambda corr, start, end: {"kind": "runtime", "name": "cudaDeviceSynchronize_v3020",
                                     "corr": corr, "tid": 1, "start": start, "end": end}
    recs = [{"kind": "meta", "what": "header", "t": 0}]
    for i in range(5):
        t = 10_000 * i
        recs += [kernel(10 * i, 7, t, t + 3000), sync(10 * i + 1, t + 1000, t + 5000),
                 kernel(10 * i + 2, 8, t + 2000, t + 4000)]   # starts after the call
    m = metrics(recs)
    assert m["sync_return_us"] == 1.0                   # 5000 - 4000, each time
