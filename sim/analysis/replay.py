"""Replay of a profiler trace: turn a recorded timeline into a workload and simulate it.

The workload is the program that made the trace (docs/replay.md has every record kind and
what becomes of it): the CUDA calls in issue order, the CPU time between them as
``host_sleep``, the streams; kernels (``cudaLaunchKernel*``, ``cuLaunchKernel``) as
``launch_kernel`` of their measured duration and SM footprint (:func:`footprint`); copies as
``memcpy_async``; memsets as kernels of their length; graph launches as launches of graphs
captured beforehand, their nodes and edges from the device's order and overlap
(:func:`graph_of_launch`); event records and stream waits from Kineto's stream-wait records
where the trace has them, else from the calling thread's work (a record on the stream of its
latest work, as PyTorch's current stream makes it; a wait by the stream of its next work);
synchronisations as ``device_synchronize``; ``ProfilerStep#`` marks as step marks; any other
call as CPU time. Work that no recorded call launched (Triton's kernels launched through the
driver API when the profiler recorded no driver calls, several sharing one correlation id) is
launched right after the call that launched its stream's work before it, and counted: the
prepared workload's ``replay_notes`` and :func:`step_summary` say how many were so launched
or skipped (:data:`UNLAUNCHED_NOTES`). A trace of launch calls without any kernel or copy
record is refused as recorded without CUDA activity.

A profiled replay (``profiler="cupti"``) runs on the trace's own host
(:func:`trace_host_scale`); an unprofiled one predicts the program on the parameter set's
host with the profiler's own CPU time taken out of the gaps (CUPTI's after each call,
torch.profiler's per operator record: ``Params.profiler_op_ns``).

``as_graph``: the work between two host synchronisations is captured into one CUDA graph per
segment (the program's streams forked from the capture stream and joined back, its events
kept) and launched once; the CPU time between the calls is gone: what the program would take
with CUDA graphs.

Steps (:func:`count_steps`) and the time of a step (:func:`per_step_us`) are defined once,
for the trace and for its replay alike.
"""

import bisect
import json
import math
import statistics

from gpufe.rtl.layouts import COPY_KINDS as _COPY_KIND_CODES
from gpufe.sim.analysis.traces import read_trace_located, TraceError, GRAPH_LAUNCHES
from gpufe.sim.collector import collector_paused
from gpufe.sim.host.workload import LIMITS

LAUNCH_NAMES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC")
RECORD_NAMES = ("cudaEventRecord", "cuEventRecord")
WAIT_NAMES = ("cudaStreamWaitEvent", "cuStreamWaitEvent")
SYNC_NAMES = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cuCtxSynchronize",
              "cuStreamSynchronize")
COPY_KINDS = {code: kind for kind, code in _COPY_KIND_CODES.items()}
#: the kernel name a replayed memset gets
MEMSET = "[memset]"


def count_steps(path, records):
    """Steps of a trace: its ``ProfilerStep#`` (or fe_trace repetition) marks; else its
    ``Optimizer.step`` annotations (PyTorch training loops); else its graph launches (a graph
    program replays one graph a step); else 1."""
    reps = sum(1 for r in records if r["kind"] == "meta" and r["what"] == "rep_begin")
    if reps:
        return reps
    opt = records[0].get("optimizer_steps") if records else None
    if opt:
        return opt
    graphs = sum(1 for r in records if r["kind"] in ("runtime", "driver")
                 and r["name"].startswith(GRAPH_LAUNCHES))
    return graphs or 1


#: what a replay did with the work that no recorded call launched (:func:`_calls`): how many
#: kernels, copies and memsets have a correlation id no call has; of those, how many share it
#: with another; how many were launched right after the call that launched the work before
#: them on their stream; how many (their stream's first) after the last call begun before
#: they started; how many were skipped (graph nodes without their graph launch, work with no
#: call before it)
UNLAUNCHED_NOTES = ("unlaunched", "sharing_correlation", "launched_after_stream_previous",
                    "launched_after_call_before", "skipped")
_WORK = ("kernel", "memcpy", "memset")
#: the call a replay makes for work no recorded call launched, by the work's kind
_UNRECORDED_CALL = {"kernel": "cuLaunchKernel", "memcpy": "cuMemcpyAsync",
                    "memset": "cuMemsetAsync"}


