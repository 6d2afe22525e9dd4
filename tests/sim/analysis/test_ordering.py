"""CUDA's ordering rules: the independent reference (``sim/analysis/hb_reference.py``) on hand-made
timelines, one rule at a time; the random program generator; and a fuzzing run of the model
against the reference (``bench/ordering_fuzz.py``)."""

import importlib.util
import pathlib

import pytest

from gpufe.sim.analysis import hb_reference as hb
from gpufe.sim.analysis.program_gen import generate
from gpufe.sim.host.workload import parse_workload, count_ops, programs_of

from tests.sim.workloads import streams, workload
from tests.sim.workloads import launch as _launch

ROOT = pathlib.Path(__file__).resolve().parents[3]


def launch(stream, ns=0, **kw):
    """A kernel launch for the hand-made timelines, which are about order, not durations:
    ``ns`` says how long the test means it to run, the kernel itself has no block time (its
    records may last anything: no ``params`` check)."""
    return _launch(stream, 0, **kw)


# -- hand-made timelines ----------------------------------------------------------------------


def events(*names):
    return [{"op": "event_create", "name": n, "timing": False} for n in names]


def record(e, s):
    return {"op": "event_record", "event": e, "stream": s}


def wait(s, e):
    return {"op": "stream_wait_event", "stream": s, "event": e}


def copy(s, kind="h2d", nbytes=4096):
    return {"op": "memcpy_async", "stream": s, "kind": kind, "bytes": nbytes}


NAMES = {"launch_kernel": "cudaLaunchKernel_v7000", "memcpy_async": "cudaMemcpyAsync_v3020",
         "event_record": "cudaEventRecord_v3020",
         "stream_wait_event": "cudaStreamWaitEvent_v3020",
         "stream_synchronize": "cudaStreamSynchronize_v3020",
         "event_synchronize": "cudaEventSynchronize_v3020",
         "event_query": "cudaEventQuery_v3020",
         "device_synchronize": "cudaDeviceSynchronize_v3020",
         "stream_create": "cudaStreamCreateWithPriority_v5050",
         "event_create": "cudaEventCreateWithFlags_v3020",
         "stream_begin_capture": "cudaStreamBeginCapture_v10000",
         "stream_end_capture": "cudaStreamEndCapture_v10000",
         "graph_instantiate": "cudaGraphInstantiate_v12000",
         "graph_launch": "cudaGraphLaunch_v10000"}


class Timeline:
    """Records written by hand, in the model's schema: API calls one after another on the
    CPU (1 us each unless told), work at the times a test gives."""

    def __init__(self):
        self.t, self.corr, self.records = 0, 100, []

    def call(self, op, until=None, event_id=None):
        """One API call's runtime record; returns its corr. ``until``: when it returns."""
        self.corr += 1
        end = self.t + 1000 if until is None else until
        self.records.append({"kind": "runtime", "name": NAMES[op], "corr": self.corr,
                             "tid": 1, "start": self.t, "end": end})
        if event_id is not None:
            self.records.append({"kind": "sync", "type": 1, "corr": self.corr,
                                 "event": event_id, "start": self.t, "end": end})
        self.t = end + 100
        return self.corr

    def calls(self, *ops):
        return [self.call(op) for op in ops]

    def work(self, corr, start, end, kind="kernel", node=None):
        r = {"kind": kind, "corr": corr, "stream": 13, "start": start, "end": end,
             "graph_id": 0 if node is None else 1,
             "graph_node": 0 if node is None else (1 << 32) | node}
        if kind == "kernel":
            r["name"] = "k"
        self.records.append(r)
        return r


def check(program, records):
    return hb.check(workload(program), records)


def classes(violations):
    return sorted({v["class"] for v in violations})


def two_stream_wait(second):
    """a: kernel (ends at 50 us), record e; b: wait e, then ``second`` (start given)."""
    prog = streams("a", "b") + events("e") + [launch("a", 50000), record("e", "a"),
                                              wait("b", "e"), second]
    t = Timeline()
    t.calls("stream_create", "stream_create", "event_create")
    ka = t.call("launch_kernel")
    t.calls("event_record", "stream_wait_event")
    kb = t.call(second["op"])
    t.work(ka, 10_000, 50_000)
    return prog, t, kb


