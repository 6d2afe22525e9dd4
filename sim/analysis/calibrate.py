"""Calibration: fit the parameter set to the reference scenarios, reproducibly.

Two stages, each parameter from the scenario that isolates it (no random search, so the same
traces always give the same parameters):

1. **Direct**: CPU costs read off the traces. Loop time per launch with and without CUPTI
   (``chain_stream`` against ``nocupti_chain_g0``) gives ``launch_cpu_ns`` and the profiler's
   cost inside and after each call; API medians give the other calls' costs (less the
   profiler's part); straight lines through (nodes, time) give the graph launch (profiled,
   and unprofiled from the ``issued`` markers) and instantiate costs; copy bandwidths come
   from the largest copies.
2. **Simulated**: the GPU-side latencies that only show in timelines are fitted one after the
   other by a secant search on a simulated scenario, in an order where each fit leaves the
   earlier ones' targets alone (for example the acquire retry interval on the unprofiled
   queued gap before CUPTI's per-kernel cost on the profiled one).

``calibrate()`` returns the fitted :class:`Params` and the residuals: for every fitted
parameter, its target metric, the model and the measured value. ``gpufe calibrate`` writes
both (``sim/params/h200.json`` and ``h200_residuals.json``).
"""

import functools
import gzip
import json
import math
import re
import statistics

from gpufe.sim.analysis.metrics import metrics, _marked_spans
from gpufe.sim.host.workload import parse_workload
from gpufe.sim.params import load, BASE
from gpufe.sim.analysis.scenarios import scenario_paths, workload_from_header, HERE
from gpufe.sim.analysis.traces import read_fe_trace, read_trace
from gpufe.sim.analysis.validate import (run_scenario, measured_metrics, all_metrics,
                                         recorded_host_scale, step_cost_runs)
from gpufe.sim.run import simulate

#: probe traces (``reference/h200/probes/<probe>/<trace>``, not validation scenarios: the
#: evidence for one mechanism) that the model is compared with and a fit may target, with the
#: settings they were recorded under (``kern``: kernel and runtime records only, as the model
#: makes no others; ``nolat``: no latency timestamps)
PROBES = {
    f"cupti_latency_timestamps/{trace}_{variant}":
        {"cupti_latency_timestamps": 0} if "nolat" in variant else {}
    for trace, variants in (("chain_gate_n100", ("full", "kern", "nolat", "kern_nolat")),
                            ("hyperq_c2_s2", ("full", "nolat")),
                            ("hyperq_c8_s8", ("full", "nolat")),
                            ("fanout2_c8_s32", ("full", "nolat")))
    for variant in variants
}


def _probe_records(name):
    return read_fe_trace(HERE / "h200" / "probes" / f"{name}.jsonl.gz")


def probe_metrics(name, params=None, backend="compiled"):
    """The metrics of probe trace ``name`` (a key of :data:`PROBES`), or with ``params`` the
    model's on the program its header names, run with the probe's settings (profiled)."""
    records = _probe_records(name)
    program = records[0]["scenario"]
    if params is None:
        return all_metrics(records, program)
    w = parse_workload(workload_from_header(records[0], name.split("/")[-1]), name)
    r = simulate(w, params.with_overrides(**PROBES[name]), backend=backend, profiler="cupti")
    return all_metrics(r.records, program)


def _trace(name):
    return read_fe_trace(scenario_paths(name)[1])


def _api_median_ns(records, prefix):
    reps = [(r["t"]) for r in records if r["kind"] == "meta" and r["what"] == "rep_begin"]
    durs = [r["end"] - r["start"] for r in records
            if r["kind"] == "runtime" and r["name"].startswith(prefix)]
    if not durs:
        raise ValueError(f"no {prefix} calls")
    return statistics.median(durs)


#: the chain's own code between two launch calls (profiled) is 0.27-0.33 us on the
#: reference machine's fast vCPUs and 0.47-0.62 us on its slow ones (probe ``run_to_run``)
FAST_VCPU_CALL_GAP_NS = 450


def _launch_gap_median_ns(records):
    """Median time from a cudaLaunchKernel's return to the next one's call."""
    calls = sorted((r for r in records if r["kind"] == "runtime"
                    and r["name"].startswith("cudaLaunchKernel")), key=lambda r: r["start"])
    return statistics.median(b["start"] - a["end"] for a, b in zip(calls, calls[1:]))


def fast_vcpu_scale(kickoff_ns):
    """How much faster the reference machine's fast vCPUs run the driver's and CUPTI's code
    than its slow ones: the launch call's medians over the ``run_to_run`` probe's runs of
    ``chain_stream`` (28 runs, some pinned to one vCPU), each run classed by the loop's own
    time between calls, less the kickoff's writes to the GPU (``kickoff_ns``), which take the
    same time on both (``Params.launch_call_ns``). 3.93 against 5.44 us less 2.27 gives 0.52,
    as the loop's own code between two calls does (0.31 against 0.55 us), where a ratio of
    whole calls (0.72) would make a fast vCPU's event record or loop 40% too slow."""
    fast, slow = _vcpu_launch_medians_ns()
    return (fast - kickoff_ns) / (slow - kickoff_ns)


@functools.lru_cache(maxsize=None)
def _vcpu_launch_medians_ns():
    """(fast, slow): the launch call's median on each kind of vCPU over the probe's runs
    (read once: calibrate asks again once the kickoff is fitted)."""
    fast, slow = [], []
    probe = HERE / "h200" / "probes" / "run_to_run"
    for path in sorted(probe.glob("chain_stream_*.jsonl.gz")):
        if not re.fullmatch(r"chain_stream_(core\d+_)?r\d+\.jsonl\.gz", path.name):
            continue                        # the 1 us kernels' runs: another program
        records = read_fe_trace(path)
        launch = _api_median_ns(records, "cudaLaunchKernel")
        (fast if _launch_gap_median_ns(records) < FAST_VCPU_CALL_GAP_NS else slow).append(launch)
    return statistics.median(fast), statistics.median(slow)


#: submitted -> start above this (ns) marks CUPTI's shared-slot state (probe
#: ``multistream_state``: 0.48-0.58 us before it, 0.61-0.77 after)
SHARED_STATE_NS = 600


