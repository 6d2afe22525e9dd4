"""Replay of a profiler trace: turn a recorded timeline into a workload and simulate it.

The workload keeps, from the trace: the order of the CUDA calls, the CPU time between them
(as ``host_sleep``: the application's own work), the streams, and every kernel's measured
duration (as a one-block kernel of that length, of the recorded block size; the model adds
its block overhead, so it is taken off). Kernel launches (runtime ``cudaLaunchKernel*`` and
driver ``cuLaunchKernel``) become ``launch_kernel``; copies ``memcpy_async``; device and stream
synchronisations ``device_synchronize``; event records and stream waits ``event_record`` and
``stream_wait_event`` (the trace's record and wait calls name no stream or event: a record is
on the stream of its thread's latest work, as PyTorch's current stream makes it, one event a
stream; a wait is for the thread's latest record, by the stream of its thread's next work, and
is left out when that is the recording stream or there is no such work); any other call is
CPU time.

``as_graph``: the launches between two host synchronisations are captured into one CUDA
graph, instantiated beforehand, and replayed with one ``graph_launch``; the CPU work between
them is gone, as it would be in a graph replay (every stream's work in one line: the events
are not captured yet). That predicts what the program would take
with CUDA graphs.

Steps: a trace with ``ProfilerStep#`` marks has that many; otherwise the number of
``Optimizer.step`` annotations (PyTorch training loops); otherwise 1.
"""

from gpufe.rtl.layouts import COPY_KINDS as _COPY_KIND_CODES
from gpufe.sim.analysis.traces import read_trace_located, TraceError, GRAPH_LAUNCHES
from gpufe.sim.host.workload import LIMITS

LAUNCH_NAMES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC")
RECORD_NAMES = ("cudaEventRecord", "cuEventRecord")
WAIT_NAMES = ("cudaStreamWaitEvent", "cuStreamWaitEvent")
SYNC_NAMES = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cuCtxSynchronize",
              "cuStreamSynchronize")
COPY_KINDS = {code: kind for kind, code in _COPY_KIND_CODES.items()}


def count_steps(path, records):
    reps = sum(1 for r in records if r["kind"] == "meta" and r["what"] == "rep_begin")
    if reps:
        return reps
    # a Kineto trace's reader counts its Optimizer.step annotations
    return (records[0].get("optimizer_steps") if records else None) or 1


def _calls(records, where=None):
    """Host calls in issue order, each with the kernel or copy it launched (or None), and
    where the call and its work are in the trace. A correlation id names one launch: its
    work goes to the first call (in issue order) that has it; a graph launch's nodes share
    their call's id and are not replayed one by one."""
    where = where or [None] * len(records)
    work = {}
    for r, loc in zip(records, where):
        if r["kind"] in ("kernel", "memcpy"):
            work.setdefault(r["corr"], []).append((r, loc))
    calls = [(r, loc) for r, loc in zip(records, where) if r["kind"] in ("runtime", "driver")]
    calls.sort(key=lambda c: (c[0]["start"], c[0]["corr"]))
    out, taken = [], set()
    for c, loc in calls:
        ws = work.get(c["corr"])
        w = w_loc = None
        if ws and len(ws) == 1 and c["corr"] not in taken \
                and not c["name"].startswith(GRAPH_LAUNCHES):
            (w, w_loc), = ws
            taken.add(c["corr"])
        out.append((c, loc, w, w_loc))
    return out


