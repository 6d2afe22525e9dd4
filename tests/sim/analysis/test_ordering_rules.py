"""The ordering reference's rules for the ops beyond streams, events and graphs
(``sim/analysis/hb_reference.py``): kernel parameters and their updates, PDL triggers, graph
uploads, host threads, barriers and processes, on hand-made timelines; device graph
versions and families on the model's own runs; and the model bugs the extended fuzzer found
(strict xfails: each passes once the model is fixed)."""

import pathlib

import pytest

from gpufe.sim.analysis import hb_reference as hb
from gpufe.sim.host.records import RUNTIME_NAMES as NAMES   # the names a timeline carries
from gpufe.sim.host.workload import parse_workload

ROOT = pathlib.Path(__file__).resolve().parents[3]



class Timeline:
    """Records written by hand: each thread's API calls one after another (1 us each unless
    told), work at the times a test gives; ``pid``: the process every record belongs to."""

    def __init__(self, pid=None, corr=100):
        self.t, self.corr, self.records, self.pid = {}, corr, [], pid

    def call(self, op, tid=1, at=None, until=None):
        self.corr += 1
        start = self.t.get(tid, 0) if at is None else at
        end = start + 1000 if until is None else until
        r = {"kind": "runtime", "name": NAMES[op], "corr": self.corr, "tid": tid,
             "start": start, "end": end}
        if self.pid:
            r["pid"] = self.pid
        self.records.append(r)
        self.t[tid] = end + 100
        return self.corr

    def calls(self, *ops, tid=1):
        return [self.call(op, tid) for op in ops]

    def work(self, corr, start, end, node=None, **extra):
        r = {"kind": "kernel", "name": extra.pop("name", "k"), "corr": corr, "start": start,
             "end": end, "graph_id": 0 if node is None else 1,
             "graph_node": 0 if node is None else (1 << 32) | node, **extra}
        if self.pid:
            r["pid"] = self.pid
        self.records.append(r)
        return r


def k(stream, ns=0, name="k", **extra):
    return {"op": "launch_kernel", "stream": stream, "kernel": name, "block_ns": ns, **extra}


def streams(*names):
    return [{"op": "stream_create", "name": n} for n in names]


def program(ops):
    return parse_workload({"name": "t", "program": ops}, "t")


def classes(violations):
    return sorted({v["class"] for v in violations})


def check(w, records):
    return hb.check_families(w, records)


# -- kernel parameters -------------------------------------------------------------------------


def test_a_kernel_lasts_at_least_its_blocks_work():
    w = program(streams("a") + [k("a", 5000), k("a", 3000, prologue_ns=1000, pdl=True)])
    t = Timeline()
    t.call("stream_create")
    k1, k2 = t.call("launch_kernel"), t.call("launch_kernel_ex")
    t.work(k1, 10_000, 15_500)
    t.work(k2, 15_600, 20_000, sync=16_700, exit=19_800)
    violations, checked, fams = check(w, t.records)
    assert violations == [] and fams["params"][0] == 3
    t.records[-2]["end"] = 14_000                       # 4 us of a 5 us block
    t.records[-1]["sync"] = 16_500                      # sync 900 ns after start: prologue 1 us
    assert classes(check(w, t.records)[0]) == ["params:kernel", "params:kernel:prologue"]


def test_a_pdl_kernel_starts_after_its_primary_can_have_triggered():
    """trigger_ns 2 us: the dependent may start 2 us after the primary starts, not sooner;
    without a trigger, once the primary's blocks have run their block_ns."""
    for trigger, earliest in ((2000, 12_000), (None, 18_000)):
        extra = {} if trigger is None else {"trigger_ns": trigger}
        w = program(streams("a") + [k("a", 8000, **extra), k("a", 0, pdl=True)])
        t = Timeline()
        t.call("stream_create")
        k1, k2 = t.call("launch_kernel"), t.call("launch_kernel_ex")
        t.work(k1, 10_000, 18_500, **({"sync": 10_000, "exit": 18_000} if trigger else {}))
        dep = t.work(k2, earliest, 18_600, sync=18_100, exit=18_100)
        assert check(w, t.records)[0] == []
        dep["start"] = earliest - 1
        assert classes(check(w, t.records)[0]) == ["programmatic:kernel->kernel:start:trigger"]