def submitted_lead_ns():
    """How much earlier CUPTI's `submitted` comes once a context's stamp slots are all taken:
    the median submitted -> start after that point less the median before it, over the
    ``multistream_state`` probe's runs of one kernel at a time (each run's first kernel, a
    cold start, left out)."""
    before, after = [], []
    probe = HERE / "h200" / "probes" / "multistream_state"
    for path in sorted(probe.glob("[AB]*.jsonl.gz")):
        kernels = sorted((r for r in read_fe_trace(path) if r["kind"] == "kernel"),
                         key=lambda r: r["submitted"])
        s2s = [k["start"] - k["submitted"] for k in kernels]
        onset = next((i for i in range(1, len(s2s) - 2)
                      if min(s2s[i:i + 3]) > SHARED_STATE_NS), len(s2s))
        before += s2s[1:onset]
        after += s2s[onset:]
    return statistics.median(after) - statistics.median(before)


def _issue_median_ns(records):
    """Median time from a repetition's start to its work issued (the ``issued`` marker): the
    API time of an unprofiled trace, which has no runtime records."""
    spans = _marked_spans(records, "rep_begin", "issued")
    if not spans:
        raise ValueError("no rep_begin -> issued markers")
    return statistics.median(end - begin for begin, end in spans)


def _line(points):
    """Least-squares a + b x through (x, y) points."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    b = (sum((x - mx) * (y - my) for x, y in points)
         / sum((x - mx) ** 2 for x, _ in points))
    return my - b * mx, b


def _nodes(records):
    return int(records[0]["params"]["n"])


def rounded(name, value):
    """A fitted value as the parameter file keeps it: times to 0.1 ns, ratios to 0.001."""
    return round(value, 1) if name.endswith("_ns") else round(value, 3)


#: probe torch_profiler_cost's step_cost runs: file -> the bundled trace of each variant
PROFILER_STEP_TRACES = {"loader": {"eager": "loader_eager"},
                        "twostream": {"eager": "twostream_eager"},
                        "optstep": {"loop": "optstep_loop", "foreach": "optstep_foreach",
                                    "loop_cap": "optstep_loop_cap"}}


def _calls_per_step(trace):
    """(launch calls, other CUDA calls, operator records) per step of a bundled torch2
    trace."""
    from gpufe.sim.analysis.replay import count_steps, LAUNCH_NAMES
    path = HERE / "h200" / "torch2" / f"{trace}.json.gz"
    records = read_trace(path)
    calls = [r for r in records if r["kind"] in ("runtime", "driver")]
    launches = sum(1 for r in calls if r["name"].startswith(LAUNCH_NAMES)
                   and r["kind"] == "runtime")
    steps = count_steps(path, records)
    return (launches / steps, (len(calls) - launches) / steps,
            sum(r.get("cpu_ops", 0) for r in calls) / steps)


def profiler_op_ns(params):
    """torch.profiler's CPU time per operator record, from probe ``torch_profiler_cost``'s
    step_cost runs: each torch2 program's steps timed with and without the profiler,
    interleaved in one process (one vCPU for both; pinned to a CPU and not): per program and
    run, the profiled step less the unprofiled, less CUPTI's per-call costs (at ``params``)
    for the calls its trace makes a step, over the trace's operator records a step; the
    median over programs and runs."""
    per = []
    for program, traces in PROFILER_STEP_TRACES.items():
        for probe in step_cost_runs(program, repeats=False):
            for variant, trace in traces.items():
                v = probe["variants"][variant]
                launches, calls, ops = _calls_per_step(trace)
                cupti = (launches * (params.cupti_launch_ns + params.cupti_call_gap_ns)
                         + calls * params.cupti_call_gap_ns)
                per.append(((v["on_median_us"] - v["off_median_us"]) * 1e3 - cupti) / ops)
    return max(statistics.median(per), 0.0)


def _gu_median(records, what, key):
    """Median of a gupdate trace's ``key`` over its ``what`` records (ns)."""
    return statistics.median(r[key] for r in records
                             if r["kind"] == "meta" and r["what"] == what)


#: the gupdate sizes (nodes) the calibration fits on: every one recorded
GUPDATE_FIT_SIZES = (10, 30, 100, 300, 3000)


def _hinge(points, knee, fixed=True):
    """(a, b, c) of ``a + b n + c max(n - knee, 0)`` through (n, y) points, least squares of
    the errors relative to y (as validation scores them); a part that comes out negative (no
    fixed cost, no misses) is left out and the rest fitted again. ``fixed`` False: a = 0 (an
    operation the model costs per node only)."""
    import numpy as np
    n = np.array([p[0] for p in points], float)
    y = np.array([p[1] for p in points], float)
    cols = [np.ones_like(n), n, np.maximum(n - knee, 0.0)]
    use = [0, 1, 2] if fixed else [1, 2]
    while True:
        x = np.stack([cols[i] for i in use], 1) / y[:, None]
        coef = np.linalg.lstsq(x, np.ones_like(n), rcond=None)[0]
        out = [0.0, 0.0, 0.0]
        for i, c in zip(use, coef):
            out[i] = float(c)
        bad = [i for i in use if i != 1 and out[i] < 0]
        if not bad:
            return tuple(out)
        use.remove(bad[0])


def _hinge_error(points, knee, fixed=True):
    a, b, c = _hinge(points, knee, fixed)
    return sum(((a + b * n + c * max(n - knee, 0)) / y - 1) ** 2 for n, y in points)


