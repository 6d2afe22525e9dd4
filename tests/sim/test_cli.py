import pytest
import json

from sim.cli import main
from sim.timeline import summary


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
        >= {"stream 13", "channel 0"}
    assert "ch0_state" in vcd.read_text()


def test_bad_workload_is_reported_not_raised(tmp_path, capsys):
    w = tmp_path / "bad.json"
    w.write_text(json.dumps({"program": [{"op": "nope"}]}))
    assert main(["run", str(w)]) == 2
    assert "program[0]: unknown op 'nope'" in capsys.readouterr().err


def test_metrics_command_prints_a_shipped_traces_metrics(capsys):
    from sim.scenarios import HERE
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
    assert set(rows[0]) == {"scenario", "metric", "model", "measured", "rel_error"}
    for r in rows:
        assert r["rel_error"] == (r["model"] - r["measured"]) / abs(r["measured"])
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "comparisons: median |error|" in capsys.readouterr().out


def test_profiler_cupti_costs_cpu_and_gpu_time(tmp_path):
    from sim.params import load
    from sim.run import simulate
    from sim.workload import parse_workload
    from sim.metrics import metrics
    w = parse_workload({"name": "p", "program": [
        {"op": "stream_create", "name": "s"},
        {"op": "launch_kernel", "stream": "s", "kernel": "gate", "block_ns": 200000},
        {"op": "repeat", "count": 20, "body": [
            {"op": "launch_kernel", "stream": "s", "kernel": "k"}]},
        {"op": "stream_synchronize", "stream": "s"}]}, "test")
    p = load("h200")
    on = metrics(simulate(w, p, backend="compiled", profiler="cupti").records)
    off = metrics(simulate(w, p, backend="compiled", profiler="off").records)
    assert on["launch_api_us"] == pytest.approx(off["launch_api_us"]
                                                + p.cupti_launch_ns / 1e3, abs=0.01)
    # queued behind the gate: the gap grows by CUPTI's acquire cost, the kernel by its own
    assert on["median_gap_us"] == pytest.approx(off["median_gap_us"]
                                                + p.cupti_acquire_ns / 1e3, abs=0.02)
    assert on["median_kernel_us"] == pytest.approx(off["median_kernel_us"]
                                                   + p.cupti_kernel_ns / 1e3, abs=0.01)