def test_a_correct_timeline_passes_and_every_ordering_is_counted():
    prog, t, kb = two_stream_wait(launch("b"))
    t.work(kb, 50_000, 51_000)
    violations, checked = check(prog, t.records)
    assert violations == []
    # cpu order: 7 calls -> 6; per kernel: end >= start, after its call; kb after ka
    assert checked == 6 + 2 * 2 + 1


def test_stream_order():
    prog = streams("a") + [launch("a"), launch("a")]
    t = Timeline()
    t.call("stream_create")
    k1, k2 = t.calls("launch_kernel", "launch_kernel")
    t.work(k1, 5000, 9000)
    t.work(k2, 8000, 10000)
    violations, _ = check(prog, t.records)
    assert classes(violations) == ["stream:kernel->kernel"]
    assert "1000 ns too early" in violations[0]["message"]
    # priorities never break an ordering: the same with a high-priority stream
    prog[0]["priority"] = -5
    assert classes(check(prog, t.records)[0]) == ["stream:kernel->kernel"]


def test_copies_of_every_kind_are_stream_work():
    for kind in ("h2d", "d2h", "d2d"):
        prog = streams("a") + [launch("a"), copy("a", kind)]
        t = Timeline()
        t.call("stream_create")
        k, c = t.calls("launch_kernel", "memcpy_async")
        t.work(k, 5000, 9000)
        t.work(c, 8000, 10000, kind="memcpy")
        violations, _ = check(prog, t.records)
        assert classes(violations) == ["stream:kernel->copy"]
        assert f"memcpy {kind}" in violations[0]["message"]


def test_a_copy_after_a_wait_waits_for_the_event():
    """Known bug (1): an h2d copy behind stream_wait_event started before the waited work."""
    prog, t, kb = two_stream_wait(copy("b", "h2d"))
    t.work(kb, 20_000, 21_000, kind="memcpy")
    violations, _ = check(prog, t.records)
    assert classes(violations) == ["event-wait:kernel->copy"]
    assert "30000 ns too early" in violations[0]["message"]


def test_a_wait_orders_only_the_later_work_of_its_stream():
    prog = streams("a", "b") + events("e") + [launch("a", 50000), launch("b"),
                                              record("e", "a"), wait("b", "e")]
    t = Timeline()
    t.calls("stream_create", "stream_create", "event_create")
    ka, kb = t.calls("launch_kernel", "launch_kernel")
    t.calls("event_record", "stream_wait_event")
    t.work(ka, 10_000, 50_000)
    t.work(kb, 11_000, 12_000)
    assert check(prog, t.records)[0] == []


def test_orderings_pass_through_events_transitively():
    """Known bug (2): b waits on a's event, records eb with no work, c waits on eb: c's
    later work is after a's work."""
    prog = streams("a", "b", "c") + events("ea", "eb") + [
        launch("a", 50000), record("ea", "a"), wait("b", "ea"), record("eb", "b"),
        wait("c", "eb"), launch("c")]
    t = Timeline()
    t.calls("stream_create", "stream_create", "stream_create", "event_create", "event_create")
    ka = t.call("launch_kernel")
    t.calls("event_record", "stream_wait_event", "event_record", "stream_wait_event")
    kc = t.call("launch_kernel")
    t.work(ka, 10_000, 50_000)
    t.work(kc, 20_000, 21_000)
    violations, _ = check(prog, t.records)
    assert classes(violations) == ["event-wait:kernel->kernel:transitive"]
    assert "event ea" in violations[0]["message"] and "event eb" in violations[0]["message"]


