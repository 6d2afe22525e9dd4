"""Trace readers: the shipped H200 traces load; malformed and truncated files are rejected
with the file, the line or event, and the reason."""

import gzip
import json

import pytest

from gpufe.sim.analysis.scenarios import HERE
from gpufe.sim.analysis.traces import TraceError, read_trace

REF = HERE / "h200"


def test_fe_trace_reader_on_a_shipped_trace():
    records = read_trace(REF / "chain_stream_gate.jsonl.gz")
    assert records[0]["kind"] == "meta" and records[0]["scenario"] == "chain"
    kernels = [r for r in records if r["kind"] == "kernel"]
    assert len(kernels) == 3 * 1000 + 10 + 3          # reps x n, warm-ups, gates
    assert all(k["end"] >= k["start"] >= k["submitted"] >= k["queued"] for k in kernels)


def test_kineto_reader_on_the_mlp_traces():
    eager = read_trace(REF / "mlp_w256_d4_eager.json.gz")
    graph = read_trace(REF / "mlp_w256_d4_graph.json.gz")
    for records in (eager, graph):
        kernels = [r for r in records if r["kind"] == "kernel"]
        assert len(kernels) == 520 and all(k["end"] >= k["start"] >= 0 for k in kernels)
    launches = [r for r in eager if r["kind"] == "runtime" and "LaunchKernel" in r["name"]]
    assert len(launches) == 480
    assert sum(1 for r in graph if r["kind"] == "runtime" and r["name"] == "cudaGraphLaunch") == 10


def test_gpufe_timelines_read_back(tmp_path):
    lines = [{"kind": "meta", "what": "header", "t": 0, "scenario": "x"},
             {"kind": "kernel", "name": "k", "corr": 1, "stream": 7, "start": 10, "end": 20}]
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    assert read_trace(p) == lines


@pytest.mark.parametrize("text, where, why", [
    ('{"kind":"meta","what":"header","t":0}\n{"kind":"kernel","name":"k"}\n', ":2:",
     "without 'corr'"),
    ('{"kind":"meta","what":"header","t":0}\n{"kind":"kernel","name":"k","corr":1,"stream":1,'
     '"start":9,"end":3}\n', ":2:", "ends (3) before it starts (9)"),
    ('{"kind":"meta","what":"header","t":0}\nnot json\n', ":2:", "not JSON"),
    ('{"kind":"meta","what":"header","t":0}\n{"kind":"bogus","t":1}\n', ":2:",
     "unknown record kind 'bogus'"),
    ('{"kind":"runtime","name":"a","corr":1,"start":0,"end":1}\n', ":1:", "header"),
])
def test_malformed_fe_trace_is_rejected_with_line_and_reason(tmp_path, text, where, why):
    p = tmp_path / "bad.jsonl"
    p.write_text(text)
    with pytest.raises(TraceError) as e:
        read_trace(p)
    assert str(p) + where in str(e.value) and why in str(e.value)


def test_truncated_gzip_is_rejected(tmp_path):
    data = (REF / "graph_nodes10.jsonl.gz").read_bytes()
    p = tmp_path / "cut.jsonl.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError) as e:
        read_trace(p)
    assert str(p) in str(e.value) and "truncated" in str(e.value)


def test_truncated_kineto_trace_is_rejected(tmp_path):
    text = gzip.decompress((REF / "mlp_w256_d4_graph.json.gz").read_bytes()).decode()
    p = tmp_path / "cut.json"
    p.write_text(text[: len(text) // 3])
    with pytest.raises(TraceError) as e:
        read_trace(p)
    assert str(p) in str(e.value) and "truncated" in str(e.value)


def test_kineto_event_without_correlation_is_rejected(tmp_path):
    doc = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1.0, "dur": 2.0,
                            "args": {"stream": 7}}]}
    p = tmp_path / "k.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(TraceError) as e:
        read_trace(p)
    assert "traceEvents[0]" in str(e.value) and "correlation" in str(e.value)


# -- every class of bad trace: the file, the line or event, the reason; never a traceback -----

def kineto(events, **top):
    return dict({"traceEvents": events}, **top)


