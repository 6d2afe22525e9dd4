"""Replay of profiler traces, and "what would CUDA graphs save" on the MLP traces."""

import gzip
import json

import pytest

from gpufe.sim.params import load
from gpufe.sim.analysis.replay import count_steps, replay, step_summary, workload_from_trace
from gpufe.sim.analysis.scenarios import HERE
from gpufe.sim.analysis.traces import read_trace
from gpufe.sim.host.workload import parse_workload
from gpufe.sim.run import simulate

REF = HERE / "h200"


def test_eager_trace_becomes_a_workload_with_every_launch_in_order():
    path = REF / "mlp_w256_d4_eager.json.gz"
    records = read_trace(path)
    w = parse_workload(workload_from_trace(records, load("h200")), "test")
    launches = [op for op in w["program"] if op["op"] == "launch_kernel"]
    kernels = sorted((r for r in records if r["kind"] == "kernel"), key=lambda r: r["start"])
    assert len(launches) == len(kernels) == 520
    assert [op["kernel"] for op in launches] == [k["name"][:40] for k in kernels]
    assert count_steps(path, records) == 10
    # CPU time between calls is kept
    assert sum(op["ns"] for op in w["program"] if op["op"] == "host_sleep") > 10_000_000


def test_as_graph_captures_the_launches_between_synchronisations():
    records = read_trace(REF / "mlp_w256_d4_eager.json.gz")
    w = parse_workload(workload_from_trace(records, load("h200"), as_graph=True), "test")
    ops = [op["op"] for op in w["program"]]
    assert ops.count("graph_launch") == ops.count("graph_instantiate") >= 1
    assert "host_sleep" not in ops


@pytest.mark.parametrize("model", ["mlp_w256_d4", "mlp_w1024_d8"])
def test_as_graph_predicts_the_measured_graph_step_time(model):
    measured = json.loads(gzip.decompress((REF / f"{model}_summary.json.gz").read_bytes()))
    result, steps = replay(REF / f"{model}_eager.json.gz", load("h200"), as_graph=True)
    got = step_summary(result, steps)
    records = read_trace(REF / f"{model}_eager.json.gz")
    assert got["kernels"] == len([r for r in records if r["kind"] == "kernel"])
    assert got["memsets_per_step"] * steps == len([r for r in records if r["kind"] == "memset"])
    err = got["per_step_us"] / measured["graph_us_per_step"] - 1
    assert abs(err) <= 0.15, (got, measured)


# -- replays of bad traces: errors name the trace and the event, before anything runs ---------

from gpufe.sim.analysis.replay import prepare                                       # noqa: E402
from gpufe.sim.analysis.traces import TraceError                                    # noqa: E402
from gpufe.sim.host.workload import WorkloadError                               # noqa: E402


