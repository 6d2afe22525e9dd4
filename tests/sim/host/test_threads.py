"""Host threads of one process: programs run on their own CPUs, sharing streams by name;
launches contend for a stream's driver lock and the driver's shared state; records carry the
thread's name; the ordering reference follows the order the threads issued their calls."""

import pytest

from gpufe.sim.run import simulate
from gpufe.sim.host.workload import parse_workload, WorkloadError, programs_of
from gpufe.sim.analysis.hb_reference import check
from tests.sim.workloads import launch


def threaded(threads, name="threads"):
    return parse_workload({"name": name, "threads": threads}, name)


def loop(stream, n, kernel=None):
    return {"op": "repeat", "count": n, "body": [launch(stream, kernel=kernel)]}


def two_threads(shared, n=50):
    a, b = ("s", "s") if shared else ("s0", "s1")
    creates = [{"op": "stream_create", "name": x} for x in sorted({a, b})]
    return threaded([
        {"name": "t0", "program": creates + [{"op": "barrier", "name": "go"}, loop(a, n, "k0"),
                                             {"op": "stream_synchronize", "stream": a}]},
        {"name": "t1", "program": [{"op": "barrier", "name": "go"}, loop(b, n, "k1"),
                                   {"op": "stream_synchronize", "stream": b}]}])


def launches(records, tid):
    return sorted((r for r in records if r["kind"] == "runtime" and r.get("tid") == tid
                   and r["name"].startswith("cudaLaunchKernel")), key=lambda r: r["start"])


def test_threads_are_checked_like_programs():
    w = two_threads(shared=False)
    assert [len(p) for p in programs_of(w)] == [5, 3]
    with pytest.raises(WorkloadError, match="thread name 't0' used twice"):
        threaded([{"name": "t0", "program": []}, {"name": "t0", "program": []}])
    with pytest.raises(WorkloadError, match="both 'program' and 'threads'"):
        parse_workload({"program": [], "threads": [{"name": "a", "program": []}]})
    with pytest.raises(WorkloadError, match=r"threads\[1\].program: makes stream 's', which "
                                            r"thread 'a' makes too"):
        threaded([{"name": "a", "program": [{"op": "stream_create", "name": "s"}]},
                  {"name": "b", "program": [{"op": "stream_create", "name": "s"}]}])
    with pytest.raises(WorkloadError, match="refers to stream 'x'"):
        threaded([{"name": "a", "program": [launch("x")]}])
    with pytest.raises(WorkloadError, match="give 'program' or 'threads'"):
        parse_workload({"processes": [{"name": "p", "program": [],
                                       "threads": [{"name": "a", "program": []}]}]})


def test_own_streams_launch_in_parallel_at_the_contended_cost(params):
    records = simulate(two_threads(shared=False), params, backend="compiled").records
    a, b = launches(records, "t0"), launches(records, "t1")
    assert len(a) == len(b) == 50
    # the two threads' calls overlap in time: each on its own CPU
    assert a[10]["start"] < b[10]["end"] and b[10]["start"] < a[10]["end"]
    # while both launch, each call pays the shared state's move and the other launcher
    own = params.launch_cpu_ns + params.thread_contention_ns \
        + params.thread_contention_per_thread_ns
    assert a[20]["end"] - a[20]["start"] == pytest.approx(own, abs=2)
    for r in records:
        if r["kind"] in ("runtime", "meta") and r.get("what") not in ("header", "footer"):
            assert r.get("tid") in ("t0", "t1"), r


def test_a_shared_stream_takes_one_launch_at_a_time(params):
    records = simulate(two_threads(shared=True), params, backend="compiled").records
    calls = sorted(launches(records, "t0") + launches(records, "t1"), key=lambda r: r["end"])
    for x, y in zip(calls, calls[1:]):
        # the stream's lock: the launches' work does not overlap (a call may start while
        # another holds the lock, and waits)
        assert y["end"] - x["end"] >= int(params.launch_cpu_ns)
    # the lock is unfair: a thread keeps it for a turn of lock_turn_ns, not one launch
    turns = sum(1 for x, y in zip(calls, calls[1:]) if x["tid"] != y["tid"])
    assert turns < 10
    assert check(two_threads(shared=True), records)[0] == []


