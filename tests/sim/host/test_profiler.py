"""What CUPTI adds to a run (sim/host/profiler.py), against the H200's own records."""

import gzip
import json
import pathlib

import pytest

from gpufe.sim.analysis.scenarios import scenario_paths
from gpufe.sim.analysis.traces import read_fe_trace
from gpufe.sim.host.workload import parse_workload
from gpufe.sim.run import simulate
from tests.sim.workloads import streams, launch, workload, kernels

PROBE = (pathlib.Path(__file__).parents[3] / "sim" / "analysis" / "reference" / "h200"
         / "probes" / "multistream_state")
# the probe's patterns: one kernel per letter, each waited for before the next launch
PATTERNS = {"A60": "A" * 60, "B1A60": "B" + "A" * 60, "A30B1A30": "A" * 30 + "B" + "A" * 30,
            "AB30": "AB" * 30, "A20B20A20": "A" * 20 + "B" * 20 + "A" * 20,
            "ABCD15": "ABCD" * 15, "AB8A60": "AB" * 8 + "A" * 60}
LONG_NS = 600        # between the H200's 0.48-0.58 us and 0.61-0.77 us


def _longer_from(s2s):
    """Index of the first launch from which submitted -> start stays long, or None."""
    return next((i for i in range(len(s2s) - 2) if min(s2s[i:i + 3]) > LONG_NS), None)


def _measured(name):
    recs = [json.loads(line) for line in gzip.open(PROBE / f"{name}.jsonl.gz")]
    ks = sorted((r for r in recs if r["kind"] == "kernel"), key=lambda r: r["submitted"])
    return [k["start"] - k["submitted"] for k in ks]