def test_graph_updates_reach_the_launches_that_follow_not_those_queued():
    """g (one kernel of 1 us) launched behind a gate, SetParams to 20 us, launched again: the
    queued launch may last 1 us, the next one lasts at least 20 us."""
    w = program(streams("a") + [
        {"op": "stream_begin_capture", "stream": "a"}, k("a", 1000, name="kg"),
        {"op": "stream_end_capture", "stream": "a", "graph": "g"},
        {"op": "graph_instantiate", "graph": "g"}, k("a", 50_000, name="gate"),
        {"op": "graph_launch", "graph": "g", "stream": "a"},
        {"op": "graph_exec_set_params", "graph": "g", "block_ns": 20_000},
        {"op": "graph_launch", "graph": "g", "stream": "a"}])
    t = Timeline()
    t.calls("stream_create", "stream_begin_capture", "launch_kernel", "stream_end_capture",
            "graph_instantiate")
    gate, g1 = t.call("launch_kernel"), t.call("graph_launch")
    t.call("graph_exec_set_params")
    g2 = t.call("graph_launch")
    t.work(gate, 10_000, 60_000)
    t.work(g1, 60_100, 61_500, node=0)
    second = t.work(g2, 61_600, 82_000, node=0)
    violations, _, fams = check(w, t.records)
    assert violations == [] and fams["graph-update"][0] > 0
    second["end"] = 70_000
    assert classes(check(w, t.records)[0]) == ["params:graph-kernel:updated"]


def test_setparams_records_are_shared_out_by_node_counts():
    """Two SetParams calls in a row, on graphs of two and one kernel nodes: three records."""
    cap = [{"op": "stream_begin_capture", "stream": "a"}, k("a", name="x"), k("a", name="y"),
           {"op": "stream_end_capture", "stream": "a", "graph": "g"},
           {"op": "stream_begin_capture", "stream": "a"}, k("a", name="z"),
           {"op": "stream_end_capture", "stream": "a", "graph": "h"},
           {"op": "graph_instantiate", "graph": "g"}, {"op": "graph_instantiate", "graph": "h"}]
    w = program(streams("a") + cap + [
        {"op": "graph_exec_set_params", "graph": "g"},
        {"op": "graph_exec_set_params", "graph": "h"}, {"op": "device_synchronize"}])
    t = Timeline()
    t.calls("stream_create", "stream_begin_capture", "launch_kernel", "launch_kernel",
            "stream_end_capture", "stream_begin_capture", "launch_kernel", "stream_end_capture",
            "graph_instantiate", "graph_instantiate", "graph_exec_set_params",
            "graph_exec_set_params", "graph_exec_set_params", "device_synchronize")
    assert check(w, t.records)[0] == []
    del t.records[-2]                                   # one record short
    assert classes(check(w, t.records)[0]) == ["mapping"]


def test_work_after_a_graph_upload_waits_for_the_graphs_previous_launch():
    """cudaGraphUpload: "ordered behind both any previous work in hStream and any previous
    launches of graphExec": the stream's later work is too."""
    w = program(streams("a", "b") + [
        {"op": "stream_begin_capture", "stream": "a"}, k("a", name="kg"),
        {"op": "stream_end_capture", "stream": "a", "graph": "g"},
        {"op": "graph_instantiate", "graph": "g"},
        {"op": "graph_launch", "graph": "g", "stream": "a"},
        {"op": "graph_upload", "graph": "g", "stream": "b"}, k("b", name="kb")])
    t = Timeline()
    t.calls("stream_create", "stream_create", "stream_begin_capture", "launch_kernel",
            "stream_end_capture", "graph_instantiate")
    g1 = t.call("graph_launch")
    t.call("graph_upload")
    kb = t.call("launch_kernel")
    t.work(g1, 10_000, 50_000, node=0)
    after = t.work(kb, 50_100, 51_000)
    violations, _, fams = check(w, t.records)
    assert violations == [] and fams["graph-upload"] == [1, 0]
    after["start"] = 20_000
    assert classes(check(w, t.records)[0]) == ["graph-upload:graph-kernel->kernel"]


# -- host threads, barriers, processes ---------------------------------------------------------


def threads(**progs):
    return parse_workload({"name": "t", "threads": [{"name": n, "program": p}
                                                    for n, p in progs.items()]}, "t")


