"""The summary of a run (``gpufe run``; ``--json`` for the same figures as JSON).

Every figure about the timeline is one of its metrics (``metrics.py``, the one definition,
the numbers ``gpufe metrics`` prints for the timeline the run writes); the rest is what the
simulator did to get them (RTL cycles stepped, jumps over idle time, wall time), which is
not in the timeline.
"""

import json

from gpufe.sim.analysis.metrics import COPY_KIND_NAMES, format_value, metrics

#: metric -> label of its row in the text summary, in the order shown
ROWS = {
    "wall_per_rep_us": "wall per repetition",
    "gpu_span_us": "GPU span (first start to last end)",
    "median_kernel_us": "median kernel duration",
    "median_gap_us": "median gap between kernels of a stream",
    "launch_api_us": "median launch API time",
    "graph_launch_api_us": "median graph launch API time",
    "event_record_api_us": "median event record API time",
    "queued_to_submitted_us": "median queued -> submitted",
    "submitted_to_start_us": "median submitted -> start",
    "queued_to_start_us": "median queued -> start",
    "sync_return_us": "median kernel end -> synchronize returns",
    "max_concurrent": "most kernels running at once",
    "channels_used": "channels used",
}
#: metric -> label on the counts line
COUNTS = {"api_calls": "API calls", "kernels": "kernels", "copies": "copies",
          "launches_blocked": "launches that blocked"}
#: the metrics shown elsewhere: the repetitions line, a line per copy kind, the simulated time
OTHERS = ("repetitions", "trace_us") + tuple(f"copy_{k}_{what}" for k in COPY_KIND_NAMES.values()
                                              for what in ("bytes", "gbps"))


def run_figures(result, outputs=None):
    """A run's summary as a dict (what ``gpufe run --json`` prints): the run, its metrics,
    the simulator's work, and the files written."""
    m = result.digest.metrics() if result.digest is not None else metrics(result.records)
    st = result.stats
    return {"workload": result.workload["name"], "params": result.params.name,
            "max_connections": result.max_connections, "backend": result.backend,
            "metrics": m,
            "simulator": {"rtl_cycles": st["rtl_cycles"], "jumps": st["jumps"],
                          "jumped_us": st["jumped_ns"] / 1e3, "wall_s": result.wall_s},
            "outputs": {name: str(path) for name, path in (outputs or {}).items() if path}}


def summary_lines(fig):
    """The text summary of :func:`run_figures`: each metric as ``gpufe metrics`` shows it."""
    m, sim = fig["metrics"], fig["simulator"]
    v = lambda key: format_value(m[key])
    lines = [f"gpufe run: {fig['workload']}  (params {fig['params']}, max_connections "
             f"{fig['max_connections']}, backend {fig['backend']})"]
    if "repetitions" in m:
        lines.append(f"  repetitions {v('repetitions')} (rep_begin to rep_end marks): the "
                     f"figures count only what starts inside them")
    lines.append("  " + ", ".join(f"{label} {v(key)}" for key, label in COUNTS.items()
                                  if key in m))
    for key, label in ROWS.items():
        if key in m:
            unit = "us" if key.endswith("_us") else ""
            lines.append(f"  {label:40s} {v(key):>14s} {unit}".rstrip())
    for kind in COPY_KIND_NAMES.values():
        if f"copy_{kind}_bytes" in m:
            lines.append(f"  largest {kind.upper()} copy: {v(f'copy_{kind}_bytes')} B at "
                         f"{v(f'copy_{kind}_gbps')} GB/s")
    simulated = f"simulated {v('trace_us')} us: " if "trace_us" in m else ""
    lines.append(f"  {simulated}{sim['rtl_cycles']:,d} RTL cycles stepped, {sim['jumps']:,d} "
                 f"jumps over {sim['jumped_us']:,.1f} us idle; wall {sim['wall_s']:.2f} s")
    for name, path in fig["outputs"].items():
        lines.append(f"  {name}: {path}")
    return lines


def print_summary(result, outputs=None, out=print, as_json=False):
    """Print a run's summary: text, or with ``as_json`` the same figures as one JSON
    object."""
    fig = run_figures(result, outputs)
    if as_json:
        out(json.dumps(fig, indent=1))
        return
    for line in summary_lines(fig):
        out(line)