def kev(cat, name, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": args}


def launch_pair(corr, ts, stream=7, dur=2.0, name="k"):
    return [kev("cuda_runtime", "cudaLaunchKernel", ts, 1.0, correlation=corr),
            kev("kernel", name, ts + 2, dur, correlation=corr, stream=stream,
                grid=[1, 1, 1], block=[128, 1, 1])]


def write_kineto(tmp_path, doc, raw=None):
    p = tmp_path / "k.json"
    p.write_text(raw if raw is not None else json.dumps(doc))
    return p


def rejected(p, *fragments):
    with pytest.raises(TraceError) as e:
        read_trace(p)
    msg = str(e.value)
    assert msg.startswith(str(p)), msg
    for f in fragments:
        assert f in msg, msg
    return msg


def test_a_good_small_kineto_trace_reads(tmp_path):
    recs = read_trace(write_kineto(tmp_path, kineto(launch_pair(1, 10.0) + launch_pair(2, 20.0))))
    assert [r["kind"] for r in recs] == ["meta", "runtime", "kernel", "runtime", "kernel"]


@pytest.mark.parametrize("mutate, fragments", [
    (lambda d: d["traceEvents"][1].update(args=[1, 2]),
     ["traceEvents[1]", "args must be an object"]),
    (lambda d: d.update(deviceProperties={"name": "x"}), ["deviceProperties must be a list"]),
    (lambda d: d.update(deviceProperties=[{"name": 5}]), ["name must be a string"]),
    (lambda d: d.update(cuda_driver_version=[1]), ["cuda_driver_version must be"]),
    (lambda d: d["traceEvents"][1].update(name=None), ["traceEvents[1]", "name must be a string"]),
    (lambda d: d["traceEvents"][1].update(name="\ud800"), ["traceEvents[1]", "not valid Unicode"]),
    (lambda d: d["traceEvents"][1].update(ts="5"), ["traceEvents[1]", "valid ts/dur"]),
    (lambda d: d["traceEvents"][1].update(ts=True), ["traceEvents[1]", "valid ts/dur"]),
    (lambda d: d["traceEvents"][1].update(dur=-1), ["traceEvents[1]", "valid ts/dur"]),
    (lambda d: d["traceEvents"][1].update(ts=1e300), ["traceEvents[1]", "out of range"]),
    (lambda d: d["traceEvents"][1]["args"].update(stream="7"),
     ["traceEvents[1]", "without a stream (an integer; got '7')"]),
    (lambda d: d["traceEvents"][1]["args"].update(correlation=True),
     ["traceEvents[1]", "without a correlation id"]),
    (lambda d: d["traceEvents"][1]["args"].update(block=[2048, 1, 1]),
     ["traceEvents[1]", "block of 2,048 threads", "at most 1,024"]),
    (lambda d: d["traceEvents"][1]["args"].update(block="128"), ["traceEvents[1]", "args.block"]),
    (lambda d: d["traceEvents"][1]["args"].update(grid=[1.5]), ["traceEvents[1]", "args.grid"]),
    (lambda d: d["traceEvents"][1]["args"].update({"graph id": [1]}),
     ["traceEvents[1]", "graph id"]),
    (lambda d: d["traceEvents"].append(kev("gpu_memcpy", "Memcpy HtoD", 40.0, 1.0, correlation=9,
                                           stream=7, bytes="4096")),
     ["traceEvents[4]", "args.bytes must be a whole number"]),
    (lambda d: d["traceEvents"].append(kev("gpu_memcpy", "Memcpy HtoD", 40.0, 1.0, correlation=9,
                                           stream=7, bytes=float("nan"))),
     ["NaN is not a number"]),
    # kernels of one stream overlapping in time: cannot happen on a GPU (outside PDL)
    (lambda d: d["traceEvents"][3].update(ts=d["traceEvents"][1]["ts"] + 1.0),
     ["traceEvents[3]: kernel on stream 7 starts at", "before the kernel of traceEvents[1]",
      "runs in order"]),
    # two launches with one correlation id
    (lambda d: d["traceEvents"][3]["args"].update(correlation=1),
     ["traceEvents[3]: kernel has correlation id 1, as traceEvents[1] has"]),
    (lambda d: d["traceEvents"][2]["args"].update(correlation=1),
     ["traceEvents[2]", "runtime call 'cudaLaunchKernel' has correlation id 1"]),
])
def test_bad_kineto_events_are_rejected_with_the_event_and_the_reason(tmp_path, mutate, fragments):
    doc = kineto(launch_pair(1, 10.0) + launch_pair(2, 20.0))
    mutate(doc)
    rejected(write_kineto(tmp_path, doc), *fragments)


def test_the_nodes_of_one_graph_launch_may_overlap_but_launches_may_not(tmp_path):
    events = [kev("cuda_runtime", "cudaGraphLaunch", 10.0, 2.0, correlation=5),
              kev("kernel", "a", 13.0, 5.0, correlation=5, stream=7),
              kev("kernel", "b", 14.0, 5.0, correlation=5, stream=7),      # a branch, at once
              kev("cuda_runtime", "cudaGraphLaunch", 12.0, 2.0, correlation=6),
              kev("kernel", "a", 20.0, 5.0, correlation=6, stream=7)]
    recs = read_trace(write_kineto(tmp_path, kineto(events)))
    assert sum(r["kind"] == "kernel" for r in recs) == 3
    events[4]["ts"] = 18.0                  # the second launch before the first one ended
    rejected(write_kineto(tmp_path, kineto(events)), "traceEvents[4]", "before the kernel of "
             "traceEvents[1]")


def test_one_ns_of_rounding_between_kineto_kernels_is_not_an_overlap(tmp_path):
    events = launch_pair(1, 10.0, dur=2.0004) + launch_pair(2, 10.0 + 2.0, dur=1.0)
    events[3]["ts"] = events[1]["ts"] + 2.0                  # ends and starts within 1 ns
    read_trace(write_kineto(tmp_path, kineto(events)))


@pytest.mark.parametrize("raw, fragments", [
    ('{"traceEvents": [' + "[" * 50000 + "]" * 50000 + "]}", ["nested too deeply"]),
    ('{"traceEvents": [{"ph": "X", "ts": Infinity}]}', ["Infinity is not a number"]),
    ('{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1e999, "dur": 1}]}',
     ["traceEvents[0]", "valid ts/dur"]),
    ('{"traceEvents": [{"ph": "X", "ts": ' + "1" * 5000 + "}]}", ["1:36:", "5000 digits"]),
])
def test_unparseable_kineto_text_is_rejected_with_the_file(tmp_path, raw, fragments):
    rejected(write_kineto(tmp_path, None, raw), *fragments)


def test_non_utf8_and_other_encodings_are_rejected(tmp_path):
    p = tmp_path / "k.json"
    p.write_bytes(b'{"traceEvents": ["\xff"]}')
    rejected(p, "not UTF-8 text (byte 0xff")
    p.write_bytes('{"traceEvents": []}'.encode("utf-16"))
    rejected(p, "neither fe_trace JSONL nor a Chrome trace")
    p2 = tmp_path / "t.jsonl"
    p2.write_bytes(b'{"kind":"meta","what":"header","t":0}\n{"kind":"meta","what":"\xc3","t":1}\n')
    rejected(p2, ":2: not UTF-8 text")


HEADER = {"kind": "meta", "what": "header", "t": 0}


def k(corr, stream, start, end, **kw):
    return dict({"kind": "kernel", "name": "k", "corr": corr, "stream": stream, "start": start,
                 "end": end}, **kw)


@pytest.mark.parametrize("records, fragments", [
    ([HEADER, k(1, 7, 0, 10, queued="x")], [":2:", "field 'queued' is 'x', not int or null"]),
    ([HEADER, k(1, 7, 0, 10, channel="3")], [":2:", "field 'channel' is '3', not int"]),
    ([HEADER, k(1, 7, 0, 10, graph_id=[1])], [":2:", "graph_id"]),
    ([HEADER, k(1, 7, 0, 10, block=[64, 32, 1])], [":2:", "block of 2,048 threads"]),
    ([HEADER, k(1, 7, 0, 10, grid="1")], [":2:", "grid"]),
    ([HEADER, k(1, 7, 0, 2**70)], [":2:", "out of range"]),
    ([HEADER, k(1, 7, 0, True)], [":2:", "'end' is True, not int"]),
    ([HEADER, dict(HEADER, what="header", scenario=["x"])], [":2:"]),
    ([dict(HEADER, scenario=5)], [":1:", "header field 'scenario' is 5, not str"]),
    ([HEADER, k(1, 7, 0, 10), k(2, 7, 5, 20)],
     [":3: kernel on stream 7 starts at 5 ns, before the kernel of line 2 on the same stream "
      "ends (10 ns)"]),
    ([HEADER, k(1, 7, 0, 10), k(1, 8, 20, 30)], [":3: kernel has correlation id 1, as line 2"]),
    ([HEADER, {"kind": "runtime", "name": "a", "corr": 1, "start": 0, "end": 1},
      {"kind": "runtime", "name": "b", "corr": 1, "start": 2, "end": 3}],
     [":3: runtime call 'b' has correlation id 1, as line 2 has"]),
])
def test_bad_fe_trace_records_are_rejected_with_the_line(tmp_path, records, fragments):
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    rejected(p, *fragments)


@pytest.mark.parametrize("line, fragment", [
    ('{"kind":"meta","what":"x","t":NaN}', "NaN is not a number"),
    ('{"kind":"meta","what":"x","t":' + "[" * 100000 + "]" * 100000 + "}", "nested too deeply"),
    ('{"kind":"meta","what":"x","t":' + "9" * 5000 + "}", "not JSON"),
])
def test_unparseable_fe_trace_lines_are_rejected_with_the_line(tmp_path, line, fragment):
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(HEADER) + "\n" + line + "\n")
    rejected(p, ":2:", fragment)


def test_graph_kernels_of_one_launch_share_their_correlation_id_and_may_overlap(tmp_path):
    p = tmp_path / "t.jsonl"
    recs = [HEADER, k(5, 7, 0, 10, graph_id=1), k(5, 7, 2, 12, graph_id=1),
            k(6, 7, 12, 20, graph_id=1)]
    p.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    assert len(read_trace(p)) == 4


def test_gpufe_timelines_of_the_examples_read_back(tmp_path):
    from gpufe.sim.run import simulate
    from gpufe.sim.params import load
    from gpufe.sim.analysis.timeline import write_jsonl
    from gpufe.sim.host.workload import load_workload
    from pathlib import Path
    ex = Path(__file__).parents[3] / "examples"
    for name in ("graph_fork_join", "copies", "hyperq_c8_s8"):
        r = simulate(load_workload(ex / f"{name}.json"), load("h200"), 8, backend="compiled")
        p = tmp_path / f"{name}.jsonl"
        write_jsonl(r.records, p)
        assert read_trace(p)[1:] == r.records[1:]
