"""PyTorch profiler (Kineto) traces as PyTorch 1.13 to 2.5 write them (issue 41, "Real traces
from the wild are rejected"): times since the epoch, Triton's kernels launched through the
driver API with no launch record, a trace of launch calls without kernel activity.

The fixtures (``kineto_wild/``) are laid out as Kineto's ``output_json.cpp`` writes a trace:
``schemaVersion``, ``deviceProperties``, ``distributedInfo``, ``displayTimeUnit``, ``traceEvents``
(``ph`` "X" events of ``cat`` "user_annotation", "cpu_op", "cuda_runtime", "kernel",
"gpu_memcpy"; ``ac2g`` flow events; "M" metadata), ``baseTimeNanoseconds`` (newer Kineto) and
``traceName``. The same two-step program (mm, add, a copy to the host, a stream
synchronisation) is written three ways: integer us since the epoch (1.13), us since the epoch
to the ns (2.0 to 2.3), us from ``baseTimeNanoseconds`` (2.4 on)."""

import json
import pathlib

import pytest

from gpufe.sim.analysis.replay import UNLAUNCHED_NOTES, prepare, replay, step_summary
from gpufe.sim.analysis.traces import MAX_TS_US, TraceError, read_trace_located
from gpufe.sim.params import load

WILD = pathlib.Path(__file__).parent / "kineto_wild"
NO_NOTES = dict.fromkeys(UNLAUNCHED_NOTES, 0)


def ops(w, op):
    return [o for o in w["program"] if o["op"] == op]


def with_base_zero(tmp_path):
    """torch21_epoch.json with ``"baseTimeNanoseconds": 0``: times since the epoch."""
    text = (WILD / "torch21_epoch.json").read_text()
    p = tmp_path / "torch23_epoch_base0.json"
    p.write_text(text.replace('"displayTimeUnit"',
                              '"baseTimeNanoseconds": 0,\n  "displayTimeUnit"'))
    return p


# -- times since the epoch, with and without baseTimeNanoseconds ------------------------------

@pytest.mark.parametrize("name", ["torch113_epoch_us.json", "torch21_epoch.json",
                                  "torch25_base.json", "base0"])
def test_traces_with_times_since_the_epoch_or_from_base_time_replay(tmp_path, name):
    p = with_base_zero(tmp_path) if name == "base0" else WILD / name
    w, steps = prepare(p, load("h200"))
    assert steps == 2
    assert [o["kernel"][:12] for o in ops(w, "launch_kernel")] == \
        ["ampere_sgemm", "void at::nat"] * 2
    assert len(ops(w, "memcpy_async")) == 2 and "replay_notes" not in w
    result, steps = replay(p, load("h200"))
    s = step_summary(result, steps)
    assert s["kernels"] == 4 and s["per_step_us"] > 0 and s["replay_notes"] == NO_NOTES


def test_times_since_the_epoch_are_read_to_the_ns(tmp_path):
    """A double holds 1.7e15 us to 0.25 us: the reader takes the digits as written. The same
    program since the epoch (2.1) and from baseTimeNanoseconds (2.5) reads the same."""
    epoch, _ = read_trace_located(WILD / "torch21_epoch.json")
    based, _ = read_trace_located(WILD / "torch25_base.json")
    base0, _ = read_trace_located(with_base_zero(tmp_path))
    launches = [r for r in epoch if r["kind"] == "runtime"]
    # the step begins at ...124456.789 us, its first launch at ...124472.347 us, 5.127 us long
    assert (launches[0]["start"], launches[0]["end"]) == (15_558, 20_685)
    assert epoch[1:] == based[1:] == base0[1:]
    # PyTorch 1.13: integer us
    old, _ = read_trace_located(WILD / "torch113_epoch_us.json")
    assert [r["start"] for r in old if r["kind"] == "runtime"][:2] == [16_000, 38_000]