def test_a_host_wait_waits_for_what_was_issued_before_it_began():
    """Thread B synchronizes shared stream s while thread A's launch on it is under way: the
    launch may come after the wait's fence (no ordering); one that returned before the wait
    began is waited for."""
    w = threads(A=streams("s") + [{"op": "barrier", "name": "go"}, k("s", name="ka")],
                B=[{"op": "barrier", "name": "go"}, {"op": "stream_synchronize", "stream": "s"}])
    for launch_end, sync_start, broken in ((5000, 3000, False), (3000, 4000, True)):
        t = Timeline()
        t.call("stream_create", tid="A", at=0)
        ka = t.call("launch_kernel", tid="A", at=2000, until=launch_end)
        t.call("stream_synchronize", tid="B", at=sync_start, until=6000)
        t.work(ka, 5500, 9000)
        violations, _, fams = check(w, t.records)
        assert classes(violations) == (["host-sync:stream_synchronize:kernel:direct"]
                                       if broken else [])
        assert fams["threads"][0] > 0


def test_an_event_read_that_races_a_record_by_another_thread_orders_nothing():
    """A records e (over a kernel of 10 us) while B's wait on e is under way: B's kernel may
    follow either record; once A's record returned before B's wait began, it follows it."""
    w = threads(A=streams("a", "b") + [{"op": "event_create", "name": "e"},
                                       {"op": "barrier", "name": "go"}, k("a", name="ka"),
                                       {"op": "event_record", "event": "e", "stream": "a"}],
                B=[{"op": "barrier", "name": "go"},
                   {"op": "stream_wait_event", "stream": "b", "event": "e"}, k("b", name="kb")])
    for record_end, broken in ((5500, False), (4500, True)):
        t = Timeline()
        t.calls("stream_create", "stream_create", "event_create", tid="A")
        ka = t.call("launch_kernel", tid="A", at=3300, until=3900)
        t.call("event_record", tid="A", at=4000, until=record_end)
        t.call("stream_wait_event", tid="B", at=5000, until=5600)
        kb = t.call("launch_kernel", tid="B", at=5700, until=6500)
        t.work(ka, 4000, 14_000)
        t.work(kb, 7000, 8000)
        assert classes(check(w, t.records)[0]) == (["event-wait:kernel->kernel"] if broken
                                                   else [])


def test_calls_after_a_barrier_start_after_every_call_before_it_returned():
    w = threads(A=streams("a") + [{"op": "barrier", "name": "x"}, k("a", name="ka")],
                B=streams("b") + [{"op": "barrier", "name": "x"}, k("b", name="kb")])
    t = Timeline()
    t.call("stream_create", tid="A", at=0, until=1000)
    t.call("stream_create", tid="B", at=0, until=3000)
    ka = t.call("launch_kernel", tid="A", at=3100)
    kb = t.call("launch_kernel", tid="B", at=3100)
    t.work(ka, 5000, 6000)
    t.work(kb, 5000, 6000)
    violations, _, fams = check(w, t.records)
    assert violations == [] and fams["barrier"] == [2, 0]
    t.records[2]["start"] = 2000                        # A's launch before B's create returned
    assert classes(check(w, t.records)[0]) == ["barrier"]


def test_processes_are_checked_each_in_its_own_names_and_correlation_ids():
    """Two processes with the same names and correlation ids; a global barrier orders their
    calls; one's late kernel is its own stream-order violation, not the other's."""
    prog = streams("s") + [{"op": "barrier", "name": "global:g"}, k("s"), k("s")]
    w = parse_workload({"name": "t", "processes": [{"name": "p", "program": prog},
                                                   {"name": "q", "program": prog}]}, "t")
    records = []
    for pid in ("p", "q"):
        t = Timeline(pid=pid)
        t.call("stream_create", at=0)
        k1, k2 = t.call("launch_kernel", at=2000), t.call("launch_kernel", at=3100)
        t.work(k1, 5000, 6000)
        t.work(k2, 6000 if pid == "p" else 5500, 7000)
        records += t.records
    violations, _, fams = check(w, records)
    assert classes(violations) == ["stream:kernel->kernel"]
    assert "processes" in violations[0]["families"] and fams["barrier"] == [2, 0]
    records[6]["start"] = 500                           # q's first launch before p's create ends
    assert "barrier:global" in classes(check(w, records)[0])


# -- on the model's runs -----------------------------------------------------------------------


def _simulate(w):
    from gpufe.sim.params import load
    from gpufe.sim.run import simulate
    return simulate(w, load("h200"), backend="compiled").records