def kev(cat, name, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": args}


def trace(tmp_path, events, name="t.json"):
    p = tmp_path / name
    p.write_text(json.dumps({"traceEvents": events}))
    return p


#: a launch call as long as the model's profiled one on the set's host: the trace's host is
#: the set's (replay.trace_host_scale 1)
CALL_US = 5.65


def pair(corr, ts, dur=2.0, stream=7, call="cudaLaunchKernel", cat="cuda_runtime"):
    return [kev(cat, call, ts, CALL_US, correlation=corr),
            kev("kernel", f"k{corr}", ts + 2, dur, correlation=corr, stream=stream,
                grid=[1, 1, 1], block=[128, 1, 1])]


def test_a_kernel_too_long_for_the_model_names_its_event(tmp_path):
    p = trace(tmp_path, pair(1, 10.0) + pair(2, 20.0, dur=5e6))       # 5 s
    with pytest.raises(TraceError, match=rf"^{p}: traceEvents\[3\]: kernel 'k2' runs 5 s"):
        prepare(p, load("h200"))


def test_cpu_time_too_long_for_a_sleep_names_the_call(tmp_path):
    p = trace(tmp_path, pair(1, 10.0) + pair(2, 10.0 + 2e10))           # 20,000 s later
    with pytest.raises(TraceError, match=rf"^{p}: traceEvents\[2\]: 2e\+04 s of CPU time"):
        prepare(p, load("h200"))


def test_a_copy_too_large_names_its_event(tmp_path):
    events = pair(1, 10.0) + [kev("cuda_runtime", "cudaMemcpyAsync", 20.0, 1.0, correlation=2),
                              kev("gpu_memcpy", "Memcpy HtoD", 22.0, 1.0, correlation=2,
                                  stream=7, bytes=1 << 33)]
    with pytest.raises(TraceError, match=r"traceEvents\[3\]: a copy of 8,589,934,592 bytes"):
        prepare(trace(tmp_path, events), load("h200"))


def test_zero_byte_copies_and_other_kinds_are_cpu_time(tmp_path):
    events = pair(1, 10.0) + [kev("cuda_runtime", "cudaMemcpyAsync", 20.0, 1.0, correlation=2),
                              kev("gpu_memcpy", "Memcpy HtoD", 22.0, 1.0, correlation=2,
                                  stream=7, bytes=0)]
    w, _ = prepare(trace(tmp_path, events), load("h200"))
    assert [op["op"] for op in w["program"]].count("memcpy_async") == 0


def test_a_runtime_and_a_driver_call_sharing_an_id_launch_the_kernel_once(tmp_path):
    events = pair(1, 10.0) + [kev("cuda_driver", "cuLaunchKernel", 10.5, 0.2, correlation=1)]
    w, _ = prepare(trace(tmp_path, events), load("h200"))
    assert [op["op"] for op in w["program"]].count("launch_kernel") == 1


def test_a_trace_of_graph_launches_replays_its_graph_with_the_overlap_it_shows(tmp_path):
    """Two launches of one graph: a, then b and c at once, then d once both ended: one graph
    captured (b and c independent, d after both), launched twice."""
    events = []
    for k, t in enumerate((10.0, 100.0)):
        corr = 5 + k
        events += [kev("cuda_runtime", "cudaGraphLaunch", t, 2.0, correlation=corr),
                   kev("kernel", "a", t + 3, 5.0, correlation=corr, stream=7),
                   kev("kernel", "b", t + 9, 5.0, correlation=corr, stream=7),
                   kev("kernel", "c", t + 10, 6.0, correlation=corr, stream=7),
                   kev("kernel", "d", t + 17, 5.0, correlation=corr, stream=7)]
    events.append(kev("cuda_runtime", "cudaDeviceSynchronize", 200.0, 1.0, correlation=9))
    p = trace(tmp_path, events)
    w, steps = prepare(p, load("h200"))
    ops = [op["op"] for op in w["program"]]
    assert steps == 2
    assert ops.count("stream_end_capture") == 1 and ops.count("graph_launch") == 2
    assert ops.count("launch_kernel") == 4
    result = simulate(w, load("h200"), backend="compiled")
    ks = sorted((r for r in result.records if r["kind"] == "kernel"), key=lambda r: r["start"])
    first = {r["name"]: r for r in ks[:4]}
    assert first["b"]["start"] >= first["a"]["end"] and first["c"]["start"] >= first["a"]["end"]
    assert first["b"]["start"] < first["c"]["end"] and first["c"]["start"] < first["b"]["end"]
    assert first["d"]["start"] >= max(first["b"]["end"], first["c"]["end"])


def test_graph_nodes_depend_on_what_ended_before_them_less_what_is_implied():
    from gpufe.sim.analysis.replay import graph_of_launch
    nodes = [{"name": n, "start": s, "end": e} for n, s, e in
             (("d", 17, 22), ("a", 3, 8), ("c", 10, 16), ("b", 9, 14), ("e", 23, 24))]
    order, deps = graph_of_launch(nodes)
    assert [r["name"] for r in order] == ["a", "b", "c", "d", "e"]
    assert deps == [[], [0], [0], [1, 2], [3]]


def test_more_streams_than_syncpoints_is_said_before_the_run(tmp_path):
    events = []
    for i in range(5):
        events += pair(i + 1, 10.0 * (i + 1), stream=100 + i)
    p = trace(tmp_path, events)
    with pytest.raises(WorkloadError, match=rf"^{p}: 5 streams; the model has 4 syncpoints"):
        prepare(p, load("h200").with_overrides(syncpoints=4))


def test_replay_ops_carry_their_trace_event(tmp_path):
    p = trace(tmp_path, pair(1, 10.0) + pair(2, 20.0))
    w, _ = prepare(p, load("h200"))
    launches = [op for op in w["program"] if op["op"] == "launch_kernel"]
    assert [op["_at"] for op in launches] == [f"{p}: traceEvents[1]", f"{p}: traceEvents[3]"]


def test_as_graph_splits_segments_larger_than_the_graph_walker(tmp_path):
    events = []
    for i in range(7):
        events += pair(i + 1, 10.0 * (i + 1))
    params = load("h200")
    from dataclasses import replace
    cfg = params.frontend_config()
    import gpufe.sim.params as sp
    orig = sp.Params.frontend_config
    try:
        sp.Params.frontend_config = lambda self, mc=None: replace(cfg, graph_nodes_max=3)
        w, _ = prepare(trace(tmp_path, events), params, as_graph=True)
    finally:
        sp.Params.frontend_config = orig
    ops = [op["op"] for op in w["program"]]
    assert ops.count("graph_instantiate") == 3 and ops.count("launch_kernel") == 7


# -- dependencies: events recorded and waited for ----------------------------------------------

def _deps_hold(w, result):
    """Every stream_wait_event of the replayed program against the model's timeline: the
    waiting stream's later work starts after the recorded stream's work before the record.
    Returns how many (wait, later work) pairs were checked."""
    work = {}                      # stream name -> its kernels and copies in issue order
    names = result.stream_names
    for r in sorted((r for r in result.records if r["kind"] in ("kernel", "memcpy")),
                    key=lambda r: r["corr"]):
        work.setdefault(names[r["stream"]], []).append(r)
    issued, recorded, waits = {}, {}, []
    for op in w["program"]:
        if op["op"] in ("launch_kernel", "memcpy_async"):
            issued[op["stream"]] = issued.get(op["stream"], 0) + 1
        elif op["op"] == "event_record":
            recorded[op["event"]] = (op["stream"], issued.get(op["stream"], 0))
        elif op["op"] == "stream_wait_event" and op["event"] in recorded:
            waits.append((op["stream"], issued.get(op["stream"], 0), recorded[op["event"]]))
    checked = 0
    for stream, after, (src, upto) in waits:
        if upto == 0:
            continue
        done = max(r["end"] for r in work[src][:upto])
        for r in work.get(stream, [])[after:]:
            assert r["start"] >= done, (stream, after, src, upto, r)
            checked += 1
    return checked


def test_a_recorded_event_orders_the_stream_that_waits_for_it(tmp_path):
    """Kineto's records and waits name no stream: the record is on the thread's latest work's
    stream, the wait on its next work's; stream 9's short kernel, launched after stream 7's
    10 ms one and a wait, starts after it (without the wait it would run at once)."""
    events = pair(1, 10.0, dur=10_000.0, stream=7)
    events += [kev("cuda_runtime", "cudaEventRecordWithFlags", 20.0, 1.0, correlation=2),
               kev("cuda_runtime", "cudaStreamWaitEvent", 30.0, 1.0, correlation=3)]
    events += pair(4, 40.0, dur=2.0, stream=9)
    events += [kev("cuda_runtime", "cudaDeviceSynchronize", 50.0, 10_000.0, correlation=5)]
    w, _ = prepare(trace(tmp_path, events), load("h200"))
    ops = [(op["op"], op.get("stream"), op.get("event")) for op in w["program"]
           if op["op"] in ("event_record", "stream_wait_event")]
    assert ops == [("event_record", "s7", "e7"), ("stream_wait_event", "s9", "e7")]
    result = simulate(w, load("h200"), backend="compiled")
    assert _deps_hold(w, result) == 1
    a, b = sorted((r for r in result.records if r["kind"] == "kernel"), key=lambda r: r["corr"])
    assert b["start"] >= a["end"] > a["start"] + 9_000_000


@pytest.mark.parametrize("program", ["loader", "twostream"])
def test_a_pytorch_replay_keeps_every_cross_stream_dependency(program):
    w, _ = prepare(REF / "torch2" / f"{program}_eager.json.gz", load("h200"))
    assert _deps_hold(w, simulate(w, load("h200"), backend="compiled")) > 0


def test_as_graph_keeps_the_fork_and_join_so_twostreams_streams_overlap():
    """twostream captured as a graph per step: its two streams' kernels run at once (a
    straight-line capture would run them one after the other), and every step's kernels are
    there."""
    w, steps = prepare(REF / "torch2" / "twostream_eager.json.gz", load("h200"), as_graph=True)
    result = simulate(w, load("h200"), backend="compiled")
    ks = sorted((r for r in result.records if r["kind"] == "kernel"), key=lambda r: r["start"])
    assert len(ks) == 75 * steps
    overlaps = sum(1 for a, b in zip(ks, ks[1:]) if b["start"] < a["end"])
    assert overlaps >= steps


def test_unprofiled_replay_takes_the_profilers_cpu_time_out_of_the_gaps(tmp_path):
    """Three operator records and CUPTI's after-call time come out of the gap before the
    second launch without the profiler; a profiled replay takes out only CUPTI's (its calls
    add it back)."""
    events = pair(1, 10.0) + pair(2, 40.0)
    events += [kev("cpu_op", f"aten::op{i}", 20.0 + i, 0.5) for i in range(3)]
    p = trace(tmp_path, events)
    params = load("h200")
    sleeps = {}
    for profiler in ("cupti", "off"):
        w, _ = prepare(p, params, profiler=profiler)
        sleeps[profiler] = [op["ns"] for op in w["program"] if op["op"] == "host_sleep"]
    from gpufe.sim.analysis.replay import trace_host_scale
    assert trace_host_scale(read_trace(p), params) == pytest.approx(1.0, abs=1e-3)
    gap = 40_000 - 10_000 - CALL_US * 1e3
    assert sleeps["cupti"] == [pytest.approx(gap - params.cupti_call_gap_ns, abs=1)]
    assert sleeps["off"] == [pytest.approx(gap - params.cupti_call_gap_ns
                                           - 3 * params.profiler_op_ns, abs=1)]


def test_a_trace_from_a_slower_host_is_replayed_unprofiled_on_the_sets_host(tmp_path):
    """Launch calls twice as long as the set's (its CPU part): the trace's host is twice as
    slow, and the program's own CPU time between calls halves on the set's host."""
    params = load("h200")
    slow = params.launch_call_ns(2.0) / 1e3
    events = []
    for i, t in enumerate((10.0, 60.0)):
        events += [kev("cuda_runtime", "cudaLaunchKernel", t, slow, correlation=i + 1),
                   kev("kernel", f"k{i}", t + 2, 2.0, correlation=i + 1, stream=7,
                       grid=[1, 1, 1], block=[128, 1, 1])]
    p = trace(tmp_path, events)
    from gpufe.sim.analysis.replay import trace_host_scale
    assert trace_host_scale(read_trace(p), params) == pytest.approx(2.0, rel=1e-3)
    w, _ = prepare(p, params, profiler="off")
    gap = (60.0 - 10.0 - slow) * 1e3
    assert [op["ns"] for op in w["program"] if op["op"] == "host_sleep"] == \
        [pytest.approx((gap - 2 * params.cupti_call_gap_ns) / 2, abs=1)]
    # on the trace's own host the CPU time stays as recorded (less the profiler's, at that
    # host's speed), and the calls run at its speed
    w, _ = prepare(p, params, profiler="off", on_trace_host=True)
    assert [op["ns"] for op in w["program"] if op["op"] == "host_sleep"] == \
        [pytest.approx(gap - 2 * params.cupti_call_gap_ns, abs=1)]
    from gpufe.sim.analysis.replay import replay_params
    assert replay_params(read_trace(p), params, "off", on_trace_host=True).host_cpu_scale == \
        pytest.approx(2.0, rel=1e-3)
    assert replay_params(read_trace(p), params, "off").host_cpu_scale == 1.0


def test_memsets_are_replayed_in_their_stream():
    w, steps = prepare(REF / "torch2" / "loader_eager.json.gz", load("h200"))
    memsets = [op for op in w["program"] if op["op"] == "launch_kernel"
               and op["kernel"] == "[memset]"]
    assert len(memsets) == steps == 20


def test_the_replay_scenarios_validate_the_profiled_step():
    from gpufe.sim.analysis.validate import validate
    rows = validate(load("h200"), ["replay_twostream", "replay_mlp_w256_d4_graph"])
    got = {(r["scenario"], r["metric"]): r for r in rows}
    assert set(got) == {("replay_twostream", "step_us"),
                        ("replay_twostream", "step_us_unprofiled"),
                        ("replay_twostream", "profiler_ratio"),
                        ("replay_mlp_w256_d4_graph", "step_us"),
                        ("replay_mlp_w256_d4_graph", "step_us_unprofiled")}
    assert got[("replay_twostream", "step_us")]["measured"] == pytest.approx(2058.4, abs=0.1)
    assert abs(got[("replay_twostream", "step_us")]["rel_error"]) <= 0.10
    assert abs(got[("replay_mlp_w256_d4_graph", "step_us")]["rel_error"]) <= 0.15
    # the profiler's cost on the trace's host against each step_cost process's (7 runs)
    ratio = got[("replay_twostream", "profiler_ratio")]
    assert ratio["runs"] == 7 and ratio["side"] == "host"
    assert ratio["measured"] == pytest.approx(1.229, abs=1e-3)
    assert abs(ratio["rel_error"]) <= 0.10


def test_kinetos_stream_wait_records_name_the_streams(tmp_path):
    """With cuda_sync records, the wait's stream and the record's come from them, not from
    the threads' work: here the record call comes after a launch into stream 9 (the inferred
    stream), but Kineto says stream 7 recorded it and stream 11 waits."""
    events = pair(1, 10.0, stream=7) + pair(2, 20.0, stream=9)
    events += [kev("cuda_runtime", "cudaEventRecord", 30.0, 1.0, correlation=3),
               kev("cuda_runtime", "cudaStreamWaitEvent", 40.0, 1.0, correlation=4),
               kev("cuda_sync", "Stream Wait Event", 41.0, 0.1, correlation=4, stream=11,
                   wait_on_stream=7, wait_on_cuda_event_record_corr_id=3)]
    events += pair(5, 50.0, stream=11)
    w, _ = prepare(trace(tmp_path, events), load("h200"))
    ops = [(op["op"], op.get("stream"), op.get("event")) for op in w["program"]
           if op["op"] in ("event_record", "stream_wait_event")]
    assert ops == [("event_record", "s7", "e7"), ("stream_wait_event", "s11", "e7")]


def test_kineto_naming_only_the_waiting_stream_overrides_the_inferred_one():
    """Recorded with enable_cuda_sync_events (probe torch_profiler_cost): Kineto names each
    wait's stream but not the record's. twostream's join (A waits for B at the end of a step)
    is followed by the next step's work on B, so the thread's next work would say B; Kineto
    says A, and A's wait is kept."""
    path = REF / "probes" / "torch_profiler_cost" / "twostream_eager_sync.json.gz"
    records = read_trace(path)
    waits = [r for r in records if r["kind"] == "stream_wait"]
    assert len(waits) == 20 and all(r["wait_on_stream"] is None for r in waits)
    told = parse_workload(workload_from_trace(records, load("h200")), "told")
    guessed = parse_workload(workload_from_trace(
        [r for r in records if r["kind"] != "stream_wait"], load("h200")), "guessed")

    def deps(w):
        return [(op["op"], op["stream"]) for op in w["program"]
                if op["op"] in ("event_record", "stream_wait_event")]
    assert deps(told).count(("stream_wait_event", "s7")) == 10
    assert deps(guessed).count(("stream_wait_event", "s7")) == 5
    assert _deps_hold(told, simulate(told, load("h200"), backend="compiled")) > 0


def test_pdl_replay_launches_the_streams_kernels_with_the_attribute_and_saves_on_a_queue():
    """--pdl: every stream launch of the trace carries PDL; on a chain queued behind a gate
    (the GPU the bottleneck) each kernel then starts pdl_launch_ns after the one before exits
    instead of going through the front end's completion path."""
    from gpufe.sim.analysis.scenarios import scenario_paths
    from gpufe.sim.analysis.replay import prepare, replay, per_step_us
    from gpufe.sim.params import load
    p = load("h200")
    path = scenario_paths("chain_stream_gate")[1]
    w, _ = prepare(path, p, pdl=True)
    launches = [op for op in w["program"] if op["op"] == "launch_kernel"]
    launches += [o for op in w["program"] if op["op"] == "repeat" for o in op["body"]
                 if o["op"] == "launch_kernel"]
    assert launches and all(op["pdl"] for op in launches)
    plain, steps = replay(path, p)
    fast, _ = replay(path, p, pdl=True)
    # 1,000 empty kernels behind a 100 ms gate: each one's dependent launch ~0.8 us sooner
    saved = per_step_us(plain.records, steps) - per_step_us(fast.records, steps)
    assert 0.5 < saved / 1000 < 1.0