def graph_update_fit(cupti_gap_ns, fast_scale, sizes=GUPDATE_FIT_SIZES):
    """The graph operations' CPU times, from fe_trace2 gupdate (n = 10 to 3,000 nodes, the
    program's own clock).

    Without CUPTI: SetParams per node (median over n); for cudaGraphExecUpdate,
    cudaGraphExecDestroy, a re-instantiation, the first launch's upload and a recapture, a
    fixed part, a part per node, and a part per node beyond ``graph_cache_nodes``: the graph's
    driver state no longer fits the host CPU's cache, and each further node costs misses
    (per node 115 ns an update up to ~100 nodes, 250 at 3,000; a destroy 280 then 760). The
    knee is one for all five (they walk the same graph); each operation's misses its own
    (they touch more or less of each node). Each fitted by least squares of the errors
    relative to the measured times, as validation scores them; the knee the one of least
    total error, to 10 nodes.

    With CUPTI, its time per node of an update, a destroy and a re-instantiation, and of
    each SetParams call's node, each operation's own (``cupti_gap_ns`` after each call,
    then this per node: the median over the sizes of what the profiled call took more, per
    node, the profiled call the median over the size's recordings); what a process's first
    capture costs more. ``sizes``: the graph sizes fitted on (cross-validation leaves
    some out; at least three); ``fast_scale``: ``host_fast_cpu_scale``, which tells the
    recordings made on a fast vCPU (:func:`captured_call_fit`)."""
    off = {n: _trace(f"nocupti_gupdate_n{n}") for n in sizes}
    on = {n: _trace(f"gupdate_n{n}") for n in sizes}

    def set_per_node(t):
        return statistics.median(r["set_ns"] / r["nodes"] for r in t
                                 if r["kind"] == "meta" and r["what"] == "gu_set")

    series = {what: [(n, _gu_median(t, *what.split("."))) for n, t in off.items()]
              for what in ("gu_update.update_ns", "gu_reinst.destroy_ns",
                           "gu_reinst.instantiate_ns", "gu_update.capture_ns")}
    series["upload"] = [(n, _gu_median(t, "gu_build", "first_launch_sync_ns")
                         - _gu_median(t, "gu_base", "launch_sync_ns")) for n, t in off.items()]
    # a re-instantiation and an upload cost per node only (their call's fixed part is in
    # instantiate_cpu_ns, the launch's)
    fixed = {what: what not in ("gu_reinst.instantiate_ns", "upload") for what in series}
    knees = range(10, max(sizes), 10)
    knee = min(knees, key=lambda k: (sum(_hinge_error(p, k, fixed[w])
                                         for w, p in series.items()), k))
    fits = {what: _hinge(p, knee, fixed[what]) for what, p in series.items()}
    out = {"graph_cache_nodes": float(knee),
           "graph_set_params_cpu_ns": statistics.median(set_per_node(t)
                                                        for t in off.values())}
    for what, (fixed, per, miss), names in (
            ("gu_update.update_ns", fits["gu_update.update_ns"],
             ("graph_update_cpu_ns", "graph_update_per_node_ns", "graph_update_miss_ns")),
            ("gu_reinst.destroy_ns", fits["gu_reinst.destroy_ns"],
             ("graph_exec_destroy_cpu_ns", "graph_exec_destroy_per_node_ns",
              "graph_exec_destroy_miss_ns")),
            ("gu_reinst.instantiate_ns", fits["gu_reinst.instantiate_ns"],
             (None, "graph_reinstantiate_per_node_ns", "graph_reinstantiate_miss_ns")),
            ("upload", fits["upload"],
             (None, "graph_upload_per_node_ns", "graph_upload_miss_ns"))):
        for name, value in zip(names, (fixed, per, miss)):
            if name:
                out[name] = max(value, 0.0)
    # CUPTI's time per node, each operation's own (an update 0.10-0.15 us a node, a destroy
    # 0.17-0.38, a re-instantiation 0.52-1.26, a SetParams call 0.20-0.36): the profiled
    # call is the unprofiled one, CUPTI's gap and its nodes' CUPTI time. The profiled call
    # is the median over the size's recordings (the bundled one and its repeats: a process
    # on a faster vCPU makes one recording's CUPTI part come out at nothing), the fit the
    # median over the sizes
    from gpufe.sim.analysis.validate import repeat_paths
    recorded = {n: [on[n], *(read_fe_trace(p) for p in repeat_paths(f"gupdate_n{n}"))]
                for n in sizes}

    def cupti_part(n, per_node):
        return (statistics.median(per_node(t) for t in recorded[n]) - per_node(off[n])
                - cupti_gap_ns)
    for name, what, key in (("cupti_graph_update_node_ns", "gu_update", "update_ns"),
                            ("cupti_graph_destroy_node_ns", "gu_reinst", "destroy_ns"),
                            ("cupti_graph_reinstantiate_node_ns", "gu_reinst",
                             "instantiate_ns")):
        out[name] = max(statistics.median(
            cupti_part(n, lambda t: _gu_median(t, what, key)) / n for n in sizes), 0.0)
    out["cupti_graph_set_params_ns"] = max(statistics.median(
        cupti_part(n, set_per_node) for n in sizes), 0.0)
    # a capture of n launches, without CUPTI: the recaptures' (the first capture of a
    # process costs more); its begin and end share the fixed part
    a, b, c = fits["gu_update.capture_ns"]
    out["capture_call_cpu_ns"], out["capture_miss_ns"] = b, max(c, 0.0)
    out["begin_capture_cpu_ns"] = out["end_capture_cpu_ns"] = max(a, 0.0) / 2
    # a process's first capture (the build's) over a recapture of as many launches: the
    # setup once, and each launch the node store grows by
    first = [(n, _gu_median(t, "gu_build", "capture_ns")
              - (a + b * n + c * max(n - knee, 0))) for n, t in off.items()]
    a, b = _line(first)
    out["capture_first_cpu_ns"], out["capture_grow_per_node_ns"] = max(a, 0.0), max(b, 0.0)
    out.update(captured_call_fit([t for ts in recorded.values() for t in ts],
                                 out["capture_call_cpu_ns"], fast_scale))
    return out


def _captured_launches(records):
    """(record length, gap to the next call) of each launch captured into a graph that the
    next call follows, a launch captured too (ns)."""
    calls = [r for r in records if r["kind"] == "runtime"]
    out, capturing = [], False
    for a, b in zip(calls, calls[1:]):
        if "BeginCapture" in a["name"]:
            capturing = True
        elif "EndCapture" in a["name"]:
            capturing = False
        elif (capturing and a["name"].startswith("cudaLaunchKernel")
              and b["name"].startswith("cudaLaunchKernel")):
            out.append((a["end"] - a["start"], b["start"] - a["end"]))
    return out