def test_a_wait_uses_the_latest_record_before_it():
    # a: k1, record e, k2, wait (captures k1 only); a record of e after the wait is not used
    prog = streams("a", "b") + events("e") + [
        launch("a"), record("e", "a"), launch("a"), wait("b", "e"), launch("b"),
        record("e", "a")]
    t = Timeline()
    t.calls("stream_create", "stream_create", "event_create")
    k1 = t.call("launch_kernel")
    t.call("event_record")
    k2 = t.call("launch_kernel")
    t.call("stream_wait_event")
    kb = t.call("launch_kernel")
    t.call("event_record")
    t.work(k1, 10_000, 20_000)
    t.work(k2, 20_000, 90_000)
    t.work(kb, 20_500, 21_000)          # after k1, overlapping k2: fine
    assert check(prog, t.records)[0] == []
    t.records[-1]["start"] = 19_000     # before k1 ends
    assert classes(check(prog, t.records)[0]) == ["event-wait:kernel->kernel"]


def test_a_never_recorded_event_orders_nothing():
    prog = streams("a", "b") + events("e") + [launch("a", 50000), wait("b", "e"),
                                              launch("b"), {"op": "event_synchronize",
                                                            "event": "e"}]
    t = Timeline()
    t.calls("stream_create", "stream_create", "event_create")
    ka = t.call("launch_kernel")
    t.call("stream_wait_event")
    kb = t.call("launch_kernel")
    t.call("event_synchronize")
    t.work(ka, 10_000, 50_000)
    t.work(kb, 11_000, 12_000)
    assert check(prog, t.records)[0] == []


@pytest.mark.parametrize("sync", ["stream_synchronize", "event_synchronize",
                                  "device_synchronize"])
def test_host_syncs_return_after_the_work_they_wait_for(sync):
    op = {"op": sync, **({"stream": "a"} if sync == "stream_synchronize" else {}),
          **({"event": "e"} if sync == "event_synchronize" else {})}
    prog = streams("a") + events("e") + [launch("a", 50000), record("e", "a"), op]
    for returns, broken in ((60_000, False), (40_000, True)):
        t = Timeline()
        t.calls("stream_create", "event_create")
        k = t.call("launch_kernel")
        t.call("event_record")
        t.call(sync, until=returns)
        t.work(k, 10_000, 50_000)
        violations, _ = check(prog, t.records)
        assert classes(violations) == ([f"host-sync:{sync}:kernel:direct"] if broken else [])


def test_a_stream_holding_only_a_wait_is_synchronized_with_it():
    """Known bug (3): stream_synchronize on a stream whose only pending item is a wait
    returned at once."""
    prog = streams("a", "b") + events("e") + [launch("a", 50000), record("e", "a"),
                                              wait("b", "e"),
                                              {"op": "stream_synchronize", "stream": "b"}]
    t = Timeline()
    t.calls("stream_create", "stream_create", "event_create")
    k = t.call("launch_kernel")
    t.calls("event_record", "stream_wait_event")
    t.call("stream_synchronize", until=20_000)
    t.work(k, 10_000, 50_000)
    violations, _ = check(prog, t.records)
    assert classes(violations) == ["host-sync:stream_synchronize:kernel:via-event"]


def test_only_the_successful_query_must_come_after_the_work():
    prog = streams("a") + events("e", "f") + [launch("a", 50000), record("e", "a"),
                                              record("f", "a"),
                                              {"op": "event_query", "event": "e"},
                                              {"op": "event_query", "event": "f"}]
    for last_end, broken in ((55_000, False), (45_000, True)):
        t = Timeline()
        t.calls("stream_create", "event_create", "event_create")
        k = t.call("launch_kernel")
        t.calls("event_record", "event_record")
        t.call("event_query", until=20_000, event_id=1)      # not yet
        t.call("event_query", until=30_000, event_id=1)      # not yet
        t.call("event_query", until=last_end, event_id=1)    # done
        t.call("event_query", until=last_end + 2000, event_id=2)
        t.work(k, 10_000, 50_000)
        violations, _ = check(prog, t.records)
        assert classes(violations) == (["host-sync:event_query:kernel:direct"] if broken
                                       else [])


