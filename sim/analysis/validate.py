"""Validation: every calibration scenario, model against measured, metric by metric.

For each bundled scenario (``sim/analysis/scenarios.py``) the workload is simulated and the same
metrics (``sim/analysis/metrics.py``: the timeline's, and its program's ``scenario_metrics``)
are computed on the model's timeline and on the reference trace. A row is
``{scenario, metric, model, measured, rel_error}`` with
``rel_error = (model - measured) / measured``. Traces recorded with CUPTI are matched by runs
with ``profiler="cupti"``, the ``nocupti_*`` ones by runs with ``profiler="off"``.
"""

import collections
import functools
import json
import math
import re
import statistics
import time

from gpufe.sim.analysis.causes import cause_of
from gpufe.sim.analysis.metrics import metrics, scenario_metrics, GUPDATE_INTERVALS
from gpufe.sim.run import simulate
from gpufe.sim.analysis.scenarios import scenario_names, scenario_paths
from gpufe.sim.analysis.traces import read_fe_trace
from gpufe.sim.host.workload import load_workload

#: metrics compared in every scenario that has them (counts that are equal by construction,
#: such as ``kernels``, are left out)
COMPARED = ("wall_per_rep_us", "gpu_span_us", "median_gap_us", "median_kernel_us",
            "launch_api_us", "graph_launch_api_us", "event_record_api_us",
            "queued_to_submitted_us", "submitted_to_start_us", "max_concurrent",
            "channels_used")
#: metrics compared only in the programs that measure them: elsewhere they rest on one or
#: two samples (the last synchronize of a repetition, a launch delayed by the OS)
PROGRAM_METRICS = {"sync": ("sync_return_us",),
                   "copy": ("copy_h2d_gbps", "copy_d2h_gbps", "copy_d2d_gbps"),
                   "pbfull": ("launches_blocked",),
                   # fe_trace2's: their figures come from scenario_metrics (metrics.py)
                   "actgap": ("stream_period_us", "kernels_per_us", "hi_period_us",
                              "lo_period_us", "hi_chain_us", "lo_chain_us"),
                   "procs": ("timeslice_run_us", "switch_us", "switched_out_us", "run_len",
                             "switch_gap_us", "kernel_span_us", "makespan_us"),
                   "gupdate": tuple(m for m, *_ in GUPDATE_INTERVALS),
                   "pdl": ("pdl_exit_period_us", "pdl_dep_latency_us", "pdl_resident_wait_us"),
                   "threads": ("thread_launch_us", "threads_launches_per_us"),
                   "cond": ("cond_iteration_us", "cond_wall_per_iter_us"),
                   "devlaunch": ("dl_period_us", "dl_ctrl_to_next_us", "dl_first_to_ctrl_us",
                                 "dl_call_us", "dl_ret_to_first_us", "dl_wall_per_iter_us",
                                 "dl_issue_us")}


def profiler_of(name):
    return "off" if name.startswith("nocupti_") else "cupti"


def rel_error(model, measured):
    if measured == 0:
        return 0.0 if model == 0 else 1.0
    return (model - measured) / abs(measured)


#: metrics compared only in unprofiled runs: profiled, the API records time the call itself
#: (``graph_launch_api_us``), which the figure would count a second time
UNPROFILED_METRICS = frozenset({"dl_issue_us"})


def compared_metrics(name):
    from gpufe.sim.analysis.scenarios import program_of
    ms = COMPARED + PROGRAM_METRICS.get(program_of(name), ())
    if profiler_of(name) != "off":
        ms = tuple(m for m in ms if m not in UNPROFILED_METRICS)
    return ms


def compare(name, model_metrics, measured_metrics, runs=()):
    """Rows of one scenario. ``runs``: the metrics of its repeated recordings (probe
    ``third_recording``), beside the bundled trace's: a metric they have is scored against
    the median of all the runs (:func:`scored`)."""
    rows = []
    for m in compared_metrics(name):
        if m in measured_metrics and m in model_metrics:
            values = [measured_metrics[m]] + [r[m] for r in runs if r.get(m) is not None]
            rows.append(scored(name, m, model_metrics[m], values))
    return rows


