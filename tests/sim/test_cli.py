import pytest
import json

from gpufe.sim.cli import main
from gpufe.sim.analysis.timeline import summary


def test_run_writes_timeline_perfetto_and_vcd(tmp_path, capsys):
    w = tmp_path / "w.json"
    w.write_text(json.dumps({"name": "tiny", "max_connections": 2, "program": [
        {"op": "stream_create", "name": "a"},
        {"op": "mark", "what": "rep_begin"},
        {"op": "launch_kernel", "stream": "a", "kernel": "k1", "block_ns": 1000},
        {"op": "launch_kernel", "stream": "a", "kernel": "k2"},
        {"op": "stream_synchronize", "stream": "a"},
        {"op": "mark", "what": "rep_end"}]}))
    tl, pf, vcd = tmp_path / "t.jsonl", tmp_path / "p.json", tmp_path / "r.vcd"
    assert main(["run", str(w), "--timeline", str(tl), "--perfetto", str(pf),
                 "--vcd", str(vcd)]) == 0
    out = capsys.readouterr().out
    assert "gpufe run: tiny" in out and "kernels 2" in out
    records = [json.loads(line) for line in tl.read_text().splitlines()]
    assert records[0]["what"] == "header" and records[-1]["what"] == "footer"
    assert summary(records)["kernels"] == 2
    names = [r["name"] for r in records if r["kind"] == "runtime"]
    assert names.count("cudaLaunchKernel_v7000") == 2
    trace = json.loads(pf.read_text())["traceEvents"]
    assert sum(1 for e in trace if e["ph"] == "s") == 2        # a flow arrow per launch
    assert {e["args"]["name"] for e in trace if e["ph"] == "M" and e.get("tid") is not None} \
        >= {"a", "channel 0"}           # stream "a" of the workload
    assert "pbdma0_state" in vcd.read_text()


def test_bad_workload_is_reported_not_raised(tmp_path, capsys):
    w = tmp_path / "bad.json"
    w.write_text(json.dumps({"program": [{"op": "nope"}]}))
    assert main(["run", str(w)]) == 2
    assert "program[0]: unknown op 'nope'" in capsys.readouterr().err


def test_metrics_command_prints_a_shipped_traces_metrics(capsys):
    from gpufe.sim.analysis.scenarios import HERE
    assert main(["metrics", str(HERE / "h200" / "graph_nodes100.jsonl.gz")]) == 0
    out = capsys.readouterr().out
    assert "graph_launch_api_us" in out and "102.427" in out