def test_work_never_starts_before_its_call():
    prog = streams("a") + [launch("a")]
    t = Timeline()
    t.call("stream_create")
    k = t.call("launch_kernel")
    t.work(k, 500, 3000)                 # the call started at 1100
    assert classes(check(prog, t.records)[0]) == ["issue-order:kernel"]


def test_missing_and_unexpected_work_are_reported():
    prog = streams("a") + [launch("a")]
    t = Timeline()
    t.call("stream_create")
    k = t.call("launch_kernel")
    assert classes(check(prog, t.records)[0]) == ["missing-work"]
    t.work(k, 3000, 4000)
    t.work(999, 3000, 4000)
    assert classes(check(prog, t.records)[0]) == ["unexpected-work"]


def fork_join_graph(launch_into=("a",)):
    """Capture on a: k0; fork to b (k1 on b, k2 on a); join back; k3 on a. Nodes: k0 0,
    k1 1, k2 2, k3 3; edges 0->1, 0->2, 1->3, 2->3."""
    return (streams("a", "b", "c") + events("fork", "join") + [
        launch("a", 1000), {"op": "stream_begin_capture", "stream": "a"},
        launch("a", kernel="k0"), record("fork", "a"), wait("b", "fork"),
        launch("b", kernel="k1"), launch("a", kernel="k2"), record("join", "b"),
        wait("a", "join"), launch("a", kernel="k3"),
        {"op": "stream_end_capture", "stream": "a", "graph": "g"},
        {"op": "graph_instantiate", "graph": "g"}]
        + [{"op": "graph_launch", "graph": "g", "stream": s} for s in launch_into]
        + [launch("a")])


def fork_join_timeline(launches=1):
    t = Timeline()
    t.calls("stream_create", "stream_create", "stream_create", "event_create",
            "event_create")
    before = t.call("launch_kernel")
    t.calls("stream_begin_capture", "launch_kernel", "event_record", "stream_wait_event",
            "launch_kernel", "launch_kernel", "event_record", "stream_wait_event",
            "launch_kernel", "stream_end_capture", "graph_instantiate")
    gl = [t.call("graph_launch") for _ in range(launches)]
    after = t.call("launch_kernel")
    return t, before, gl, after


def graph_work(t, corr, base):
    """The four nodes at a correct schedule from ``base``; returns their records."""
    return [t.work(corr, base + s, base + e, node=n)
            for n, (s, e) in enumerate([(0, 10), (10, 30), (10, 20), (30, 40)])]


def test_a_graph_runs_in_dependency_order_as_a_unit_of_its_stream():
    prog = fork_join_graph()
    t, before, (gl,), after = fork_join_timeline()
    t.work(before, 30_000, 40_000)
    nodes = graph_work(t, gl, 40_000)
    k_after = t.work(after, 40_040, 41_000)
    violations, checked = check(prog, t.records)
    assert violations == []
    # 19 calls in CPU order; 6 pieces of work (end after start, start after the call); the
    # root after the stream's kernel, the four graph edges, the next kernel after the sink
    # (the captured launches run nothing and order nothing by themselves)
    assert checked == 18 + 6 * 2 + 1 + 4 + 1
    nodes[3]["start"] = 40_025           # k3 before k1 ends: a graph edge
    assert classes(check(prog, t.records)[0]) == ["graph-edge:graph-kernel->graph-kernel"]
    nodes[3]["start"] = 40_030
    nodes[0]["start"] = 39_000           # the root before the stream's earlier kernel ends
    assert classes(check(prog, t.records)[0]) == ["graph-in-stream:kernel->graph-kernel"]
    nodes[0]["start"] = 40_000
    k_after["start"] = 40_035            # the stream's next kernel before the graph's end
    assert classes(check(prog, t.records)[0]) == ["graph-in-stream:graph-kernel->kernel"]


def test_launches_of_one_executable_graph_are_serialized():
    prog = fork_join_graph(launch_into=("b", "c"))
    t, before, (g1, g2), after = fork_join_timeline(launches=2)
    t.work(before, 30_000, 40_000)
    graph_work(t, g1, 40_000)
    second = graph_work(t, g2, 40_040)
    t.work(after, 40_000, 40_010)        # stream a: after `before` only
    assert check(prog, t.records)[0] == []
    second[0]["start"] = 40_035          # the second launch's root before the first's end
    assert classes(check(prog, t.records)[0]) == [
        "graph-exec-serial:graph-kernel->graph-kernel"]


