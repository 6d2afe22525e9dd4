"""Programmatic dependent launch: a PDL kernel is held by the work distributor until the
kernel before it in its stream triggers, its blocks wait for that kernel's exit; a stream
keeps at most pdl_window kernels in flight; captured, the dependency is a programmatic edge
that the graph walker resolves as it dispatches the primary."""

import statistics

import pytest

from gpufe.sim.run import simulate
from gpufe.sim.host.workload import WorkloadError
from tests.sim.workloads import streams, launch, workload, kernels


def pdl(stream="s", ns=0, trigger_ns=None, prologue_ns=0, grid=(1, 1, 1), kernel="k_pdl"):
    op = dict(launch(stream, ns, kernel=kernel, grid=grid), pdl=True, prologue_ns=prologue_ns)
    if trigger_ns is not None:
        op["trigger_ns"] = trigger_ns
    return op


def gate(stream="s", ns=200_000):
    return launch(stream, ns, kernel="k_gate")


def chain(body, n, graph=False):
    """n launches of ``body`` behind a gate on stream s, or captured and launched as a graph
    (a warm-up launch first: its upload)."""
    prog = streams("s")
    if graph:
        prog += ([{"op": "stream_begin_capture", "stream": "s"},
                  {"op": "repeat", "count": n, "body": [body]},
                  {"op": "stream_end_capture", "stream": "s", "graph": "g"},
                  {"op": "graph_instantiate", "graph": "g"}]
                 + [{"op": "graph_launch", "graph": "g", "stream": "s"},
                    {"op": "stream_synchronize", "stream": "s"}] * 2)
    else:
        prog += [gate(), {"op": "repeat", "count": n, "body": [body]},
                 {"op": "stream_synchronize", "stream": "s"}]
    return workload(prog)


def run(w, params):
    return simulate(w, params, backend="compiled").records


def chain_kernels(records, graph=False):
    ks = [k for k in kernels(records) if k["name"] == "k_pdl"]
    if graph:                            # the last launch's nodes
        last = max(k["corr"] for k in ks)
        ks = [k for k in ks if k["corr"] == last]
    return sorted(ks, key=lambda k: k["start"])


def exit_period(ks):
    return statistics.median(b["exit"] - a["exit"] for a, b in zip(ks, ks[1:]))


@pytest.mark.parametrize("graph", [False, True])
def test_a_pdl_chain_runs_at_the_trigger_to_launch_period(params, graph):
    prologue, ns = 64, 500
    ks = chain_kernels(run(chain(pdl(ns=ns, prologue_ns=prologue), 30, graph), params), graph)
    assert len(ks) == 30
    # each kernel is let go pdl_launch_ns after the one before exits (its implicit trigger),
    # then runs its prologue and its work: the period, to the ns
    assert exit_period(ks) == pytest.approx(params.pdl_launch_ns + prologue + ns, abs=1)
    # without PDL the same chain goes through the front end's completion path: slower
    plain = dict(pdl(ns=ns, prologue_ns=prologue), pdl=False)
    ks0 = chain_kernels(run(chain(plain, 30, graph), params), graph)
    # (by the kernel's block overhead and the completion path less pdl_launch_ns: 5 ns for
    # 500 ns kernels in a graph, 42 before the gated chains' cold launches were modelled)
    assert exit_period(ks0) > exit_period(ks)
    for k in ks + ks0:
        assert k["start"] <= k["sync"] <= k["exit"] < k["end"]


def test_an_early_trigger_lets_dependents_wait_resident_at_most_pdl_window_in_a_stream(params):
    ns = 2000
    ks = chain_kernels(run(chain(pdl(ns=ns, trigger_ns=0), 40), params))
    # in flight at once (started, not ended): at most pdl_window
    events = sorted([(k["start"], 1) for k in ks] + [(k["end"], -1) for k in ks])
    live = most = 0
    for _, d in events:
        live += d
        most = max(most, live)
    assert most == params.pdl_window
    for a, b in zip(ks, ks[1:]):
        # the dependent started before its primary ended, and its work waited for the exit
        assert b["start"] < a["end"]
        assert b["sync"] >= a["exit"] + params.pdl_flush_ns - 1
    waits = [k["sync"] - k["start"] for k in ks[10:]]
    assert statistics.median(waits) > 5 * ns