def scored(name, metric, model, values):
    """A row: ``model`` against one measured value, or against several runs of the same
    program (the first the bundled one): their median, with ``runs`` (how many), ``spread``
    (least and greatest) and ``bundled`` (the first run's value). ``side``: whether the
    figure is made of host time or of the device's (:func:`side_of`)."""
    measured = statistics.median(values)
    row = {"scenario": name, "metric": metric, "model": model, "measured": measured,
           "rel_error": rel_error(model, measured), "side": side_of(name, metric)}
    if len(values) > 1:
        row.update(runs=len(values), spread=[min(values), max(values)], bundled=values[0])
    return row


#: tolerance of a row: within it, or inside its recordings' spread, a row is within bounds
TOLERANCE = 0.25

#: figures made of host time in any program: API calls' CPU time, the host's part of a
#: launch (written -> handed to the GPU), host threads' launch loops, the host's graph
#: operations (a graph's capture, instantiation, update, SetParams, destruction)
HOST_METRICS = frozenset({
    "launch_api_us", "graph_launch_api_us", "event_record_api_us", "queued_to_submitted_us",
    "thread_launch_us", "threads_launches_per_us", "gu_capture_us", "gu_instantiate_us",
    "gu_set_per_node_us", "gu_update_capture_us", "gu_update_us", "gu_destroy_us",
    "gu_reinstantiate_us", "profiler_ratio", "dl_issue_us"})
#: figures of the device alone, whatever rules the program's pace
DEVICE_METRICS = frozenset({
    "median_kernel_us", "max_concurrent", "channels_used", "submitted_to_start_us",
    "copy_h2d_gbps", "copy_d2h_gbps", "copy_d2d_gbps", "copy_h2d_bytes", "copy_d2h_bytes",
    "copy_d2d_bytes", "kernels", "copies"})


def side_of(name, metric):
    """``"host"`` for a figure made of host time: a metric of :data:`HOST_METRICS`, or any
    figure but the device's own (:data:`DEVICE_METRICS`) of a host-bound program: one the
    set recorded several times for that reason (probe ``third_recording``: its gaps, spans
    and run lengths are ruled by the host's launch rate) and the trace replays' steps (a
    PyTorch step is host calls and the kernels they wait for). Else ``"device"``."""
    if metric in HOST_METRICS:
        return "host"
    if metric in DEVICE_METRICS:
        return "device"
    return "host" if host_bound(name) else "device"


#: the programs recorded several times because the host's launch rate rules them (probe
#: third_recording); the repeats of probe host_repeats are for their host figures alone (the
#: launch and graph calls, the host threads' loops), their programs' other figures the device's
HOST_BOUND_RECORDED = re.compile(r"fanout2?_c\d+_s\d+|copy_busy[01]|procs_empty_P2|xstream_t1")


@functools.lru_cache(maxsize=None)
def host_bound(name, device="h200"):
    """Scenario ``name`` is a host-bound program (its figures are the host's pace)."""
    from gpufe.sim.analysis.replay import REPLAYS
    return name in REPLAYS or (bool(HOST_BOUND_RECORDED.fullmatch(name))
                               and bool(repeat_paths(name, device)))


def within_bounds(row):
    """A row is within bounds when its error is within :data:`TOLERANCE`, or when the model
    lies inside the spread of the row's repeated recordings (a host-bound figure the host
    itself does not repeat more closely)."""
    if abs(row["rel_error"]) <= TOLERANCE:
        return True
    spread = row.get("spread")
    return bool(spread) and spread[0] <= row["model"] <= spread[1]


#: the repeated recordings of host-bound calibration programs (probe third_recording):
#: ``<scenario>_r<N>.jsonl.gz``, and the torch2 programs' step_cost runs
#: ``steps_<program>_r<N>.json``
REPEATS = "repeats"


def repeat_paths(name, device="h200"):
    from gpufe.sim.analysis.scenarios import HERE
    return sorted((HERE / device / REPEATS).glob(f"{name}_r*.jsonl.gz"),
                  key=lambda p: int(p.name[len(name) + 2:-len(".jsonl.gz")]))


