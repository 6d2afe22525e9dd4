import pathlib

import pytest

from sim.workload import load_workload, parse_workload, WorkloadError, count_ops

EXAMPLES = sorted(pathlib.Path(__file__).parents[2].joinpath("examples").glob("*.json"))


def bad(program, **top):
    return parse_workload({"name": "w", "program": program, **top}, "w.json")


@pytest.mark.parametrize("program, message", [
    ([{"op": "stream_create", "name": "a"},
      {"op": "repeat", "count": 2, "body": [{"op": "launch_kernel", "stream": "a",
                                             "kernel": "k"}, {"op": "lanch_kernel"}]}],
     r"w.json: program\[1\]\.body\[1\]: unknown op 'lanch_kernel'"),
    ([{"op": "launch_kernel", "stream": "nope", "kernel": "k"}],
     r"program\[0\]: launch_kernel refers to stream 'nope', which was not created before"),
    ([{"op": "stream_create"}], r"program\[0\]: stream_create needs field 'name'"),
    ([{"op": "stream_create", "name": "a", "priority": "high"}],
     r"program\[0\]: stream_create.priority has the wrong type"),
    ([{"op": "stream_create", "name": "a"},
      {"op": "launch_kernel", "stream": "a", "kernel": "k", "grid": [0, 1]}],
     r"program\[1\]: grid must be a list of 1 to 3 positive integers"),
    ([{"op": "stream_create", "name": "a"},
      {"op": "memcpy_async", "stream": "a", "kind": "h2h", "bytes": 4}],
     r"program\[1\]: memcpy kind must be h2d, d2h or d2d"),
    ([{"op": "device_synchronize", "stream": "a"}],
     r"program\[0\]: device_synchronize has no field\(s\) stream"),
    ([{"op": "event_create", "name": "e"}, {"op": "event_create", "name": "e"}],
     r"program\[1\]: event_create 'e' already exists"),
    ("not a list", r"program: must be a list of ops"),
])
def test_bad_workloads_are_rejected_with_the_op_path(program, message):
    with pytest.raises(WorkloadError, match=message):
        bad(program)


def test_bad_top_level_and_bad_json(tmp_path):
    with pytest.raises(WorkloadError, match="max_connections must be 1..32"):
        bad([], max_connections=33)
    f = tmp_path / "broken.json"
    f.write_text('{"name": "x",\n "program": [\n  {"op": "mark" "what": 1}]}')
    with pytest.raises(WorkloadError, match=r"broken.json:3:\d+: not valid JSON"):
        load_workload(f)
    with pytest.raises(WorkloadError, match="cannot read"):
        load_workload(tmp_path / "missing.json")


def test_defaults_and_counting():
    w = bad([{"op": "stream_create", "name": "a"},
             {"op": "repeat", "count": 3, "body": [
                 {"op": "launch_kernel", "stream": "a", "kernel": "k", "grid": [4]}]}])
    op = w["program"][1]["body"][0]
    assert op["grid"] == [4, 1, 1] and op["block"] == [32, 1, 1] and op["block_ns"] == 0
    assert count_ops(w["program"]) == 4


def test_every_bundled_example_is_valid():
    assert len(EXAMPLES) >= 8
    for path in EXAMPLES:
        w = load_workload(path)
        assert count_ops(w["program"]) > 0, path
