"""Updating an executable graph: SetParams, cudaGraphExecUpdate, destroy and re-instantiate,
each at its CPU cost; an update changes the launches after it, not one in flight."""

import pytest

from gpufe.sim.run import simulate
from gpufe.sim.host.workload import ProgramError, WorkloadError
from tests.sim.workloads import streams, launch, workload, kernels


def capture(stream, ns, graph, n=3):
    return ([{"op": "stream_begin_capture", "stream": stream}]
            + [launch(stream, ns, kernel=f"k{i}") for i in range(n)]
            + [{"op": "stream_end_capture", "stream": stream, "graph": graph}])


def glaunch(graph="g", stream="s"):
    return {"op": "graph_launch", "graph": graph, "stream": stream}


def instantiate(graph="g"):
    return {"op": "graph_instantiate", "graph": graph}


def set_params(nodes="all", ns=None, graph="g"):
    op = {"op": "graph_exec_set_params", "graph": graph, "nodes": nodes}
    if ns is not None:
        op["block_ns"] = ns
    return op


def blocks_of_launches(records):
    """Each graph launch's kernels' block work (duration less the fixed overhead), in
    launch order."""
    out = {}
    for k in kernels(records):
        out.setdefault(k["corr"], []).append(k["end"] - k["start"])
    base = min(d for ds in out.values() for d in ds)
    return [[d - base for d in ds] for _, ds in sorted(out.items())]


def test_set_params_changes_the_launches_after_it_and_not_the_one_in_flight(params):
    prog = (streams("s") + capture("s", 1000, "g") + [instantiate()]
            + [launch("s", 30_000, kernel="gate"), glaunch(), set_params(ns=5000), glaunch(),
               set_params(nodes=[1], ns=9000), glaunch(), {"op": "device_synchronize"}])
    r = simulate(workload(prog), params, backend="compiled")
    gks = [k for k in kernels(r.records) if k["name"] != "gate"]
    by = {}
    for k in gks:
        by.setdefault(k["corr"], []).append(k["end"] - k["start"])
    first, second, third = [by[c] for c in sorted(by)]
    # the first launch was still queued behind the gate when the params changed: it kept 1 us
    assert max(first) < 2000
    assert all(5000 <= d < 6000 for d in second)
    assert 5000 <= third[0] < 6000 and 9000 <= third[1] < 10000 and 5000 <= third[2] < 6000
    calls = [x for x in r.records if x["kind"] == "runtime"
             and x["name"].startswith("cudaGraphExecKernelNodeSetParams")]
    assert len(calls) == 3 + 1
    assert all(x["end"] - x["start"] == pytest.approx(params.graph_set_params_cpu_ns, abs=1)
               for x in calls)


def test_exec_update_takes_the_other_graphs_parameters(params):
    prog = (streams("s") + capture("s", 1000, "g") + capture("s", 7000, "g2") + [instantiate()]
            + [{"op": "graph_exec_update", "graph": "g", "from": "g2"}, glaunch(),
               {"op": "device_synchronize"}])
    r = simulate(workload(prog), params, backend="compiled")
    assert all(7000 <= k["end"] - k["start"] < 8000 for k in kernels(r.records))
    upd = [x for x in r.records if x["kind"] == "runtime"
           and x["name"].startswith("cudaGraphExecUpdate")]
    assert upd[0]["end"] - upd[0]["start"] == pytest.approx(
        params.graph_update_cpu_ns + 3 * params.graph_update_per_node_ns, abs=1)


def test_exec_update_from_another_topology_fails_as_cuda_does(params):
    prog = (streams("s") + capture("s", 1000, "g") + capture("s", 1000, "g2", n=4)
            + [instantiate(), {"op": "graph_exec_update", "graph": "g", "from": "g2"}])
    with pytest.raises(ProgramError, match=r"program\[13\] \(graph_exec_update\): graph 'g2' does not have the "
                                           r"topology .*: 4 nodes, "
                                           r"not 3 \(cudaErrorGraphExecUpdateFailure\)"):
        simulate(workload(prog), params, backend="compiled")


