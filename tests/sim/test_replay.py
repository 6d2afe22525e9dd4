"""Replay of profiler traces, and "what would CUDA graphs save" on the MLP traces."""

import gzip
import json

import pytest

from sim.params import load
from sim.replay import count_steps, replay, step_summary, workload_from_trace
from sim.scenarios import HERE
from sim.traces import read_trace
from sim.workload import parse_workload

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
    assert got["kernels"] == len([r for r in read_trace(REF / f"{model}_eager.json.gz")
                                  if r["kind"] == "kernel"])
    err = got["per_step_us"] / measured["graph_us_per_step"] - 1
    assert abs(err) <= 0.15, (got, measured)
