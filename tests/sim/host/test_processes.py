"""Several processes on one GPU: workload files, time slices, context switches, barriers."""

import pytest

from gpufe.sim.cosim.harness import Deadlock
from gpufe.sim.host.workload import parse_workload, WorkloadError
from gpufe.sim.run import simulate


def _proc(name, block_ns, barrier="global:start"):
    prog = [{"op": "stream_create", "name": "s"}]
    if barrier:
        prog.append({"op": "barrier", "name": barrier})
    prog += [{"op": "launch_kernel", "stream": "s", "kernel": "k", "grid": [1],
              "block": [32], "block_ns": block_ns},
             {"op": "stream_synchronize", "stream": "s"}]
    return {"name": name, "program": prog}


def _two(block_ns=500_000, **kw):
    return parse_workload({"name": "two", "max_connections": 1,
                           "processes": [_proc("p0", block_ns, **kw), _proc("p1", block_ns, **kw)]})


def test_processes_time_slice_the_gpu(params):
    p = params.with_overrides(tsg_timeslice_ns=100_000, tsg_switch_ns=10_000,
                              tsg_preempt_ns=4_000)
    r = simulate(_two(), p)
    kernels = [x for x in r.records if x["kind"] == "kernel"]
    switches = [x for x in r.records if x["kind"] == "ctxsw"]
    assert sorted(k["pid"] for k in kernels) == ["p0", "p1"]
    # a switch away from a process with work (its timeslice ran out) takes 10 + 4 us; away
    # from one without (the first, before p0 launched; the last, after p1's kernel ended)
    # 10 us. While both have work, each runs 100 us at a time.
    cost = [s["end"] - s["start"] for s in switches]
    assert cost[0] == cost[-1] == 10_000 and set(cost[1:-1]) == {14_000}
    busy = [s for s in switches if s["end"] < min(k["end"] for k in kernels)]
    assert [s["pid_in"] for s in busy] == ["p1", "p0"] * (len(busy) // 2) + (
        ["p1"] if len(busy) % 2 else [])
    runs = [b["start"] - a["end"] for a, b in zip(busy, busy[1:])]
    assert runs and all(x == 100_000 for x in runs)
    # each 500 us kernel is stretched by the other's turns and the switches
    for k in kernels:
        assert k["end"] - k["start"] > 950_000
    # the records carry the process, marks included
    assert all("pid" in x for x in r.records if x["kind"] in ("kernel", "runtime"))
    assert r.stats["context_switches"] == len(switches)


def test_one_process_alone_never_switches(params):
    w = parse_workload({"name": "one", "processes": [_proc("only", 200_000, barrier=None)]})
    r = simulate(w, params)
    assert not [x for x in r.records if x["kind"] == "ctxsw"]
    (k,) = [x for x in r.records if x["kind"] == "kernel"]
    assert k["end"] - k["start"] < 201_000


def test_a_global_barrier_one_process_never_reaches_is_a_deadlock(params):
    w = _two(block_ns=1000)
    w["processes"][1]["program"] = [op for op in w["processes"][1]["program"]
                                    if op["op"] != "barrier"]
    w["processes"][1]["program"].append({"op": "barrier", "name": "global:other"})
    with pytest.raises(Deadlock, match="barrier 'global:start'"):
        simulate(w, params)


@pytest.mark.parametrize("bad, message", [
    ({"processes": []}, "non-empty list"),
    ({"processes": [{"name": "a", "program": []}, {"name": "a", "program": []}]}, "used twice"),
    ({"processes": [{"name": "a"}]}, "give 'program' or 'threads'"),
    ({"processes": [{"name": "a", "program": [], "max_connections": 33}]}, "max_connections"),
    ({"processes": [{"name": f"p{i}", "program": []} for i in range(5)]}, "at most 4"),
    ({"processes": [{"name": "a", "program": []}], "program": []}, "give one"),
    ({"processes": [{"name": "a", "program": [], "x": 1}]}, "unknown field"),
])
def test_bad_processes_are_refused_with_the_reason(bad, message):
    with pytest.raises(WorkloadError, match=message):
        parse_workload(dict(bad, name="bad"), "bad.json")