@pytest.mark.parametrize("change, fragments", [
    # one event 1e15 us after the others: relative to the trace's earliest event
    (lambda d: d["traceEvents"][1].update(ts=d["traceEvents"][1]["ts"] + MAX_TS_US + 1e3),
     ["traceEvents[1]: event ", "after the trace's earliest one (traceEvents[3])",
      "a trace spans at most 1e+15 us"]),
    # beyond a 64-bit count of ns from baseTimeNanoseconds
    (lambda d: (d.update(baseTimeNanoseconds=9_223_372_036_000_000_000),
                d["traceEvents"][1].update(ts=1e6)),
     ["traceEvents[1]: cuda_runtime event's ts 1e+06 or dur 5.127 is out of range",
      "64-bit ns from baseTimeNanoseconds"]),
    (lambda d: d["traceEvents"][1].update(ts=-1e17),
     ["traceEvents[1]", "out of range"]),
    (lambda d: d.update(baseTimeNanoseconds="1695839990000000000"),
     ["baseTimeNanoseconds must be a whole number of ns"]),
])
def test_times_out_of_what_kineto_writes_are_rejected(tmp_path, change, fragments):
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": 1695839990000000000,
           "traceEvents": [
               {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1.0, "dur": 9.871},
               {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1.5,
                "dur": 5.127, "args": {"correlation": 1}},
               {"ph": "s", "id": 1, "ts": 1.5, "cat": "ac2g", "name": "ac2g"},
               {"ph": "X", "cat": "kernel", "name": "k", "ts": 1.0, "dur": 2.0,
                "args": {"correlation": 1, "stream": 7, "grid": [1, 1, 1],
                         "block": [128, 1, 1]}}]}
    change(doc)
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(TraceError) as e:
        read_trace_located(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}: "), msg
    for f in fragments:
        assert f in msg, msg


# -- Triton's kernels: launched through the driver API, no launch record, one correlation id --

def test_kernels_without_a_launch_record_sharing_a_correlation_id_replay_counted(capsys):
    """Each step: mm by cudaLaunchKernel, two Triton kernels sharing one correlation id that
    no call has, relu by cudaLaunchKernel. The Triton kernels are launched right after mm's
    call (their stream's previous), counted in the replay's summary."""
    from gpufe.sim.cli import main
    p = WILD / "torch22_triton_shared_corr.json"
    w, steps = prepare(p, load("h200"))
    assert [o["kernel"][:12] for o in ops(w, "launch_kernel")] == \
        ["ampere_sgemm", "triton_poi_f", "triton_red_f", "void at::nat"] * 2
    notes = dict(NO_NOTES, unlaunched=4, sharing_correlation=4,
                 launched_after_stream_previous=4)
    assert w["replay_notes"] == notes
    result, steps = replay(p, load("h200"))
    s = step_summary(result, steps)
    assert s["kernels"] == 8 and s["replay_notes"] == notes
    # gpufe run --from-trace: the counts in each run's figures
    assert main(["run", "--from-trace", str(p), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {label: run["replay_notes"] for label, run in out["model"].items()} == \
        {"eager, profiled": notes, "eager, unprofiled": notes}


def kev(cat, name, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1,
            "args": args}


def test_a_streams_first_kernel_without_launch_goes_after_the_call_before_it(tmp_path):
    """Kernel b is stream 9's first and no call launched it: after the last call begun
    before it; graph node g without its graph launch: skipped, counted. A kernel sharing
    the correlation id of a recorded launch is still refused."""
    events = [kev("cuda_runtime", "cudaLaunchKernel", 10.0, 5.0, correlation=1),
              kev("kernel", "a", 16.0, 3.0, correlation=1, stream=7),
              kev("kernel", "b", 31.0, 3.0, correlation=5, stream=9),
              kev("kernel", "g", 40.0, 3.0, correlation=6, stream=9, **{"graph id": 2}),
              kev("cuda_runtime", "cudaLaunchKernel", 25.0, 5.0, correlation=2),
              kev("kernel", "c", 36.0, 3.0, correlation=2, stream=7),
              kev("cuda_runtime", "cudaDeviceSynchronize", 45.0, 9.0, correlation=3)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    w, _ = prepare(p, load("h200"))
    assert [o["kernel"] for o in ops(w, "launch_kernel")] == ["a", "c", "b"]
    assert w["replay_notes"] == dict(NO_NOTES, unlaunched=2, launched_after_call_before=1,
                                     skipped=1)
    events[5]["args"]["correlation"] = 1
    p.write_text(json.dumps({"traceEvents": events}))
    with pytest.raises(TraceError, match=rf"^{p}: traceEvents\[5\]: kernel has correlation id "
                                         rf"1, as traceEvents\[1\] has"):
        read_trace_located(p)


# -- launch calls but no kernel records ---------------------------------------------------------

def test_launches_without_kernel_records_say_what_is_missing():
    p = WILD / "range_profiler_launches_only.json"
    with pytest.raises(TraceError) as e:
        prepare(p, load("h200"))
    assert str(e.value).startswith(
        f"{p}: 77 cudaLaunchKernel calls but no kernel records: was the trace recorded "
        f"without CUDA activity (ProfilerActivity.CUDA)?"), str(e.value)


def test_the_run_says_what_it_did_with_unlaunched_kernels(capsys):
    from gpufe.sim.cli import main
    assert main(["run", "--from-trace", str(WILD / "torch22_triton_shared_corr.json")]) == 0
    out = capsys.readouterr().out
    assert "4 kernels/copies without a launch record (4 sharing a correlation id): 4 " \
           "launched after their stream's previous call" in out
