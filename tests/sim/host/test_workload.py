import pathlib

import pytest

from gpufe.sim.host.workload import (load_workload, parse_workload, WorkloadError, count_ops,
                                     programs_of)

EXAMPLES = sorted(pathlib.Path(__file__).parents[3].joinpath("examples").glob("*.json"))


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
        assert sum(count_ops(p) for p in programs_of(w)) > 0, path


# -- bad input of every class: rejected with the file, the place and the reason ---------------

import json                                                          # noqa: E402

from gpufe.sim.params import load as load_params                          # noqa: E402
from gpufe.sim.host.workload import (check_run, show, MAX_OPS, MAX_SIM_NS,      # noqa: E402
                                     ProgramError)


def write(tmp_path, text, name="w.json"):
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    return p


@pytest.mark.parametrize("data, where, why", [
    (b'{"program": [\n {"op": "mark", "what": "\xff"}]}', ":2:", "not UTF-8 text (byte 0xff"),
    ('{"program": []}'.encode("utf-16"), ":", "UTF-16 text"),
    (b"\x1f\x8b\x08\x00", ":", "gzip-compressed"),
    (b'{"program": [{"op": "host_sleep",\n "ns": NaN}]}', ":2:8:", "NaN is not a number"),
    (b'{"program": [{"op": "host_sleep", "ns": Infinity}]}', ":1:", "Infinity is not"),
    (b'{"program": [{"op": "host_sleep", "ns": -Infinity}]}', ":1:", "-Infinity is not"),
    (b'{"program": [{"op": "host_sleep", "ns": 1e999}]}', ":1:", "1e999 is too large"),
    (b'{"program": [{"op": "host_sleep", "ns": ' + b"9" * 5000 + b"}]}", ":1:",
     "5000 digits"),
    (b'{"program": ' + b"[" * 100000 + b"]" * 100000 + b"}", ":", "nested too deeply"),
])
def test_unreadable_files_name_the_file_and_the_line(tmp_path, data, where, why):
    p = write(tmp_path, data)
    with pytest.raises(WorkloadError) as e:
        load_workload(p)
    assert str(e.value).startswith(f"{p}{where}") and why in str(e.value)


def test_a_utf8_bom_is_accepted(tmp_path):
    p = write(tmp_path, b'\xef\xbb\xbf{"program": [{"op": "mark", "what": "x"}]}')
    assert load_workload(p)["program"][0]["what"] == "x"


@pytest.mark.parametrize("program, top, message", [
    ([], {"max_connections": True}, r"max_connections must be 1..32 \(an integer\), not True"),
    ([{"op": "stream_create", "name": "a", "priority": True}], {},
     r"stream_create.priority has the wrong type \(True; an integer\)"),
    ([{"op": "repeat", "count": True, "body": []}], {}, "repeat.count has the wrong type"),
    ([{"op": "stream_create", "name": "a"},
      {"op": "memcpy_async", "stream": "a", "kind": "h2d", "bytes": False}], {},
     "memcpy_async.bytes has the wrong type"),
    ([{"op": "stream_create", "name": "a"},
      {"op": "launch_kernel", "stream": "a", "kernel": "k", "grid": [True]}], {},
     "grid must be a list of 1 to 3 positive integers"),
    ([{"op": "event_create", "name": "e", "timing": 1}], {}, "event_create.timing has the wrong"),
])
def test_bools_are_not_integers_and_integers_not_bools(program, top, message):
    with pytest.raises(WorkloadError, match=message):
        bad(program, **top)


def kernel(**kw):
    return [{"op": "stream_create", "name": "a"},
            dict({"op": "launch_kernel", "stream": "a", "kernel": "k"}, **kw)]