@pytest.mark.parametrize("graph", [False, True])
def test_under_cupti_the_dependency_wait_ends_later_by_cupti_flush(params, graph):
    w = chain(pdl(ns=2000, trigger_ns=0), 20, graph)
    lag = {}
    for profiler in ("off", "cupti"):
        ks = chain_kernels(simulate(w, params, backend="compiled", profiler=profiler).records,
                           graph)
        lag[profiler] = statistics.median(b["sync"] - a["exit"] for a, b in zip(ks, ks[1:]))
    assert params.cupti_flush_ns > 0
    assert lag["off"] == pytest.approx(params.pdl_flush_ns, abs=1)
    assert lag["cupti"] == pytest.approx(params.pdl_flush_ns + params.cupti_flush_ns, abs=1)


@pytest.mark.parametrize("ns", [5000, 50000])
@pytest.mark.parametrize("graph", [False, True])
def test_under_cupti_an_implicit_trigger_waits_for_the_primarys_end_record(params, graph, ns):
    """A primary that never calls the trigger triggers as its grid completes. Under CUPTI its
    completion follows CUPTI's end timestamp's write, in a stream and in a graph alike: its
    dependent launches cupti_kernel_ns later (the H200, 5 and 50 us kernels: the in-kernel
    stamps' exit-to-start grows by 0.20 us in a stream, 0.19 in a graph). A stream's
    dependent then no longer overlaps the primary's record (0.10 us after its recorded end);
    a graph node's record ends later (cupti_graph_kernel_ns), so its dependent still starts
    inside it (0.06 us before)."""
    w = chain(pdl(ns=ns), 12, graph)
    launch = {}
    for profiler in ("off", "cupti"):
        ks = chain_kernels(simulate(w, params, backend="compiled", profiler=profiler).records,
                           graph)
        launch[profiler] = statistics.median(b["start"] - a["exit"] for a, b in zip(ks, ks[1:])
                                             if "exit" in a)
        gaps = [b["start"] - a["end"] for a, b in zip(ks, ks[1:])]
        if profiler == "cupti":
            assert (min(gaps) > 0) == (not graph)
            assert graph == (max(gaps) < 0)
    assert params.cupti_kernel_ns > 0
    assert launch["cupti"] - launch["off"] == pytest.approx(params.cupti_kernel_ns, abs=2)


def test_in_a_graph_the_pile_up_is_bounded_by_resident_kernels_only(params):
    ks = chain_kernels(run(chain(pdl(ns=2000, trigger_ns=0), 200, graph=True), params),
                       graph=True)
    assert len(ks) == 200
    waits = [k["sync"] - k["start"] for k in ks]
    assert max(waits) > 100 * 2000 * 0.9         # ~128 kernels resident, waiting their turn
    assert max(waits) < 129 * 2500


def test_pdl_does_not_reach_past_other_stream_work(params):
    # an event record between the two kernels: the second is ordered as any launch
    w = workload(streams("s") + [{"op": "event_create", "name": "e"}, gate(),
                                 launch("s", 1000, kernel="k_a"),
                                 {"op": "event_record", "event": "e", "stream": "s"},
                                 pdl(ns=2000, trigger_ns=0, kernel="k_b"),
                                 pdl(trigger_ns=0, kernel="k_c"),
                                 {"op": "stream_synchronize", "stream": "s"}])
    ks = {k["name"]: k for k in kernels(run(w, params))}
    assert ks["k_b"]["start"] > ks["k_a"]["end"]
    assert ks["k_c"]["start"] < ks["k_b"]["end"]          # k_c's primary is k_b


