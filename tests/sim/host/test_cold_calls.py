"""A launch call whose code has left the host CPU's caches: after its thread has done other
things for a while (slept in a synchronize), the next launch refills them, the more the longer
it was away (``Params.cold_call_factor``, ``cold_decay_ns``); on the H200 a launch 2 ms after
the thread's previous one takes 2-3 times its warm time, after 50 ms ~11 times. And a kernel
function's first launch loads it (lazy loading, ``function_load_cpu_ns``)."""

import math

import pytest

from gpufe.sim.analysis.calibrate import (cold_launches, function_loads, _launch_calls,
                                           _trace)
from gpufe.sim.run import simulate
from tests.sim.workloads import streams, launch, workload

SYNC = {"op": "stream_synchronize", "stream": "s"}


def launch_calls(params, wait_ns, profiler="off"):
    """Durations and idle times (since the previous launch returned) of the launches of a
    program that launches two kernels, waits for a kernel of ``wait_ns``, then launches two
    more."""
    prog = streams("s") + [launch("s", 0, kernel="k_a"), launch("s", 0, kernel="k_a"), SYNC,
                           launch("s", wait_ns, kernel="k_a"), SYNC,
                           launch("s", 0, kernel="k_a"), launch("s", 0, kernel="k_a"), SYNC]
    recs = simulate(workload(prog), params, backend="compiled", profiler=profiler).records
    calls = [r for r in recs if r["kind"] == "runtime"
             and r["name"].startswith("cudaLaunchKernel")]
    return [(b["end"] - b["start"], b["start"] - a["end"]) for a, b in zip(calls, calls[1:])]


@pytest.mark.parametrize("profiler", ["off", "cupti"])
def test_a_launch_after_a_long_wait_refills_the_caches(params, profiler):
    warm = params.launch_call_ns(params.host_cpu_scale, profiler == "cupti")
    calls = launch_calls(params, 20_000_000, profiler)
    (second, _), _, (after, idle), (next_one, _) = calls
    assert idle > 20_000_000
    expected = warm * params.cold_call_factor * -math.expm1(-idle / params.cold_decay_ns)
    assert expected > 2 * warm
    assert after - next_one == pytest.approx(expected, abs=20)   # (the next: 1 us idle)
    # the launch right behind it is warm again, as the second of the program is
    assert next_one == pytest.approx(second, abs=2)


def test_the_longer_away_the_colder(params):
    extra = []
    for wait in (500_000, 2_000_000, 20_000_000, 100_000_000):
        calls = launch_calls(params, wait)
        extra.append(calls[2][0] - calls[3][0])
    assert extra == sorted(extra) and extra[0] > 0
    # a ceiling: the whole path refilled
    assert extra[-1] < params.cold_call_factor * params.launch_call_ns(params.host_cpu_scale,
                                                                      False) + 2


def test_without_the_mechanism_every_launch_is_warm(params):
    calls = launch_calls(params.with_overrides(cold_call_factor=0), 20_000_000)
    assert max(d for d, _ in calls) - min(d for d, _ in calls) <= 1     # (ns rounding)


def test_the_h200s_launches_are_slow_after_a_long_wait():
    """The reference: chain_stream_gate's gate launches come ~97 ms after the previous launch
    and take 13 times the warm call; priority_p1's, 0.6-1.4 ms after it, 2.2 to 3.7 times."""
    long = [x for t, x in cold_launches(_launch_calls(_trace("chain_stream_gate"))) if t > 50e6]
    mid = [x for t, x in cold_launches(_launch_calls(_trace("priority_p1"))) if 0.5e6 < t < 2e6]
    assert len(long) == 2 and min(long) > 10
    assert len(mid) == 9 and 1 < min(mid) and max(mid) < 3


def test_a_functions_first_launch_loads_it(params):
    params = params.with_overrides(cold_call_factor=0)
    prog = streams("s") + [launch("s", kernel="k_a"), launch("s", kernel="k_a"),
                           launch("s", kernel="k_b"), launch("s", kernel="k_b"),
                           launch("s", kernel="k_a"), SYNC]
    recs = simulate(workload(prog), params, backend="compiled", profiler="off").records
    calls = [r["end"] - r["start"] for r in recs if r["kind"] == "runtime"
             and r["name"].startswith("cudaLaunchKernel")]
    load = params.function_load_cpu_ns * params.host_cpu_scale
    assert load > 5000
    warm = calls[1]
    assert calls == [pytest.approx(x, abs=2) for x in
                     (warm + load, warm, warm + load, warm, warm)]


def test_a_function_captured_first_is_loaded_with_its_graph(params):
    params = params.with_overrides(cold_call_factor=0)
    prog = streams("s") + [launch("s", kernel="k_a"), launch("s", kernel="k_a"),
                           {"op": "stream_begin_capture", "stream": "s"},
                           launch("s", kernel="k_b"),
                           {"op": "stream_end_capture", "stream": "s", "graph": "g"},
                           launch("s", kernel="k_b"), SYNC]
    recs = simulate(workload(prog), params, backend="compiled", profiler="off").records
    calls = [r["end"] - r["start"] for r in recs if r["kind"] == "runtime"
             and r["name"].startswith("cudaLaunchKernel") and "graph" not in r]
    assert calls[-1] == pytest.approx(calls[1], abs=2)


def test_the_h200s_first_launch_of_a_function_is_slow():
    """The reference: hyperq_c8_s16_o0's first k_spin launch takes 16.0 us against a 4.7 us
    warm call; actgap_c32_A1_g100's first k_gate 26.9 against 4.3."""
    def loads(name):
        return [round(x / 1e3, 1) for x in function_loads(_launch_calls(_trace(name)))]
    assert loads("hyperq_c8_s16_o0") == [11.3]
    assert loads("actgap_c32_A1_g100") == [22.6]