def _calls(records, where=None, notes=None):
    """Host calls and step marks in issue order: (record, where, work, work's where), ``work``
    the kernel, copy or memset the call launched (a list of kernels and copies for a graph
    launch), or None. A correlation id names one launch: its work goes to the first call (in
    issue order) that has it (a runtime call and the driver call it makes share theirs).

    Work whose correlation id no call has (Triton's kernels launched through the driver API
    when the profiler recorded no driver calls; such kernels may share one id) is launched by
    an unrecorded call (``"unrecorded": True``, taking no time) placed right after the call
    that launched the work before it on its stream, else (its stream's first) right after
    the last call or mark begun before it started that is not a synchronisation it ran
    during, else skipped, as are graph nodes without their graph launch. ``notes``: a dict
    that gets the counts (:data:`UNLAUNCHED_NOTES`)."""
    where = where or [None] * len(records)
    work = {}
    for r, loc in zip(records, where):
        if r["kind"] in _WORK:
            work.setdefault(r["corr"], []).append((r, loc))
    items = [(r, loc) for r, loc in zip(records, where)
             if r["kind"] in ("runtime", "driver")
             or r["kind"] == "meta" and r["what"] in ("rep_begin", "rep_end")]
    items.sort(key=lambda c: (c[0].get("start", c[0].get("t")), c[0].get("corr", -1)))
    out, taken = [], set()
    for c, loc in items:
        w = w_loc = None
        ws = work.get(c.get("corr"))
        if c["kind"] != "meta" and ws and c["corr"] not in taken:
            if c["name"].startswith(GRAPH_LAUNCHES):
                w, w_loc = [r for r, _ in ws if r["kind"] != "memset"], ws[0][1]
                taken.add(c["corr"])
            elif len(ws) == 1:
                (w, w_loc), = ws
                taken.add(c["corr"])
        out.append((c, loc, w, w_loc))
    if notes is not None:
        notes.update(dict.fromkeys(UNLAUNCHED_NOTES, 0))
    called = {c["corr"] for c, _ in items if c["kind"] != "meta"}
    if all(corr in called for corr in work):
        return out
    return _place_unlaunched(out, work, called, notes if notes is not None else {})


def _place_unlaunched(out, work, called, notes):
    """``out`` (:func:`_calls`) with the work no recorded call launched placed after the
    calls that stand for its launch; ``notes`` counted."""
    # each stream's work in device order; the entry of ``out`` that launched each
    launched_by = {}
    for i, (c, _, _, _) in enumerate(out):
        if c["kind"] != "meta" and c["corr"] in work:
            for r, _ in work[c["corr"]]:
                launched_by.setdefault(id(r), i)
    streams = {}
    for ws in work.values():
        for r, loc in ws:
            streams.setdefault((r.get("pid"), r["stream"]), []).append((r, loc))
    starts = [c.get("start", c.get("t")) for c, _, _, _ in out]
    after = {}                                  # index in out -> [(work, where)]
    for corr, ws in work.items():
        if corr not in called:
            notes["unlaunched"] += len(ws)
            if len(ws) > 1:
                notes["sharing_correlation"] += len(ws)
    for ws in streams.values():
        ws.sort(key=lambda x: (x[0]["start"], x[0]["end"]))
        last = None                 # the entry that launched the stream's latest work so far
        for r, loc in ws:
            if r["corr"] in called:
                last = launched_by.get(id(r), last)
                continue
            if r.get("graph_id"):
                notes["skipped"] += 1             # a graph's node without its graph launch
                continue
            host = last
            if host is not None:
                notes["launched_after_stream_previous"] += 1
            else:
                # the stream's first: after the last call (or mark) begun before it started,
                # not a synchronisation it ran during
                j = bisect.bisect_right(starts, r["start"]) - 1
                while j >= 0 and out[j][0]["kind"] != "meta" \
                        and out[j][0]["name"].split("_v")[0].startswith(SYNC_NAMES) \
                        and out[j][0]["end"] > r["start"]:
                    j -= 1
                if j < 0:
                    notes["skipped"] += 1
                    continue
                host = j
                notes["launched_after_call_before"] += 1
            after.setdefault(host, []).append((r, loc))
            last = host
    placed = []
    for i, entry in enumerate(out):
        placed.append(entry)
        for r, loc in sorted(after.get(i, ()), key=lambda x: (x[0]["start"], x[0]["end"])):
            c = entry[0]
            t = c.get("end", c.get("t"))
            placed.append(({"kind": "driver", "name": _UNRECORDED_CALL[r["kind"]],
                            "corr": r["corr"], "tid": c.get("tid"), "start": t, "end": t,
                            "cpu_ops": 0, "unrecorded": True}, loc, r, loc))
    return placed