def captured_call_fit(recordings, capture_call_ns, fast_scale):
    """CUPTI's time inside a launch captured into a graph and after it, from profiled
    ``recordings`` (gupdate's, every size and run): per recording the median captured
    launch's record and gap, on the set's (slow) vCPU only: a process on a fast one takes
    ~0.55 times as long for both (30 recordings: 21 at 1.06 us and 0.52, 9 at 0.59 and
    0.30), told apart by a record shorter than ``sqrt(fast_scale)`` times the upper
    quartile's. Inside: the slow records' median less the unprofiled call
    (``capture_call_ns``); after: the slow gaps' median."""
    each = [(statistics.median(x for x, _ in c), statistics.median(g for _, g in c))
            for c in map(_captured_launches, recordings) if c]
    upper = statistics.quantiles([x for x, _ in each], n=4)[2]
    slow = [(x, g) for x, g in each if x >= upper * math.sqrt(fast_scale)]
    return {"cupti_captured_call_ns": max(statistics.median(x for x, _ in slow)
                                          - capture_call_ns, 0.0),
            "cupti_captured_gap_ns": statistics.median(g for _, g in slow)}


def pdl_window():
    """Kernels of a stream in flight at once under PDL: on the stream chain of 2 us kernels
    that trigger at once (stamps, unprofiled), kernels pile up resident until each one waits
    in its channel for the completion of the kernel pdl_window before it, and enters
    ~1.5 us after that kernel's exit. For each kernel past the first 20: its index less
    that of the last kernel to exit at least PDL_PATH_NS before it entered; the median."""
    out = []
    for r in _trace("nocupti_pdl_stamp_p1_t1_ns2000_g0"):
        if r["kind"] == "meta" and r["what"] == "pdl_stamps":
            entries, exits = r["in_wait_out"][0::3], r["in_wait_out"][2::3]
            for i in range(20, len(entries)):
                before = [j for j in range(i) if exits[j] <= entries[i] - PDL_PATH_NS]
                if before:
                    out.append(i - before[-1])
    return int(statistics.median(out))


#: pdl_window: the least time from a kernel's exit to the entry of a kernel its channel
#: ordered behind its completion (a stream's dependent launch takes ~1.5 us on the H200)
PDL_PATH_NS = 1000


#: the PDL kernel lengths (ns) and the conditional and device-launched body sizes (kernels)
#: the calibration fits on: every one recorded (``--cv`` leaves ends out)
PDL_FIT_NS = (2000, 5000, 50000)
BODY_FIT_SIZES = (1, 2, 4)

#: the thread counts the calibration fits the threads' contention on: every one recorded
#: (the second set's 2, 4, 8 and the third recording's 3, 6, 12; ``--cv`` leaves ends out)
THREADS_FIT_SIZES = (2, 3, 4, 6, 8, 12)


def threads_fit(sizes=THREADS_FIT_SIZES):
    """Host threads' contention for the driver (fe_trace2 threads, own streams, unprofiled):
    a thread's launch against the one-thread run's, over the other threads launching (1, 3,
    7): a line whose intercept is ``thread_contention_ns`` and slope
    ``thread_contention_per_thread_ns``: cache lines moving between CPUs, whatever the vCPU's
    speed (the profiled series, recorded on a slow vCPU, adds as much per thread; it and the
    shared-stream runs are left to validation). ``sizes``: the thread counts fitted on
    (every one recorded, 2 to 12 threads)."""
    from gpufe.sim.analysis.validate import THREADS_ONE
    from gpufe.sim.analysis.metrics import scenario_metrics
    one = scenario_metrics(_trace(THREADS_ONE), "threads")["thread_launch_us"]
    points = [(t - 1, scenario_metrics(_trace(f"nocupti_threads_T{t}_sh0"),
                                       "threads")["thread_launch_us"] - one)
              for t in sizes]
    a, b = _line(points)
    return {"thread_contention_ns": max(a, 0.0) * 1e3,
            "thread_contention_per_thread_ns": max(b, 0.0) * 1e3}


def lock_wake_ns(after_release_ns, sizes=THREADS_FIT_SIZES):
    """A sleeping waiter's wake-up on a driver lock, from fe_trace2 threads on one shared
    stream (profiled: the launch records carry their thread): the launch calls' end-to-end
    interval where the lock went to another thread, over the interval between two calls of
    one thread (median each; median over the thread counts), is the wake-up less what the
    thread that kept it does between its release and its next call's acquire
    (``after_release_ns``: CUPTI's time inside and after the call, on that slow vCPU).
    ``sizes``: the thread counts."""
    extra = []
    for t in sizes:
        calls = sorted((r for r in _trace(f"threads_T{t}_sh1") if r["kind"] == "runtime"
                        and r["name"].startswith("cudaLaunchKernel")), key=lambda r: r["end"])
        same, handed = [], []
        for a, b in zip(calls, calls[1:]):
            (same if a.get("tid") == b.get("tid") else handed).append(b["end"] - a["end"])
        extra.append(statistics.median(handed) - statistics.median(same))
    return max(statistics.median(extra) + after_release_ns, 0.0)


#: idle times (ms) that bound the buckets of :func:`cold_call_fit`
COLD_IDLE_EDGES_MS = (0.1, 0.3, 1, 2, 5, 15, 50, math.inf)


def _launch_calls(records):
    """The launch calls of a one-thread profiled trace in time order, the warm call (the
    median of those that came within 100 us of the one before) and each call's kernel
    function (None: a captured launch); None when the trace has no 20 warm calls or several
    threads."""
    calls = sorted((r for r in records if r["kind"] == "runtime"
                    and r["name"].startswith("cudaLaunchKernel")), key=lambda r: r["start"])
    if len({r.get("tid") for r in calls}) > 1:
        return None
    warm = [b["end"] - b["start"] for a, b in zip(calls, calls[1:])
            if b["start"] - a["end"] < 100_000]
    if len(warm) < 20:
        return None
    names = {r["corr"]: r["name"] for r in records if r["kind"] == "kernel"}
    return calls, statistics.median(warm), [names.get(r["corr"]) for r in calls]


def function_loads(found):
    """Excess over the warm call (ns) of each kernel function's first launch that comes within
    100 us of the launch before it (so not cold), the program's first launch left out (its
    context's and module's set-up too); ``found``: a trace's :func:`_launch_calls`."""
    calls, warm, names = found
    seen, out = {names[0]}, []
    for a, b, name in zip(calls, calls[1:], names[1:]):
        if name is not None and name not in seen and b["start"] - a["end"] < 100_000:
            out.append(b["end"] - b["start"] - warm)
        seen.add(name)
    return out