def test_metrics_command_rejects_a_bad_trace(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind":"meta","what":"header","t":0}\n{"kind":"kernel"}\n')
    assert main(["metrics", str(bad)]) == 2
    assert f"{bad}:2:" in capsys.readouterr().err


def test_validate_writes_rows_and_a_plot(tmp_path, capsys):
    js, png = tmp_path / "v.json", tmp_path / "v.png"
    assert main(["validate", "--scenarios", "graph_nodes10", "nocupti_graph_nodes10",
                 "--json", str(js), "--plot", str(png)]) == 0
    rows = json.loads(js.read_text())["rows"]
    assert {r["scenario"] for r in rows} == {"graph_nodes10", "nocupti_graph_nodes10"}
    assert set(rows[0]) == {"scenario", "metric", "model", "measured", "rel_error", "side"}
    assert {r["side"] for r in rows if r["metric"] == "graph_launch_api_us"} == {"host"}
    assert {r["side"] for r in rows if r["metric"] == "gpu_span_us"} == {"device"}
    for r in rows:
        assert r["rel_error"] == (r["model"] - r["measured"]) / abs(r["measured"])
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "comparisons: median |error|" in capsys.readouterr().out


def test_validate_cv_writes_the_predicted_rows_and_refuses_what_it_cannot_do(tmp_path, capsys):
    js = tmp_path / "cv.json"
    assert main(["validate", "--cv", "--family", "graph_nodes", "--json", str(js)]) == 0
    rows = json.loads(js.read_text())["rows"]
    assert {(r["scenario"], r["cv"]) for r in rows} == {
        ("nocupti_graph_nodes1000", "largest"), ("nocupti_graph_nodes10", "smallest")}
    assert "comparisons: median |error|" in capsys.readouterr().out
    assert main(["validate", "--family", "nope"]) == 2
    assert "one of gupdate" in capsys.readouterr().err
    assert main(["validate", "--cv", "--scenarios", "graph_nodes10"]) == 2


def test_profiler_cupti_costs_cpu_and_gpu_time(tmp_path):
    from gpufe.sim.params import load
    from gpufe.sim.run import simulate
    from gpufe.sim.host.workload import parse_workload
    from gpufe.sim.analysis.metrics import metrics
    w = parse_workload({"name": "p", "program": [
        {"op": "stream_create", "name": "s"},
        {"op": "launch_kernel", "stream": "s", "kernel": "gate", "block_ns": 200000},
        {"op": "repeat", "count": 20, "body": [
            {"op": "launch_kernel", "stream": "s", "kernel": "k"}]},
        {"op": "stream_synchronize", "stream": "s"}]}, "test")
    p = load("h200").with_overrides(cold_call_factor=0)    # (calls a few us apart)
    runs = {(prof, lat): simulate(w, p.with_overrides(cupti_latency_timestamps=lat),
                                  backend="compiled", profiler=prof).records
            for prof, lat in (("cupti", 0), ("cupti", 1), ("off", 1))}
    on, off = metrics(runs["cupti", 0]), metrics(runs["off", 1])
    assert on["launch_api_us"] == pytest.approx(off["launch_api_us"]
                                                + p.cupti_launch_ns / 1e3, abs=0.01)
    # queued behind the gate: the gap grows by CUPTI's release delay, the kernel by its own
    assert on["median_gap_us"] == pytest.approx(off["median_gap_us"]
                                                + p.cupti_release_ns / 1e3, abs=0.02)
    assert on["median_kernel_us"] == pytest.approx(off["median_kernel_us"]
                                                   + p.cupti_kernel_ns / 1e3, abs=0.01)
    # with latency timestamps each launch waits for its stamp first: its two writes and its
    # round trip, longer by stamp_fetch_ns while more than a segment queue of entries (10
    # kernels: the synchronize pushes nothing) waits behind it
    def gaps(records):
        ks = sorted((r for r in records if r["kind"] == "kernel" and r["name"] == "k"),
                    key=lambda r: r["start"])
        return [(b["start"] - a["end"]) / 1e3 for a, b in zip(ks, ks[1:])]
    extra = [round(g1 - g0, 3) for g0, g1 in zip(gaps(runs["cupti", 0]), gaps(runs["cupti", 1]))]
    # gap i is kernel i + 2's (of 20): more than 10 behind it for i + 2 <= 9
    fast, slow = set(extra[8:]), set(extra[:8])
    assert len(fast) == 1 and len(slow) == 1, extra
    stamp = fast.pop()
    assert p.stamp_hold_ns / 1e3 < stamp <= (p.stamp_hold_ns + 2 * p.dma_write_ns) / 1e3, extra
    assert slow.pop() - stamp == pytest.approx(p.stamp_fetch_ns / 1e3, abs=0.002), extra


# -- bad input through the command: one line, the file, the place, the reason -----------------

def tiny(tmp_path, program=None, name="w.json", **top):
    w = tmp_path / name
    w.write_text(json.dumps(dict({"program": program or [
        {"op": "stream_create", "name": "a"},
        {"op": "launch_kernel", "stream": "a", "kernel": "k"},
        {"op": "stream_synchronize", "stream": "a"}]}, **top)))
    return w


def one_error_line(capsys, *fragments):
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("gpufe: "), err
    assert "Traceback" not in err
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("option", ["--timeline", "--perfetto", "--vcd"])
def test_outputs_into_a_missing_folder_fail_before_the_simulation(tmp_path, capsys, option,
                                                                  no_simulation):
    w = tiny(tmp_path)
    out = tmp_path / "missing" / "out.x"
    assert main(["run", str(w), option, str(out)]) == 2
    one_error_line(capsys, option, f"folder {out.parent} does not exist")


def test_outputs_that_cannot_be_written_fail_before_the_simulation(tmp_path, capsys,
                                                                   no_simulation):
    w = tiny(tmp_path)
    for argv, fragment in [
            (["--timeline", str(tmp_path)], "is a folder"),
            (["--timeline", str(tmp_path / "a"), "--perfetto", str(tmp_path / "a")],
             "both write"),
            (["--timeline", str(w)], "would overwrite an input file"),
            (["--timeline", ""], "empty file name")]:
        assert main(["run", str(w)] + argv) == 2
        one_error_line(capsys, fragment)
    assert not (tmp_path / "a").exists()
    for argv in (["validate", "--json", str(tmp_path / "no" / "v.json")],
                 ["validate", "--plot", str(tmp_path / "no" / "v.png")],
                 ["calibrate", "--out", str(tmp_path / "no" / "p.json")],
                 ["demo", "--vcd", str(tmp_path / "no" / "d.vcd")]):
        assert main(argv) == 2
        one_error_line(capsys, "does not exist")
    f = tmp_path / "file"
    f.write_text("")
    assert main(["synth", "--out", str(f)]) == 2
    one_error_line(capsys, "is not a folder")


@pytest.mark.parametrize("text, fragments", [
    (b'{"program": [\xff]}', [":1: not UTF-8 text"]),
    (b'{"program": [{"op": "host_sleep", "ns": NaN}]}', [":1:", "NaN is not a number"]),
    (b'{"max_connections": true, "program": []}', ["max_connections must be 1..32"]),
    (b'{"program": ' + b"[" * 50000 + b"]" * 50000 + b"}", ["nested too deeply"]),
])
def test_bad_workload_files_give_one_line(tmp_path, capsys, no_simulation, text, fragments):
    w = tmp_path / "w.json"
    w.write_bytes(text)
    assert main(["run", str(w)]) == 2
    one_error_line(capsys, str(w), *fragments)


def test_bad_parameter_files_give_one_line(tmp_path, capsys, no_simulation):
    w = tiny(tmp_path)
    p = tmp_path / "p.json"
    p.write_text('{"sms": true}')
    assert main(["run", str(w), "--params", str(p)]) == 2
    one_error_line(capsys, str(p), "sms must be an integer")
    p.write_text('{"hw_channels": 30}')
    assert main(["run", str(w), "--params", str(p), "--max-connections", "32"]) == 2
    one_error_line(capsys, str(p), "max_connections 32 need 34 channels; the front end has "
                                   "hw_channels = 30")


def test_work_limits_are_said_before_the_run_and_no_limits_lifts_them(tmp_path, capsys,
                                                                      monkeypatch):
    import gpufe.sim.host.workload
    monkeypatch.setattr(gpufe.sim.host.workload, "MAX_OPS", 2)
    w = tiny(tmp_path)
    assert main(["run", str(w), "--max-connections", "8"]) == 2
    one_error_line(capsys, str(w), "the program runs 3 ops", "--no-limits")
    assert main(["run", str(w), "--max-connections", "8", "--no-limits"]) == 0


def test_errors_while_the_program_runs_name_the_file(tmp_path, capsys):
    w = tiny(tmp_path, [{"op": "stream_create", "name": "a"},
                        {"op": "stream_create", "name": "b"},
                        {"op": "stream_begin_capture", "stream": "a"},
                        {"op": "stream_end_capture", "stream": "b", "graph": "g"}])
    assert main(["run", str(w), "--max-connections", "8"]) == 2
    one_error_line(capsys, f"{w}: program[3] (stream_end_capture)", "did not begin a capture")


def test_an_error_after_a_progress_bar_goes_on_its_own_line(tmp_path, capsys):
    body = [{"op": "launch_kernel", "stream": "a", "kernel": "k"}] * 300
    w = tiny(tmp_path, [{"op": "stream_create", "name": "a"},
                        {"op": "stream_create", "name": "b"}] + body + [
        {"op": "stream_begin_capture", "stream": "a"},
        {"op": "stream_end_capture", "stream": "b", "graph": "g"}])
    assert main(["run", str(w), "--max-connections", "8", "--progress"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith(f"gpufe: {w}: program[303]")


def test_bad_traces_give_one_line_and_metrics_print_nothing_before(tmp_path, capsys):
    from gpufe.sim.analysis.scenarios import HERE
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind":"meta","what":"header","t":0}\n'
                   '{"kind":"kernel","name":"k","corr":1,"stream":7,"start":0,"end":9,'
                   '"channel":"x"}\n')
    good = HERE / "h200" / "graph_nodes10.jsonl.gz"
    assert main(["metrics", str(good), str(bad)]) == 2
    assert capsys.readouterr().out == ""
    assert main(["metrics", str(bad)]) == 2
    one_error_line(capsys, f"{bad}:2:", "'channel' is 'x'")
    assert main(["run", "--from-trace", str(bad)]) == 2
    one_error_line(capsys, f"{bad}:2:")


def test_a_bad_replay_fails_before_printing_or_simulating(tmp_path, capsys, no_simulation):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1.0, "dur": 1.0,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 3.0, "dur": 5e6,
         "args": {"correlation": 1, "stream": 7}}]}))
    assert main(["run", "--from-trace", str(p)]) == 2
    assert capsys.readouterr().out == ""
    assert main(["run", "--from-trace", str(p)]) == 2
    one_error_line(capsys, f"{p}: traceEvents[1]: kernel 'k' runs 5 s")