def test_a_destroyed_executable_graph_cannot_launch(params):
    prog = (streams("s") + capture("s", 0, "g") + [instantiate(),
                                                   {"op": "graph_exec_destroy", "graph": "g"},
                                                   glaunch()])
    with pytest.raises(ProgramError, match=r"graph_launch.*'g' was not instantiated"):
        simulate(workload(prog), params, backend="compiled")


def test_reinstantiating_into_a_destroyed_graphs_memory_costs_the_writes_only(params):
    prog = (streams("s") + capture("s", 0, "g") + capture("s", 0, "g2")
            + [instantiate(), {"op": "graph_exec_destroy", "graph": "g"}, instantiate("g2"),
               instantiate("g"), glaunch("g2"), {"op": "device_synchronize"}])
    r = simulate(workload(prog), params, backend="compiled")
    inst = [x["end"] - x["start"] for x in r.records if x["kind"] == "runtime"
            and x["name"].startswith("cudaGraphInstantiate")]
    fresh = params.instantiate_cpu_ns + 3 * params.instantiate_per_node_ns
    # g fresh; g2 into g's freed memory; g again fresh (the pool is empty)
    assert inst == [pytest.approx(fresh, abs=1),
                    pytest.approx(3 * params.graph_reinstantiate_per_node_ns, abs=1),
                    pytest.approx(fresh, abs=1)]


def test_under_cupti_each_graph_operation_pays_its_own_time_per_node(params):
    """CUPTI's callbacks differ by what an operation does to a node: an update gives it new
    parameters, a destroy frees it, a re-instantiation makes it (the H200, per node: 0.14,
    0.23 and 0.60 us over the gupdate recordings), a SetParams call one node's (0.30)."""
    n = 20
    prog = (streams("s") + capture("s", 0, "g", n) + capture("s", 0, "g2", n)
            + [instantiate(), {"op": "graph_exec_update", "graph": "g", "from": "g2"},
               set_params([0], ns=100), {"op": "graph_exec_destroy", "graph": "g"},
               instantiate("g2")])
    took = {}
    for profiler in ("off", "cupti"):
        r = simulate(workload(prog), params, backend="compiled", profiler=profiler)
        calls = [x for x in r.records if x["kind"] == "runtime"]
        took[profiler] = {name: [x["end"] - x["start"] for x in calls
                                 if x["name"].startswith(name)]
                          for name in ("cudaGraphExecUpdate", "cudaGraphExecDestroy",
                                       "cudaGraphInstantiate", "cudaGraphExecKernelNodeSetParams")}
    extra = {name: took["cupti"][name][-1] - took["off"][name][-1] for name in took["off"]}
    assert extra == {
        "cudaGraphExecUpdate": pytest.approx(n * params.cupti_graph_update_node_ns, abs=2),
        "cudaGraphExecDestroy": pytest.approx(n * params.cupti_graph_destroy_node_ns, abs=2),
        "cudaGraphInstantiate": pytest.approx(n * params.cupti_graph_reinstantiate_node_ns,
                                              abs=2),
        "cudaGraphExecKernelNodeSetParams": pytest.approx(params.cupti_graph_set_params_ns,
                                                          abs=2)}
    assert (params.cupti_graph_update_node_ns < params.cupti_graph_destroy_node_ns
            < params.cupti_graph_reinstantiate_node_ns)


def test_the_first_launch_uploads_the_graph(params):
    params = params.with_overrides(cold_call_factor=0)   # the first launch is no colder
    prog = streams("s") + capture("s", 0, "g") + [instantiate(), glaunch(), glaunch(),
                                                  {"op": "device_synchronize"}]
    r = simulate(workload(prog), params, backend="compiled")
    calls = [x["end"] - x["start"] for x in r.records if x["kind"] == "runtime"
             and x["name"].startswith("cudaGraphLaunch")]
    assert calls[0] - calls[1] == pytest.approx(3 * params.graph_upload_per_node_ns, abs=2)


