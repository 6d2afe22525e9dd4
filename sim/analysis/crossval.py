"""Cross-validation: each family's fit judged on a size it did not see.

A *family* is a set of H200 recordings of one program at several sizes of one thing (graph
nodes, host threads, busy channels, kernel length, body kernels) and the parameters the
calibration fits on it. For each family, :func:`cv_rows` refits those parameters with the
calibration's own fit (``calibrate.py``: the same line, series or secant), on every size
the set has but the largest, and predicts the largest; then the same leaving out the
smallest. The predicted scenarios' rows are the validation's (``validate.compare``), marked
``cv`` ("largest" or "smallest"), ``family``, ``fitted_on`` (the sizes kept) and ``refit``
(each refitted parameter's value). Every other parameter keeps the set's value.

A family whose left-out rows are far off where its fitted rows are close says that the
mechanism behind its parameters is missing: a constant per unit stands where the cost is not
linear, or the cost sits in the wrong block.

``gpufe validate --cv`` prints them (``--family`` picks some).
"""

from dataclasses import dataclass
import re

from gpufe.sim.analysis import calibrate as cal
from gpufe.sim.analysis.scenarios import scenario_names


@dataclass(frozen=True)
class Family:
    """``sizes``: every size the set has, ascending; ``pattern``: a regular expression with
    ``{size}`` where a scenario name holds the size (the scenarios scored at that size);
    ``refit(params, sizes, backend)``: the family's parameters fitted on ``sizes`` only."""
    name: str
    what: str
    sizes: tuple
    pattern: str
    refit: object
    parameters: tuple

    def scenarios(self, size, names=None):
        rx = re.compile(self.pattern.format(size=size) + "$")
        return [n for n in (names or scenario_names()) if rx.match(n)]


def _gupdate(params, sizes, backend):
    return cal.graph_update_fit(params.cupti_call_gap_ns, params.host_fast_cpu_scale, sizes)


def _threads(params, sizes, backend):
    out = cal.threads_fit(sizes)
    out["lock_wake_ns"] = cal.lock_wake_ns(params.cupti_launch_ns + params.cupti_call_gap_ns,
                                           sizes)
    return out


def _graph_nodes(params, sizes, backend):
    # the unprofiled launch's per-node part: the issue time's slope against nodes
    issue = [(n, cal._issue_median_ns(cal._trace(f"nocupti_graph_nodes{n}"))) for n in sizes]
    return {"graph_launch_per_node_ns": max(cal._line(issue)[1], 0.0)}


def _series(*fits):
    """A refit of simulated parameters, each on a series of scenarios (``{size}`` in the
    name), in the calibration's order; each fit starts from the set's value and 1.25 times
    it."""
    def refit(params, sizes, backend):
        out = {}
        for name, pattern, metric in fits:
            x0 = getattr(params, name)
            series = tuple(n for s in sizes for n in _expand(pattern.replace("{size}", str(s))))
            x, _, _ = cal.fit_simulated(params, name, series, metric,
                                        (x0, x0 * 1.25 + 10.0), backend)
            params = cal.with_value(params, name, x)
            out[name] = x
        return out
    return refit


def _direct_then(direct, series):
    """A refit of parameters read straight off the kept sizes' traces (``direct(sizes)``, as
    the calibration's direct stage), then of simulated ones (``series``) on top of them."""
    def refit(params, sizes, backend):
        out = {k: cal.rounded(k, x) for k, x in direct(sizes).items()}
        return {**out, **series(params.with_overrides(**out), sizes, backend)}
    return refit


def _expand(name):
    """``a_g{0,1}`` -> a_g0, a_g1 (the scenario names of a size)."""
    m = re.search(r"\{([^}]*)\}", name)
    if not m:
        return [name]
    return [n for v in m.group(1).split(",")
            for n in _expand(name[:m.start()] + v + name[m.end():])]


