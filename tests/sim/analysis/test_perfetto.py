"""Perfetto traces: a track per stream named as in the workload, a track per hardware channel
(the copy engines' channels named as such), an arrow from each call to its work."""

from gpufe.sim.analysis.timeline import perfetto, track_names
from gpufe.sim.host.workload import parse_workload
from gpufe.sim.params import load
from gpufe.sim.run import simulate

PROGRAM = [{"op": "stream_create", "name": "loader"},
           {"op": "stream_create", "name": "compute"},
           {"op": "memcpy_async", "stream": "loader", "kind": "h2d", "bytes": 4096},
           {"op": "launch_kernel", "stream": "compute", "kernel": "k"},
           {"op": "memcpy_async", "stream": "compute", "kind": "d2d", "bytes": 4096},
           {"op": "memcpy_async", "stream": "loader", "kind": "d2h", "bytes": 4096},
           {"op": "device_synchronize"}]


def _run(max_connections=2):
    w = parse_workload({"name": "tracks", "max_connections": max_connections,
                        "program": PROGRAM}, "test")
    return simulate(w, load("h200"), backend="pysim")


def _thread_names(trace, pid):
    return {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
            if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == pid}


def test_stream_tracks_have_the_workloads_names_and_copy_channels_say_so():
    r = _run()
    assert r.stream_names == {13: "loader", 14: "compute"}
    trace = perfetto(r.records, r.stream_names)
    assert _thread_names(trace, 2) == {13: "loader", 14: "compute"}
    # two connections: compute channels 0 and 1, then the H2D and D2H copy engines' channels;
    # the D2D copy runs on its stream's compute channel
    assert _thread_names(trace, 3) == {1: "channel 1", 2: "copy channel 2 (H2D)",
                                       3: "copy channel 3 (D2H)"}
    on = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X" and e["pid"] in (2, 3):
            on.setdefault(e["name"], set()).add((e["pid"], e["tid"]))
    assert on["k"] == {(2, 14), (3, 1)}
    assert on["memcpy 4096 B"] == {(2, 13), (2, 14), (3, 1), (3, 2), (3, 3)}
    flows = [e for e in trace["traceEvents"] if e["ph"] in "sf"]
    assert len(flows) == 2 * 4                          # a kernel and three copies
    assert {e["tid"] for e in flows if e["ph"] == "f"} == {13, 14}


def test_without_the_workloads_names_a_stream_is_its_number():
    r = _run(max_connections=1)
    streams, channels = track_names(r.records)
    assert streams == {13: "stream 13", 14: "stream 14"}
    assert channels == {0: "channel 0", 1: "copy channel 1 (H2D)", 2: "copy channel 2 (D2H)"}