def test_device_launches_run_beside_or_after_their_launching_graph():
    """Graph l: k_l launches g fire-and-forget; g (device launch): k_a, then k_ctl, which
    tail-launches g once more. Its child runs (k_a, k_ctl twice) start after k_l starts, the
    second after the first ends, and the stream's next kernel after all of them."""
    def k(name, graph=None, mode=None):
        op = launch("s", kernel=name)
        if graph:
            op["device_graph_launch"] = {"graph": graph, "mode": mode, "count": 1}
        return op
    prog = streams("s") + [{"op": "stream_begin_capture", "stream": "s"}, k("k_a"),
                           k("k_ctl", "g", "tail"),
                           {"op": "stream_end_capture", "stream": "s", "graph": "g"},
                           {"op": "graph_instantiate", "graph": "g", "device_launch": True},
                           {"op": "stream_begin_capture", "stream": "s"},
                           k("k_l", "g", "fire_and_forget"),
                           {"op": "stream_end_capture", "stream": "s", "graph": "l"},
                           {"op": "graph_instantiate", "graph": "l"},
                           {"op": "graph_launch", "graph": "l", "stream": "s"},
                           k("k_after")]
    t = Timeline()
    t.calls("stream_create", "stream_begin_capture", "launch_kernel", "launch_kernel",
            "stream_end_capture", "graph_instantiate", "stream_begin_capture",
            "launch_kernel", "stream_end_capture", "graph_instantiate")
    gl = t.call("graph_launch")
    after = t.call("launch_kernel")

    def node(name, n, start, end, device=True):
        r = t.work(gl, start, end, node=n)
        r["name"] = name
        if device:
            r["device_launched"] = True
        return r
    node("k_l", 0, 50_000, 60_000, device=False)
    runs = [(node("k_a", 0, s, s + 1000), node("k_ctl", 1, s + 1000, s + 2000))
            for s in (51_000, 54_000)]
    k_after = t.work(after, 60_100, 61_000)
    violations, checked = check(prog, t.records)
    assert violations == []
    runs[1][0]["start"] = 52_500          # the tail run before its launching run's end
    assert classes(check(prog, t.records)[0]) == ["tail-launch:graph-kernel->graph-kernel"]
    runs[1][0]["start"] = 54_000
    runs[0][0]["start"] = 49_000          # the child before the kernel that launched it
    assert classes(check(prog, t.records)[0]) == ["device-launch:graph-kernel->graph-kernel"]
    runs[0][0]["start"] = 51_000
    runs[1][1]["end"] = 60_500            # the stream's next kernel before the child's end
    assert classes(check(prog, t.records)[0]) == ["graph-in-stream:graph-kernel->kernel"]


def test_captured_work_does_not_run():
    prog = fork_join_graph()
    t, before, (gl,), after = fork_join_timeline()
    t.work(before, 30_000, 40_000)
    graph_work(t, gl, 40_000)
    t.work(after, 40_040, 41_000)
    captured = [r for r in t.records if r.get("name") == NAMES["launch_kernel"]][1]
    t.work(captured["corr"], 50_000, 51_000)
    assert classes(check(prog, t.records)[0]) == ["unexpected-work"]


def test_invalid_programs_are_refused():
    bad = [
        # a host synchronisation during a capture
        streams("a") + [{"op": "stream_begin_capture", "stream": "a"}, launch("a"),
                        {"op": "device_synchronize"}],
        # a fork not joined back
        streams("a", "b") + events("e") + [
            {"op": "stream_begin_capture", "stream": "a"}, launch("a"), record("e", "a"),
            wait("b", "e"), launch("b"),
            {"op": "stream_end_capture", "stream": "a", "graph": "g"}],
        # a wait on an event last recorded in a capture that has ended
        streams("a", "b") + events("e") + [
            {"op": "stream_begin_capture", "stream": "a"}, launch("a"), record("e", "a"),
            {"op": "stream_end_capture", "stream": "a", "graph": "g"}, wait("b", "e")],
        # a capturing stream waiting on an event recorded outside its capture
        streams("a", "b") + events("e") + [
            launch("b"), record("e", "b"), {"op": "stream_begin_capture", "stream": "a"},
            wait("a", "e")],
    ]
    for prog in bad:
        with pytest.raises(hb.InvalidProgram):
            hb.analyse(workload(prog))


