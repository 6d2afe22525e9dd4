"""Trace readers: the shipped H200 traces load; malformed and truncated files are rejected
with the file, the line or event, and the reason."""

import gzip
import json

import pytest

from sim.scenarios import HERE
from sim.traces import TraceError, read_trace

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