def test_device_graph_versions_on_the_models_run():
    """examples/graph_update_device.json (a device graph updated between its launcher's
    launches, uploaded in stream order): no violation, its device runs' parameters checked;
    a device run made shorter than the version it must have read is one."""
    from gpufe.sim.host.workload import load_workload
    w = load_workload(ROOT / "examples" / "graph_update_device.json")
    records = _simulate(w)
    violations, _, fams = check(w, records)
    assert violations == []
    for f in ("device-launch", "graph-update", "params", "conditional"):
        assert fams[f][0] > 0, f
    runs = sorted((r for r in records if r.get("device_launched") and r["end"] - r["start"]
                   > 10_000), key=lambda r: r["start"])
    runs[-1]["end"] = runs[-1]["start"] + 5000
    assert "params:graph-kernel:updated" in classes(check(w, records)[0])


# -- model bugs the extended fuzzer found (issue 41), fixed ------------------------------------


def _bug_programs():
    """Minimised programs (bench/ordering_fuzz.py, then by hand) of the model bugs the
    extended fuzzer found, each with the ordering class it breaks."""
    def kern(s, name, ns, **kw):
        return {"op": "launch_kernel", "stream": s, "kernel": name, "block_ns": ns, **kw}
    capture = [{"op": "stream_begin_capture", "stream": "c"}, kern("c", "kg", 20_000),
               {"op": "stream_end_capture", "stream": "c", "graph": "g"},
               {"op": "graph_instantiate", "graph": "g"}]
    return {
        # cudaGraphUpload is "ordered behind ... any previous launches of graphExec" (and the
        # stream's later work behind it): the model pushes nothing for a graph that is not
        # instantiated for device launch (or has no update to write), so the copy after the
        # upload starts while the graph launched on stream c still runs (fixed: an upload
        # with nothing to write acquires the graph's previous launch on its stream)
        "graph-upload-ordering": ("graph-upload:graph-kernel->copy", {"program": [
            {"op": "stream_create", "name": "c"}, {"op": "stream_create", "name": "b"},
            *capture, {"op": "graph_launch", "graph": "g", "stream": "c"},
            {"op": "graph_upload", "graph": "g", "stream": "b"},
            {"op": "memcpy_async", "stream": "b", "kind": "d2d", "bytes": 4096}]}),
        # thread A's graph launch on shared stream sh marks the stream "latest op no kernel"
        # (after_kernel) as it begins, before it has sh's lock; thread B's launches, which
        # hold the lock meanwhile, mark it "kernel" again; so B's PDL launch after A's graph
        # launch names the graph's release as its primary, which no kernel has: it is held
        # behind nothing and starts while the graph runs (fixed: an op marks the stream
        # under its lock, Runtime._hold_op)
        "pdl-after-kernel-race": ("graph-in-stream:graph-kernel->kernel", {"threads": [
            {"name": "main", "program": [
                {"op": "stream_create", "name": "sh"}, {"op": "stream_create", "name": "c"},
                *capture, {"op": "barrier", "name": "go"}, {"op": "barrier", "name": "x"}]},
            {"name": "A", "program": [
                {"op": "barrier", "name": "go"}, {"op": "host_sleep", "ns": 1000},
                {"op": "graph_launch", "graph": "g", "stream": "sh"},
                {"op": "barrier", "name": "x"}]},
            {"name": "B", "program": [
                {"op": "barrier", "name": "go"}, kern("sh", "k1", 20_000),
                kern("sh", "k2", 1000), {"op": "barrier", "name": "x"},
                kern("sh", "k3", 100, pdl=True)]}]}),
        # a PDL chain of process p switched out (for q's kernel) while k2 runs: k2's exit
        # moves by the time p was out (289 us), k3's record keeps the dependency wait
        # computed before the switch (its blocks resume consistently: its end moves too)
        # (fixed: a block preempted before its code began resumes in its dependency wait,
        # engines.Waiting)
        "pdl-sync-across-time-slices": ("programmatic:kernel->kernel:sync", {"processes": [
            {"name": "p", "program": [
                {"op": "stream_create", "name": "s"}, kern("s", "k1", 600_000),
                kern("s", "k2", 2_000_000, pdl=True, trigger_ns=0),
                kern("s", "k3", 1_800_000, pdl=True, trigger_ns=0)]},
            {"name": "q", "program": [{"op": "stream_create", "name": "t"},
                                      kern("t", "kq", 0)]}]}),
        # device graph d tail-launches itself 3 times ("a tail launch's run goes on
        # counting": 4 runs of kd each launch of l), updated and uploaded on stream u while
        # the chain runs on s: the runs after the upload landed count their calls afresh
        # (6 runs: 2 of 3 us, 4 of 20 us) (fixed: counted per node, not per descriptor)
        "device-launch-count-restarts": ("missing-work", {"program": [
            {"op": "stream_create", "name": "s"}, {"op": "stream_create", "name": "u"},
            {"op": "stream_begin_capture", "stream": "s"},
            kern("s", "kd", 3000,
                 device_graph_launch={"graph": "d", "mode": "tail", "count": 3}),
            {"op": "stream_end_capture", "stream": "s", "graph": "d"},
            {"op": "graph_instantiate", "graph": "d", "device_launch": True},
            {"op": "stream_begin_capture", "stream": "s"},
            kern("s", "kl", 500,
                 device_graph_launch={"graph": "d", "mode": "fire_and_forget", "count": 1}),
            {"op": "stream_end_capture", "stream": "s", "graph": "l"},
            {"op": "graph_instantiate", "graph": "l"},
            {"op": "graph_launch", "graph": "l", "stream": "s"},
            {"op": "graph_exec_set_params", "graph": "d", "block_ns": 20_000},
            {"op": "host_sleep", "ns": 10_000},
            {"op": "graph_upload", "graph": "d", "stream": "u"},
            {"op": "device_synchronize"}]}),
        # device graph d updated and uploaded on stream u behind a gate, then launched from
        # the host on stream h: its run takes the new parameters (the launch's), but its
        # tail launch read the device's record, which the upload's writes, still behind the
        # gate, had not yet pointed at the new table (fixed: a host launch points the record
        # in its own stream's order where the current version was pointed in others' only)
        "device-graph-host-launch-after-upload": ("params:graph-kernel:updated", {"program": [
            {"op": "stream_create", "name": "s"}, {"op": "stream_create", "name": "u"},
            {"op": "stream_create", "name": "h"},
            {"op": "stream_begin_capture", "stream": "s"}, kern("s", "k0", 3000),
            kern("s", "k1", 1000,
                 device_graph_launch={"graph": "d", "mode": "tail", "count": 1}),
            {"op": "stream_end_capture", "stream": "s", "graph": "d"},
            {"op": "graph_instantiate", "graph": "d", "device_launch": True},
            kern("u", "gate", 200_000),
            {"op": "graph_exec_set_params", "graph": "d", "nodes": "all", "block_ns": 20_000},
            {"op": "graph_upload", "graph": "d", "stream": "u"},
            {"op": "graph_launch", "graph": "d", "stream": "h"},
            {"op": "device_synchronize"}]}),
        # a valid program of one thread: graph g1 (3 copies, 3 kernels across s9 and s5)
        # launched on s5, s4, s1 and s8 (each launch behind the one before), timing event e2
        # recorded on s3 (which shares its channel with s9, priority -3), then on s1, waited
        # for by s4: the third launch (on s1) never starts, nor what follows it, and
        # stream_synchronize(s4) deadlocks ("the GPU is idle and nothing else is due");
        # with max_connections other than 6, s9's priority 0 or e2 without timing it runs
        # (fixed with the next one: the syncpoint unit's lost wake-up)
        "false-deadlock-graph-launches": ("model-error:Deadlock", {"max_connections": 6,
                                                                   "program": [
            *[{"op": "stream_create", "name": f"s{i}", "priority": -3 if i == 9 else 0}
              for i in range(1, 10)],
            {"op": "event_create", "name": "e0", "timing": False},
            {"op": "event_create", "name": "e2", "timing": True},
            {"op": "event_create", "name": "g1_e1", "timing": False},
            {"op": "event_create", "name": "g1_e2", "timing": False},
            {"op": "stream_begin_capture", "stream": "s9"},
            {"op": "memcpy_async", "stream": "s9", "kind": "d2d", "bytes": 256},
            {"op": "memcpy_async", "stream": "s9", "kind": "h2d", "bytes": 256},
            kern("s9", "k1", 0, grid=[222]),
            {"op": "memcpy_async", "stream": "s9", "kind": "h2d", "bytes": 4},
            {"op": "event_record", "event": "g1_e1", "stream": "s9"},
            {"op": "stream_wait_event", "stream": "s5", "event": "g1_e1"},
            kern("s5", "k2", 1177),
            {"op": "event_record", "event": "g1_e2", "stream": "s5"},
            {"op": "stream_wait_event", "stream": "s9", "event": "g1_e2"},
            kern("s9", "k3", 0, grid=[264]),
            {"op": "stream_end_capture", "stream": "s9", "graph": "g1"},
            {"op": "graph_instantiate", "graph": "g1"},
            {"op": "graph_launch", "graph": "g1", "stream": "s5"},
            {"op": "graph_launch", "graph": "g1", "stream": "s4"},
            {"op": "graph_launch", "graph": "g1", "stream": "s1"},
            {"op": "stream_wait_event", "stream": "s6", "event": "e0"},
            {"op": "graph_launch", "graph": "g1", "stream": "s8"},
            {"op": "event_record", "event": "e2", "stream": "s3"},
            kern("s1", "k4", 0),
            {"op": "event_record", "event": "e2", "stream": "s1"},
            {"op": "stream_wait_event", "stream": "s4", "event": "e2"},
            {"op": "stream_synchronize", "stream": "s4"}]}),
        # one stream, one thread: a PDL chain (kp4 with a prologue, kp5, kp6), copies and
        # plain kernels behind it (two waits for an event never recorded, which push
        # nothing): after kp6 nothing runs (the d2h copy behind it never starts) and
        # device_synchronize deadlocks, whatever max_connections; without any one op it runs
        # (fixed: a channel parked off the PBDMAs, due for a poll after a release, was bound
        # to a PBDMA before its poll: neither the poller nor that release's scan re-checked
        # it; the poller now polls it wherever it is)
        "false-deadlock-one-stream": ("model-error:Deadlock", {"program": [
            {"op": "stream_create", "name": "s0"},
            {"op": "event_create", "name": "e0", "timing": False},
            kern("s0", "k1", 33221), kern("s0", "k2", 0),
            {"op": "stream_wait_event", "stream": "s0", "event": "e0"},
            kern("s0", "kp3", 1000), kern("s0", "kp4", 20000, pdl=True, prologue_ns=3000),
            kern("s0", "kp5", 0, pdl=True), kern("s0", "kp6", 5000, pdl=True),
            {"op": "memcpy_async", "stream": "s0", "kind": "d2h", "bytes": 4},
            {"op": "stream_wait_event", "stream": "s0", "event": "e0"},
            kern("s0", "k7", 0),
            {"op": "memcpy_async", "stream": "s0", "kind": "d2d", "bytes": 4},
            kern("s0", "k8", 0), kern("s0", "k9", 0), kern("s0", "k10", 0),
            {"op": "memcpy_async", "stream": "s0", "kind": "d2h", "bytes": 4},
            {"op": "memcpy_async", "stream": "s0", "kind": "h2d", "bytes": 4},
            {"op": "device_synchronize"}]}),
        # one channel (max_connections 1) for streams a and b: graph g launched on a while
        # b's k1 runs, a copy on a behind it, k2 on b. Everything runs, but the graph
        # launch's release of a's tracking semaphore (a RELEASE_WFI on the shared channel)
        # waits for k1 to end, after the copy (on a copy channel) has released the next
        # value: the semaphore goes back and device_synchronize waits for ever (fixed: every
        # tracking release is a reduction IMAX, which never lowers it)
        "false-deadlock-shared-channel": ("model-error:Deadlock", {
            "max_connections": 1, "program": [
                {"op": "stream_create", "name": "a"}, {"op": "stream_create", "name": "b"},
                {"op": "stream_begin_capture", "stream": "a"}, kern("a", "kg", 1632),
                {"op": "stream_end_capture", "stream": "a", "graph": "g"},
                {"op": "graph_instantiate", "graph": "g"}, kern("b", "k1", 20_000),
                {"op": "graph_launch", "graph": "g", "stream": "a"},
                {"op": "memcpy_async", "stream": "a", "kind": "d2h", "bytes": 4},
                kern("b", "k2", 20_000), {"op": "device_synchronize"}]}),
    }


@pytest.mark.parametrize("bug", sorted(_bug_programs()))
def test_the_bugs_the_fuzzer_found_stay_fixed(bug):
    """Each program keeps the ordering the model once broke (or runs, for a false deadlock)."""
    cls, w = _bug_programs()[bug]
    w = parse_workload(dict(w, name=bug), bug)
    if "program" in w and w["program"]:
        hb.analyse(w)                                  # valid CUDA
    try:
        records = _simulate(w)
    except Exception as e:                             # noqa: BLE001 - a failed run
        pytest.fail(f"{cls}: {type(e).__name__}: {e}")
    violations, _, _ = check(w, records)
    assert cls not in classes(violations)
