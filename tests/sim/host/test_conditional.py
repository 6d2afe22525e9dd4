"""Conditional nodes: a graph's WHILE or IF node runs its body's nodes the given number of
times per launch, each run started on the device cond_iteration_ns after the one before."""

import statistics

import pytest

from gpufe.sim.run import simulate
from gpufe.sim.host.workload import WorkloadError, ProgramError
from tests.sim.workloads import streams, launch, workload, kernels


def capture(graph, ops, stream="s"):
    return ([{"op": "stream_begin_capture", "stream": stream}] + ops
            + [{"op": "stream_end_capture", "stream": stream, "graph": graph}])


def cond(graph="g", body="body", kind="while", iterations=5):
    return {"op": "graph_add_conditional", "graph": graph, "kind": kind, "body": body,
            "iterations": iterations}


def run_graph(build, launches=2):
    prog = streams("s") + build + [{"op": "graph_instantiate", "graph": "g"}]
    prog += [{"op": "graph_launch", "graph": "g", "stream": "s"},
             {"op": "stream_synchronize", "stream": "s"}] * launches
    return prog


def test_a_while_node_runs_its_body_per_launch_at_the_iteration_period(params):
    body = capture("body", [launch("s", 0, kernel="k_body"), launch("s", 0, kernel="k_ctl")])
    prog = run_graph(body + capture("g", [launch("s", 0, kernel="k_set")]) + [cond()])
    records = simulate(workload(prog), params, backend="compiled").records
    ks = kernels(records)
    last = max(k["corr"] for k in ks)
    mine = sorted((k for k in ks if k["corr"] == last), key=lambda k: k["start"])
    assert [k["name"] for k in mine] == ["k_set"] + ["k_body", "k_ctl"] * 5
    ctl = [k["start"] for k in mine if k["name"] == "k_ctl"]
    period = statistics.median(b - a for a, b in zip(ctl, ctl[1:]))
    # a run: the set-up, then the two kernels one after the other
    body_run = mine[2]["end"] - mine[1]["start"]
    assert period == pytest.approx(params.cond_iteration_ns + body_run, abs=200)
    # the body's nodes carry their place in the table: after the graph's own two
    assert {k["graph_node"] & 0xFFFF for k in mine[1:]} == {2, 3}


def test_the_body_is_recorded_on_the_device_runtimes_stream_and_channel(params):
    """CUPTI records a WHILE node's body kernels on the stream and channel of the device
    runtime, which runs them (the H200: stream 15, channel 0; the graph's own kernel on
    stream 13, channel 2): the runtime's stream takes the next stream id, once, and a user
    stream created after it the one after."""
    body = capture("body", [launch("s", 0, kernel="k_body")])
    prog = run_graph(body + capture("g", [launch("s", 0, kernel="k_set")]) + [cond()])
    prog += streams("late") + [launch("late", 0, kernel="k_late"),
                               {"op": "stream_synchronize", "stream": "late"}]
    ks = kernels(simulate(workload(prog), params, backend="compiled").records)
    where = {}
    for k in ks:
        where.setdefault(k["name"], set()).add((k["stream"], k["channel"]))
    (own,), (body_at,) = where["k_set"], where["k_body"]
    assert own[0] == 13 and body_at[0] == 14
    assert body_at[1] != own[1]
    assert [s for s, _ in where["k_late"]] == [15]


@pytest.mark.parametrize("body_kernels", [1, 3])
def test_under_cupti_each_iteration_pays_for_every_body_kernel_recorded(params, body_kernels):
    """Traced, CUPTI records the body's kernels one by one as each iteration launches the
    body: the iteration's set-up grows by cupti_cond_record_ns per body node, not by a cost
    per iteration (the H200: 9.6, 11.6 and 16.7 us periods for 1, 2 and 4 body kernels
    profiled, 5.0, 5.2 and 6.2 us unprofiled)."""
    nodes = body_kernels + 1
    body = capture("body", [launch("s", 0, kernel="k_body")] * body_kernels
                   + [launch("s", 0, kernel="k_ctl")])
    prog = run_graph(body + capture("g", [launch("s", 0, kernel="k_set")]) + [cond()], 1)

    def setup(profiler):
        ks = kernels(simulate(workload(prog), params, backend="compiled",
                              profiler=profiler).records)
        ctl = sorted(k["start"] for k in ks if k["name"] == "k_ctl")
        firsts = sorted(k["start"] for k in ks if k["name"] == "k_body")[::body_kernels]
        ends = sorted(k["end"] for k in ks if k["name"] == "k_ctl")
        # the last control kernel's end -> the next run's first body kernel's start
        return statistics.median(f - e for e, f in zip(ends, firsts[1:]))

    assert params.cupti_cond_record_ns > 0
    assert setup("off") == pytest.approx(params.cond_iteration_ns, abs=200)
    assert setup("cupti") == pytest.approx(
        params.cond_iteration_ns + nodes * params.cupti_cond_record_ns, abs=200)


def test_an_empty_graph_holds_an_if_node_that_runs_or_not(params):
    body = capture("body", [launch("s", 1000, kernel="k_body")])
    for runs in (0, 1):
        prog = run_graph(body + [{"op": "graph_create", "graph": "g"},
                                 cond(kind="if", iterations=runs)], launches=1)
        names = [k["name"] for k in kernels(simulate(workload(prog), params,
                                                     backend="compiled").records)]
        assert names == ["k_body"] * runs


def test_work_after_the_graph_waits_for_the_last_run(params):
    body = capture("body", [launch("s", 5000, kernel="k_body")])
    prog = run_graph(body + capture("g", [launch("s", 0, kernel="k_set")]) + [cond()],
                     launches=0)
    prog += [{"op": "graph_launch", "graph": "g", "stream": "s"}, launch("s", 0, kernel="k_after"),
             {"op": "stream_synchronize", "stream": "s"}]
    ks = {(k["name"], k["start"]): k for k in kernels(simulate(workload(prog), params,
                                                              backend="compiled").records)}
    last_body = max(k["end"] for (n, _), k in ks.items() if n == "k_body")
    after = [k for (n, _), k in ks.items() if n == "k_after"][0]
    assert after["start"] > last_body


def test_conditional_nodes_are_checked():
    body = capture("body", [launch("s")])
    with pytest.raises(WorkloadError, match="refers to graph 'nope'"):
        workload(streams("s") + body + [{"op": "graph_create", "graph": "g"},
                                        cond(body="nope")])
    with pytest.raises(WorkloadError, match="kind must be while or if"):
        workload(streams("s") + body + [{"op": "graph_create", "graph": "g"},
                                        cond(kind="until")])
    bad_if = workload(streams("s") + body + [{"op": "graph_create", "graph": "g"},
                                             cond(kind="if", iterations=2)])
    two = workload(streams("s") + body + [{"op": "graph_create", "graph": "g"}, cond(), cond(),
                                          {"op": "graph_instantiate", "graph": "g"}])
    from gpufe.sim.params import load
    for w, why in ((bad_if, "runs its body 0 or 1 times"), (two, "2 conditional nodes")):
        with pytest.raises(ProgramError, match=why):
            simulate(w, load("h200"), backend="compiled")
