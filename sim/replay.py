"""Replay of a profiler trace: turn a recorded timeline into a workload and simulate it.

The workload keeps, from the trace: the order of the CUDA calls, the CPU time between them
(as ``host_sleep``: the application's own work), the streams, and every kernel's measured
duration (as a one-block kernel of that length, of the recorded block size; the model adds
its block overhead, so it is taken off). Kernel launches (runtime ``cudaLaunchKernel*`` and
driver ``cuLaunchKernel``) become ``launch_kernel``; copies ``memcpy_async``; device and stream
synchronisations ``device_synchronize``; any other call is CPU time.

``as_graph``: the launches between two host synchronisations are captured into one CUDA
graph, instantiated beforehand, and replayed with one ``graph_launch``; the CPU work between
them is gone, as it would be in a graph replay. That predicts what the program would take
with CUDA graphs.

Steps: a trace with ``ProfilerStep#`` marks has that many; otherwise the number of
``Optimizer.step`` annotations (PyTorch training loops); otherwise 1.
"""

import gzip
import json

from .traces import read_trace

LAUNCH_NAMES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC")
SYNC_NAMES = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cuCtxSynchronize",
              "cuStreamSynchronize")
COPY_KINDS = {1: "h2d", 2: "d2h", 8: "d2d"}


def count_steps(path, records):
    reps = sum(1 for r in records if r["kind"] == "meta" and r["what"] == "rep_begin")
    if reps:
        return reps
    try:
        with gzip.open(path, "rt") if str(path).endswith(".gz") else open(path) as f:
            doc = json.load(f)
        events = doc.get("traceEvents", []) if isinstance(doc, dict) else []
    except (OSError, ValueError):
        return 1
    steps = sum(1 for e in events if isinstance(e, dict) and e.get("cat") == "user_annotation"
                and str(e.get("name", "")).startswith("Optimizer.step"))
    return steps or 1


def _calls(records):
    """Host calls in issue order, with the kernel or copy each launched."""
    work = {r["corr"]: r for r in records if r["kind"] in ("kernel", "memcpy")}
    calls = [r for r in records if r["kind"] in ("runtime", "driver")]
    calls.sort(key=lambda r: (r["start"], r["corr"]))
    return [(c, work.get(c["corr"])) for c in calls]


def workload_from_trace(records, params, *, as_graph=False, profiler="off", name="replay"):
    sm_ns = params.block_overhead_ns + (params.cupti_kernel_ns if profiler == "cupti" else 0)
    streams = {}

    def stream_of(w):
        sid = w["stream"]
        if sid not in streams:
            streams[sid] = f"s{sid}"
        return streams[sid]

    # segments of launches/copies between host synchronisations
    ops = []                 # (kind, payload) in order
    last_end = None
    for call, w in _calls(records):
        gap = 0 if last_end is None else max(call["start"] - last_end, 0)
        last_end = call["end"]
        name_ = call["name"].split("_v")[0]
        if name_.startswith(LAUNCH_NAMES) and w is not None and w["kind"] == "kernel":
            block = w.get("block") or [32, 1, 1]
            dur = max(w["end"] - w["start"] - sm_ns, 0)
            ops.append(("cpu", gap))
            ops.append(("work", {"op": "launch_kernel", "stream": stream_of(w),
                                 "kernel": w["name"][:40], "grid": [1, 1, 1],
                                 "block": [min(max(int(b), 1), 1024) for b in block[:3]],
                                 "block_ns": round(dur)}))
        elif w is not None and w["kind"] == "memcpy" and w["copy_kind"] in COPY_KINDS:
            ops.append(("cpu", gap))
            ops.append(("work", {"op": "memcpy_async", "stream": stream_of(w),
                                 "kind": COPY_KINDS[w["copy_kind"]], "bytes": w["bytes"]}))
        elif name_.startswith(SYNC_NAMES):
            ops.append(("cpu", gap))
            ops.append(("sync", None))
        else:
            # another call (attribute queries, capture checks...): CPU time
            ops.append(("cpu", gap + call["end"] - call["start"]))
    prog = [{"op": "stream_create", "name": n} for n in sorted(streams.values())]
    if not as_graph:
        prog.append({"op": "mark", "what": "rep_begin"})
        for kind, op in ops:
            if kind == "cpu" and op > 0:
                prog.append({"op": "host_sleep", "ns": op})
            elif kind == "work":
                prog.append(op)
            elif kind == "sync":
                prog.append({"op": "device_synchronize"})
        prog += [{"op": "device_synchronize"}, {"op": "mark", "what": "rep_end"}]
    else:
        # one graph per run of work between synchronisations, built before the timed part
        segments, cur = [], []
        for kind, op in ops:
            if kind == "work":
                cur.append(op)
            elif kind == "sync" and cur:
                segments.append(cur)
                cur = []
        if cur:
            segments.append(cur)
        cap = sorted(streams.values())[0] if streams else "s"
        for i, seg in enumerate(segments):
            prog.append({"op": "stream_begin_capture", "stream": cap})
            # every stream's work joins the capture stream's order (a straight line)
            prog += [dict(op, stream=cap) for op in seg]
            prog += [{"op": "stream_end_capture", "stream": cap, "graph": f"g{i}"},
                     {"op": "graph_instantiate", "graph": f"g{i}"}]
        prog.append({"op": "mark", "what": "rep_begin"})
        for i in range(len(segments)):
            prog += [{"op": "graph_launch", "graph": f"g{i}", "stream": cap},
                     {"op": "device_synchronize"}]
        prog.append({"op": "mark", "what": "rep_end"})
    if not streams:
        raise ValueError("the trace launches no kernels or copies")
    w = {"name": name + ("_as_graph" if as_graph else ""), "program": prog}
    if len(streams) > params.max_connections:
        w["max_connections"] = min(len(streams), 32)
    return w


def replay(path, params, *, as_graph=False, profiler="off", backend="compiled",
           progress=False):
    """(result, steps) of simulating a trace's program."""
    from .run import simulate
    from .workload import parse_workload
    records = read_trace(path)
    steps = count_steps(path, records)
    w = parse_workload(workload_from_trace(records, params, as_graph=as_graph,
                                           profiler=profiler,
                                           name=records[0].get("scenario", "replay")),
                       str(path))
    return simulate(w, params, backend=backend, profiler=profiler, progress=progress), steps


def step_summary(result, steps):
    """GPU span and time per step of a replay (us)."""
    from .metrics import metrics
    m = metrics(result.records)
    return {"steps": steps, "wall_us": m.get("wall_per_rep_us", 0.0),
            "per_step_us": m.get("wall_per_rep_us", 0.0) / steps,
            "gpu_span_us": m.get("gpu_span_us", 0.0), "kernels": m.get("kernels", 0)}