@functools.lru_cache(maxsize=None)
def repeated_metrics(name, device="h200"):
    """The metrics of each repeated recording of scenario ``name`` (none: ())."""
    from gpufe.sim.analysis.scenarios import program_of
    return tuple(all_metrics(read_fe_trace(p), program_of(name, device))
                 for p in repeat_paths(name, device))


def step_cost_runs(program, device="h200", probe=True, repeats=True):
    """Every step_cost process's result for a torch2 program: probe ``torch_profiler_cost``'s
    runs (pinned to a CPU and not) when ``probe``, then the repeated runs (probe
    third_recording) when ``repeats``; each a dict of its variants' rounds (``off_us``,
    ``on_us`` and their medians), timed in that process on one vCPU."""
    from gpufe.sim.analysis.scenarios import HERE
    paths = []
    if probe:
        paths += sorted((HERE / device / "probes" / "torch_profiler_cost")
                        .glob(f"steps_{program}*.json"))
    if repeats:
        paths += sorted((HERE / device / REPEATS).glob(f"steps_{program}_r*.json"))
    return [json.loads(p.read_text()) for p in paths]


def repeated_steps_us(program, variant, device="h200"):
    """Every round's unprofiled step (us) of a torch2 program's variant in the repeated
    step_cost runs (each a process: rounds of synchronised steps without and with the
    profiler, interleaved)."""
    return [us for run in step_cost_runs(program, device, probe=False)
            for us in run["variants"].get(variant, {}).get("off_us", ())]


def profiler_ratios(program, variant, device="h200"):
    """torch.profiler's cost as each process measured it: per step_cost run of a torch2
    program's variant, the median profiled step over the median unprofiled one."""
    return [statistics.median(v["on_us"]) / statistics.median(v["off_us"])
            for run in step_cost_runs(program, device)
            if (v := run["variants"].get(variant))]


_MEASURED = {}


def all_metrics(records, program, params=None):
    """The metrics of a timeline and the figures of its program (``scenario_metrics``, with
    the program's ``params``: by default a trace header's own): what a scenario compares,
    the same code on the reference trace and on the model's timeline. The timeline's metrics
    leave out kernels of device-launched graphs, which CUPTI does not record (the program's
    figures, from in-kernel stamps, take them)."""
    seen = [r for r in records if not r.get("device_launched")]
    return {**metrics(seen), **scenario_metrics(records, program, params)}


@functools.lru_cache(maxsize=None)
def program_params(name, device="h200"):
    """The fe_trace program parameters of a bundled scenario: its trace header's, the first
    line of the trace (not the whole trace read again for them)."""
    import gzip
    with gzip.open(scenario_paths(name, device)[1], "rt", encoding="utf-8") as f:
        return json.loads(f.readline()).get("params") or {}


def measured_metrics(name, device="h200"):
    key = (name, device)
    if key not in _MEASURED:
        from gpufe.sim.analysis.scenarios import program_of
        records = read_fe_trace(scenario_paths(name, device)[1])
        _MEASURED[key] = all_metrics(records, program_of(name, device))
    return _MEASURED[key]


def recorded_host_scale(params, launch_api_us):
    """``host_cpu_scale`` of the vCPU a trace ran on, told by its median ``cudaLaunchKernel``
    (profiled): the reference machine's vCPUs run at two speeds (probe ``run_to_run``), the
    set is calibrated on a slow one, and a trace whose launches are nearer (geometrically) the
    set's launch time on a fast vCPU than on a slow one ran on a fast one. Two speeds only: the
    launch rows are still compared, and the trace's own time is not taken."""
    if launch_api_us is None:
        return 1.0
    slow = params.launch_call_ns(1.0) / 1e3
    fast = params.launch_call_ns(params.host_fast_cpu_scale) / 1e3
    return params.host_fast_cpu_scale if launch_api_us < math.sqrt(slow * fast) else 1.0


@functools.lru_cache(maxsize=None)
def _launches_capture(name, device):
    """Whether most of a trace's launch calls were captured (no kernel of theirs ran): their
    time is a capture's, which tells nothing of the vCPU."""
    records = read_fe_trace(scenario_paths(name, device)[1])
    ran = {r["corr"] for r in records if r["kind"] == "kernel"}
    launches = [r["corr"] for r in records if r["kind"] == "runtime"
                and r["name"].startswith("cudaLaunchKernel")]
    return 2 * sum(1 for c in launches if c in ran) < len(launches)