def test_a_woken_waiter_finds_the_lock_taken_back_until_the_turn_ends(params):
    """Under CUPTI a launch's CPU work goes on after the lock's release, but less than a
    waiter takes to wake: the holder takes it back. A turn's end costs a wake-up."""
    short = params.with_overrides(lock_turn_ns=100_000.0)
    assert params.lock_wake_ns > params.cupti_launch_ns + params.cupti_call_gap_ns
    records = simulate(two_threads(shared=True, n=100), short, backend="compiled",
                       profiler="cupti").records
    calls = sorted(launches(records, "t0") + launches(records, "t1"), key=lambda r: r["end"])
    steps = [(x["tid"] != y["tid"], y["end"] - x["end"]) for x, y in zip(calls, calls[1:])]
    handed = sorted(d for h, d in steps if h)
    kept = sorted(d for h, d in steps if not h)
    assert 2 <= len(handed) < 20
    # a hand-over: the launch's own interval and the waiter's wake-up, less what the
    # holder did after its release meanwhile
    after = params.cupti_launch_ns + params.cupti_call_gap_ns   # the holder's, after release
    assert handed[len(handed) // 2] == pytest.approx(
        kept[len(kept) // 2] + params.lock_wake_ns - after, abs=20)
    # without a wake-up time the threads would take turns launch by launch
    eager = simulate(two_threads(shared=True, n=100), short.with_overrides(lock_wake_ns=0.0),
                     backend="compiled", profiler="cupti").records
    calls = sorted(launches(eager, "t0") + launches(eager, "t1"), key=lambda r: r["end"])
    assert sum(1 for x, y in zip(calls, calls[1:]) if x["tid"] != y["tid"]) > 100


def test_the_reference_follows_the_threads_issue_order(params):
    w = two_threads(shared=True)
    records = simulate(w, params, backend="compiled").records
    violations, checked = check(w, records)
    assert violations == [] and checked > 100
    # two kernels of the shared stream swapped in time: a stream-order violation
    ks = sorted((r for r in records if r["kind"] == "kernel"), key=lambda r: r["start"])
    bad = [dict(r) for r in records]
    i, j = records.index(ks[30]), records.index(ks[31])
    bad[i]["start"], bad[j]["start"] = ks[31]["start"], ks[30]["start"]
    bad[i]["end"], bad[j]["end"] = ks[31]["end"], ks[30]["end"]
    assert any(v["rule"] == "stream" for v in check(w, bad)[0])


def test_a_barrier_meets_every_thread_of_the_process(params):
    w = threaded([
        {"name": "a", "program": [{"op": "host_sleep", "ns": 50_000},
                                  {"op": "barrier", "name": "b"}, {"op": "mark", "what": "a"}]},
        {"name": "b", "program": [{"op": "barrier", "name": "b"}, {"op": "mark", "what": "b"}]}])
    records = simulate(w, params, backend="compiled").records
    marks = {r["what"]: r for r in records if r["kind"] == "meta" and r.get("tid")}
    assert marks["a"]["t"] == marks["b"]["t"] >= 50_000
    assert (marks["a"]["tid"], marks["b"]["tid"]) == ("a", "b")


def two_on_one_stream(first, second, delay_ns=500, before=()):
    """Thread a issues ``first`` on shared stream "sh", thread b ``second`` ``delay_ns``
    later; the main thread synchronizes the device once both are done."""
    return threaded([
        {"name": "main", "program": [{"op": "stream_create", "name": "sh"},
                                     {"op": "event_create", "name": "e"}, *before,
                                     {"op": "barrier", "name": "go"},
                                     {"op": "barrier", "name": "done"},
                                     {"op": "device_synchronize"}]},
        {"name": "a", "program": [{"op": "barrier", "name": "go"}, first,
                                  {"op": "barrier", "name": "done"}]},
        {"name": "b", "program": [{"op": "barrier", "name": "go"},
                                  {"op": "host_sleep", "ns": delay_ns}, second,
                                  {"op": "barrier", "name": "done"}]}])


D2D = {"op": "memcpy_async", "stream": "sh", "kind": "d2d", "bytes": 1 << 20}
GRAPH = [{"op": "stream_create", "name": "cap"}, {"op": "stream_begin_capture", "stream": "cap"},
         {"op": "repeat", "count": 200, "body": [launch("cap", kernel="g0")]},
         {"op": "stream_end_capture", "stream": "cap", "graph": "g"},
         {"op": "graph_instantiate", "graph": "g"}]


@pytest.mark.parametrize("case", ["memcpy-launch", "graph-launch", "memcpy-event",
                                  "launch-memcpy", "event-wait"])
def test_calls_of_two_threads_on_one_stream_keep_their_order(params, case):
    """Issue 41: every call that pushes a stream's commands holds its lock, not only a launch:
    a call that begins later but would push sooner waits (it used to land first in the
    channel, behind nothing, and the stream deadlocked)."""
    first, second, before = {
        "memcpy-launch": (D2D, launch("sh", kernel="k"), ()),
        "graph-launch": ({"op": "graph_launch", "graph": "g", "stream": "sh"},
                         launch("sh", kernel="k"), GRAPH),
        "memcpy-event": (D2D, {"op": "event_record", "event": "e", "stream": "sh"}, ()),
        "launch-memcpy": (launch("sh", kernel="k"), D2D, ()),
        "event-wait": ({"op": "event_record", "event": "e", "stream": "sh"},
                       {"op": "stream_wait_event", "stream": "sh", "event": "e"}, ()),
    }[case]
    w = two_on_one_stream(first, second, before=before)
    records = simulate(w, params, backend="compiled").records
    violations, checked = check(w, records)
    assert violations == [] and checked > 0
    # the second call waited for the first one's lock: it returns after it
    a = [r for r in records if r["kind"] == "runtime" and r.get("tid") == "a"]
    b = [r for r in records if r["kind"] == "runtime" and r.get("tid") == "b"]
    assert b[-1]["end"] > a[-1]["end"]


def test_barriers_that_can_never_be_met_are_refused_before_the_run():
    bar = lambda name: {"op": "barrier", "name": name}
    with pytest.raises(WorkloadError, match=r"barrier 'x' is reached 3 times by thread 'a' "
                                            r"and 2 by thread 'b'.*can never be met"):
        threaded([{"name": "a", "program": [{"op": "repeat", "count": 3, "body": [bar("x")]}]},
                  {"name": "b", "program": [bar("x"), bar("x")]}])
    with pytest.raises(WorkloadError, match=r"at its barrier use 2, thread 'b' waits at "
                                            r"barrier 'y' and thread 'a' at 'z'"):
        threaded([{"name": "a", "program": [bar("x"), bar("z"), bar("y")]},
                  {"name": "b", "program": [bar("x"), bar("y"), bar("z")]}])
    # global barriers meet every process's threads: counted across processes
    proc = lambda name, prog: {"name": name, "program": prog}
    with pytest.raises(WorkloadError, match=r"barrier 'global:g' is reached 2 times by "
                                            r"thread 'p1/main' and 1 by thread 'p0/main'"):
        parse_workload({"processes": [proc("p0", [bar("global:g")]),
                                      proc("p1", [bar("global:g"), bar("global:g")])]})
    parse_workload({"processes": [proc("p0", [bar("global:g"), bar("own")]),
                                  proc("p1", [bar("global:g")])]})