def workload_from_trace(records, params, *, as_graph=False, profiler="off", name="replay",
                        where=None, path=None):
    """The trace's program as a workload (see the module's docstring). ``where``: for each
    record, its place in the trace (:func:`gpufe.sim.analysis.traces.read_trace_located`); the ops made from
    a record carry it (``"_at"``), for errors to name."""
    sm_ns = params.block_overhead_ns + (params.cupti_kernel_ns if profiler == "cupti" else 0)
    streams = {}

    def stream_of(sid):
        """The workload's name of trace stream ``sid``."""
        if sid not in streams:
            streams[sid] = f"s{sid}"
        return streams[sid]

    def at(op, loc):
        if loc is not None:
            op["_at"] = loc
        return op

    block_max = LIMITS[("launch_kernel", "block_ns")][1]
    sleep_max = LIMITS[("host_sleep", "ns")][1]
    bytes_max = LIMITS[("memcpy_async", "bytes")][1]
    calls = _calls(records, where)
    # the stream of each thread's next work after each call (where a wait's stream is told)
    next_stream, ahead = [None] * len(calls), {}
    for i in range(len(calls) - 1, -1, -1):
        call, _, w, _ = calls[i]
        next_stream[i] = ahead.get(call.get("tid"))
        if w is not None:
            ahead[call.get("tid")] = w["stream"]
    # segments of launches/copies between host synchronisations
    ops = []                 # (kind, payload) in order
    last_end = None
    graph_calls = 0
    last_stream, last_record, events = {}, {}, {}
    for i, (call, loc, w, w_loc) in enumerate(calls):
        gap = 0 if last_end is None else max(call["start"] - last_end, 0)
        last_end = call["end"]
        name_ = call["name"].split("_v")[0]
        graph_calls += name_.startswith(GRAPH_LAUNCHES)
        tid = call.get("tid")
        if w is not None:
            last_stream[tid] = w["stream"]
        if name_.startswith(RECORD_NAMES) and tid in last_stream:
            # recorded on the thread's current stream: its latest work's (PyTorch's rule; a
            # trace's record names no stream); one event a stream, recorded again each time
            sid = last_stream[tid]
            ev = events.setdefault(sid, f"e{sid}")
            last_record[tid] = sid
            ops.append(("cpu", gap, loc))
            ops.append(("dep", at({"op": "event_record", "event": ev,
                                   "stream": stream_of(sid)}, loc), loc))
        elif name_.startswith(WAIT_NAMES) and last_record.get(tid) is not None \
                and next_stream[i] is not None and next_stream[i] != last_record[tid]:
            # the thread's latest record, waited for by the stream of its next work
            ops.append(("cpu", gap, loc))
            ops.append(("dep", at({"op": "stream_wait_event",
                                   "stream": stream_of(next_stream[i]),
                                   "event": events[last_record[tid]]}, loc), loc))
        elif name_.startswith(LAUNCH_NAMES) and w is not None and w["kind"] == "kernel":
            block = w.get("block") or [32, 1, 1]
            dur = max(w["end"] - w["start"] - sm_ns, 0)
            if round(dur) > block_max:
                raise TraceError(f"{w_loc or path}: kernel {w['name'][:40]!r} runs "
                                 f"{dur / 1e9:.3g} s; a replay runs each kernel as one thread "
                                 f"block, and the model runs a block at most "
                                 f"{block_max / 1e9:g} s")
            ops.append(("cpu", gap, loc))
            ops.append(("work", at({"op": "launch_kernel", "stream": stream_of(w["stream"]),
                                    "kernel": w["name"][:40], "grid": [1, 1, 1],
                                    "block": [min(max(int(b), 1), 1024) for b in block[:3]],
                                    "block_ns": round(dur)}, w_loc), loc))
        elif w is not None and w["kind"] == "memcpy" and w["copy_kind"] in COPY_KINDS \
                and w["bytes"] > 0:
            if w["bytes"] > bytes_max:
                raise TraceError(f"{w_loc or path}: a copy of {w['bytes']:,} bytes; the model "
                                 f"copies at most {bytes_max:,} bytes at once")
            ops.append(("cpu", gap, loc))
            ops.append(("work", at({"op": "memcpy_async", "stream": stream_of(w["stream"]),
                                    "kind": COPY_KINDS[w["copy_kind"]], "bytes": w["bytes"]},
                                   w_loc), loc))
        elif name_.startswith(SYNC_NAMES):
            ops.append(("cpu", gap, loc))
            ops.append(("sync", None, loc))
        else:
            # another call (attribute queries, capture checks...): CPU time
            ops.append(("cpu", gap + call["end"] - call["start"], loc))
    if not streams:
        raise TraceError(f"{path or name}: nothing to replay: no kernel launch "
                         f"({', '.join(LAUNCH_NAMES)}) or copy with its kernel or copy record"
                         + (f" (its {graph_calls} graph launches are not replayed)"
                            if graph_calls else ""))
    prog = [{"op": "stream_create", "name": n} for n in sorted(streams.values())]
    if not as_graph:
        # PyTorch's events: cudaEventDisableTiming unless asked
        prog += [{"op": "event_create", "name": e, "timing": False}
                 for e in sorted(events.values())]
        prog.append({"op": "mark", "what": "rep_begin"})
        for kind, op, loc in ops:
            if kind == "cpu" and op > sleep_max:
                raise TraceError(f"{loc or path}: {op / 1e9:,.3g} s of CPU time up to the end "
                                 f"of this call; a replay sleeps at most {sleep_max / 1e9:,g} s "
                                 f"at once")
            if kind == "cpu" and op > 0:
                prog.append(at({"op": "host_sleep", "ns": op}, loc))
            elif kind in ("work", "dep"):
                prog.append(op)
            elif kind == "sync":
                prog.append(at({"op": "device_synchronize"}, loc))
        prog += [{"op": "device_synchronize"}, {"op": "mark", "what": "rep_end"}]
    else:
        # one graph per run of work between synchronisations (split where it would not fit
        # the front end's graph walker), built before the timed part
        most = params.frontend_config().graph_nodes_max
        segments, cur = [], []
        for kind, op, loc in ops:
            if kind == "work":
                cur.append(op)
                if len(cur) == most:
                    segments.append(cur)
                    cur = []
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
    w = {"name": name + ("_as_graph" if as_graph else ""), "program": prog}
    if len(streams) > params.max_connections:
        w["max_connections"] = min(len(streams), 32)
    return w


