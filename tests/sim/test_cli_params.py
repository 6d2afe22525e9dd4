"""gpufe params, --set on run/validate/calibrate, run --json, and the Perfetto trace's track
names, through the command line."""

import json

import pytest

from gpufe.sim.cli import main
from gpufe.sim.params import FIELDS, load


def workload(tmp_path, launches=6):
    w = tmp_path / "w.json"
    w.write_text(json.dumps({"name": "launches", "max_connections": 2, "program": [
        {"op": "stream_create", "name": "main"},
        {"op": "stream_create", "name": "side"},
        {"op": "repeat", "count": launches, "body": [
            {"op": "launch_kernel", "stream": "main", "kernel": "k"}]},
        {"op": "memcpy_async", "stream": "side", "kind": "h2d", "bytes": 65536},
        {"op": "device_synchronize"}]}))
    return w


def the_error(capsys):
    """The one line on stderr."""
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert captured.out == ""
    return lines[0]


def test_params_lists_the_sets_and_every_parameter_of_one(capsys):
    assert main(["params"]) == 0
    out = capsys.readouterr().out
    assert "\n  h200 " in out and "NVIDIA H200" in out and "residuals" not in out
    assert main(["params", "h200"]) == 0
    lines = capsys.readouterr().out.splitlines()
    h200 = load("h200")
    for name, f in FIELDS.items():
        (line,) = [ln for ln in lines if ln.split()[:1] == [name]]
        assert f.metadata["doc"] in line and f.metadata["unit"] in line, line
    (line,) = [ln for ln in lines if ln.startswith("  launch_latency_ns ")]
    assert line.split()[1:3] == [f"{h200.launch_latency_ns:g}", "ns"]
    assert main(["params", "h200", "--set", "launch_latency_ns=600"]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines()
               if ln.startswith("  launch_latency_ns ")]
    assert line.split()[1] == "600"


def test_params_of_an_unknown_set_is_one_line(capsys):
    assert main(["params", "h300"]) == 2
    assert the_error(capsys).startswith("gpufe: no parameter set 'h300'")


@pytest.mark.parametrize("setting, message", [
    ("foo=1", "gpufe: --set foo=1: no parameter 'foo' (gpufe params lists them)"),
    ("sms=lots", "gpufe: --set sms=lots: sms must be an integer, not 'lots'"),
    ("kickoff_ns=-1", "gpufe: --set kickoff_ns=-1: kickoff_ns is -1; it must be 0..1e+09 ns"),
])
def test_a_bad_setting_is_one_line_before_anything_runs(tmp_path, capsys, no_simulation,
                                                        setting, message):
    w = workload(tmp_path)
    assert main(["run", str(w), "--set", "sms=100", "--set", setting]) == 2
    assert the_error(capsys) == message
    assert main(["validate", "--scenarios", "chain_stream", "--set", setting]) == 2
    assert the_error(capsys) == message
    out = tmp_path / "fit.json"
    assert main(["calibrate", "--out", str(out), "--set", setting]) == 2
    assert the_error(capsys) == message
    assert not out.exists()


def test_run_with_settings_prints_json_of_the_changed_model(tmp_path, capsys):
    w = workload(tmp_path)
    assert main(["run", str(w), "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["run", str(w), "--json", "--set", "launch_cpu_ns=20000",
                 "--set", "h2d_bytes_per_ns=10"]) == 0
    changed = json.loads(capsys.readouterr().out)
    assert plain["params"] == "h200"
    assert changed["params"] == "h200 (launch_cpu_ns=20000, h2d_bytes_per_ns=10)"
    # (to the ns but for the launch path's few ns of cold between calls: cold_call_factor)
    assert plain["metrics"]["launch_api_us"] == pytest.approx(load("h200").launch_cpu_ns / 1e3,
                                                              abs=0.002)
    assert changed["metrics"]["launch_api_us"] == 20.0
    assert changed["metrics"]["copy_h2d_gbps"] == pytest.approx(10, rel=0.01)
    assert changed["metrics"]["kernels"] == plain["metrics"]["kernels"] == 6
    assert (plain["workload"], plain["max_connections"]) == ("launches", 2)


def test_run_perfetto_names_tracks_by_stream_names(tmp_path, capsys):
    w, pf = workload(tmp_path), tmp_path / "p.json"
    assert main(["run", str(w), "--perfetto", str(pf)]) == 0
    assert f"perfetto: {pf}" in capsys.readouterr().out
    names = {(e["pid"], e["tid"]): e["args"]["name"]
             for e in json.loads(pf.read_text())["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {(2, 13): "main", (2, 14): "side", (3, 0): "channel 0",
                     (3, 2): "copy channel 2 (H2D)"}
