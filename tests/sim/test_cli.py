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
