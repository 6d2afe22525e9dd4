"""CUDA graphs: capture into a DAG, instantiate, launch with one doorbell, walk in the RTL."""

import statistics

import pytest

from gpufe.sim.run import simulate
from gpufe.sim.host.workload import ProgramError, WorkloadError
from tests.sim.workloads import streams, launch, workload, kernels


def capture(stream, body, graph="g"):
    return ([{"op": "stream_begin_capture", "stream": stream}] + body
            + [{"op": "stream_end_capture", "stream": stream, "graph": graph},
               {"op": "graph_instantiate", "graph": graph}])


def glaunch(stream, graph="g"):
    return {"op": "graph_launch", "graph": graph, "stream": stream}


def sync(stream):
    return {"op": "stream_synchronize", "stream": stream}


def test_captured_chain_replays_in_order(params):
    body = [launch("s", 1000 * (i + 1), kernel=f"k{i}") for i in range(5)]
    r = simulate(workload(streams("s") + capture("s", body)
                          + [glaunch("s"), glaunch("s"), sync("s")]), params)
    ks = sorted(kernels(r.records), key=lambda k: k["start"])
    assert [k["name"] for k in ks] == [f"k{i}" for i in range(5)] * 2
    assert [k["graph_node"] & 0xFFFFFFFF for k in ks] == list(range(5)) * 2
    for a, b in zip(ks, ks[1:]):
        assert b["start"] >= a["end"]
    for i, k in enumerate(ks[:5]):
        assert k["end"] - k["start"] >= 1000 * (i + 1)
        assert k["queued"] == 0 and k["submitted"] == 0 and k["graph_id"] >= 1
    # during capture nothing ran: every kernel belongs to a graph launch
    assert len({k["corr"] for k in ks}) == 2


def _fork_join():
    body = [launch("a", 0, "k_root"),
            {"op": "event_record", "event": "fork", "stream": "a"},
            {"op": "stream_wait_event", "stream": "b", "event": "fork"},
            launch("b", 20_000, "k_left"), launch("a", 10_000, "k_right"),
            {"op": "event_record", "event": "join", "stream": "b"},
            {"op": "stream_wait_event", "stream": "a", "event": "join"},
            launch("a", 0, "k_join")]
    events = [{"op": "event_create", "name": n, "timing": False} for n in ("fork", "join")]
    return workload(streams("a", "b") + events + capture("a", body) + [glaunch("a"), sync("a")])


def test_fork_join_runs_both_branches_at_once_and_joins_after_both(params):
    ks = {k["name"]: k for k in kernels(simulate(_fork_join(), params).records)}
    left, right, root, join = ks["k_left"], ks["k_right"], ks["k_root"], ks["k_join"]
    assert left["start"] >= root["end"] and right["start"] >= root["end"]
    assert left["start"] < right["end"] and right["start"] < left["end"]      # concurrent
    assert join["start"] >= max(left["end"], right["end"])
    assert {k["stream"] for k in ks.values()} == {13}        # launched on the origin stream


def test_graph_launch_is_one_call_and_one_doorbell_whatever_its_size(params):
    def run(n):
        body = [launch("s") for _ in range(n)]
        r = simulate(workload(streams("s") + capture("s", body) + [glaunch("s"), sync("s")]),
                     params)
        calls = [c for c in r.records if c["kind"] == "runtime"]
        graph_calls = [c for c in calls if c["name"].startswith("cudaGraphLaunch")]
        return len(graph_calls), r.stats["doorbells"], len(kernels(r.records))
    small, large = run(2), run(60)
    assert small[0] == large[0] == 1
    # the graph launch's; the synchronize polls the stream's tracking semaphore
    assert small[1] == large[1] == 1
    assert (small[2], large[2]) == (2, 60)


def test_dependent_graph_nodes_are_closer_than_dependent_stream_launches(params):
    gate = launch("s", 100_000, "k_gate")
    chain = [launch("s") for _ in range(10)]
    as_stream = simulate(workload(streams("s") + [gate] + chain + [sync("s")]), params)
    as_graph = simulate(workload(streams("s") + capture("s", chain)
                                 + [gate, glaunch("s"), sync("s")]), params)

    def median_gap(r):
        ks = sorted((k for k in kernels(r.records) if k["name"] != "k_gate"),
                    key=lambda k: k["start"])
        return statistics.median(b["start"] - a["end"] for a, b in zip(ks, ks[1:]))
    g, s = median_gap(as_graph), median_gap(as_stream)
    assert g < s, (g, s)


def test_capture_rejects_a_synchronize(params):
    w = workload(streams("s") + [{"op": "stream_begin_capture", "stream": "s"},
                                 launch("s"), sync("s")])
    with pytest.raises(ProgramError, match=r"program\[3\] \(stream_synchronize\): "
                       r"stream_synchronize is not permitted while stream 's' is capturing"):
        simulate(w, params)


def test_unjoined_fork_is_rejected(params):
    body = [launch("a"), {"op": "event_record", "event": "e", "stream": "a"},
            {"op": "stream_wait_event", "stream": "b", "event": "e"}, launch("b")]
    w = workload(streams("a", "b") + [{"op": "event_create", "name": "e"}] + capture("a", body))
    with pytest.raises(ProgramError, match="not joined back"):
        simulate(w, params)


def test_launching_an_unknown_graph_is_a_workload_error():
    with pytest.raises(WorkloadError, match=r"program\[1\]: graph_launch refers to graph 'g'"):
        workload(streams("s") + [glaunch("s")])