#: fe_trace2 threads: the series' run of one launching thread, whose launch loop tells the
#: speed of the host the series was recorded on (unprofiled: no launch records)
THREADS_ONE = "nocupti_threads_T1_sh0"
#: the profiled series' one-thread run: its launch records tell its vCPU's speed
THREADS_ONE_PROFILED = "threads_T1_sh0"


def threads_host_scale(params, device="h200", profiled=False):
    """The host speed of fe_trace2's threads series: unprofiled, the scale at which the
    model's unprofiled launch takes the one-thread run's launch loop (3.5 us on the H200's
    host that day, against the set's 4.4); profiled, the speed of the vCPU that the
    one-thread run's launch calls tell (:func:`recorded_host_scale`: a slow one). The other
    runs (2 to 8 threads) are the predictions."""
    if profiled:
        one = measured_metrics(THREADS_ONE_PROFILED, device).get("launch_api_us")
        return recorded_host_scale(params, one)
    one = measured_metrics(THREADS_ONE, device)["thread_launch_us"] * 1e3
    return params.host_scale_for_launch(one, profiled=False)


def _launch_told(name, device="h200"):
    """The median ``cudaLaunchKernel`` (us, profiled) that tells the vCPU scenario ``name``'s
    trace ran on: its own, or the median of its repeated recordings'; None where it has no
    launch records, or where they are captures (they tell nothing of the vCPU)."""
    launch = measured_metrics(name, device).get("launch_api_us")
    if launch is not None and _launches_capture(name, device):
        launch = None
    runs = [r["launch_api_us"] for r in repeated_metrics(name, device)
            if r.get("launch_api_us") is not None]
    if launch is not None and runs:
        # scored against the median of its runs: the host of the median run's launches
        launch = statistics.median([launch] + runs)
    return launch


def _graph_launch_told(name, device="h200"):
    """The median ``cudaGraphLaunch`` (us, profiled) that tells the vCPU scenario ``name``'s
    trace ran on where no plain launch does: its own, or the median of its repeated
    recordings' (the figure its row is scored against); None where it has none."""
    graph = measured_metrics(name, device).get("graph_launch_api_us")
    runs = [r["graph_launch_api_us"] for r in repeated_metrics(name, device)
            if r.get("graph_launch_api_us") is not None]
    if graph is not None and runs:
        graph = statistics.median([graph] + runs)
    return graph


def scenario_params(name, params, device="h200"):
    """``params`` for a run of scenario ``name``: at the speed of the vCPU its trace was
    recorded on (:func:`recorded_host_scale`; unprofiled traces have no launch records, and
    traces whose launches are captures tell nothing: both keep the set's, or take the speed
    their graph launches tell, :func:`run_scenario`); a scenario recorded several times, at
    the speed its runs' median launch tells."""
    from gpufe.sim.analysis.scenarios import program_of
    if program_of(name, device) == "threads":
        scale = threads_host_scale(params, device, profiler_of(name) == "cupti")
        return params.with_overrides(host_cpu_scale=params.host_cpu_scale * scale)
    scale = recorded_host_scale(params, _launch_told(name, device))
    if scale == 1.0:
        return params
    return params.with_overrides(host_cpu_scale=params.host_cpu_scale * scale)


def graph_host_scale(params, measured_us, model_us):
    """``host_cpu_scale`` of the vCPU a profiled trace without plain launches ran on, told by
    its median ``cudaGraphLaunch`` (us) as :func:`recorded_host_scale` tells it by plain ones:
    against the model's at the set's speed (``model_us``), whose time all follows the CPU (the
    fixed part, CUPTI's record of every node, the driver's per-node part; the kickoff's few
    hundred ns aside), a call nearer (geometrically) the fast vCPU's time ran on one. The
    H200's 300-node PDL graphs launch in 189-218 us in some processes and 307-490 in others
    (the model: 374 on a slow vCPU)."""
    if measured_us is None or model_us is None:
        return 1.0
    fast = params.host_fast_cpu_scale
    return fast if measured_us < model_us * math.sqrt(fast) else 1.0