def test_captured_pdl_launches_become_programmatic_edges(params):
    from gpufe.sim.host.graphs import Capture, GraphNodeSpec
    cap = Capture(origin=None, frontier={"s": set()})
    for i, p in enumerate([False, True, True]):
        cap.add("s", GraphNodeSpec("kernel", frozenset(), name=f"k{i}"), pdl=p)
    assert [n.prog for n in cap.nodes] == [frozenset(), {0}, {1}]
    cap.add("s", GraphNodeSpec("copy", frozenset()), pdl=True)
    cap.add("s", GraphNodeSpec("kernel", frozenset()), pdl=True)
    assert cap.nodes[-1].prog == frozenset()              # after a copy: an ordinary edge


def test_pdl_fields_are_checked():
    with pytest.raises(WorkloadError, match="trigger_ns"):
        workload(streams("s") + [dict(pdl(), trigger_ns=-1)])
    with pytest.raises(WorkloadError, match="pdl"):
        workload(streams("s") + [dict(pdl(), pdl="yes")])


def test_a_pdl_graph_longer_than_the_walkers_cap_sleeps_through_its_kernels(params):
    """A PDL chain graph of more nodes than graph_inflight_max: the walker waits for a
    completion with a ready node held back by the cap, which is quiet (the compiled loop
    jumps); the timeline is the one stepping every cycle gives."""
    n = params.frontend_config().graph_inflight_max + 12
    w = chain(pdl(ns=5000), n, graph=True)
    jumped = simulate(w, params, backend="compiled")
    # 140 kernels of 5 us: ~0.7 ms; before, every cycle past the cap was stepped (138,527)
    assert jumped.stats["rtl_cycles"] < 20_000
    stepped = simulate(w, params, backend="compiled", jumps=False)
    assert stepped.stats["rtl_cycles"] > 30 * jumped.stats["rtl_cycles"]
    assert stepped.records == jumped.records


def pdl_under_a_time_slice(graph):
    """Process p0: a 5 ms primary, a PDL dependent, a plain kernel, a stream synchronize;
    process p1 takes the time slice 0.1 ms in with a 3 ms kernel (issue 41)."""
    work = [launch("s", 5_000_000, kernel="primary"), pdl(ns=1000, kernel="dep"),
            launch("s", 1000, kernel="plain")]
    if graph:
        p0 = streams("s") + ([{"op": "stream_begin_capture", "stream": "s"}] + work
                             + [{"op": "stream_end_capture", "stream": "s", "graph": "g"},
                                {"op": "graph_instantiate", "graph": "g"},
                                {"op": "graph_launch", "graph": "g", "stream": "s"}])
    else:
        p0 = streams("s") + work
    p0 += [{"op": "stream_synchronize", "stream": "s"}, {"op": "mark", "what": "synced"}]
    p1 = streams("t") + [{"op": "host_sleep", "ns": 100_000},
                         launch("t", 3_000_000, kernel="other"),
                         {"op": "stream_synchronize", "stream": "t"}]
    from gpufe.sim.host.workload import parse_workload
    return parse_workload({"name": "pdl_slice", "processes": [
        {"name": "p0", "program": p0}, {"name": "p1", "program": p1}]}, "pdl_slice")


@pytest.mark.parametrize("graph", [False, True])
def test_a_dependent_never_runs_ahead_of_a_primary_switched_out(params, graph):
    w = pdl_under_a_time_slice(graph)
    records = simulate(w, params, backend="compiled").records
    k = {r["name"]: r for r in records if r["kind"] == "kernel"}
    assert any(r["kind"] == "ctxsw" for r in records)
    # the primary is preempted, so it ends well after its 5 ms of work
    assert k["primary"]["end"] > k["primary"]["start"] + 6_000_000
    # its dependent's wait returns after it exits, the plain kernel and the synchronize
    # after the dependent
    assert k["dep"]["sync"] >= k["primary"]["end"] - params.kernel_end_ns - 1000
    assert k["plain"]["start"] > k["dep"]["end"]
    synced = next(r for r in records if r["kind"] == "meta" and r["what"] == "synced")
    assert synced["t"] > k["plain"]["end"]
    # both compute engines agree
    assert simulate(w, params, backend="compiled", compute="blocks").records == records