@pytest.mark.parametrize("program, message", [
    (kernel(block=[64, 32]), r"block \[64, 32, 1\] has 2,048 threads; CUDA allows at most 1024"),
    (kernel(block=[1025]), "block.x is 1,025; CUDA allows at most 1,024"),
    (kernel(block=[1, 1, 65]), "block.z is 65; CUDA allows at most 64"),
    (kernel(grid=[1 << 31]), "grid.x is 2,147,483,648; CUDA allows at most 2,147,483,647"),
    (kernel(grid=[1, 65536]), "grid.y is 65,536; CUDA allows at most 65,535"),
    (kernel(block_ns=10**9 + 1), r"block_ns is 1,000,000,001; at most 1,000,000,000 \(1 s"),
    (kernel(block_ns=float("inf")), "block_ns is inf: not a finite number"),
    (kernel(block_ns=float("nan")), "block_ns is nan: not a finite number"),
    (kernel(block_ns=-1), "block_ns is -1; it must be at least 0"),
    ([{"op": "host_sleep", "ns": 10**13 + 1}], r"host_sleep.ns is 10,000,000,000,001; at most"),
    ([{"op": "stream_create", "name": "a"},
      {"op": "memcpy_async", "stream": "a", "kind": "d2d", "bytes": 1 << 32}],
     r"memcpy_async.bytes is 4,294,967,296; at most 4,294,967,295 \(4 GiB - 1"),
    ([{"op": "stream_create", "name": "a"},
      {"op": "memcpy_async", "stream": "a", "kind": "d2d", "bytes": 0}],
     "memcpy_async.bytes is 0; it must be at least 1"),
    ([{"op": "repeat", "count": 10**9 + 1, "body": []}], "repeat.count is 1,000,000,001; at most"),
    ([{"op": "stream_create", "name": "a", "priority": 1 << 40}], "priority is 1,099,511,627,776"),
    ([{"op": "mark", "what": "\ud800"}], r"mark.what: '\\ud800' is not valid Unicode"),
    ([{"op": "repeat", "count": 2, "body": [{"op": "stream_create", "name": "a"}]}],
     r"program\[0\].body\[0\]: stream_create inside a repeat that runs it 2 times would make "
     r"stream 'a' again"),
])
def test_values_past_cuda_and_model_limits_are_rejected(program, message):
    with pytest.raises(WorkloadError, match=message):
        bad(program)


def test_repeats_nested_too_deep_are_rejected_without_recursing():
    op = {"op": "mark", "what": "x"}
    for _ in range(300):
        op = {"op": "repeat", "count": 1, "body": [op]}
    with pytest.raises(WorkloadError, match="repeats nested more than 32 deep"):
        bad([op])
    deep = []
    for _ in range(10000):
        deep = [deep]
    assert len(show(deep)) < 100                      # messages never recurse into values
    with pytest.raises(WorkloadError, match="grid must be a list"):
        bad(kernel(grid=deep))


def test_what_a_repeat_of_count_zero_creates_does_not_exist_after_it():
    with pytest.raises(WorkloadError, match="refers to stream 'a', which was not created"):
        bad([{"op": "repeat", "count": 0, "body": [{"op": "stream_create", "name": "a"}]},
             {"op": "stream_synchronize", "stream": "a"}])


def test_an_empty_repeat_costs_nothing_however_large():
    w = bad([{"op": "repeat", "count": 10**9, "body": [
        {"op": "repeat", "count": 10**9, "body": []}]}])
    assert count_ops(w["program"]) == 0


def test_an_empty_repeat_is_skipped_by_the_cpu_thread():
    from gpufe.sim.host.workload import _run_ops
    w = bad([{"op": "repeat", "count": 10**9, "body": []}])
    assert list(_run_ops(w["program"], None, None, "program")) == []


def test_errors_while_running_name_the_op_or_its_origin():
    from gpufe.sim.host.workload import _run_ops

    class Rt:
        def api_call(self, call):
            return call

        def mark(self, what):
            raise ValueError("no")
            yield
    w = parse_workload({"program": [{"op": "mark", "what": "x", "_at": "t.json: traceEvents[7]"}]},
                       "t.json", located=True)
    with pytest.raises(ProgramError, match=r"^t.json: traceEvents\[7\] \(mark\): no"):
        list(_run_ops(w["program"], Rt(), None, "program"))
    with pytest.raises(WorkloadError, match="has no field"):
        bad([{"op": "mark", "what": "x", "_at": "nope"}])      # only replays may say where


def test_runs_too_large_for_the_model_are_rejected_before_they_start():
    p = load_params("h200")
    launch = {"op": "launch_kernel", "stream": "a", "kernel": "k"}
    w = bad([{"op": "stream_create", "name": "a"},
             {"op": "repeat", "count": 10**9, "body": [launch]}])
    with pytest.raises(WorkloadError, match=r"w.json: the program runs 1,000,000,001 ops .* "
                                            r"the limit is 1,000,000 .*--no-limits"):
        check_run(w, p, "w.json")
    assert MAX_OPS == 1_000_000
    big = bad([{"op": "stream_create", "name": "a"},
               {"op": "repeat", "count": 1000, "body": [
                   dict(launch, grid=[2**31 - 1, 65535, 65535])]}])
    with pytest.raises(WorkloadError, match="thread blocks"):
        check_run(big, p, "w.json")
    with pytest.raises(WorkloadError, match=r"simulated time .*at most 1e\+16 ns"):
        check_run(big, p, "w.json", limits=False)
    sleepy = bad([{"op": "repeat", "count": 10**6, "body": [{"op": "host_sleep", "ns": 10**13}]}])
    with pytest.raises(WorkloadError, match=r"up to 1e\+19 ns of simulated time \(host_sleep"):
        check_run(sleepy, p, "w.json")
    copies = bad([{"op": "stream_create", "name": "a"},
                  {"op": "repeat", "count": 200, "body": [
                      {"op": "memcpy_async", "stream": "a", "kind": "d2d",
                       "bytes": 2**32 - 1}]}])
    with pytest.raises(WorkloadError, match="copies 858,993,459,200 bytes in all"):
        check_run(copies, p, "w.json")
    graph = bad([{"op": "stream_create", "name": "a"},
                 {"op": "stream_begin_capture", "stream": "a"},
                 {"op": "repeat", "count": 20000, "body": [launch]},
                 {"op": "stream_end_capture", "stream": "a", "graph": "g"}])
    with pytest.raises(WorkloadError, match="graph 'g' captures 20,000 nodes; the front end's "
                                            "graph walker holds 16,384"):
        check_run(graph, p, "w.json")
    streams = bad([{"op": "stream_create", "name": f"s{i}"} for i in range(300)])
    with pytest.raises(WorkloadError, match="300 streams; the model has 256 syncpoints"):
        check_run(streams, p, "w.json")
    assert MAX_SIM_NS == 10**16