def run_scenario(name, params, backend="compiled", device="h200"):
    """Model metrics of one scenario (run with :func:`scenario_params`), and the run's wall
    time (:func:`run_scenario_at` also says at what speed it ran)."""
    model, wall, _ = run_scenario_at(name, params, backend, device)
    return model, wall


def run_scenario_at(name, params, backend="compiled", device="h200"):
    """:func:`run_scenario`, and the parameters the model ran with. A profiled scenario whose
    trace has graph launches and no plain launch to tell its vCPU by runs at the set's speed
    first, then again at the fast vCPU's if its graph launches (the median of its recordings'
    where it has several) tell one (:func:`graph_host_scale`)."""
    from gpufe.sim.analysis.scenarios import program_of
    w = load_workload(scenario_paths(name, device)[0])
    p = scenario_params(name, params, device)
    t0 = time.perf_counter()

    def run(p):
        r = simulate(w, p, backend=backend, profiler=profiler_of(name))
        return all_metrics(r.records, program_of(name, device), program_params(name, device))

    model = run(p)
    graph_api = _graph_launch_told(name, device)
    if (p is params and graph_api is not None and profiler_of(name) == "cupti"
            and _launch_told(name, device) is None):
        scale = graph_host_scale(params, graph_api, model.get("graph_launch_api_us"))
        if scale != 1.0:
            p = params.with_overrides(host_cpu_scale=params.host_cpu_scale * scale)
            model = run(p)
    return model, time.perf_counter() - t0, p


def validation_names(device="h200"):
    """Every validation scenario: the bundled fe_trace scenarios, then the trace replays
    (:data:`gpufe.sim.analysis.replay.REPLAYS`)."""
    from gpufe.sim.analysis.replay import REPLAYS
    return scenario_names(device) + list(REPLAYS)


def validate(params, names=None, backend="compiled", device="h200", log=None):
    """All rows for ``names`` (default: every validation scenario)."""
    from gpufe.sim.analysis.replay import REPLAYS, replay_rows
    rows = []
    for name in names or validation_names(device):
        t0 = time.perf_counter()
        if name in REPLAYS:
            got = replay_rows(name, params, backend, device)
            wall, fast = time.perf_counter() - t0, False
        else:
            model, wall, ran = run_scenario_at(name, params, backend, device)
            got = compare(name, model, measured_metrics(name, device),
                          repeated_metrics(name, device))
            fast = ran is not params
        rows += got
        if log:
            worst = max((abs(r["rel_error"]) for r in got), default=0)
            log(f"  {name:28s} {len(got):2d} metrics, worst {100 * worst:6.1f}%  "
                f"({wall:.1f} s{', fast vCPU' if fast else ''})")
    return rows


def error_summary(rows):
    """Median and greatest |error|, the worst row, and ``over_25pct``: the rows out of
    bounds (:func:`within_bounds`); ``in_spread``: rows above the tolerance inside their
    recordings' spread; ``named``: rows out of bounds whose cause is known
    (:func:`gpufe.sim.analysis.causes.cause_of`)."""
    errs = [abs(r["rel_error"]) for r in rows]
    if not errs:
        return {"rows": 0}
    worst = max(rows, key=lambda r: abs(r["rel_error"]))
    return {"rows": len(rows), "median_abs_rel_error": statistics.median(errs),
            "max_abs_rel_error": max(errs), "worst": f"{worst['scenario']} {worst['metric']}",
            "over_25pct": sum(1 for r in rows if not within_bounds(r)),
            "in_spread": sum(1 for r in rows
                             if abs(r["rel_error"]) > TOLERANCE and within_bounds(r)),
            "named": sum(1 for r in rows if named_cause(r) is not None)}


def named_cause(row):
    """The known cause of a row out of bounds (:mod:`gpufe.sim.analysis.causes`), or None
    (also for a row within bounds)."""
    return None if within_bounds(row) else cause_of(row)


def side_summaries(rows):
    """:func:`error_summary` of the device-side and of the host-side rows apart."""
    return {side: error_summary([r for r in rows if r.get("side", "device") == side])
            for side in ("device", "host")}