def test_the_reference_shares_no_code_with_the_model():
    src = (ROOT / "sim" / "analysis" / "hb_reference.py").read_text()
    imports = [line for line in src.splitlines() if line.startswith(("import ", "from "))]
    assert imports == ["from dataclasses import dataclass, field"]


# -- the generator ----------------------------------------------------------------------------


def _ops(program):
    for op in program:
        yield op
        if op["op"] == "repeat":
            yield from _ops(op["body"])


def test_the_generator_is_deterministic():
    assert generate(7) == generate(7)
    assert generate("1.5", [1, 4]) == generate("1.5", [1, 4])
    assert generate(7) != generate(8)


def test_generated_programs_are_valid_and_cover_every_op():
    seen, kinds, mcs, fills, multi_stream_captures = set(), set(), set(), 0, 0
    timing, priorities, launches_into_other_streams = set(), set(), 0
    shapes = {"program": 0, "threads": 0, "processes": 0}
    pdl = pdl_graphs = shared_kinds = queued_updates = twins = global_barriers = 0
    modes, n_procs, node_lists = set(), set(), 0
    for i in range(300):
        w = generate(f"t.{i}")
        parsed = parse_workload(w, w["name"])          # raises if not valid
        procs = parsed.get("processes")
        shapes["processes" if procs else "threads" if parsed.get("threads") else
               "program"] += 1
        n_procs.add(len(procs or [parsed]))
        ops = []
        for p in procs or [parsed]:
            if p.get("threads"):
                # (their order is the timeline's); calls of every kind on a shared stream
                calls = [op for t in p["threads"] for op in _ops(t["program"])]
                shared_kinds += {op["op"] for op in calls if op.get("stream", "").startswith(
                    "sh")} >= {"launch_kernel", "memcpy_async", "event_record",
                               "stream_wait_event", "stream_synchronize", "graph_launch",
                               "graph_upload"}
                ops += calls
            else:
                hb.analyse(p)                          # raises if not valid CUDA
                ops += list(_ops(p["program"]))
        mcs.update(p.get("max_connections") or parsed["max_connections"]
                   for p in procs or [parsed])
        pdl += sum(1 for op in ops if op.get("pdl"))
        modes.update(op["device_graph_launch"]["mode"] for op in ops
                     if op.get("device_graph_launch") and op["device_graph_launch"]["count"])
        seen.update(op["op"] for op in ops)
        kinds.update(op["kind"] for op in ops if op["op"] == "memcpy_async")
        timing.update(op["timing"] for op in ops if op["op"] == "event_create")
        priorities.update(op["priority"] for op in ops if op["op"] == "stream_create")
        fills += sum(count_ops(p) for p in programs_of(parsed)) > 1023
        joined = {op["stream"] for op in ops if op["op"] == "stream_wait_event"
                  and "g" in op["event"]}
        multi_stream_captures += len(joined) >= 2
        origins = {op["graph"]: op["stream"] for op in ops
                   if op["op"] == "stream_end_capture"}
        # (a graph made by graph_create has no capture stream)
        launches_into_other_streams += any(
            op["stream"] != origins.get(op["graph"], op["stream"])
            for op in ops if op["op"] == "graph_launch")
        # PDL chains captured (programmatic edges), launches queued behind a gate while
        # their graph is updated, twins to update from, SetParams on some nodes
        capturing = set()
        for op in ops:
            if op["op"] == "stream_begin_capture":
                capturing.add(op["stream"])
            elif op["op"] == "stream_end_capture":
                capturing.discard(op["stream"])
            pdl_graphs += bool(op.get("pdl") and op["stream"] in capturing)
        queued_updates += any(a["op"] == "launch_kernel" and a["kernel"].startswith("gate")
                              and b["op"] == "graph_launch" for a, b in zip(ops, ops[1:]))
        twins += any(op["op"] == "graph_exec_update" and op["from"] != op["graph"]
                     for op in ops)
        node_lists += any(isinstance(op.get("nodes"), list) for op in ops)
        global_barriers += any(op["op"] == "barrier" and op["name"].startswith("global:")
                               for op in ops)
    from gpufe.sim.host.workload import OPS
    assert seen == set(OPS)
    assert kinds == {"h2d", "d2h", "d2d"}
    assert timing == {True, False} and min(priorities) < -1 and 0 in priorities
    assert min(mcs) == 1 and max(mcs) == 32 and len(mcs) > 20
    assert fills >= 3 and multi_stream_captures >= 10 and launches_into_other_streams >= 10
    assert 30 <= shapes["threads"] <= 90 and 30 <= shapes["processes"] <= 90
    assert n_procs == {1, 2, 3, 4} and global_barriers >= 20
    assert pdl >= 300 and pdl_graphs >= 50 and shared_kinds >= 10
    assert queued_updates >= 20 and twins >= 20 and node_lists >= 20
    assert modes == {"tail", "fire_and_forget"}
    assert {generate(f"t.{i}", [4, 8])["max_connections"] for i in range(20)} == {4, 8}