FAMILIES = [
    Family("gupdate", "graph nodes n", cal.GUPDATE_FIT_SIZES,
           r"(nocupti_)?gupdate_n{size}", _gupdate,
           ("graph_cache_nodes", "graph_set_params_cpu_ns", "graph_update_cpu_ns",
            "graph_update_per_node_ns", "graph_update_miss_ns", "graph_exec_destroy_cpu_ns",
            "graph_exec_destroy_per_node_ns", "graph_exec_destroy_miss_ns",
            "graph_reinstantiate_per_node_ns", "graph_reinstantiate_miss_ns",
            "graph_upload_per_node_ns", "graph_upload_miss_ns", "capture_miss_ns",
            "cupti_graph_update_node_ns", "cupti_graph_set_params_ns",
            "cupti_graph_destroy_node_ns", "cupti_graph_reinstantiate_node_ns",
            "capture_call_cpu_ns", "cupti_captured_call_ns", "cupti_captured_gap_ns",
            "begin_capture_cpu_ns",
            "end_capture_cpu_ns", "capture_first_cpu_ns", "capture_grow_per_node_ns")),
    Family("threads", "host threads T", cal.THREADS_FIT_SIZES,
           r"(nocupti_)?threads_T{size}_sh[01]", _threads,
           ("thread_contention_ns", "thread_contention_per_thread_ns", "lock_wake_ns")),
    Family("graph_nodes", "graph nodes", (10, 100, 1000),
           r"nocupti_graph_nodes{size}", _graph_nodes, ("graph_launch_per_node_ns",)),
    Family("actgap", "busy channels A", (4, 8, 16, 32),
           r"(nocupti_)?actgap(_stamp)?_c32_A{size}_g100",
           _series(("pbdma_ctx_load_ns", "nocupti_actgap_stamp_c32_A{size}_g100",
                    "stream_period_us")),
           ("pbdma_ctx_load_ns", "pbdma_ctx_save_ns")),
    Family("hyperq", "streams s", (2, 8, 16, 32, 64),
           r"hyperq_c\d+_s{size}_o0",
           _series(("stamp_hold_ns", "hyperq_c8_s{size}_o0", "median_gap_us")),
           ("stamp_hold_ns",)),
    Family("pdl", "kernel length ns", cal.PDL_FIT_NS,
           r"(nocupti_)?pdl_stamp_p\d_t\d_ns{size}_g\d",
           _series(("pdl_flush_ns", "nocupti_pdl_stamp_p1_t1_ns{size}_g{0,1}",
                    "pdl_dep_latency_us")),
           ("pdl_flush_ns",)),
    Family("body", "body kernels b", cal.BODY_FIT_SIZES,
           r"(nocupti_)?(cond|condhost|dl_ff|dl_host|dl_hostplain|dl_tail|dl_tailff)"
           r"_b{size}_m\d+(_gate)?",
           _direct_then(cal.device_launch_fit, _series(
               ("graph_start_ns", "nocupti_condhost_b{size}_m1000_gate", "cond_iteration_us"),
               ("cond_iteration_ns", "nocupti_cond_b{size}_m1000", "cond_iteration_us"),
               ("cupti_cond_record_ns", "cond_b{size}_m100", "cond_iteration_us"),
               ("device_graph_start_ns", "nocupti_dl_ff_b{size}_m100", "dl_ret_to_first_us"),
               ("device_runtime_start_ns", "nocupti_dl_host_b{size}_m100_gate",
                "dl_ctrl_to_next_us"),
               ("tail_launch_call_ns", "nocupti_dl_tail_b{size}_m100", "dl_period_us"))),
           ("device_launch_call_ns", "cupti_device_launch_ns",
            "device_runtime_launch_cpu_ns", "graph_start_ns",
            "cond_iteration_ns", "cupti_cond_record_ns", "device_graph_start_ns",
            "device_runtime_start_ns", "tail_launch_call_ns")),
]


def family(name):
    for f in FAMILIES:
        if f.name == name:
            return f
    raise KeyError(f"no cross-validation family {name!r}; one of "
                   f"{', '.join(f.name for f in FAMILIES)}")


def cv_rows(params, families=None, backend="compiled", device="h200", log=None):
    """The cross-validated rows of ``families`` (default: all), each left-out side in
    turn."""
    from gpufe.sim.analysis import validate as v
    rows = []
    names = scenario_names(device)
    for fam in families or FAMILIES:
        for side, left in (("largest", fam.sizes[-1]), ("smallest", fam.sizes[0])):
            kept = tuple(s for s in fam.sizes if s != left)
            refit = fam.refit(params, kept, backend)
            fitted = params
            for k, x in refit.items():
                fitted = cal.with_value(fitted, k, cal.rounded(k, x))
            predicted = fam.scenarios(left, names)
            got = v.validate(fitted, predicted, backend=backend, device=device)
            for r in got:
                r.update(cv=side, family=fam.name, fitted_on=list(kept),
                         refit={k: cal.rounded(k, x) for k, x in refit.items()})
            rows += got
            if log:
                s = v.error_summary(got)
                log(f"  {fam.name:12s} without {side:8s} ({fam.what} {left}; fitted on "
                    f"{', '.join(map(str, kept))}): {len(predicted)} scenarios, "
                    f"{s['rows']} rows, median |error| "
                    f"{100 * s.get('median_abs_rel_error', 0):.1f}%, "
                    f"{s.get('over_25pct', 0)} above 25%")
    return rows