def _summary_line(label, s):
    line = (f"{label}{s['rows']} comparisons: median |error| "
            f"{100 * s['median_abs_rel_error']:.1f}%, max {100 * s['max_abs_rel_error']:.1f}% "
            f"({s['worst']}), {s['over_25pct']} above 25%")
    if s.get("named"):
        line += f", {s['named']} of them with a named cause"
    if s.get("in_spread"):
        line += f" ({s['in_spread']} more inside their recordings' spread)"
    return line


def format_table(rows):
    out = [f"{'scenario':28s} {'metric':24s} {'model':>14s} {'measured':>14s} {'error':>8s}"]
    named = collections.Counter()
    for r in rows:
        line = (f"{r['scenario']:28s} {r['metric']:24s} {r['model']:14,.3f} "
                f"{r['measured']:14,.3f} {100 * r['rel_error']:+7.1f}%")
        if r.get("runs"):
            lo, hi = r["spread"]
            line += f"  median of {r['runs']} runs, {lo:,.3f} to {hi:,.3f}"
            if abs(r["rel_error"]) > TOLERANCE and within_bounds(r):
                line += " (inside)"
        if (cause := named_cause(r)) is not None:
            line += f"  [{cause.key}]"
            named[cause] += 1
        out.append(line)
    s = error_summary(rows)
    if s["rows"]:
        out.append(_summary_line("", s))
        for side, ss in side_summaries(rows).items():
            if ss["rows"] and ss["rows"] != s["rows"]:
                out.append(_summary_line(f"  {side}-side: ", ss))
    out += [f"  [{c.key}] {c.text} ({n} rows)" for c, n in named.items()]
    return "\n".join(out)


def write_json(rows, path):
    """The rows (each out of bounds with a known cause carrying its key, ``cause``), their
    summary and each side's."""
    rows = [dict(r, cause=c.key) if (c := named_cause(r)) is not None else r for r in rows]
    with open(path, "w") as f:
        json.dump({"rows": rows, "summary": error_summary(rows),
                   "sides": side_summaries(rows)}, f, indent=1)


def figure(rows):
    """Model against measured, one point per row (coloured by metric), on log axes so that
    nanosecond, microsecond and millisecond values all show, over the +-25% band and the
    diagonal (drawn beneath the points: the band would hide most of them). Rows with a zero
    or negative value cannot be placed on log axes and are left out (the title says how
    many). Returns the matplotlib figure."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    pts = [(r["measured"], r["model"], r["metric"]) for r in rows
           if r["measured"] > 0 and r["model"] > 0]
    fig, ax = plt.subplots(figsize=(7, 7))
    ax.set_xscale("log")
    ax.set_yscale("log")
    if pts:
        lo = min(min(p[0], p[1]) for p in pts) / 2
        hi = max(max(p[0], p[1]) for p in pts) * 2
    else:
        lo, hi = 0.1, 10.0
    # beneath everything: the band, then the diagonal, then the points
    ax.fill_between([lo, hi], [lo * 0.75, hi * 0.75], [lo * 1.25, hi * 1.25], color="0.88",
                    lw=0, zorder=0, label="model within 25%")
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8, zorder=1)
    cmap = plt.get_cmap("tab20")
    for i, m in enumerate(sorted({p[2] for p in pts})):
        xs = [p[0] for p in pts if p[2] == m]
        ys = [p[1] for p in pts if p[2] == m]
        ax.scatter(xs, ys, s=14, color=cmap(i % 20), label=m, zorder=2)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.set_xlabel("measured (H200; us, GB/s or count, by metric)")
    ax.set_ylabel("model")
    s = error_summary(rows)
    left_out = len(rows) - len(pts)
    ax.set_title(f"gpufe vs H200: {s['rows']} comparisons"
                 + (f", median |error| {100 * s['median_abs_rel_error']:.1f}%" if rows else "")
                 + (f"\n({left_out} with a zero value not shown)" if left_out else ""),
                 fontsize=10)
    ax.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    return fig


def plot(rows, path):
    """Writes :func:`figure` to ``path`` (PNG, or any format matplotlib knows by its
    extension)."""
    fig = figure(rows)
    import matplotlib.pyplot as plt
    try:
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)