# -- the model against the reference ----------------------------------------------------------


def _fuzzer():
    spec = importlib.util.spec_from_file_location("ordering_fuzz",
                                                  ROOT / "bench" / "ordering_fuzz.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_200_random_programs_keep_every_ordering():
    """200 programs of the generator (single programs, threads, processes; every op), through
    the model and the reference: no violation, no failed run."""
    from gpufe.sim.params import load
    fz = _fuzzer()
    params = load("h200")
    programs = calls = checked = 0
    other, families = {}, {}
    for i in range(200):
        w = generate(f"14.{i}")
        classes, violations, n = fz.run_one(w, params, "compiled", families=families)
        programs, calls, checked = programs + 1, calls + fz.calls_of(w), checked + n
        for v in violations or classes.values():
            other.setdefault(v["class"], (f"14.{i}", v["message"]))
    assert checked > calls
    # every family's orderings are checked
    assert all(families.get(f, [0])[0] > 0 for f in hb.FAMILIES if f != "mapping"), families
    assert not other, (
        f"{len(other)} violation classes in {programs} programs (again, minimised: "
        f"bench/ordering_fuzz.py --programs 200 --seed 14):\n" +
        "\n".join(f"{c}: seed {s}: {m}" for c, (s, m) in sorted(other.items())))


def test_the_minimiser_keeps_only_what_the_violation_needs(monkeypatch):
    fz = _fuzzer()
    w = generate("m.1", [8], shape="program")
    bad = launch(w["program"][0]["name"], kernel="k_bad")
    w["program"] += [{"op": "repeat", "count": 3, "body": [
        launch(w["program"][0]["name"]), bad, {"op": "host_sleep", "ns": 10}]},
        {"op": "device_synchronize"}]

    def fake_run(workload, params, backend, times=None):
        # "broken" while a device_synchronize follows k_bad
        kinds = [op.get("kernel", op["op"]) for op in _ops(workload["program"])]
        broken = "k_bad" in kinds and "device_synchronize" in kinds[kinds.index("k_bad"):]
        return ({"c": {"class": "c", "message": "m"}} if broken else {}), [], 0
    monkeypatch.setattr(fz, "run_one", fake_run)
    small = fz.minimise(w, "c", None, "compiled", budget_s=60)
    assert small["program"] == [dict(w["program"][0], priority=0),
                                dict(bad, grid=[1], block=[32]), {"op": "device_synchronize"}]
    assert fz.parse_connections("1,4, 8-10") == [1, 4, 8, 9, 10]