def _modelled(pattern, params):
    prog = streams(*sorted(set(pattern)))
    for s in pattern:
        prog += [launch(s), {"op": "stream_synchronize", "stream": s}]
    ks = kernels(simulate(workload(prog, max_connections=8), params,
                          profiler="cupti").records)
    return [k["start"] - k["submitted"] for k in ks]


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_submitted_to_start_lengthens_where_the_h200s_does(name, params):
    measured, model = _measured(name), _modelled(PATTERNS[name], params)
    assert len(model) == len(measured) == len(PATTERNS[name])
    assert _longer_from(model) == _longer_from(measured)
    # and by what the H200 shows: 0.64-0.74 us after, 0.54 before
    after = _longer_from(measured)
    if after is not None:
        assert 640 <= sorted(model[after:])[len(model[after:]) // 2] <= 760
    assert sorted(model[:after])[len(model[:after]) // 2] < LONG_NS


def _gap2(a, ns0, ns=0, n=200, gate=20_000_000):
    """The probe's `gap2` program: A streams of n dependent kernels queued behind gates."""
    names = [f"s{i}" for i in range(a)]
    prog = streams(*names) + [launch(s) for s in names] + [{"op": "device_synchronize"}]
    prog += [launch(s, gate, kernel="k_gate") for s in names]
    for _ in range(n):
        prog += [launch(s, ns0 if i == 0 else ns, kernel=f"k{i}") for i, s in enumerate(names)]
    return workload(prog + [{"op": "device_synchronize"}], max_connections=32)


def _ends_at_a_submitted(ks):
    """Fraction of the short kernels that end within 32 ns after another stream's kernel is
    submitted, and their median time (ns)."""
    short = [k for k in ks if k["end"] - k["start"] < 1_000_000]
    subs = sorted((k["submitted"], k["stream"]) for k in short)
    at = sum(any(0 <= k["end"] - t <= 32 and s != k["stream"] for t, s in subs) for k in short)
    durations = sorted(k["end"] - k["start"] for k in short)
    return at / len(short), durations[len(durations) // 2]


@pytest.mark.parametrize("a,ns0", [(1, 3000), (2, 0), (2, 3000), (4, 3000)])
def test_a_kernel_ends_at_the_stamp_in_flight_as_on_the_h200(a, ns0, params):
    measured = [json.loads(line) for line in gzip.open(PROBE / f"gap2_A{a}_ns0_{ns0}.jsonl.gz")]
    m_at, m_median = _ends_at_a_submitted(sorted(
        (r for r in measured if r["kind"] == "kernel"), key=lambda k: k["start"])[a:])
    r = simulate(_gap2(a, ns0), params, backend="compiled", profiler="cupti")
    at, median = _ends_at_a_submitted(kernels(r.records)[a:])   # after the warm-ups
    assert at == pytest.approx(m_at, abs=0.15)
    assert median == pytest.approx(m_median, rel=0.2)


def _captured(params, profiler):
    """(record lengths, gaps to the next call) of 20 launches captured into a graph, the
    process's second capture (its first grows the node store as it goes)."""
    prog = streams("s")
    for graph in ("G0", "G"):
        prog += [{"op": "stream_begin_capture", "stream": "s"}]
        prog += [launch("s") for _ in range(20)]
        prog += [{"op": "stream_end_capture", "stream": "s", "graph": graph}]
    calls = [r for r in simulate(workload(prog), params, profiler=profiler).records
             if r["kind"] == "runtime"]
    launches = [i for i, r in enumerate(calls)
                if r["name"].startswith("cudaLaunchKernel")][20:]
    return ([calls[i]["end"] - calls[i]["start"] for i in launches[:-1]],
            [calls[i + 1]["start"] - calls[i]["end"] for i in launches[:-1]])


def test_a_captured_launch_pays_cuptis_callbacks_but_no_activity_record(params):
    """Captured, a launch sets up no kernel record: CUPTI's own time inside it and after it
    are the captured call's (on the H200 1.06 us and 0.52 after, slow vCPU), not an eager
    launch's (cupti_launch_ns inside, cupti_call_gap_ns after)."""
    off_len, off_gap = _captured(params, "off")
    on_len, on_gap = _captured(params, "cupti")
    assert set(off_gap) == {0}
    assert all(abs(b - a - params.cupti_captured_call_ns) <= 1 for a, b in zip(off_len, on_len))
    assert all(abs(g - params.cupti_captured_gap_ns) <= 1 for g in on_gap)
    assert params.cupti_captured_gap_ns < params.cupti_call_gap_ns
    assert 1000 <= on_len[0] <= 1120 and 480 <= on_gap[0] <= 560


def _threads(t, n):
    """Probe fe_trace2 threads' program (private streams): ``t`` threads, each launching
    ``n`` empty kernels on its own stream as fast as it can, all at once."""
    names = [f"s{i}" for i in range(t)]
    main = streams(*names) + [launch(s) for s in names] + [
        {"op": "device_synchronize"}, {"op": "barrier", "name": "go"}]
    threads = [{"name": "main", "program": main}] + [
        {"name": f"t{i}", "program": [{"op": "barrier", "name": "go"},
                                      {"op": "repeat", "count": n, "body": [launch(s)]},
                                      {"op": "stream_synchronize", "stream": s}]}
        for i, s in enumerate(names)]
    return parse_workload({"name": "threads", "threads": threads}, "threads")


def _median_record_ns(records):
    lengths = sorted(k["end"] - k["start"] for k in records if k["kind"] == "kernel")
    return lengths[len(lengths) // 2]


def test_a_kernel_ends_behind_another_streams_launch_the_front_end_works_towards(params):
    """Eight threads' private streams keep the front end moving from channel to channel: on
    the H200 a kernel's record then lasts until the next channel's launch is submitted
    (1.18 us, against 0.58 alone). Without the wait (cupti_end_wait_ns 0) it is its own
    length."""
    measured = _median_record_ns(read_fe_trace(scenario_paths("threads_T8_sh0")[1]))
    runs = {w: _median_record_ns(simulate(_threads(8, 150), params.with_overrides(
        cupti_end_wait_ns=w), backend="compiled", profiler="cupti").records)
        for w in (params.cupti_end_wait_ns, 0)}
    assert runs[params.cupti_end_wait_ns] == pytest.approx(measured, rel=0.15)
    assert runs[0] < 0.6 * measured


def test_a_kernel_does_not_end_behind_its_own_streams_next_launch(params):
    """The next launch of a kernel's own stream waits for it, so the front end takes it up
    after the kernel ended: a dependent chain's records keep their length, however long
    the wait (on the H200 its next `submitted` comes 0.96-1.7 us after a 5 us kernel's end,
    which stays: scenario chain_stream_ns5000). Without the rule, a 2 us wait would move
    every end to the next launch's `submitted`."""
    prog = streams("s") + [launch("s", 5000) for _ in range(40)] + [
        {"op": "stream_synchronize", "stream": "s"}]
    ends = {w: [(k["start"], k["end"]) for k in kernels(simulate(
        workload(prog), params.with_overrides(cupti_end_wait_ns=w), backend="compiled",
        profiler="cupti").records)] for w in (0, 2000)}
    assert ends[0] == ends[2000]
    assert max(e - s for s, e in ends[0]) < 5800
