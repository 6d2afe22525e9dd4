"""The one-screen summary of a run."""

from gpufe.sim.analysis.timeline import digest


def print_summary(result, outputs=None, out=print):
    """A run's key figures; from its records, or from ``result.digest`` where the run
    streamed its timeline (the same figures)."""
    d = result.digest if result.digest is not None else digest(result.records)
    s = d.summary()
    st = result.stats
    w = result.workload
    out(f"gpufe run: {w['name']}  (params {result.params.name}, "
        f"max_connections {result.max_connections}, backend {result.backend})")
    copies = sum(n for n, _ in d.copies.values())
    out(f"  API calls {d.runtime_calls}, kernels {s['kernels']}, copies {copies}, "
        f"launches that blocked {result.blocked_launches}")
    rows = [("wall per repetition", "wall_per_rep_us", "us"),
            ("GPU span (first start to last end)", "gpu_span_us", "us"),
            ("median kernel duration", "median_kernel_us", "us"),
            ("median gap between kernels of a stream", "median_gap_us", "us"),
            ("median launch API time", "launch_api_us", "us"),
            ("median graph launch API time", "graph_launch_api_us", "us"),
            ("median submitted -> start", "submitted_to_start_us", "us"),
            ("most kernels running at once", "max_concurrent", ""),
            ("channels used", "channels_used", "")]
    for label, key, unit in rows:
        if key in s:
            v = s[key]
            out(f"  {label:40s} {v:12.3f} {unit}" if isinstance(v, float)
                else f"  {label:40s} {v:12d} {unit}")
    kinds = {1: "H2D", 2: "D2H", 8: "D2D"}
    for kind, label in kinds.items():
        if kind in d.copies:
            n, big = d.copies[kind]
            dur = max(big["end"] - big["start"], 1)
            out(f"  {label} copies: {n}; largest {big['bytes']} B in {dur / 1e3:.2f} us "
                f"({big['bytes'] / dur:.1f} GB/s)")
    end = d.end
    out(f"  simulated {end / 1e3:.1f} us: {st['rtl_cycles']} RTL cycles stepped, "
        f"{st['jumps']} jumps over {st['jumped_ns'] / 1e3:.1f} us idle; "
        f"wall {result.wall_s:.2f} s ({s['kernels'] / max(result.wall_s, 1e-9):.0f} "
        f"launches/s)")
    for name, path in (outputs or {}).items():
        if path:
            out(f"  {name}: {path}")