@functools.lru_cache(maxsize=None)
def _bundled_launch_calls(names=None):
    """:func:`_launch_calls` of every bundled profiled trace that has them (``names``: a
    tuple of scenarios; default all), each trace read once for both fits of the launch path
    (:func:`function_load_fit`, :func:`cold_call_fit`)."""
    from gpufe.sim.analysis.scenarios import scenario_names
    out = []
    for name in names or scenario_names():
        with gzip.open(scenario_paths(name)[1], "rt") as f:
            header = json.loads(f.readline())
        # (read whole only where they can count: profiled, one host thread)
        if header.get("cupti") != 0 and header.get("scenario") != "threads":
            found = _launch_calls(_trace(name))
            if found is not None:
                out.append(found)
    return tuple(out)


def function_load_fit(names=None):
    """``function_load_cpu_ns``: the median excess of a kernel function's first launch (CUDA's
    lazy loading: 13-48 us against a 4-6 us warm call on the H200) over the bundled profiled
    one-thread traces (``names``: a tuple of scenarios; default all)."""
    return statistics.median(x for found in _bundled_launch_calls(names)
                             for x in function_loads(found))


def cold_launches(found):
    """(idle ns, duration / warm - 1) of a trace's launch calls (``found``: its
    :func:`_launch_calls`): idle, the time since the thread's previous launch call returned.
    A kernel function's first launch (lazy loading) is left out."""
    calls, warm, names = found
    seen, out = {names[0]}, []
    for a, b, name in zip(calls, calls[1:], names[1:]):
        if name in seen:
            out.append((b["start"] - a["end"], (b["end"] - b["start"]) / warm - 1))
        seen.add(name)
    return out


def cold_call_fit(names=None):
    """``cold_call_factor`` and ``cold_decay_ns`` from the launch calls of the bundled
    profiled one-thread traces (``names``: a tuple of scenarios; default all): a call's duration
    over its trace's warm call, against the time since its thread's previous launch, grows
    from 1 (within 100 us) to ~11 (after 50 ms or more; 2 to 3 after 1-2 ms, as copy_busy1's
    launches behind their 2 ms synchronizes). The buckets' medians (idle and excess) are
    fitted with factor x (1 - exp(-idle / decay)) by weighted least squares (weight: the
    square root of the bucket's calls), the decay on a 0.1 ms grid."""
    points = [p for found in _bundled_launch_calls(names) for p in cold_launches(found)]
    buckets = []
    lo = COLD_IDLE_EDGES_MS[0] * 1e6
    for hi in COLD_IDLE_EDGES_MS[1:]:
        inside = [(t, x) for t, x in points if lo <= t < hi * 1e6]
        if inside:
            buckets.append((statistics.median(t for t, _ in inside),
                            statistics.median(x for _, x in inside), math.sqrt(len(inside))))
        lo = hi * 1e6
    best = None
    for step in range(1, 1001):
        decay = step * 1e5
        g = [(w, 1 - math.exp(-t / decay), x) for t, x, w in buckets]
        factor = sum(w * e * x for w, e, x in g) / sum(w * e * e for w, e, x in g)
        err = sum(w * (factor * e - x) ** 2 for w, e, x in g)
        if best is None or err < best[0]:
            best = (err, factor, decay)
    return {"cold_call_factor": best[1], "cold_decay_ns": best[2]}


def _refill_lags_ns(run, hi):
    """Probe sm_placement, one run: how long after the latest block end on its SM (ns) each
    high-priority kernel started (``hi`` True; ``run``'s high-priority chains during the
    load), or each of the load's blocks did on an SM whose blocks no gate shared (False)."""
    import bisect
    load = run["load"]
    l0, l1 = min(b[1] for b in load), max(b[2] for b in load)
    ends = {}
    for sm, _, end in load:
        ends.setdefault(sm, []).append(end)
    for v in ends.values():
        v.sort()

    def lag(sm, t):
        i = bisect.bisect_left(ends.get(sm, ()), t)
        return t - ends[sm][i - 1] if i else None
    if hi:
        starts = [(sm, t) for c in run["chains"][:run["hi"]] for sm, t in c if l0 < t < l1]
    else:
        gated = {g[0] for g in run["gates"]}
        starts = [(sm, t) for sm, t, _ in load if sm not in gated]
    return [x for x in (lag(sm, t) for sm, t in starts) if x is not None and x < 2000]


#: the H200 traces CUPTI's end-timestamp wait is fitted on: private streams from 8 threads
#: and 16 channels of 4 streams (the other threads and actgap sizes are left to predict)
END_WAIT_FIT = ("threads_T8_sh0", "actgap_c16_A4_g100_hi0")
#: an end "at" a stamp: within two of the H200's 32 ns timer ticks of it
END_AT_STAMP_NS = 64


def end_wait_ns(scenarios=END_WAIT_FIT, step=25, most=2000):
    """How long before a launch's `submitted` a kernel's end timestamp already waits for it
    (``cupti_end_wait_ns``), from the H200's kernel records: the shortest wait that puts
    (within half a percent) the most records' ends where the H200 has them. The rule: a
    kernel whose next launch (the first `submitted` after its own end) is another stream's
    and comes within the wait ends at that `submitted`, else at its own end (its own
    stream's next launch waits for it: the front end takes that one up after it ended).
    Its own end is its start plus the scenario's record length with no launch near (the
    median over records whose next `submitted` is more than ``most`` ns after their
    end)."""
    import bisect
    cases = []
    for name in scenarios:
        ks = sorted((r for r in _trace(name) if r["kind"] == "kernel"
                     and r.get("submitted") is not None), key=lambda r: r["start"])
        launches = sorted((k["submitted"], k["stream"]) for k in ks)
        stamps = [t for t, _ in launches]
        next_of = [bisect.bisect_right(stamps, k["start"]) for k in ks]
        own = statistics.median(k["end"] - k["start"] for k, j in zip(ks, next_of)
                                if j == len(stamps) or stamps[j] - k["end"] > most)
        for k in ks:
            j = bisect.bisect_right(stamps, k["start"] + own)
            cases.append((k["start"] + own, stamps[j] if j < len(stamps)
                          and launches[j][1] != k["stream"] else None, k["end"]))

    def held(wait):
        return sum(abs((n if n is not None and real < n <= real + wait else real) - end)
                   <= END_AT_STAMP_NS for real, n, end in cases)
    # past the front end's work towards a launch, a longer wait holds about as many (the
    # launches then come later than that): the shortest within half a percent of the best
    waits = range(0, most + 1, step)
    best = max(held(w) for w in waits)
    return float(next(w for w in waits if held(w) >= best - 0.005 * len(cases)))