def prepare(path, params, *, as_graph=False, profiler="off", max_connections=None,
            limits=True, trace=None):
    """(workload, steps) of a trace's replay, checked (:func:`gpufe.sim.host.workload.check_run`): every
    error names the trace and, where it comes from one event, the event (or line).
    ``trace``: (records, where) already read by :func:`gpufe.sim.analysis.traces.read_trace_located`."""
    from gpufe.sim.host.workload import parse_workload, check_run
    records, where = trace or read_trace_located(path)
    steps = count_steps(path, records)
    w = parse_workload(workload_from_trace(records, params, as_graph=as_graph,
                                           profiler=profiler,
                                           name=records[0].get("scenario", "replay"),
                                           where=where, path=path),
                       str(path), located=True)
    check_run(w, params, str(path), max_connections=max_connections, limits=limits)
    return w, steps


def replay(path, params, *, as_graph=False, profiler="off", backend="compiled",
           progress=False, max_connections=None):
    """(result, steps) of simulating a trace's program."""
    from gpufe.sim.run import simulate
    w, steps = prepare(path, params, as_graph=as_graph, profiler=profiler,
                       max_connections=max_connections)
    return simulate(w, params, max_connections, backend=backend, profiler=profiler,
                    progress=progress), steps


def step_summary(result, steps):
    """GPU span and time per step of a replay (us)."""
    from gpufe.sim.analysis.metrics import metrics
    m = metrics(result.records)
    return {"steps": steps, "wall_us": m.get("wall_per_rep_us", 0.0),
            "per_step_us": m.get("wall_per_rep_us", 0.0) / steps,
            "gpu_span_us": m.get("gpu_span_us", 0.0), "kernels": m.get("kernels", 0)}