def test_bad_options_are_usage_errors(tmp_path, capsys):
    w = tiny(tmp_path)
    for argv in (["run", str(w), "--max-connections", "40"],
                 ["run", str(w), "--max-connections", "x"],
                 ["synth", "--clock-mhz", "nan"], ["demo", "--channels", "0"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
        assert "Traceback" not in capsys.readouterr().err
    assert main(["run", str(w), "--as-graph"]) == 2
    one_error_line(capsys, "--as-graph goes with --from-trace")
    assert main(["run", str(w), "--pdl"]) == 2
    one_error_line(capsys, "--pdl goes with --from-trace")
    assert main(["demo", "--channels", "200", "--fifo-depth", "100", "--vcd", ""]) == 2
    one_error_line(capsys, "fifo_depth must be a power of two")


def test_an_internal_error_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    import gpufe.sim.run
    w = tiny(tmp_path)

    def broken(*a, **kw):
        return {}["oops"]
    monkeypatch.setattr(gpufe.sim.run, "simulate", broken)
    assert main(["run", str(w)]) == 70
    line = one_error_line(capsys, "internal error (a bug in gpufe, not in the input)",
                          "KeyError: 'oops'", "test_cli.py")
    assert "GPUFE_TRACEBACK=1" in line
    monkeypatch.setenv("GPUFE_TRACEBACK", "1")
    assert main(["run", str(w)]) == 70
    assert "Traceback" in capsys.readouterr().err


def test_run_from_trace_prints_each_regime_per_step_as_the_replay_gives_it(capsys):
    """One screen (here its JSON) per step: the trace's step, and the model's profiled (on
    the trace's host: as replay() runs it), unprofiled, eager and as a graph."""
    from gpufe.sim.analysis.replay import replay, per_step_us
    from gpufe.sim.analysis.scenarios import HERE
    from gpufe.sim.params import load
    path = HERE / "h200" / "torch2" / "twostream_eager.json.gz"
    assert main(["run", "--from-trace", str(path), "--as-graph", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["steps"] == 20
    assert out["measured"]["per_step_us"] == pytest.approx(2058.4, abs=0.1)
    assert set(out["model"]) == {"eager, profiled", "eager, unprofiled", "as graph, profiled",
                                 "as graph, unprofiled"}
    result, steps = replay(path, load("h200"), profiler="cupti")
    assert out["model"]["eager, profiled"]["per_step_us"] == per_step_us(result.records, steps)
    for label, run in out["model"].items():
        assert run["kernels_per_step"] == 75.0, label
    assert out["model"]["as graph, unprofiled"]["per_step_us"] < \
        out["model"]["eager, unprofiled"]["per_step_us"] < \
        out["model"]["eager, profiled"]["per_step_us"]


def test_run_from_trace_with_pdl_adds_the_pdl_runs(capsys):
    from gpufe.sim.analysis.scenarios import HERE
    path = HERE / "h200" / "torch2" / "twostream_eager.json.gz"
    assert main(["run", "--from-trace", str(path), "--pdl", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["model"]
    assert set(out) == {"eager, profiled", "eager, unprofiled", "eager, unprofiled, PDL"}
    # twostream's launches are CPU-bound: PDL cannot take GPU time out of the step
    assert out["eager, unprofiled, PDL"]["per_step_us"] <= out["eager, unprofiled"]["per_step_us"]
