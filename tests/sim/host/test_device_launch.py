"""Device graph launch: kernels of a graph launch graphs instantiated for device launch,
fire-and-forget (a child run beside the launching graph, which completes after it) or as a
tail launch (after the launching run, in its stream's place); the device runtime's code costs
a host launch of its graph its set-up."""

import pytest

from gpufe.sim.run import simulate
from gpufe.sim.host.workload import WorkloadError, ProgramError
from tests.sim.workloads import streams, launch, workload, kernels


def capture(graph, ops, stream="s"):
    return ([{"op": "stream_begin_capture", "stream": stream}] + ops
            + [{"op": "stream_end_capture", "stream": stream, "graph": graph}])


def dgl(graph, mode, count=1):
    return {"graph": graph, "mode": mode, "count": count}


def calling(kernel, graph, mode, count=1, ns=0, stream="s"):
    return dict(launch(stream, ns, kernel=kernel), device_graph_launch=dgl(graph, mode, count))


def instantiate(graph, device=False):
    return {"op": "graph_instantiate", "graph": graph, "device_launch": device}


def glaunch(graph, stream="s"):
    return {"op": "graph_launch", "graph": graph, "stream": stream}


SYNC = {"op": "stream_synchronize", "stream": "s"}


def run(params, prog, profiler="off"):
    return kernels(simulate(workload(prog), params, backend="compiled",
                            profiler=profiler).records)


def self_loop(count):
    """Graph g (k_a, then k_ctl tail-launching g ``count`` times), instantiated for device
    launch."""
    return capture("g", [launch("s", 0, kernel="k_a"), calling("k_ctl", "g", "tail", count)]) \
        + [instantiate("g", device=True)]


def test_a_tail_self_relaunch_runs_the_graph_count_more_times_per_host_launch(params):
    prog = streams("s") + self_loop(3)
    prog += [glaunch("g"), launch("s", 0, kernel="k_after"), SYNC, glaunch("g"), SYNC]
    ks = sorted(run(params, prog), key=lambda k: k["start"])
    assert [k["name"] for k in ks] == ["k_a", "k_ctl"] * 4 + ["k_after"] + ["k_a", "k_ctl"] * 4
    # the host launch's own run, then the device's; the stream's next work after the last
    assert [bool(k.get("device_launched")) for k in ks[:8]] == [False] * 2 + [True] * 6
    assert ks[8]["start"] > ks[7]["end"]
    # every run carries the host launch's correlation id; each call returns inside k_ctl
    assert len({k["corr"] for k in ks[:8]}) == 1
    ctl = [k for k in ks[:8] if k["name"] == "k_ctl"]
    assert [("graph_launched" in k) for k in ctl] == [True, True, True, False]
    for k in ctl[:3]:
        assert k["graph_launched"] - k["start"] == pytest.approx(params.tail_launch_call_ns,
                                                                 abs=2)
    # a run starts after the one before ended: the device runtime's launch, the graph's start
    firsts = [k for k in ks[:8] if k["name"] == "k_a"]
    for before, after in zip(ctl, firsts[1:]):
        gap = after["start"] - before["end"]
        assert gap > params.device_launch_call_ns + params.device_graph_start_ns


def test_a_fire_and_forget_launch_runs_beside_its_graph_which_completes_after_it(params):
    prog = streams("s") + capture("g", [launch("s", 2000, kernel="k_child")])
    prog += [instantiate("g", device=True)]
    prog += capture("l", [calling("k_launcher", "g", "fire_and_forget", ns=20000),
                          launch("s", 0, kernel="k_tail")]) + [instantiate("l")]
    prog += [glaunch("l"), launch("s", 0, kernel="k_after"), SYNC]
    ks = {k["name"]: k for k in run(params, prog)}
    launcher, child = ks["k_launcher"], ks["k_child"]
    assert child["device_launched"] and "device_launched" not in launcher
    # the child starts while its launcher still runs, the device graph's start after the call
    assert launcher["graph_launched"] - launcher["start"] == pytest.approx(
        params.device_launch_call_ns, abs=2)
    assert launcher["graph_launched"] + params.device_graph_start_ns < child["start"]
    assert child["end"] < launcher["end"]
    # the stream's next work waits for the launching graph, which waits for its child
    assert ks["k_after"]["start"] > max(child["end"], ks["k_tail"]["end"])