def dispatch_switch_fit():
    """The work distributor's switch to another kernel (``dispatch_switch_ns``), from probe
    sm_placement (a high-priority chain beside a low-priority load holding every SM): a
    high-priority kernel starts a median 0.48 us after a load block ends on its SM, where
    the load's own next block, with no other kernel to place, starts 0.22 us after one: the
    difference is the distributor setting up the other kernel (the median over the runs
    with high-priority chains, less that over the runs without)."""
    runs = []
    for path in sorted((HERE / "h200" / "probes" / "sm_placement").glob("sm_*.json.gz")):
        d = json.loads(gzip.decompress(path.read_bytes()))
        runs.append(dict(d["reps"][-1], hi=d["hi"]))
    with_hi = statistics.median(statistics.median(_refill_lags_ns(r, True))
                                for r in runs if r["hi"])
    refill = statistics.median(statistics.median(_refill_lags_ns(r, False))
                               for r in runs if not r["hi"])
    return with_hi - refill


def direct_fit():
    """Parameters read straight off the traces (ns)."""
    out = {}
    chain = _trace("chain_stream")
    n = _nodes(chain)
    loop_prof = metrics(chain)["wall_per_rep_us"] * 1e3 / n
    api_prof = _api_median_ns(chain, "cudaLaunchKernel")
    loop_off = metrics(_trace("nocupti_chain_g0"))["wall_per_rep_us"] * 1e3 / n
    # CUPTI's cost: inside a launch call (its kernel record), after every call
    out["launch_cpu_ns"] = loop_off
    out["cupti_launch_ns"] = api_prof - loop_off
    out["cupti_call_gap_ns"] = loop_prof - api_prof
    # calls without an unprofiled reference: their profiled medians
    out["event_record_cpu_ns"] = _api_median_ns(_trace("events_t0_g0"), "cudaEventRecord")
    out["event_record_timing_cpu_ns"] = _api_median_ns(_trace("events_t1_g0"),
                                                       "cudaEventRecord")
    out["stream_wait_event_cpu_ns"] = _api_median_ns(_trace("xstream_t0"),
                                                     "cudaStreamWaitEvent")
    out["memcpy_cpu_ns"] = _api_median_ns(_trace("copy_busy0"), "cudaMemcpyAsync")
    # the reference machine's fast vCPUs against its slow ones, from the probe's runs of the
    # same chain; sync_h2 ran on a fast one: its query time at the calibration host's speed
    out["host_fast_cpu_scale"] = fast_vcpu_scale(load(BASE).kickoff_ns)
    # CUPTI's record once its stamp slots are shared (a record, no time of its own)
    out["cupti_submitted_lead_ns"] = submitted_lead_ns()
    host = load(BASE).with_overrides(**out)
    sync = _trace("sync_h2")
    out["query_cpu_ns"] = (_api_median_ns(sync, "cudaEventQuery")
                           / recorded_host_scale(host, _api_median_ns(sync, "cudaLaunchKernel")
                                                 / 1e3))
    # graph launch API time against nodes (profiled), instantiate time against nodes, up to
    # 1000 nodes (the 10000-node graph costs less per node: left to validation)
    graphs = [_trace(g) for g in ("graph_nodes1", "graph_nodes10", "graph_nodes100",
                                  "chain_graph")]
    launch = {_nodes(t): _api_median_ns(t, "cudaGraphLaunch") for t in graphs}
    b = (launch[1000] - launch[100]) / 900
    out["graph_launch_cpu_ns"] = max(launch[1] - b, 0.0)
    # unprofiled, the call hardly grows with the graph (2.6 us for 10 nodes, 5.6 for 1,000):
    # its per-node part is the slope of issue time against nodes; the rest of the profiled
    # slope is CUPTI's records
    issue = [(_nodes(t), _issue_median_ns(t)) for t in
             (_trace(f"nocupti_graph_nodes{n}") for n in (10, 100, 1000))]
    per_node = max(_line(issue)[1], 0.0)
    out["graph_launch_per_node_ns"] = per_node
    out["cupti_graph_node_ns"] = max(b - per_node, 0.0)
    out["profiler_op_ns"] = profiler_op_ns(host)
    out.update(cold_call_fit())
    out["function_load_cpu_ns"] = function_load_fit()
    out["pdl_window"] = pdl_window()
    out.update(threads_fit())
    out["lock_wake_ns"] = lock_wake_ns(out["cupti_launch_ns"] + out["cupti_call_gap_ns"])
    out.update(graph_update_fit(out["cupti_call_gap_ns"], out["host_fast_cpu_scale"]))
    inst = [(r["nodes"], r["instantiate_ns"]) for t in graphs for r in t
            if r["kind"] == "meta" and r["what"] == "graph_built"]
    a, b = _line(inst)
    out["instantiate_cpu_ns"], out["instantiate_per_node_ns"] = max(a, 0.0), b
    copies = metrics(_trace("copy_busy0"))
    out["h2d_bytes_per_ns"] = copies["copy_h2d_gbps"]
    out["d2h_bytes_per_ns"] = copies["copy_d2h_gbps"]
    out["d2d_bytes_per_ns"] = copies["copy_d2d_gbps"]
    out.update(device_launch_fit())
    out["dispatch_switch_ns"] = dispatch_switch_fit()
    out["cupti_end_wait_ns"] = end_wait_ns()
    return out


def device_launch_fit(sizes=BODY_FIT_SIZES):
    """The device-side fire-and-forget cudaGraphLaunch call (the launcher's timer reads
    around it, unprofiled), and what CUPTI adds to it (the profiled run's): the median over
    the body sizes ``sizes`` (the call does not depend on the graph it launches; the timer's
    ticks give 2.24 us at b = 1, 1.76 at 2 and 4); and the host's set-up of the device
    runtime for a host launch of a graph holding its code (the graph's size does not
    change it)."""
    from gpufe.sim.analysis.metrics import scenario_metrics
    call = {p: statistics.median(
        scenario_metrics(_trace(f"{p}dl_ff_b{b}_m100"), "devlaunch")["dl_call_us"] * 1e3
        for b in sizes) for p in ("nocupti_", "")}
    # a host launch of a graph holding device-runtime code (host: G's control kernel, ff: the
    # launcher L) against one holding none (hostplain), each launched m times back to back,
    # unprofiled: the repetition's issue time a launch (medians over sizes, gate or not)
    issue = {mode: statistics.median(
        scenario_metrics(_trace(f"nocupti_dl_{mode}_b{b}_m100{g}"), "devlaunch")["dl_issue_us"]
        for b in sizes for g in ("", "_gate")) for mode in ("host", "ff", "hostplain")}
    runtime = statistics.median([issue["host"], issue["ff"]]) - issue["hostplain"]
    return {"device_launch_call_ns": call["nocupti_"],
            "cupti_device_launch_ns": call[""] - call["nocupti_"],
            "device_runtime_launch_cpu_ns": max(runtime * 1e3, 0.0)}


