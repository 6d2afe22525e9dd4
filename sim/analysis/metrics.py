"""Metrics of a timeline, computed by the same code on measured and simulated traces.

Every metric is a median unless its name says otherwise; times in us. Where the trace marks
repetitions (``rep_begin``/``rep_end``), only what starts inside them counts: warm-ups and
one-off costs (the first launch loads the module) stay out. Medians of fewer than
:data:`MIN_SAMPLES` values are not reported, except wall time and GPU span per repetition. A metric that the trace
has no data for is left out (a graph-only trace has no stream gaps; a Kineto trace has no
channels or queued/submitted times).
"""

import bisect
import statistics

#: metric -> what it is (units in the name)
METRICS = {
    "wall_per_rep_us": "wall time of a repetition, rep_begin to rep_end mark",
    "gpu_span_us": "first kernel/copy start to last end, per repetition when marked",
    "kernels": "kernels in the trace (count)",
    "median_gap_us": "gap between consecutive kernels of a stream (start - previous end)",
    "median_kernel_us": "kernel duration",
    "launch_api_us": "cudaLaunchKernel CPU time",
    "graph_launch_api_us": "cudaGraphLaunch CPU time",
    "event_record_api_us": "cudaEventRecord CPU time",
    "queued_to_submitted_us": "kernel written into the command buffer -> handed to the GPU",
    "submitted_to_start_us": "kernel handed to the GPU -> started",
    "queued_to_start_us": "kernel written into the command buffer -> started",
    "max_concurrent": "most kernels running at once (count)",
    "channels_used": "hardware channels that ran kernels or copies (count)",
    "launches_blocked": "launch calls that blocked for space (count; > 50 us and 10x median)",
    "copy_h2d_gbps": "bandwidth of the largest host-to-device copy (GB/s)",
    "copy_d2h_gbps": "bandwidth of the largest device-to-host copy (GB/s)",
    "copy_d2d_gbps": "bandwidth of the largest device-to-device copy (GB/s)",
    "sync_return_us": "kernel end (or the call, if later) -> the synchronize call returns",
}

_COPY = {1: "copy_h2d_gbps", 2: "copy_d2h_gbps", 8: "copy_d2d_gbps"}
BLOCKED_NS = 50_000


#: medians of fewer samples are not reported (one launch delayed by the OS is not a figure)
MIN_SAMPLES = 5


def _median_us(values):
    return statistics.median(values) / 1e3 if len(values) >= MIN_SAMPLES else None


def _rep_windows(records):
    begins = [r["t"] for r in records if r["kind"] == "meta" and r["what"] == "rep_begin"]
    ends = [r["t"] for r in records if r["kind"] == "meta" and r["what"] == "rep_end"]
    return list(zip(begins, ends))


def _calls(records, prefix):
    return [r for r in records if r["kind"] == "runtime" and r["name"].startswith(prefix)]


def metrics(records):
    """The metrics of a timeline: {name: value}, in the order of :data:`METRICS`."""
    out = {}
    reps = _rep_windows(records)
    if reps:
        inside = lambda t: any(b <= t <= e for b, e in reps)
        records = [r for r in records if r["kind"] == "meta" or inside(r["start"])]
    ks = sorted((r for r in records if r["kind"] == "kernel"), key=lambda r: r["start"])
    copies = [r for r in records if r["kind"] == "memcpy"]
    work = sorted(ks + copies, key=lambda r: r["start"])
    walls = [e - b for b, e in reps]
    out["wall_per_rep_us"] = statistics.median(walls) / 1e3 if walls else None
    if work:
        spans = []
        for b, e in reps or [(None, None)]:
            inside = [w for w in work if b is None or b <= w["start"] <= e]
            if inside:
                spans.append(max(w["end"] for w in inside) - inside[0]["start"])
        out["gpu_span_us"] = statistics.median(spans) / 1e3 if spans else None
    out["kernels"] = len(ks)
    if ks:
        by_stream = {}
        for k in ks:
            if not k.get("graph_id"):
                by_stream.setdefault(k["stream"], []).append(k)
        gaps = [b["start"] - a["end"] for lst in by_stream.values()
                for a, b in zip(lst, lst[1:])]
        graph_ks = {}
        for k in ks:
            if k.get("graph_id"):
                graph_ks.setdefault((k["graph_id"], k["stream"]), []).append(k)
        gaps += [b["start"] - a["end"] for lst in graph_ks.values()
                 for a, b in zip(lst, lst[1:])]
        out["median_gap_us"] = _median_us(gaps)
        out["median_kernel_us"] = _median_us([k["end"] - k["start"] for k in ks])
    launches = _calls(records, "cudaLaunchKernel")
    out["launch_api_us"] = _median_us([r["end"] - r["start"] for r in launches])
    out["graph_launch_api_us"] = _median_us([r["end"] - r["start"]
                                             for r in _calls(records, "cudaGraphLaunch")])
    out["event_record_api_us"] = _median_us([r["end"] - r["start"]
                                             for r in _calls(records, "cudaEventRecord")])
    streamed = [k for k in ks if k.get("queued") and k.get("submitted")]
    out["queued_to_submitted_us"] = _median_us([k["submitted"] - k["queued"] for k in streamed])
    out["submitted_to_start_us"] = _median_us([k["start"] - k["submitted"] for k in streamed])
    out["queued_to_start_us"] = _median_us([k["start"] - k["queued"] for k in streamed])
    if ks:
        out["max_concurrent"] = max_concurrent(ks)
    chans = {w["channel"] for w in work if w.get("channel", -1) >= 0}
    if chans:
        out["channels_used"] = len(chans)
    if launches:
        durs = [r["end"] - r["start"] for r in launches]
        limit = max(BLOCKED_NS, 10 * statistics.median(durs))
        out["launches_blocked"] = sum(1 for d in durs if d > limit)
    for kind, name in _COPY.items():
        cs = [c for c in copies if c["copy_kind"] == kind]
        if cs:
            big = max(cs, key=lambda c: (c["bytes"], -c["start"]))
            out[name] = big["bytes"] / max(big["end"] - big["start"], 1)
    out["sync_return_us"] = _median_us(_sync_returns(records, ks))
    return {k: out[k] for k in METRICS if out.get(k) is not None}


def max_concurrent(jobs):
    """Most of ``jobs`` (records with start and end) running at once."""
    edges = sorted([(j["start"], 1) for j in jobs] + [(j["end"], -1) for j in jobs])
    run = best = 0
    for _, d in edges:
        run += d
        best = max(best, run)
    return best


def _sync_returns(records, ks):
    """For each host synchronize call that waited for a kernel: its return minus the later of
    the call's start and the end of the last kernel that ended before it returned."""
    ends = sorted(k["end"] for k in ks)
    out = []
    for r in records:
        if r["kind"] == "runtime" and "Synchronize" in r["name"]:
            i = bisect.bisect_right(ends, r["end"]) - 1
            if i >= 0:
                out.append(r["end"] - max(ends[i], r["start"]))
    return out


def format_metrics(values):
    lines = []
    for k, v in values.items():
        shown = f"{v:,.3f}" if isinstance(v, float) else f"{v:,d}"
        lines.append(f"  {k:24s} {shown:>14s}   {METRICS[k]}")
    return "\n".join(lines)