def test_a_graph_holding_device_runtime_code_takes_longer_to_set_up(params):
    """Queued host launches of a two-kernel graph: its control kernel holding
    device-launch code that is never called (count 0) adds device_runtime_start_ns."""
    periods = []
    for code in (False, True):
        ctl = calling("k_ctl", "g", "tail", 0) if code else launch("s", 0, kernel="k_ctl")
        prog = streams("s") + capture("g", [launch("s", 0, kernel="k_a"), ctl])
        prog += [instantiate("g"), glaunch("g"), SYNC, launch("s", 20000, kernel="k_gate")]
        prog += [glaunch("g")] * 6 + [SYNC]
        a = sorted(k["start"] for k in run(params, prog) if k["name"] == "k_a")[1:]
        periods.append((a[-1] - a[0]) / (len(a) - 1))
    assert periods[1] - periods[0] == pytest.approx(params.device_runtime_start_ns, abs=20)


def test_device_launches_are_checked(params):
    base = streams("s") + capture("g", [launch("s")])
    with pytest.raises(WorkloadError, match="mode must be"):
        workload(base + [calling("k", "g", "sideways")])
    with pytest.raises(WorkloadError, match="count must be an integer"):
        workload(base + [calling("k", "g", "tail", -1)])
    with pytest.raises(WorkloadError, match="has no field"):
        workload(base + [dict(launch("s"), device_graph_launch={"graph": "g", "mode": "tail",
                                                                "when": 1})])
    cases = [
        # a stream kernel may hold the code, not call it
        (base + [instantiate("g", device=True), calling("k", "g", "tail")],
         "only from kernels of a graph"),
        # the target must be instantiated for device launch
        (base + [instantiate("g")] + capture("l", [calling("k", "g", "fire_and_forget")])
         + [instantiate("l")], "not instantiated with device_launch"),
        # a device-launch graph whose kernels launch fire-and-forget: not modelled
        (base + [instantiate("g", device=True)]
         + capture("l", [calling("k", "g", "fire_and_forget")])
         + [instantiate("l", device=True)], "fire-and-forget launches from device-launched"),
    ]
    for prog, why in cases:
        with pytest.raises(ProgramError, match=why):
            simulate(workload(prog), params, backend="compiled")
    # code only, in a stream: runs
    ok = base + [instantiate("g", device=True), calling("k", "g", "tail", 0), SYNC]
    assert [k["name"] for k in run(params, ok)] == ["k"]


def test_device_launched_kernels_are_recorded_under_cupti_too(params):
    prog = streams("s") + self_loop(2) + [glaunch("g"), SYNC]
    ks = run(params, prog, profiler="cupti")
    assert sum(1 for k in ks if k.get("device_launched")) == 4


def test_cupti_makes_no_end_record_for_a_device_launched_kernel(params):
    # (the H200 under CUPTI: a device-launched graph's kernels start 0.80 us apart, a
    # host-launched one's 1.06 us, 0.77 us without CUPTI)
    prog = streams("s") + self_loop(2) + [glaunch("g"), SYNC]

    def a_to_ctl(profiler):
        ks = sorted(run(params, prog, profiler), key=lambda k: k["start"])
        return [c["start"] - a["start"] for a, c in zip(ks[::2], ks[1::2])]

    off, on = a_to_ctl("off"), a_to_ctl("cupti")
    assert on[0] - off[0] == pytest.approx(params.cupti_graph_kernel_ns, abs=2)
    assert on[1:] == off[1:]


def _call_ns(records, api):
    return [r["end"] - r["start"] for r in records
            if r["kind"] == "runtime" and r["name"].startswith(api)]


def test_a_host_launch_holding_device_runtime_code_costs_the_host_its_set_up(params):
    """The driver's set-up of the device runtime for a host launch of a graph (or a kernel)
    holding its code: unprofiled, the H200 issues such graph launches 2.8 us slower than the
    same graph without it (devlaunch, host and ff against hostplain). Each call here is the
    plain one's plus device_runtime_launch_cpu_ns (the launch path kept warm: the two
    programs' calls come at other times)."""
    params = params.with_overrides(cold_call_factor=0)
    calls = {}
    for code in (False, True):
        ctl = calling("k_ctl", "g", "tail", 0) if code else launch("s", 0, kernel="k_ctl")
        prog = streams("s") + capture("g", [launch("s", 0, kernel="k_a"), ctl])
        prog += [instantiate("g"), glaunch("g"), SYNC] + [glaunch("g"), SYNC] * 3
        prog += [ctl, SYNC] * 3
        recs = simulate(workload(prog), params, backend="compiled", profiler="off").records
        calls[code] = (_call_ns(recs, "cudaGraphLaunch")[1:], _call_ns(recs, "cudaLaunchKernel")[2:])
    extra = params.device_runtime_launch_cpu_ns * params.host_cpu_scale
    assert extra > 1000
    for plain, coded in zip(calls[False], calls[True]):
        assert len(plain) == len(coded) == 3
        assert [c - p for p, c in zip(plain, coded)] == [pytest.approx(extra, abs=2)] * 3