#: (parameter, scenario, metric, first two guesses): fitted in this order
SIMULATED = [
    ("block_overhead_ns", "nocupti_chain_gate_g1", "wall_per_rep_us", (300.0, 550.0)),
    ("acquire_retry_ns", "nocupti_chain_gate_g0", "wall_per_rep_us", (0.0, 500.0)),
    ("cupti_kernel_ns", "chain_stream_gate", "median_kernel_us", (0.0, 200.0)),
    ("cupti_graph_kernel_ns", "chain_graph_gate", "median_kernel_us", (0.0, 300.0)),
    ("launch_latency_ns", "chain_stream_gate", "submitted_to_start_us", (150.0, 600.0)),
    # the CP moving between two resident channels: two streams' dependent kernels, each
    # launch decoded after the other channel's (unprofiled: nothing else differs from one)
    ("cp_switch_ns", "nocupti_actgap_stamp_c32_A2_g100", "stream_period_us", (100.0, 400.0)),
    # CUPTI's kernel records on a dependent chain without latency timestamps (a probe), then
    # the latency timestamps' stamp: its round trip on two streams' short queues, and what it
    # adds while more than a segment queue of entries waits behind (1,000 queued kernels)
    ("cupti_release_ns", "cupti_latency_timestamps/chain_gate_n100_kern_nolat", "median_gap_us",
     (100.0, 500.0)),
    ("stamp_hold_ns", "hyperq_c8_s2_o0", "median_gap_us", (200.0, 600.0)),
    ("stamp_fetch_ns", "chain_stream_gate", "median_gap_us", (400.0, 900.0)),
    ("kickoff_ns", "chain_stream", "queued_to_submitted_us", (2000.0, 3500.0)),
    ("timestamp_hold_ns", "events_t1_g50000000", "median_gap_us", (500.0, 2000.0)),
    # a host wait ends ~2.4 us after its kernel, on the stream (sync_h0: the kernel's release
    # reaches the stream's tracking semaphore) or on an event (sync_h1: the event's release
    # behind it): the semaphore's way back to the CPU, one value for both
    ("host_write_visible_ns", ("sync_h0", "sync_h1"), "sync_return_us", (250.0, 2000.0)),
    # a graph launch's set-up on the device (its first kernel starts ~3.5 us after the call
    # returns, profiled or not, whatever the size up to 1,000 nodes): the part once the
    # walker has taken it, on launches queued behind a gate (the body graph of cond, each
    # taken as the one before completes), then the part before, from the wall time of a
    # short graph launched alone, unprofiled
    ("graph_start_ns", tuple(f"nocupti_condhost_b{b}_m1000_gate" for b in BODY_FIT_SIZES),
     "cond_iteration_us", (1000.0, 2000.0)),
    ("graph_prepare_ns", "nocupti_graph_nodes10", "wall_per_rep_us", (300.0, 900.0)),
    # the host scheduler: the PBDMA's context switch (save and load, one value each: the
    # traces give their sum) on four and eight busy channels (more than the PBDMAs: each
    # kernel costs a switch through the context port), then the poll of a channel parked off
    # the PBDMAs on eight channels waiting for 100 us kernels (a probe, profiled as the
    # validation traces are; its unprofiled twin is validated), then
    # the switch between two processes' contexts
    # (a series of scenarios: the geometric mean of model / measured over them is fitted to 1,
    # so that one value serves both, not one of them exactly; 16 and 32 channels and the
    # hyperq and fanout2 validation rows are validated, not fitted)
    ("pbdma_ctx_load_ns", tuple(f"nocupti_actgap_stamp_c32_A{a}_g100" for a in (4, 8)),
     "stream_period_us", (400.0, 600.0)),
    ("acquire_poll_ns", "cupti_latency_timestamps/hyperq_c8_s8_full", "median_gap_us",
     (200.0, 500.0)),
    # a switch away from a process that ran dry (empty kernels: its queue drains), then the
    # extra of one that still has work (20 ms kernels: its timeslice runs out)
    ("tsg_switch_ns", "procs_empty_P2", "switch_gap_us", (120000.0, 150000.0)),
    ("tsg_preempt_ns", "procs_long_P2", "switch_us", (5000.0, 30000.0)),
    # PDL (stamps, unprofiled): the dependent's launch after its primary's trigger, on chains
    # of empty kernels, stream and graph, triggering as they exit or at once (one value for
    # the four, as for the context switch above); then the dependency wait's end after the
    # primary's exit, on the early-trigger chains of 2, 5 and 50 us kernels, stream and graph
    ("pdl_launch_ns", tuple(f"nocupti_pdl_stamp_p1_t{t}_ns0_g{g}" for t in (0, 1)
                            for g in (0, 1)), "pdl_exit_period_us", (300.0, 600.0)),
    ("pdl_flush_ns", tuple(f"nocupti_pdl_stamp_p1_t1_ns{ns}_g{g}" for ns in PDL_FIT_NS
                           for g in (0, 1)), "pdl_dep_latency_us", (200.0, 500.0)),
    # ... and what CUPTI adds to that wait, on the same chains profiled
    ("cupti_flush_ns", tuple(f"pdl_stamp_p1_t1_ns{ns}_g{g}" for ns in PDL_FIT_NS
                             for g in (0, 1)), "pdl_dep_latency_us", (0.0, 150.0)),
    # a WHILE conditional node's iteration on the device (unprofiled, the control kernel's
    # stamps, bodies of 1, 2 and 4 kernels): the set-up before its body's roots are queued
    ("cond_iteration_ns", tuple(f"nocupti_cond_b{b}_m1000" for b in BODY_FIT_SIZES),
     "cond_iteration_us", (3000.0, 4500.0)),
    # ... and what CUPTI adds to it per body node (it records the body's kernels one by one
    # as each iteration launches them), profiled, on bodies of 1, 2 and 4 kernels
    ("cupti_cond_record_ns", tuple(f"cond_b{b}_m100" for b in BODY_FIT_SIZES),
     "cond_iteration_us", (1500.0, 2000.0)),
    # device graph launch (unprofiled, in-kernel stamps): a fire-and-forget launch's start
    # on the device-launch walker (its call returned -> the graph's first kernel); the
    # device runtime's set-up of a host launch of a graph holding its code (queued host
    # launches: the control kernel -> the next launch's first kernel); a tail launch's call
    # in the launching kernel (the tail self-relaunch's period); each on bodies of 1, 2 and 4
    # stamping kernels
    ("device_graph_start_ns", tuple(f"nocupti_dl_ff_b{b}_m100" for b in BODY_FIT_SIZES),
     "dl_ret_to_first_us", (500.0, 900.0)),
    ("device_runtime_start_ns",
     tuple(f"nocupti_dl_host_b{b}_m100_gate" for b in BODY_FIT_SIZES), "dl_ctrl_to_next_us",
     (3000.0, 4000.0)),
    ("tail_launch_call_ns", tuple(f"nocupti_dl_tail_b{b}_m100" for b in BODY_FIT_SIZES),
     "dl_period_us", (1000.0, 2000.0)),
]