def test_graph_launches_count_with_their_nodes():
    from gpufe.sim.host.workload import work_totals
    w = bad([{"op": "stream_create", "name": "s"},
             {"op": "stream_begin_capture", "stream": "s"},
             {"op": "repeat", "count": 3, "body": [
                 {"op": "launch_kernel", "stream": "s", "kernel": "k", "grid": [10]}]},
             {"op": "stream_end_capture", "stream": "s", "graph": "g"},
             {"op": "graph_instantiate", "graph": "g"},
             {"op": "repeat", "count": 100, "body": [
                 {"op": "graph_launch", "graph": "g", "stream": "s"}]}])
    t = work_totals(w["program"])
    assert t["graph_nodes"] == 3 and t["graph_node_runs"] == 300
    assert t["work"].kernels == 300 and t["work"].blocks == 3000


def test_every_bundled_workload_and_scenario_passes_the_run_checks():
    from gpufe.sim.analysis.scenarios import HERE
    p = load_params("h200")
    for path in EXAMPLES + sorted((HERE / "h200").glob("*.json")):
        check_run(load_workload(path), p, str(path))


def test_params_files_are_checked(tmp_path):
    from gpufe.sim.params import ParamsError, load
    base = json.loads((pathlib.Path(__file__).parents[3] / "sim/params/h200.json").read_text())
    for change, message in [({"sms": True}, "sms must be an integer, not True"),
                            ({"clock_ghz": -1}, "clock_ghz is -1; it must be 0.001..100"),
                            ({"query_cpu_ns": 0}, "query_cpu_ns is 0"),
                            ({"gpfifo_entries": 1000}, "gpfifo_entries must be a power of two"),
                            ({"fifo_depth": 100}, "fifo_depth must be a power of two"),
                            ({"device": 5}, "device must be a string"),
                            ({"launch_cpu_ns": 1e10}, r"launch_cpu_ns is 1e\+10"),
                            ({"timestamp_hold_ns": 1e6}, "timestamp_hold register holds 65,535"),
                            ({"bogus": 1}, "unknown parameters bogus")]:
        p = tmp_path / "p.json"
        p.write_text(json.dumps(dict(base, **change)))
        with pytest.raises(ParamsError, match=message):
            load(str(p))
    p.write_text('{"sms": NaN}')
    with pytest.raises(ParamsError, match=r"p.json:1:9: NaN is not a number"):
        load(str(p))
    with pytest.raises(ParamsError, match="no parameter set 'nope'"):
        load("nope")
    (tmp_path / "d.json").mkdir()
    with pytest.raises(ParamsError, match=r"d.json: cannot read \(Is a directory\)"):
        load(str(tmp_path / "d.json"))


@pytest.mark.parametrize("op, message", [
    ({"op": ["stream_create"], "name": "a"}, r"threads\[1\]\.program\[0\]: .*op"),
    ({"op": "stream_create", "name": ["a"]}, r"threads\[1\]\.program\[0\]: stream_create\.name"),
    ({"op": "graph_create", "graph": {"g": 1}}, r"threads\[1\]\.program\[0\]: graph_create"),
])
def test_unhashable_op_or_name_in_a_thread_is_an_error_not_a_crash(op, message):
    # The threads' cross-check of created names runs before each op's own check: a list
    # where a name belongs must come out as the op's error, not a TypeError.
    threads = [{"name": "t0", "program": [{"op": "stream_create", "name": "s"}]},
               {"name": "t1", "program": [op]}]
    with pytest.raises(WorkloadError, match=message):
        parse_workload({"name": "w", "threads": threads}, "w.json")