def footprint(grid, block, params):
    """(blocks, threads a block) a replayed kernel runs as: the SM space the recorded kernel
    holds while it runs (its threads, at most the whole GPU's), in at most two blocks an SM,
    so that kernels that fill the GPU cannot run beside each other and small ones can, at a
    simulation cost bounded per kernel. Every block runs the kernel's whole duration."""
    n = math.prod(max(int(g), 1) for g in grid[:3])
    t = math.prod(max(int(b), 1) for b in block[:3])
    held = min(n * t, params.sms * params.max_threads_per_sm)
    blocks = max(min(n, 2 * params.sms, params.sms * params.max_blocks_per_sm), 1)
    per_block = -(-held // blocks)
    threads = min(max(-(-per_block // 32) * 32, 32), 1024)       # whole warps
    return blocks, threads


def graph_of_launch(nodes):
    """A graph launch's kernels and copies as a graph: (nodes in start order, each node's
    dependencies as indices into that list). Node j depends on the nodes that ended before it
    started, less those implied through another (the device ran them one after the other;
    nodes that overlapped are independent)."""
    nodes = sorted(nodes, key=lambda r: (r["start"], r["end"]))
    by_end = sorted(range(len(nodes)), key=lambda i: (nodes[i]["end"], i))
    ends = [nodes[i]["end"] for i in by_end]
    ended = [0]                           # bitsets: the first k nodes to end
    for i in by_end:
        ended.append(ended[-1] | 1 << i)
    anc = [0] * len(nodes)                # bitset of each node's ancestors
    deps = []
    for j, r in enumerate(nodes):
        k = bisect.bisect_right(ends, r["start"])
        want = ended[k] & ~(1 << j)
        covered, mine = 0, []
        # the latest to end first: each chosen one covers its ancestors
        for i in reversed(by_end[:k]):
            if not want & ~covered:
                break
            if i != j and not covered >> i & 1:
                mine.append(i)
                covered |= anc[i] | 1 << i
        deps.append(sorted(mine))
        anc[j] = covered
    return nodes, deps


def _capture_graph(name, nodes, deps, lanes, stream_of, kernel_op):
    """Ops that capture the graph (``nodes``, ``deps``) from streams: node j goes on a lane
    (stream) whose last node it depends on or descends from, else on a new lane forked from
    the capture's start; its other dependencies are event waits. ``lanes``: the replay's lane
    streams so far (grown here)."""
    ops, tail, anc, used = [], {}, [], []
    fork = f"{name}_fork"
    events = {fork}

    def ev(i):
        events.add(f"{name}_n{i}")
        return f"{name}_n{i}"

    origin = stream_of(nodes[0]["stream"])
    ops += [{"op": "stream_begin_capture", "stream": origin},
            {"op": "event_record", "event": fork, "stream": origin}]
    tail[origin] = None
    used.append(origin)
    for j, (r, d) in enumerate(zip(nodes, deps)):
        a = set(d)
        for i in d:
            a |= anc[i]
        anc.append(a)
        lane = next((ln for ln in used if tail[ln] in d), None) \
            or next((ln for ln in used if tail[ln] is None or tail[ln] in a), None)
        if lane is None:
            k = len(used) - 1
            if k >= len(lanes):
                lanes.append(f"lane{k}")
            lane = lanes[k]
            used.append(lane)
            tail[lane] = None
            ops.append({"op": "stream_wait_event", "stream": lane, "event": fork})
        implied = anc[tail[lane]] | {tail[lane]} if tail[lane] is not None else set()
        # (node i's event was recorded right after it: i < j)
        ops += [{"op": "stream_wait_event", "stream": lane, "event": ev(i)}
                for i in d if i not in implied]
        ops += [kernel_op(r, lane), {"op": "event_record", "event": ev(j), "stream": lane}]
        tail[lane] = j
    for ln in used[1:]:
        ops.append({"op": "stream_wait_event", "stream": origin,
                    "event": ev(tail[ln]) if tail[ln] is not None else fork})
    ops += [{"op": "stream_end_capture", "stream": origin, "graph": name},
            {"op": "graph_instantiate", "graph": name}]
    return ops, events


def workload_from_trace(records, params, *, as_graph=False, profiler="off", name="replay",
                        where=None, path=None, pdl=False, notes=None, on_trace_host=False):
    """The trace's program as a workload (see the module's docstring). ``where``: for each
    record, its place in the trace (:func:`gpufe.sim.analysis.traces.read_trace_located`); the ops made from
    a record carry it (``"_at"``), for errors to name. ``pdl``: the trace's stream launches
    made with programmatic dependent launch (each kernel waiting for the one before it at its
    start, triggering as it exits): what PDL would save. ``notes``: a dict that gets what
    became of the work no recorded call launched (:data:`UNLAUNCHED_NOTES`).
    ``on_trace_host``: an unprofiled replay's program on the host that recorded the trace,
    as a profiled replay's is (:func:`replay_params`)."""
    sm_ns = params.block_overhead_ns + (params.cupti_kernel_ns if profiler == "cupti" else 0)
    graph_sm_ns = params.block_overhead_ns + (params.cupti_graph_kernel_ns
                                              if profiler == "cupti" else 0)
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
    footprints = {}                         # (grid, block) -> footprint()
    sleep_max = LIMITS[("host_sleep", "ns")][1]
    bytes_max = LIMITS[("memcpy_async", "bytes")][1]

    def kernel_op(w, stream, w_loc=None, overhead=sm_ns, stream_launch=False):
        """launch_kernel of a kernel record (or a memset: a kernel of its length); a stream
        launch with PDL when ``pdl``."""
        dur = max(w["end"] - w["start"] - overhead, 0)
        label = w["name"] if w["kind"] == "kernel" else MEMSET
        if round(dur) > block_max:
            raise TraceError(f"{w_loc or path}: {w['kind']} {label[:40]!r} runs "
                             f"{dur / 1e9:.3g} s; a replay runs each kernel as one thread "
                             f"block, and the model runs a block at most "
                             f"{block_max / 1e9:g} s")
        grid, block = w.get("grid") or [1, 1, 1], w.get("block") or [256, 1, 1]
        shape = (tuple(grid), tuple(block))     # (a trace has a few hundred shapes)
        fp = footprints.get(shape)
        if fp is None:
            fp = footprints[shape] = footprint(grid, block, params)
        blocks, threads = fp
        dur = max(dur - (blocks - 1) * params.block_dispatch_ns, 0)
        op = {"op": "launch_kernel", "stream": stream, "kernel": label[:40],
              "grid": [blocks, 1, 1], "block": [threads, 1, 1], "block_ns": round(dur)}
        if pdl and stream_launch:
            op["pdl"] = True
        return at(op, w_loc)

    def copy_op(w, stream, w_loc=None):
        if w["bytes"] > bytes_max:
            raise TraceError(f"{w_loc or path}: a copy of {w['bytes']:,} bytes; the model "
                             f"copies at most {bytes_max:,} bytes at once")
        return at({"op": "memcpy_async", "stream": stream,
                   "kind": COPY_KINDS[w["copy_kind"]], "bytes": w["bytes"]}, w_loc)

    def node_op(w, lane):
        if w["kind"] == "memcpy" and w["copy_kind"] in COPY_KINDS and w["bytes"] > 0:
            return copy_op(w, lane)
        return kernel_op(w, lane, overhead=graph_sm_ns)

    calls = _calls(records, where, notes)
    # the stream of each thread's next work after each call (where a wait's stream is told)
    next_stream, ahead = [None] * len(calls), {}
    for i in range(len(calls) - 1, -1, -1):
        call, _, w, _ = calls[i]
        next_stream[i] = ahead.get(call.get("tid"))
        if isinstance(w, dict):
            ahead[call.get("tid")] = w["stream"]
    # the trace's graphs: launches of the same kernels in the same order are one executable
    # graph launched again (CUDA's replays), its nodes' times the medians of theirs and its
    # edges those most of its launches show (the device's overlap varies from launch to launch)
    graph_names, graph_runs, graph_of_call = {}, {}, {}
    for i, (call, loc, w, _) in enumerate(calls):
        if isinstance(w, list) and w:
            nodes, deps = graph_of_launch(w)
            # a node: its kernel (or copy), stream and how many such came before it; the
            # graph: its set of nodes (independent branches start in any order)
            seen, ids = {}, []
            for r in nodes:
                kind = (r["kind"], r.get("name"), r["stream"])
                seen[kind] = seen.get(kind, -1) + 1
                ids.append(kind + (seen[kind],))
            key = tuple(sorted(ids))
            graph_names.setdefault(key, f"G{len(graph_names)}")
            graph_runs.setdefault(key, []).append((ids, nodes, deps))
            graph_of_call[i] = graph_names[key]
    setup, lanes, graph_events = [], [], set()
    for key, runs in graph_runs.items():
        # the first launch's order; each node's median time; the edges most launches show
        durations = {}
        for ids, nodes, _ in runs:
            for n_id, r in zip(ids, nodes):
                durations.setdefault(n_id, []).append(r["end"] - r["start"])
        ids0, nodes0, _ = runs[0]
        nodes = [dict(r, start=0, end=round(statistics.median(durations[n_id])))
                 for n_id, r in zip(ids0, nodes0)]
        shapes = [frozenset((ids[j], ids[i]) for j, d in enumerate(deps) for i in d)
                  for ids, _, deps in runs]
        edges = max(shapes, key=lambda e: (shapes.count(e), -shapes.index(e)))
        where_ = {n_id: j for j, n_id in enumerate(ids0)}
        deps = [[] for _ in nodes]
        for a, b in edges:
            deps[where_[a]].append(where_[b])
        if any(b >= a for a, ds in enumerate(deps) for b in ds):
            # those edges do not follow the first launch's order: its own edges instead
            deps = runs[0][2]
        ops_, evs = _capture_graph(graph_names[key], nodes, [sorted(d) for d in deps], lanes,
                                   stream_of, node_op)
        setup += ops_
        graph_events |= evs
    # Kineto's stream-wait records, where the trace has them: which stream waits for which
    # stream's record (else told from the threads' work, below)
    waits = {r["corr"]: r for r in records if r["kind"] == "stream_wait"}
    recorded_on = {r["record_corr"]: r["wait_on_stream"] for r in waits.values()
                   if r["record_corr"] is not None and r["wait_on_stream"] is not None}
    ops = []                 # (kind, payload, where) in issue order
    last_end = None
    last_stream, last_record, events = {}, {}, {}
    # the profiler's own CPU time in a trace's gaps (at the run's host speed): CUPTI's after
    # every call (a profiled replay's calls add it back), the operator records' before a call
    scale = trace_host_scale(records, params)
    after_call = params.cupti_call_gap_ns * scale
    per_record = params.profiler_op_ns * scale if profiler == "off" else 0.0
    # the program's own CPU time, on the host the replay runs on (replay_params)
    speed = (scale if profiler == "cupti" or on_trace_host else params.host_cpu_scale) / scale
    modelled = False          # whether the call before was one the model makes (not a sleep)
    for i, (call, loc, w, w_loc) in enumerate(calls):
        if call.get("unrecorded"):
            # work no recorded call launched, launched right after the call before it
            # (_calls): no CPU time of its own (the unrecorded call's is in the gaps)
            last_stream[call.get("tid")] = w["stream"]
            if w["kind"] != "memcpy":
                ops.append(("work", kernel_op(w, stream_of(w["stream"]), w_loc,
                                              stream_launch=w["kind"] == "kernel"), loc))
            elif w["copy_kind"] in COPY_KINDS and w["bytes"] > 0:
                ops.append(("work", copy_op(w, stream_of(w["stream"]), w_loc), loc))
            continue
        if call["kind"] == "meta":
            gap = 0 if last_end is None else max(call["t"] - last_end, 0) * speed
            last_end = max(last_end or 0, call["t"])
            ops.append(("cpu", gap, loc))
            ops.append(("mark", {"op": "mark", "what": call["what"]}, loc))
            continue
        gap = 0 if last_end is None else max(call["start"] - last_end, 0)
        if last_end is not None and (profiler == "off" or modelled):
            gap = max(gap - after_call, 0)
        gap = max(gap - per_record * call.get("cpu_ops", 0), 0) * speed
        last_end = call["end"]
        n_ops = len(ops)
        name_ = call["name"].split("_v")[0]
        tid = call.get("tid")
        if isinstance(w, dict):
            last_stream[tid] = w["stream"]
        if name_.startswith(RECORD_NAMES) and (tid in last_stream
                                               or call["corr"] in recorded_on):
            # recorded on the stream a wait for it names, else the thread's current stream:
            # its latest work's (PyTorch's rule; the call names no stream); one event a
            # stream, recorded again each time
            sid = recorded_on.get(call["corr"], last_stream.get(tid))
            ev = events.setdefault(sid, f"e{sid}")
            last_record[tid] = sid
            ops.append(("cpu", gap, loc))
            ops.append(("dep", at({"op": "event_record", "event": ev,
                                   "stream": stream_of(sid)}, loc), loc))
        elif name_.startswith(WAIT_NAMES) and call["corr"] in waits:
            # the waiting stream as Kineto names it; the recording one too where it could
            # tell, else the thread's latest record's
            sw = waits[call["corr"]]
            src = sw["wait_on_stream"] if sw["wait_on_stream"] is not None \
                else last_record.get(tid)
            if src is not None and src != sw["stream"]:
                ev = events.setdefault(src, f"e{src}")
                ops.append(("cpu", gap, loc))
                ops.append(("dep", at({"op": "stream_wait_event",
                                       "stream": stream_of(sw["stream"]), "event": ev},
                                      loc), loc))
            else:
                ops.append(("cpu", gap + (call["end"] - call["start"]) * speed, loc))
        elif name_.startswith(WAIT_NAMES) and last_record.get(tid) is not None \
                and next_stream[i] is not None and next_stream[i] != last_record[tid]:
            # the thread's latest record, waited for by the stream of its next work
            ops.append(("cpu", gap, loc))
            ops.append(("dep", at({"op": "stream_wait_event",
                                   "stream": stream_of(next_stream[i]),
                                   "event": events[last_record[tid]]}, loc), loc))
        elif isinstance(w, list) and w:
            ops.append(("cpu", gap, loc))
            ops.append(("graph", at({"op": "graph_launch",
                                     "graph": graph_of_call[i],
                                     "stream": stream_of(w[0]["stream"])}, loc), loc))
        elif isinstance(w, dict) and w["kind"] == "kernel" \
                and name_.startswith(LAUNCH_NAMES):
            ops.append(("cpu", gap, loc))
            ops.append(("work", kernel_op(w, stream_of(w["stream"]), w_loc,
                                          stream_launch=True), loc))
        elif isinstance(w, dict) and w["kind"] == "memset":
            ops.append(("cpu", gap, loc))
            ops.append(("work", kernel_op(w, stream_of(w["stream"]), w_loc), loc))
        elif isinstance(w, dict) and w["kind"] == "memcpy" and w["copy_kind"] in COPY_KINDS \
                and w["bytes"] > 0:
            ops.append(("cpu", gap, loc))
            ops.append(("work", copy_op(w, stream_of(w["stream"]), w_loc), loc))
        elif name_.startswith(SYNC_NAMES):
            ops.append(("cpu", gap, loc))
            ops.append(("sync", None, loc))
        else:
            # another call (attribute queries, capture checks...): CPU time
            ops.append(("cpu", gap + (call["end"] - call["start"]) * speed, loc))
        modelled = len(ops) - n_ops > 1 or ops[-1][0] != "cpu"
    if not any(kind in ("work", "graph") for kind, _, _ in ops):
        _no_work_recorded(records, path or name)
        raise TraceError(f"{path or name}: nothing to replay: no kernel launch "
                         f"({', '.join(LAUNCH_NAMES)}), copy, memset or graph launch with its "
                         f"kernel or copy records")
    marked = any(kind == "mark" for kind, _, _ in ops)
    prog = [{"op": "stream_create", "name": n} for n in sorted(streams.values())]
    prog += [{"op": "stream_create", "name": n} for n in lanes]
    # PyTorch's events: cudaEventDisableTiming unless asked
    all_events = set(events.values()) | graph_events
    if as_graph:
        all_events |= {"fork"} | {f"join_{n}" for n in streams.values()}
    prog += [{"op": "event_create", "name": e, "timing": False} for e in sorted(all_events)]
    prog += setup
    body = _eager_body(ops, sleep_max, path, at) if not as_graph else \
        _graph_body(ops, prog, params, sorted(streams.values())[0])
    if not marked:
        body = [{"op": "mark", "what": "rep_begin"}] + body
    prog += body + [{"op": "device_synchronize"}]
    if not marked:
        prog.append({"op": "mark", "what": "rep_end"})
    w = {"name": name + ("_as_graph" if as_graph else "") + ("_pdl" if pdl else ""),
         "program": prog}
    n_streams = len(streams) + len(lanes)
    if n_streams > params.max_connections:
        w["max_connections"] = min(n_streams, 32)
    return w


def _no_work_recorded(records, where):
    """A TraceError if the trace has calls that launch GPU work (kernels, graphs, copies,
    memsets) but no record of any such work: recorded without the GPU's activity."""
    if any(r["kind"] in _WORK for r in records):
        return
    launching = LAUNCH_NAMES + GRAPH_LAUNCHES + ("cudaMemcpy", "cuMemcpy", "cudaMemset",
                                                 "cuMemset")
    counts = {}
    for r in records:
        if r["kind"] in ("runtime", "driver") and r["name"].startswith(launching):
            counts[r["name"]] = counts.get(r["name"], 0) + 1
    if not counts:
        return
    calls = sorted(counts.items(), key=lambda nc: (-nc[1], nc[0]))
    said = ", ".join(f"{n:,} {name}" for name, n in calls[:4])
    if len(calls) > 4:
        said += f" and {sum(n for _, n in calls[4:]):,} other"
    kernel = any(name.startswith(LAUNCH_NAMES + GRAPH_LAUNCHES) for name in counts)
    raise TraceError(f"{where}: {said} call{'s' if sum(counts.values()) > 1 else ''} but no "
                     f"{'kernel' if kernel else 'copy or memset'} records: was the trace "
                     f"recorded without CUDA activity (ProfilerActivity.CUDA)? Nothing to "
                     f"replay")


def _eager_body(ops, sleep_max, path, at):
    """The timed program of an eager replay: the calls in order, the CPU time between them as
    sleeps."""
    body = []
    for kind, op, loc in ops:
        if kind == "cpu" and op > sleep_max:
            raise TraceError(f"{loc or path}: {op / 1e9:,.3g} s of CPU time up to the end "
                             f"of this call; a replay sleeps at most {sleep_max / 1e9:,g} s "
                             f"at once")
        if kind == "cpu" and round(op) > 0:
            body.append(at({"op": "host_sleep", "ns": round(op)}, loc))
        elif kind in ("work", "dep", "graph", "mark"):
            body.append(op)
        elif kind == "sync":
            body.append(at({"op": "device_synchronize"}, loc))
    return body


def _graph_body(ops, prog, params, origin):
    """The timed program of an as-graph replay: each run of work between two host
    synchronisations (or step marks, or launches of the trace's own graphs) captured into a
    graph beforehand (appended to ``prog``), with its streams forked from and joined back to
    ``origin`` as PyTorch's capture does, and its events and waits kept; the CPU time between
    calls gone. Runs of the same work (the same calls on the same streams: the next step's)
    are one graph, captured once with each kernel's median time and launched again, as a
    program that captures its step replays it. A wait for an event recorded before the run
    is left out: the synchronisation between them has ordered it."""
    most = params.frontend_config().graph_nodes_max
    entries, seg = [], []            # ("seg", ops) or ("op", op), in program order

    def close():
        if any(op["op"] in ("launch_kernel", "memcpy_async") for op in seg):
            entries.append(("seg", list(seg)))
        seg.clear()

    n_work = 0
    for kind, op, loc in ops:
        if kind in ("work", "dep"):
            seg.append(op)
            n_work += kind == "work"
            if n_work == most:
                close()
                n_work = 0
        elif kind == "sync":
            close()
            n_work = 0
            entries.append(("op", {"op": "device_synchronize"}))
        elif kind in ("graph", "mark"):
            close()
            n_work = 0
            entries.append(("op", op))
    close()

    def shape(run):
        return json.dumps([{k: v for k, v in op.items() if k not in ("_at", "block_ns")}
                           for op in run], sort_keys=True)

    groups = {}
    for what, run in entries:
        if what == "seg":
            groups.setdefault(shape(run), []).append(run)
    made, body = {}, []
    for what, run in entries:
        if what == "op":
            body.append(run)
            continue
        key = shape(run)
        if key not in made:
            made[key] = g = f"g{len(made)}"
            runs = groups[key]
            work = [dict(op, block_ns=round(statistics.median(r[i]["block_ns"] for r in runs)))
                    if op["op"] == "launch_kernel" else op for i, op in enumerate(runs[0])]
            prog.extend(_capture_segment(work, origin, g))
        body.append({"op": "graph_launch", "graph": made[key], "stream": origin})
    return body


def _capture_segment(run, origin, graph):
    """Ops that capture ``run`` (work and the trace's records and waits) from ``origin``:
    each stream forked at the capture's start, joined back at its end."""
    cap = [{"op": "stream_begin_capture", "stream": origin},
           {"op": "event_record", "event": "fork", "stream": origin}]
    joined, recorded = {origin}, set()
    for op in run:
        s = op["stream"]
        if op["op"] == "stream_wait_event":
            if op["event"] not in recorded:
                continue
            joined.add(s)
            cap.append(op)
            continue
        if s not in joined:
            cap.append({"op": "stream_wait_event", "stream": s, "event": "fork"})
            joined.add(s)
        cap.append(op)
        if op["op"] == "event_record":
            recorded.add(op["event"])
    for s in sorted(joined - {origin}):
        cap += [{"op": "event_record", "event": f"join_{s}", "stream": s},
                {"op": "stream_wait_event", "stream": origin, "event": f"join_{s}"}]
    return cap + [{"op": "stream_end_capture", "stream": origin, "graph": graph},
                  {"op": "graph_instantiate", "graph": graph}]


def trace_host_scale(records, params):
    """How slow the host that recorded a (profiled) trace was against ``params``'s (its
    ``host_cpu_scale``): the scale at which the model's profiled ``cudaLaunchKernel`` takes
    the trace's median one (:meth:`Params.launch_call_ns`: the driver's and CUPTI's CPU time
    scale, the kickoff does not); 1 for a trace without launch calls. The reference machine's
    vCPUs run at different speeds from run to run (probe ``torch_profiler_cost``: twostream's
    launches 5.2-7.4 us, its profiled step 1,282-2,058 us)."""
    calls = sorted(r["end"] - r["start"] for r in records
                   if r["kind"] == "runtime" and r["name"] == "cudaLaunchKernel")
    if not calls:
        return 1.0
    return params.host_scale_for_launch(statistics.median(calls)) * params.host_cpu_scale


def replay_params(records, params, profiler, on_trace_host=False):
    """The parameters a replay runs with: a profiled replay on the trace's own host
    (:func:`trace_host_scale`), so that its calls take what the trace's did; an unprofiled
    one on ``params``'s host (the prediction for the program on it), or with
    ``on_trace_host`` on the trace's too (what the profiler costs the program there: the
    profiled replay's step over this one's)."""
    if profiler != "cupti" and not on_trace_host:
        return params
    return params.with_overrides(host_cpu_scale=trace_host_scale(records, params))


def prepare(path, params, *, as_graph=False, profiler="off", max_connections=None,
            limits=True, trace=None, pdl=False, on_trace_host=False):
    """(workload, steps) of a trace's replay, checked (:func:`gpufe.sim.host.workload.check_run`): every
    error names the trace and, where it comes from one event, the event (or line).
    ``trace``: (records, where) already read by :func:`gpufe.sim.analysis.traces.read_trace_located`."""
    from gpufe.sim.host.workload import parse_workload, check_run
    records, where = trace or read_trace_located(path)
    steps = count_steps(path, records)
    notes = {}
    with collector_paused():
        w = parse_workload(workload_from_trace(records, params, as_graph=as_graph,
                                               profiler=profiler,
                                               name=records[0].get("scenario", "replay"),
                                               where=where, path=path, pdl=pdl, notes=notes,
                                               on_trace_host=on_trace_host),
                           str(path), located=True)
        check_run(w, replay_params(records, params, profiler, on_trace_host), str(path),
                  max_connections=max_connections, limits=limits)
    if notes.get("unlaunched"):
        # what became of the work no recorded call launched: step_summary reports it
        w["replay_notes"] = notes
    return w, steps


def replay(path, params, *, as_graph=False, profiler="off", backend="compiled",
           progress=False, max_connections=None, trace=None, pdl=False, compute="aggregate",
           on_trace_host=False):
    """(result, steps) of simulating a trace's program (``compute``: the compute engine, as
    :func:`gpufe.sim.run.simulate` takes it; ``on_trace_host``: :func:`replay_params`)."""
    from gpufe.sim.run import simulate
    trace = trace or read_trace_located(path)
    w, steps = prepare(path, params, as_graph=as_graph, profiler=profiler,
                       max_connections=max_connections, trace=trace, pdl=pdl,
                       on_trace_host=on_trace_host)
    params = replay_params(trace[0], params, profiler, on_trace_host)
    return simulate(w, params, max_connections, backend=backend, profiler=profiler,
                    progress=progress, compute=compute), steps


def per_step_us(records, steps):
    """Time per step of a timeline, the same on a trace and on its replay: the median of its
    marked steps where it has several (``ProfilerStep#``; the replay marks the same points),
    else its GPU span (first kernel or copy start to last end) over ``steps``."""
    from gpufe.sim.analysis.metrics import metrics
    m = metrics(records)
    marks = sum(1 for r in records if r["kind"] == "meta" and r["what"] == "rep_begin")
    if marks > 1:
        return m.get("wall_per_rep_us") or 0.0
    return (m.get("gpu_span_us") or 0.0) / steps


def step_summary(result, steps):
    """Time per step of a replay (:func:`per_step_us`), its kernels and memsets (replayed as
    kernels named ``[memset]``) per step, the run's wall time and GPU span (us), and
    ``replay_notes``: what became of the trace's work that no recorded call launched
    (:data:`UNLAUNCHED_NOTES`; all 0 where there was none)."""
    from gpufe.sim.analysis.metrics import metrics
    m = metrics(result.records)
    memsets = sum(1 for r in result.records if r["kind"] == "kernel" and r["name"] == MEMSET)
    kernels = m.get("kernels", 0) - memsets
    return {"steps": steps, "per_step_us": per_step_us(result.records, steps),
            "kernels_per_step": kernels / steps, "memsets_per_step": memsets / steps,
            "kernels": kernels, "wall_us": m.get("wall_per_rep_us", 0.0),
            "gpu_span_us": m.get("gpu_span_us", 0.0),
            "replay_notes": dict(dict.fromkeys(UNLAUNCHED_NOTES, 0),
                                 **(result.workload or {}).get("replay_notes", {}))}


#: validation scenarios that replay a bundled trace (under the reference's ``h200``): name ->
#: (trace, its summary, the summary's variant). The summaries give the step measured without
#: the profiler (and, where there is one, the program's own CUDA-graph step); the ``_r1``,
#: ``_r2`` runs are probe ``torch_profiler_cost``'s re-runs of the same programs
_PROBE = "probes/torch_profiler_cost"
REPLAYS = {
    "replay_loader": ("torch2/loader_eager.json.gz", "torch2/loader_summary.json", "eager"),
    "replay_twostream": ("torch2/twostream_eager.json.gz", "torch2/twostream_summary.json",
                         "eager"),
    "replay_optstep_loop": ("torch2/optstep_loop.json.gz", "torch2/optstep_summary.json",
                            "loop"),
    "replay_optstep_foreach": ("torch2/optstep_foreach.json.gz", "torch2/optstep_summary.json",
                               "foreach"),
    "replay_optstep_loop_cap": ("torch2/optstep_loop_cap.json.gz",
                                "torch2/optstep_summary.json", "loop_cap"),
    "replay_mlp_w256_d4_eager": ("mlp_w256_d4_eager.json.gz", "mlp_w256_d4_summary.json.gz",
                                 "eager"),
    "replay_mlp_w1024_d8_eager": ("mlp_w1024_d8_eager.json.gz",
                                  "mlp_w1024_d8_summary.json.gz", "eager"),
    "replay_mlp_w256_d4_graph": ("mlp_w256_d4_graph.json.gz", "mlp_w256_d4_summary.json.gz",
                                 "graph"),
    "replay_mlp_w1024_d8_graph": ("mlp_w1024_d8_graph.json.gz",
                                  "mlp_w1024_d8_summary.json.gz", "graph"),
}
for _r in (1, 2):
    for _prog, _var in (("twostream", "eager"), ("twostream", "graph"), ("loader", "eager")):
        REPLAYS[f"replay_{_prog}{'_graph' if _var == 'graph' else ''}_r{_r}"] = (
            f"{_PROBE}/{_prog}_{_r}/{_prog}_{_var}.json.gz",
            f"{_PROBE}/{_prog}_{_r}/{_prog}_summary.json", _var)


def unprofiled_step_us(summary, variant):
    """The step of ``variant`` measured without the profiler, from a summary (torch2's
    ``noprof_sync`` median, or the MLP summaries' ``<variant>_us_per_step``), or None."""
    if "variants" in summary:
        v = summary["variants"].get(variant) or {}
        return (v.get("noprof_sync") or {}).get("median_wall_us")
    return summary.get(f"{variant}_us_per_step")


#: replays of the bundled torch2 traces -> their program in the repeated step_cost runs
REPEATED_STEPS = {"replay_loader": "loader", "replay_twostream": "twostream",
                  "replay_optstep_loop": "optstep", "replay_optstep_foreach": "optstep",
                  "replay_optstep_loop_cap": "optstep"}


def replay_rows(name, params, backend="compiled", device="h200"):
    """Validation rows of replay scenario ``name``: the step profiled (model under CUPTI
    against the trace), unprofiled (model without a profiler against the summary's step
    without one) and, for an eager trace whose program was also measured as a CUDA graph,
    the as-graph replay unprofiled against that graph's step."""
    import gzip
    import json
    from gpufe.sim.analysis.scenarios import HERE
    from gpufe.sim.analysis.validate import profiler_ratios, repeated_steps_us, scored
    trace, summary, variant = REPLAYS[name]
    path, spath = HERE / device / trace, HERE / device / summary
    raw = spath.read_bytes()
    summ = json.loads(gzip.decompress(raw) if spath.suffix == ".gz" else raw)
    located = read_trace_located(path)
    rows = []

    def step(as_graph, profiler, on_trace_host=False):
        result, steps = replay(path, params, as_graph=as_graph, profiler=profiler,
                               backend=backend, trace=located, on_trace_host=on_trace_host)
        return per_step_us(result.records, steps)

    def row(metric, as_graph, profiler, measured, runs=()):
        if measured is None:
            return
        rows.append(scored(name, metric, step(as_graph, profiler), [measured, *runs]))

    steps = count_steps(path, located[0])
    profiled = step(False, "cupti")
    rows.append(scored(name, "step_us", profiled, [per_step_us(located[0], steps)]))
    if name in REPEATED_STEPS:
        # what the profiler costs the program: the profiled step over the unprofiled one,
        # both on the trace's host, against the ratio each step_cost process measured
        ratios = profiler_ratios(REPEATED_STEPS[name], variant, device)
        if ratios:
            rows.append(scored(name, "profiler_ratio",
                               profiled / step(False, "off", on_trace_host=True),
                               ratios))
    # the bundled traces' own programs were measured again, unprofiled, five processes over
    # (probe third_recording): scored against the median of every round
    again = (repeated_steps_us(REPEATED_STEPS[name], variant, device)
             if name in REPEATED_STEPS else ())
    row("step_us_unprofiled", False, "off", unprofiled_step_us(summ, variant), again)
    if variant != "graph":
        again = (repeated_steps_us(REPEATED_STEPS[name], "graph", device)
                 if name in REPEATED_STEPS else ())
        row("graph_step_us_unprofiled", True, "off", unprofiled_step_us(summ, "graph"), again)
    return rows