def _secant(f, target, x0, x1, lo=0.0, steps=5, tol=0.005):
    """x with f(x) close to target (f monotonic), and f(x); x kept >= lo.

    Secant steps first (f roughly linear). Where f is a staircase (a latency that decides
    which of two events comes first moves the metric in jumps), the secant overshoots: then
    the closest pair of points seen that brackets the target is bisected, and the point
    nearest the target of all those evaluated is returned."""
    seen = {}

    def ev(x):
        if x not in seen:
            seen[x] = f(x)
        return seen[x]

    y0, y1 = ev(x0), ev(x1)
    for _ in range(steps):
        if abs(y1 - target) <= tol * abs(target):
            break
        if y1 == y0:        # a flat step: go on the same way, twice as far
            x0, x1 = x1, max(lo, x1 + 2 * (x1 - x0))
        else:
            x0, x1 = x1, max(lo, x1 + (target - y1) * (x1 - x0) / (y1 - y0))
        if x1 == x0:
            break
        y0, y1 = y1, ev(x1)
    for _ in range(steps + 1):
        best = min(seen, key=lambda x: abs(seen[x] - target))
        if abs(seen[best] - target) <= tol * abs(target):
            break
        below = [x for x in seen if seen[x] < target]
        above = [x for x in seen if seen[x] > target]
        if not below or not above:
            break
        a = min(below, key=lambda x: target - seen[x])
        b = min(above, key=lambda x: seen[x] - target)
        if abs(a - b) <= 1.0:
            break
        ev(round((a + b) / 2, 1))
    best = min(seen, key=lambda x: abs(seen[x] - target))
    return best, seen[best]


def with_value(params, name, x):
    """``params`` with parameter ``name`` at ``x`` (a PBDMA's context load and save share
    one value: the traces give their sum)."""
    params = params.with_overrides(**{name: round(x, 1)})
    if name == "pbdma_ctx_load_ns":
        params = params.with_overrides(pbdma_ctx_save_ns=round(x, 1))
    return params


def fit_simulated(params, name, scenario, metric, guesses, backend="compiled"):
    """Parameter ``name`` fitted by :func:`_secant` so that the model's ``metric`` on
    ``scenario`` meets the measured one (a tuple of scenarios: the geometric mean of model
    over measured meets 1; a probe's name: its trace). Returns (value, model, measured)."""
    series = scenario if isinstance(scenario, tuple) else None
    probe = scenario in PROBES
    measured = (1.0 if series else probe_metrics(scenario)[metric] if probe
                else measured_metrics(scenario)[metric])

    def model(x):
        p = with_value(params, name, x)
        if probe:
            return probe_metrics(scenario, p, backend)[metric]
        if series:
            ratios = [run_scenario(n, p, backend)[0][metric] / measured_metrics(n)[metric]
                      for n in series]
            return math.exp(statistics.fmean(math.log(r) for r in ratios))
        return run_scenario(scenario, p, backend)[0][metric]

    x, y = _secant(model, measured, *guesses)
    return x, y, measured


def calibrate(base="h200", backend="compiled", log=print):
    params = load(base)
    direct = direct_fit()
    params = params.with_overrides(sync_return_ns=100.0,
                                   **{k: rounded(k, v) for k, v in direct.items()})
    log("direct: " + ", ".join(f"{k}={rounded(k, v)}" for k, v in direct.items()))
    residuals = []
    for name, scenario, metric, guesses in SIMULATED:
        series = scenario if isinstance(scenario, tuple) else None
        x, y, measured = fit_simulated(params, name, scenario, metric, guesses, backend)
        params = with_value(params, name, x)
        if name == "kickoff_ns":
            # the launch call encodes, then kicks off, within its own time (the traces'
            # "queued" comes later in the call than this: the model kicks off inside it)
            params = params.with_overrides(
                launch_encode_ns=round(max(params.launch_cpu_ns - x, 0.0), 1),
                host_fast_cpu_scale=rounded("host_fast_cpu_scale", fast_vcpu_scale(x)))
        residuals.append({"parameter": name, "value": round(x, 1),
                          "scenario": " ".join(series) if series else scenario,
                          "metric": metric, "model": y, "measured": measured,
                          "rel_error": (y - measured) / measured})
        what = (f"{len(series)} scenarios {series[0]}..., {metric}: model / measured, geometric "
                f"mean" if series else f"{scenario} {metric}")
        log(f"  {name:26s} = {x:10.1f}  ({what}: model {y:.3f}, measured {measured:.3f})")
    return params, {"direct": direct, "simulated": residuals}


def write(params, residuals, path, residuals_path):
    from dataclasses import asdict
    d = asdict(params)
    with open(path, "w") as f:
        json.dump(d, f, indent=1)
        f.write("\n")
    with open(residuals_path, "w") as f:
        json.dump(residuals, f, indent=1)
        f.write("\n")