@pytest.mark.parametrize("nodes, why", [([5], "graph 'g' has 3 nodes; there is no node 5")])
def test_set_params_on_a_node_that_is_not_there_fails(params, nodes, why):
    prog = streams("s") + capture("s", 0, "g") + [instantiate(), set_params(nodes, 100)]
    with pytest.raises(ProgramError, match=why):
        simulate(workload(prog), params, backend="compiled")


@pytest.mark.parametrize("nodes", ["some", [], [-1], [1.5], [True]])
def test_set_params_nodes_must_be_all_or_indices(nodes):
    prog = streams("s") + capture("s", 0, "g") + [instantiate(), set_params(nodes, 100)]
    with pytest.raises(WorkloadError, match=r"graph_exec_set_params.nodes must be \"all\" or"):
        workload(prog)


def test_an_update_from_an_unknown_graph_is_a_workload_error():
    prog = streams("s") + capture("s", 0, "g") + [instantiate(),
                                                  {"op": "graph_exec_update", "graph": "g",
                                                   "from": "nope"}]
    with pytest.raises(WorkloadError, match=r"refers to graph 'nope', which no "
                                            r"stream_end_capture or graph_create before it "
                                            r"makes"):
        workload(prog)


def test_a_process_first_capture_and_a_larger_one_cost_more(params):
    """The first capture sets the machinery up and grows the node store; a recapture of as
    many launches costs the calls only; a larger one grows the store by its extra nodes."""
    prog = (streams("s") + capture("s", 0, "a", n=4) + capture("s", 0, "b", n=4)
            + capture("s", 0, "c", n=6))
    r = simulate(workload(prog), params, backend="compiled")
    calls = [x for x in r.records if x["kind"] == "runtime"]
    spans, cur = [], None
    for x in calls:
        if x["name"].startswith("cudaStreamBeginCapture"):
            cur = x["start"]
        elif x["name"].startswith("cudaStreamEndCapture"):
            spans.append(x["end"] - cur)
    call, grow = params.capture_call_cpu_ns, params.capture_grow_per_node_ns
    fixed = params.begin_capture_cpu_ns + params.end_capture_cpu_ns
    assert spans == [pytest.approx(fixed + params.capture_first_cpu_ns + 4 * (call + grow), abs=2),
                     pytest.approx(fixed + 4 * call, abs=2),
                     pytest.approx(fixed + 6 * call + 2 * grow, abs=2)]


def test_graph_operations_on_more_nodes_than_the_host_cache_holds_pay_each_further_nodes_misses(
        params):
    """What an operation touches: beyond graph_cache_nodes, each node of an update costs its
    misses too (H200 gupdate, unprofiled: 117 ns a node up to ~100 nodes, 250 at 3,000)."""
    def update_ns(n):
        prog = (streams("s") + capture("s", 0, "g", n=n) + capture("s", 0, "g2", n=n)
                + [instantiate(), {"op": "graph_exec_update", "graph": "g", "from": "g2"}])
        r = simulate(workload(prog), params, backend="compiled")
        upd = [x for x in r.records if x["kind"] == "runtime"
               and x["name"].startswith("cudaGraphExecUpdate")][0]
        return upd["end"] - upd["start"]
    k = int(params.graph_cache_nodes)
    assert 50 <= k <= 500 and params.graph_update_miss_ns > 0
    small, big = update_ns(k // 2), update_ns(2 * k)
    assert small == pytest.approx(params.graph_update_cpu_ns
                                  + k // 2 * params.graph_update_per_node_ns, abs=1)
    assert big == pytest.approx(params.graph_update_cpu_ns + 2 * k * params.graph_update_per_node_ns
                                + k * params.graph_update_miss_ns, abs=1)
    assert big / (2 * k) > 1.3 * small / (k // 2)
