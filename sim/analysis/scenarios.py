"""Calibration scenarios: the programs of ``fe_trace.cu`` and ``fe_trace2.cu`` as workloads,
beside their traces.

Every reference trace's header names its program (``scenario``), its arguments (``params``)
and ``max_connections``; :func:`workload_from_header` writes the same program as a workload,
step for step (warm-ups, gates, repetitions, marks), with the fe_trace defaults for missing
arguments. The bundled scenarios (``sim/analysis/reference/h200/``) are a trace
(``NAME.jsonl.gz``, copied from the recording) and its workload (``NAME.json``, written by
``python -m gpufe.sim.analysis.scenarios``); the ``nocupti_*`` traces, recorded with CUPTI
off, hold only the marks (and fe_trace2's in-kernel stamps) and are compared with runs under
``--profiler off``. fe_trace2's ``procs`` runs several processes: its trace is the merge of
the per-process files (:func:`gpufe.sim.analysis.traces.merge_processes`, every record with
its ``pid``) and its workload has a ``processes`` list (one program a process) when P > 1.
:func:`bundle_fe_trace2` copies and merges the fe_trace2 files of the bundle.
"""

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).parent / "reference"
SMS_DEFAULT = 132


def _arg(params, key, default):
    return int(params.get(key, default))


def _dims(n):
    return [int(n), 1, 1]


def _work(stream, ns, grid=1, block=32):
    """fe_trace's launch_work: an empty kernel, or a spin kernel of ``ns`` a block."""
    if ns == 0:
        return {"op": "launch_kernel", "stream": stream, "kernel": "k_empty",
                "grid": _dims(grid), "block": _dims(block)}
    return {"op": "launch_kernel", "stream": stream, "kernel": "k_spin", "grid": _dims(grid),
            "block": _dims(block), "block_ns": ns}


def _gate(stream, ns):
    return {"op": "launch_kernel", "stream": stream, "kernel": "k_gate", "grid": [1, 1, 1],
            "block": [32, 1, 1], "block_ns": ns}


def _mark(what):
    return {"op": "mark", "what": what}


def _repeat(count, body):
    return {"op": "repeat", "count": count, "body": body}


def _chain(p, sms):
    n, ns, graph = _arg(p, "n", 1000), _arg(p, "ns", 0), _arg(p, "graph", 0)
    gate, reps = _arg(p, "gate", 0), _arg(p, "reps", 3)
    grid, block = _arg(p, "grid", 1), _arg(p, "block", 32)
    prog = [{"op": "stream_create", "name": "s"}]
    if graph:
        prog += [{"op": "stream_begin_capture", "stream": "s"},
                 _repeat(n, [_work("s", ns, grid, block)]),
                 {"op": "stream_end_capture", "stream": "s", "graph": "g"},
                 {"op": "graph_instantiate", "graph": "g"},
                 {"op": "graph_launch", "graph": "g", "stream": "s"},      # warm-up replay
                 {"op": "stream_synchronize", "stream": "s"}]
        body = [{"op": "graph_launch", "graph": "g", "stream": "s"}]
    else:
        prog += [_repeat(10, [_work("s", ns, grid, block)]),
                 {"op": "stream_synchronize", "stream": "s"}]
        body = [_repeat(n, [_work("s", ns, grid, block)])]
    rep = [_mark("rep_begin")] + ([_gate("s", gate)] if gate else []) + body + [
        _mark("issued"), {"op": "stream_synchronize", "stream": "s"}, _mark("rep_end")]
    return prog + [_repeat(reps, rep)]


def _hyperq(p, sms):
    S, K, ns = _arg(p, "streams", 8), _arg(p, "k", 4), _arg(p, "ns", 100000)
    order, reps = _arg(p, "order", 0), _arg(p, "reps", 3)
    names = [f"s{i}" for i in range(S)]
    prog = [{"op": "stream_create", "name": n} for n in names]
    prog += [_work(n, 0) for n in names] + [{"op": "device_synchronize"}]
    if order == 0:
        issue = [_repeat(K, [_work(n, ns)]) for n in names]
    else:
        issue = [_repeat(K, [_work(n, ns) for n in names])]
    rep = [_mark("rep_begin")] + issue + [{"op": "device_synchronize"}, _mark("rep_end")]
    return prog + [_repeat(reps, rep)]


def _events(p, sms):
    n, timing, gate = _arg(p, "n", 500), _arg(p, "timing", 1), _arg(p, "gate", 0)
    reps, ns = _arg(p, "reps", 3), _arg(p, "ns", 0)
    prog = [{"op": "stream_create", "name": "s"}]
    body = [_work("s", ns)]
    if timing >= 0:
        # fe_trace records a different event each time; one event re-recorded is the same
        # work for the front end
        prog.append({"op": "event_create", "name": "e", "timing": bool(timing)})
        body.append({"op": "event_record", "event": "e", "stream": "s"})
    rep = [_mark("rep_begin")] + ([_gate("s", gate)] if gate else []) + [_repeat(n, body)] + [
        {"op": "stream_synchronize", "stream": "s"}, _mark("rep_end")]
    return prog + [_repeat(reps, rep)]


def _xstream(p, sms):
    n, ns, timing = _arg(p, "n", 200), _arg(p, "ns", 20000), _arg(p, "timing", 0)
    prog = [{"op": "stream_create", "name": "a"}, {"op": "stream_create", "name": "b"},
            {"op": "event_create", "name": "e", "timing": bool(timing)},
            _work("a", 0), _work("b", 0), {"op": "device_synchronize"}, _mark("rep_begin"),
            _repeat(n, [_work("a", ns), {"op": "event_record", "event": "e", "stream": "a"},
                        {"op": "stream_wait_event", "stream": "b", "event": "e"},
                        _work("b", 0)]),
            {"op": "device_synchronize"}, _mark("rep_end")]
    return prog


def _priority(p, sms):
    lows, ns, delay = _arg(p, "lows", 10), _arg(p, "ns", 200000), _arg(p, "delay", 500000)
    prio, reps = _arg(p, "prio", 1), _arg(p, "reps", 5)
    prog = [{"op": "stream_create", "name": "low", "priority": 0},
            {"op": "stream_create", "name": "high", "priority": -5 if prio else 0},
            _work("low", 0), _work("high", 0), {"op": "device_synchronize"}]
    rep = [_mark("rep_begin"), _repeat(lows, [_work("low", ns, 2 * sms, 1024)]),
           {"op": "host_sleep", "ns": delay}, _mark("high_issue"), _work("high", 0),
           {"op": "device_synchronize"}, _mark("rep_end")]
    return prog + [_repeat(reps, rep)]


def _copy(p, sms):
    busy, reps = _arg(p, "busy", 0), _arg(p, "reps", 5)
    prog = [{"op": "stream_create", "name": "a"}, {"op": "stream_create", "name": "b"},
            {"op": "device_synchronize"}]
    for size in (4096, 65536, 1 << 20, 16 << 20, 64 << 20):
        for kind in ("h2d", "d2h", "d2d"):
            body = ([_work("a", 2000000)] if busy else []) + [
                {"op": "memcpy_async", "stream": "b", "kind": kind, "bytes": size},
                {"op": "device_synchronize"}]
            prog.append(_repeat(reps, body))
    return prog


def _sync(p, sms):
    n, how = _arg(p, "n", 200), _arg(p, "how", 0)
    prog = [{"op": "stream_create", "name": "s"},
            {"op": "event_create", "name": "e", "timing": False},
            _work("s", 0), {"op": "stream_synchronize", "stream": "s"}, _mark("rep_begin")]
    if how == 0:
        body = [_work("s", 0), {"op": "stream_synchronize", "stream": "s"}]
    else:
        wait = ({"op": "event_synchronize", "event": "e"} if how == 1
                else {"op": "event_query", "event": "e"})
        body = [_work("s", 0), {"op": "event_record", "event": "e", "stream": "s"}, wait]
    return prog + [_repeat(n, body), _mark("rep_end")]


def _grid(p, sms):
    n, grid, block = _arg(p, "n", 20), _arg(p, "grid", 1), _arg(p, "block", 128)
    gate = _arg(p, "gate", 2000000)
    return [{"op": "stream_create", "name": "s"}, _work("s", 0, grid, block),
            {"op": "stream_synchronize", "stream": "s"}, _mark("rep_begin"), _gate("s", gate),
            _repeat(n, [_work("s", 0, grid, block)]),
            {"op": "stream_synchronize", "stream": "s"}, _mark("rep_end")]


#: the H200's greatest stream priority (cudaDeviceGetStreamPriorityRange: -5 to 0)
GREATEST_PRIORITY = -5


def _actgap(p, sms):
    """fe_trace2 actgap: A streams, each behind its own gate, then n empty kernels on each,
    issued breadth-first (all chains are queued when the gates end). stamp=1: the chain
    kernels are k_stampp (thread 0 stores its start time) and the gates k_gate2 (stores its
    end), whose stamps are copied back after each repetition (the act_stamps records); the
    cudaMemset that clears the stamps before a repetition has no op (nothing is queued then:
    a device synchronize follows it).

    The third recording's priority runs: hi=K, streams s0..s(K-1) of the greatest priority
    (the H200's -5), the others of the least; load=W, one more stream of the least priority,
    created last, whose gate ends ``lead`` ns before the chains' and is followed by a
    full-GPU k_spin of W waves (2 blocks of 1024 threads a multiprocessor, ``lns`` ns a
    block). With hi or load, every kernel of the repetitions runs once before them."""
    A, n, gate = _arg(p, "A", 8), _arg(p, "n", 200), _arg(p, "gate", 20000000)
    reps, stamp = _arg(p, "reps", 2), _arg(p, "stamp", 0)
    hi, load = _arg(p, "hi", 0), _arg(p, "load", 0)
    lns, lead = _arg(p, "lns", 20000), _arg(p, "lead", 200000)
    names = [f"s{i}" for i in range(A)]
    chain = "k_stampp" if stamp else "k_empty"
    gate_kernel = "k_gate2" if stamp else "k_gate"
    if hi or load:
        prog = [{"op": "stream_create", "name": s, "priority": GREATEST_PRIORITY if i < hi else 0}
                for i, s in enumerate(names)]
    else:
        prog = [{"op": "stream_create", "name": s} for s in names]
    if load:
        # its warm-ups: the program's k_spin and k_gate, once each
        prog += [{"op": "stream_create", "name": "load", "priority": 0}, _work("load", 0),
                 _gate("load", 0)]
    prog += [_work(s, 0) for s in names]
    if (hi or load) and stamp:
        # the reps' kernels run once first (the third recording's program: lazy loading)
        prog += [op for s in names for op in (dict(_gate(s, 0), kernel=gate_kernel),
                                              dict(_work(s, 0), kernel=chain))]
    prog += [{"op": "device_synchronize"}]
    gates = [dict(_gate(s, gate), kernel=gate_kernel) for s in names]
    if load:
        gates += [_gate("load", max(gate - lead, 0)), _work("load", lns, 2 * sms * load, 1024)]
    issue = [dict(_work(s, 0), kernel=chain) for s in names]
    rep = ([{"op": "device_synchronize"}, _mark("rep_begin")] + gates
           + [_mark("gates_issued"), _repeat(n, issue), _mark("issued"),
              {"op": "device_synchronize"}, _mark("rep_end")])
    if stamp:
        # cudaMemcpy of the stamps (A x (n + 1) words), synchronous
        rep += [{"op": "memcpy_async", "stream": names[0], "kind": "d2h",
                 "bytes": A * (n + 1) * 8},
                {"op": "stream_synchronize", "stream": names[0]}]
    return prog + [_repeat(reps, rep)]


#: fe_trace2 procs: k_gtres's 100,000 timer reads (its gt_res record's span on the H200)
GTRES_NS = 2_680_000
#: fe_trace2 procs: words of one k_work record (4 + 2 x 64 switched-out intervals)
WREC = 4 + 2 * 64


def _procs_program(p, sms, meet):
    """One process of fe_trace2 procs: a stream, warm-ups, then `reps` repetitions of k
    k_work kernels of `ns` running time (grid x block), or with empty=1 of n empty kernels,
    back to back, each repetition followed (k_work) by the copies of the kernels' records.
    fe_trace2 starts repetition r of every process at go + r x period on the wall clock,
    the period far longer than a repetition: a meeting of all processes (`meet`, a global
    barrier) before each repetition gives the same common start without simulating the idle
    time between. The cudaMemset calls that clear the records have no op (nothing is
    running then)."""
    k, ns, grid, block = _arg(p, "k", 20), _arg(p, "ns", 1000000), _arg(p, "grid", 1), \
        _arg(p, "block", 32)
    empty, n, reps = _arg(p, "empty", 0), _arg(p, "n", 2000), _arg(p, "reps", 3)

    def k_work(block_ns):
        return dict(_work("s", block_ns, grid, block), kernel="k_work")

    def copy(nbytes):                   # cudaMemcpy: synchronous
        return [{"op": "memcpy_async", "stream": "s", "kind": "d2h", "bytes": nbytes},
                {"op": "stream_synchronize", "stream": "s"}]

    prog = [{"op": "stream_create", "name": "s"},
            {"op": "launch_kernel", "stream": "s", "kernel": "k_gtres", "grid": [1, 1, 1],
             "block": [1, 1, 1], "block_ns": GTRES_NS}]
    prog += copy(32)
    prog += [k_work(1000), _repeat(10, [_work("s", 0)]),
             {"op": "stream_synchronize", "stream": "s"}]
    work = _repeat(n, [_work("s", 0)]) if empty else _repeat(k, [k_work(ns)])
    rep = meet + [_mark("rep_begin"), work, _mark("issued"),
                  {"op": "stream_synchronize", "stream": "s"}, _mark("rep_end")]
    if not empty:
        rep += copy(k * WREC * 8) + copy(k * grid * 8)
    return prog + [_repeat(reps, rep)]


def _procs(p, sms):
    """fe_trace2 procs, P = 1: one process (nothing to meet)."""
    return _procs_program(p, sms, [])


def _procs_processes(p, sms, mc):
    """fe_trace2 procs, P > 1: P processes p0, p1, ... (forked before any CUDA call, so each
    has its own context), the same program each, meeting before every repetition."""
    out = []
    for i in range(_arg(p, "P", 2)):
        proc = {"name": f"p{i}"}
        if mc != "default":
            proc["max_connections"] = int(mc)
        proc["program"] = _procs_program(p, sms, [{"op": "barrier", "name": "global:start"}])
        out.append(proc)
    return out


def _gupdate(p, sms):
    """fe_trace2 gupdate: a graph of n chained k_spin(v) nodes (v = 0 at first); after a
    build (capture, instantiate, first launch) and reps plain relaunches, reps each of (a)
    cudaGraphExecKernelNodeSetParams on every node (v = 100 (r + 1)), (b) a recapture (v + 50)
    and cudaGraphExecUpdate, (c) a recapture (v + 20), cudaGraphExecDestroy and
    cudaGraphInstantiate of the new graph; each then launched and synchronised. Marks
    ``gu:<phase>:<a, b, ...>`` stand where the program reads its clock (the trace's gu_*
    records hold the intervals between them)."""
    n, reps = _arg(p, "n", 100), _arg(p, "reps", 5)

    def spin(ns):
        return {"op": "launch_kernel", "stream": "s", "kernel": "k_spin", "grid": [1, 1, 1],
                "block": [32, 1, 1], "block_ns": ns}

    def capture(graph, ns):
        return [{"op": "stream_begin_capture", "stream": "s"}, _repeat(n, [spin(ns)]),
                {"op": "stream_end_capture", "stream": "s", "graph": graph}]

    def launch_sync(graph):
        return [{"op": "graph_launch", "graph": graph, "stream": "s"},
                {"op": "stream_synchronize", "stream": "s"}]

    prog = [{"op": "stream_create", "name": "s"}, spin(0),
            {"op": "stream_synchronize", "stream": "s"}, _mark("gu:build:a")]
    prog += capture("g", 0) + [_mark("gu:build:b"), {"op": "graph_instantiate", "graph": "g"},
                               _mark("gu:build:c")]
    prog += launch_sync("g") + [_mark("gu:build:d")]
    for _ in range(reps):
        prog += [_mark("rep_begin"), _mark("gu:base:a")] + launch_sync("g") + \
            [_mark("gu:base:b"), _mark("rep_end")]
    for r in range(reps):
        prog += [_mark("rep_begin"), _mark("gu:set:a"),
                 {"op": "graph_exec_set_params", "graph": "g", "nodes": "all",
                  "block_ns": 100 * (r + 1)}, _mark("gu:set:b")]
        prog += launch_sync("g") + [_mark("gu:set:c"), _mark("rep_end")]
    for r in range(reps):
        prog += [_mark("rep_begin"), _mark("gu:update:a")] + \
            capture(f"u{r}", 100 * (r + 1) + 50) + [_mark("gu:update:b"),
                                                    {"op": "graph_exec_update", "graph": "g",
                                                     "from": f"u{r}"}, _mark("gu:update:c")]
        prog += launch_sync("g") + [_mark("gu:update:d"), _mark("rep_end")]
    current = "g"
    for r in range(reps):
        prog += [_mark("rep_begin"), _mark("gu:reinst:a")] + \
            capture(f"r{r}", 100 * (r + 1) + 20) + [_mark("gu:reinst:b"),
                                                    {"op": "graph_exec_destroy",
                                                     "graph": current}, _mark("gu:reinst:c"),
                                                    {"op": "graph_instantiate",
                                                     "graph": f"r{r}"}, _mark("gu:reinst:d")]
        current = f"r{r}"
        prog += launch_sync(current) + [_mark("gu:reinst:e"), _mark("rep_end")]
    return prog


#: fe_trace2 k_pdl: a block's time from its entry to its dependency wait's return, and from
#: that return to its exit, with no wait and ns = 0 (its stamps, median, on the H200: the
#: timer reads and stores the kernel makes)
PDL_PROLOGUE_NS = 64
PDL_EPILOGUE_NS = 64


def _pdl(p, sms):
    """fe_trace2 pdl: a chain of n k_pdl kernels (cudaLaunchKernelEx, programmatic stream
    serialization = pdl; trigger: each block triggers first), on a stream, or captured
    (graph = 1: PDL launches become programmatic edges) and launched as a graph; each
    repetition behind a plain gate kernel when gate > 0. stamp = 1: block 0 stamps its
    entry, its wait's return and its exit, copied back after each repetition (the
    pdl_stamps records). The kernel's own code is a prologue of PDL_PROLOGUE_NS before its
    dependency wait and ns + PDL_EPILOGUE_NS after it."""
    n, ns = _arg(p, "n", 300), _arg(p, "ns", 0)
    pdl, trig = _arg(p, "pdl", 1), _arg(p, "trigger", 0)
    graph, reps, gate = _arg(p, "graph", 0), _arg(p, "reps", 5), _arg(p, "gate", 0)
    stamp, grid, block = _arg(p, "stamp", 0), _arg(p, "grid", 1), _arg(p, "block", 32)
    k = {"op": "launch_kernel", "stream": "s", "kernel": "k_pdl", "grid": _dims(grid),
         "block": _dims(block), "block_ns": ns + PDL_EPILOGUE_NS,
         "prologue_ns": PDL_PROLOGUE_NS, "pdl": bool(pdl)}
    if trig:
        k["trigger_ns"] = 0
    prog = [{"op": "stream_create", "name": "s"}]
    if graph:
        prog += [{"op": "stream_begin_capture", "stream": "s"}, _repeat(n, [k]),
                 {"op": "stream_end_capture", "stream": "s", "graph": "g"},
                 {"op": "graph_instantiate", "graph": "g"},
                 {"op": "graph_launch", "graph": "g", "stream": "s"},     # upload, warm-up
                 {"op": "stream_synchronize", "stream": "s"}]
        issue = [{"op": "graph_launch", "graph": "g", "stream": "s"}]
    else:
        prog += [_repeat(10, [k]), {"op": "stream_synchronize", "stream": "s"}]
        issue = [_repeat(n, [k])]
    rep = ([_mark("rep_begin")] + ([_gate("s", gate)] if gate else []) + issue
           + [_mark("issued"), {"op": "stream_synchronize", "stream": "s"}, _mark("rep_end")])
    if stamp:
        # cudaMemcpy of the stamps (3 words a kernel), synchronous
        rep += [{"op": "memcpy_async", "stream": "s", "kind": "d2h", "bytes": n * 3 * 8},
                {"op": "stream_synchronize", "stream": "s"}]
    return prog + [_repeat(reps, rep)]


def _threads(p, sms):
    """fe_trace2 threads: T host threads, each launching n empty kernels on its own stream
    (shared = 1: all on one stream) after a common start, then synchronising its stream; the
    main thread creates the streams (each warmed up with 10 kernels) and marks each
    repetition. Each launching thread marks its loop's start and end (``loop_start``,
    ``loop_end``, with its ``tid``: the trace's thread_loop records)."""
    T, n, shared, reps = _arg(p, "T", 4), _arg(p, "n", 2000), _arg(p, "shared", 0), \
        _arg(p, "reps", 3)
    names = ["s"] if shared else [f"s{i}" for i in range(T)]
    main = [{"op": "stream_create", "name": s} for s in names]
    main += [_repeat(10, [_work(s, 0) for s in names]), {"op": "device_synchronize"},
             {"op": "barrier", "name": "setup"}]
    main += [_repeat(reps, [{"op": "barrier", "name": "ready"}, _mark("rep_begin"),
                            {"op": "barrier", "name": "go"}, {"op": "barrier", "name": "done"},
                            _mark("rep_end")])]
    threads = [{"name": "main", "program": main}]
    for i in range(T):
        s = names[0 if shared else i]
        loop = [{"op": "barrier", "name": "ready"}, {"op": "barrier", "name": "go"},
                _mark("loop_start"), _repeat(n, [_work(s, 0)]), _mark("loop_end"),
                {"op": "stream_synchronize", "stream": s}, {"op": "barrier", "name": "done"}]
        threads.append({"name": f"t{i}", "program": [{"op": "barrier", "name": "setup"},
                                                     _repeat(reps, loop)]})
    return threads


def _cond(p, sms):
    """fe_trace2 cond: a body of b empty kernels and a control kernel (k_cond_dec, which
    decrements a counter and sets the condition) run m times: host = 0, by a WHILE
    conditional node after k_set (which sets the counter), one graph launch; host = 1, as
    a graph of its own (control kernel k_dec) launched m times after a k_set launch. Each
    repetition (behind a gate kernel when gate > 0) is launched and synchronised, then the
    counter, the iteration count and the control kernel's stamps are copied back (three
    cudaMemcpy); the cudaMemset of the stamps before it has no op (a device synchronize
    follows it)."""
    b, m, host = _arg(p, "b", 1), _arg(p, "m", 10), _arg(p, "host", 0)
    reps, gate = _arg(p, "reps", 3), _arg(p, "gate", 0)

    def kernel(name):
        return {"op": "launch_kernel", "stream": "s", "kernel": name, "grid": [1, 1, 1],
                "block": [32, 1, 1]}

    def capture(graph, ops):
        return ([{"op": "stream_begin_capture", "stream": "s"}] + ops
                + [{"op": "stream_end_capture", "stream": "s", "graph": graph}])

    glaunch = {"op": "graph_launch", "graph": "g", "stream": "s"}
    prog = [{"op": "stream_create", "name": "s"}]
    if host:
        prog += capture("g", [kernel("k_empty")] * b + [kernel("k_dec")])
        one = [kernel("k_set"), _repeat(m, [glaunch])]
    else:
        prog += capture("body", [kernel("k_empty")] * b + [kernel("k_cond_dec")])
        prog += capture("g", [kernel("k_set")])
        prog += [{"op": "graph_add_conditional", "graph": "g", "kind": "while",
                  "body": "body", "iterations": m}]
        one = [glaunch]
    prog += [{"op": "graph_instantiate", "graph": "g"}] + one
    prog += [{"op": "stream_synchronize", "stream": "s"}]
    copies = [{"op": "memcpy_async", "stream": "s", "kind": "d2h", "bytes": n}
              for n in (4, 4, (m + 8) * 8)]
    rep = ([{"op": "device_synchronize"}, _mark("rep_begin")]
           + ([_gate("s", gate)] if gate else []) + one
           + [_mark("issued"), {"op": "stream_synchronize", "stream": "s"}, _mark("rep_end")]
           + [x for c in copies for x in (c, {"op": "stream_synchronize", "stream": "s"})])
    return prog + [_repeat(reps, rep)]


#: fe_trace2 k_stamp's work: a load of the iteration counter, then the store of its stamp
#: (its CUPTI-recorded duration less k_empty's in the same kind of host-launched graph on the
#: H200: 225, 288 and 257 ns with 1, 2 and 4 a graph, dl_host_b* against condhost_b*)
K_STAMP_NS = 257

#: devlaunch's modes: host launches, fire-and-forget from a launcher kernel, tail
#: self-relaunch, a tail loop started fire-and-forget, host launches of a graph whose
#: control kernel holds no device-launch code
DEVLAUNCH_MODES = ("host", "ff", "tail", "tailff", "hostplain")


def _devlaunch(p, sms):
    """fe_trace2 devlaunch: graph G = b k_stamp kernels then a control kernel (each stamps
    its start; k_ctrl holds device-side cudaGraphLaunch code, k_ctrl_plain, mode 4, none),
    run m times after k_set: launched m times from the host (mode 0, 4); by m host launches
    of a graph L whose one kernel, k_launcher, launches G fire-and-forget (1); by one host
    launch of G whose control kernel tail-launches G while the counter lasts, m - 1 times (2);
    as 2, started by one launch of L (3). G is instantiated for device launch in modes 1-3.
    Each repetition (behind a gate kernel when gate > 0) is launched and synchronised, the
    counters read back (two cudaMemcpy, the trace's drain), then the error word and the
    stamps (three cudaMemcpy); the memsets before it have no op (a device synchronize
    follows them)."""
    b, m, mode = _arg(p, "b", 1), _arg(p, "m", 10), _arg(p, "mode", 0)
    reps, gate = _arg(p, "reps", 3), _arg(p, "gate", 0)
    if not 0 <= mode < len(DEVLAUNCH_MODES):
        raise ScenarioError(f"devlaunch mode {mode}: 0..{len(DEVLAUNCH_MODES) - 1}")

    def kernel(name, dgl=None, ns=0):
        k = {"op": "launch_kernel", "stream": "s", "kernel": name, "grid": [1, 1, 1],
             "block": [32, 1, 1]}
        if ns:
            k["block_ns"] = ns
        if dgl is not None:
            k["device_graph_launch"] = dgl
        return k

    def capture(graph, ops):
        return ([{"op": "stream_begin_capture", "stream": "s"}] + ops
                + [{"op": "stream_end_capture", "stream": "s", "graph": graph}])

    def launch(graph):
        return {"op": "graph_launch", "graph": graph, "stream": "s"}

    relaunch = mode in (2, 3)
    ctrl = (kernel("k_ctrl_plain") if mode == 4 else
            kernel("k_ctrl", {"graph": "G", "mode": "tail", "count": m - 1 if relaunch else 0}))
    sync = {"op": "stream_synchronize", "stream": "s"}
    prog = [{"op": "stream_create", "name": "s"}]
    prog += capture("G", [kernel("k_stamp", ns=K_STAMP_NS)] * b + [ctrl])
    prog += [{"op": "graph_instantiate", "graph": "G", "device_launch": 1 <= mode <= 3}, sync]
    if mode in (1, 3):
        prog += capture("L", [kernel("k_launcher", {"graph": "G", "mode": "fire_and_forget"})])
        prog += [{"op": "graph_instantiate", "graph": "L"}]
    host = "L" if mode in (1, 3) else "G"
    one = [kernel("k_set"), _repeat(1 if relaunch else m, [launch(host)])]

    def copies(sizes):
        return [x for n in sizes for x in ({"op": "memcpy_async", "stream": "s", "kind": "d2h",
                                             "bytes": n}, sync)]

    stamps = (m + 4) * (b + 1) * 8
    prog += one + [sync] + copies((4, 4)) + [{"op": "device_synchronize"}]
    rep = ([{"op": "device_synchronize"}, _mark("rep_begin")]
           + ([_gate("s", gate)] if gate else []) + one
           + [_mark("issued"), sync, _mark("rep_end")] + copies((4, 4))
           + [{"op": "device_synchronize"}] + copies((4, stamps, (m + 4) * 16)))
    return prog + [_repeat(reps, rep)]


PROGRAMS = {"chain": _chain, "hyperq": _hyperq, "events": _events, "xstream": _xstream,
            "priority": _priority, "copy": _copy, "sync": _sync, "grid": _grid,
            "actgap": _actgap, "procs": _procs, "gupdate": _gupdate, "pdl": _pdl,
            "threads": _threads, "cond": _cond, "devlaunch": _devlaunch}
#: programs of fe_trace2.cu (the second set), the others are fe_trace.cu's
FE_TRACE2 = {"actgap", "procs", "gupdate", "pdl", "threads", "cond", "devlaunch"}
#: programs whose workload is several host threads (``threads``), not one program
THREADED = {"threads"}


class ScenarioError(ValueError):
    pass


def workload_from_header(header, name=None):
    """The workload of the fe_trace program a trace header describes."""
    sc = header.get("scenario")
    if sc not in PROGRAMS:
        raise ScenarioError(f"unknown fe_trace program {sc!r} (known: {', '.join(PROGRAMS)})")
    params = header.get("params") or {}
    mc = header.get("max_connections", "default")
    sms = header.get("sms") or SMS_DEFAULT
    tool = "fe_trace2" if sc in FE_TRACE2 else "fe_trace"
    w = {"name": name or sc,
         "description": f"{tool} {sc} " + " ".join(f"{k}={v}" for k, v in params.items())}
    if sc == "procs" and _arg(params, "P", 2) < 1:
        raise ScenarioError(f"procs needs P >= 1 processes, not {params.get('P')!r}")
    if sc == "procs" and _arg(params, "P", 2) > 1:
        # several processes: each its own context, with its own connections
        w["processes"] = _procs_processes(params, sms, mc)
        return w
    w["threads" if sc in THREADED else "program"] = PROGRAMS[sc](params, sms)
    if mc != "default":
        w["max_connections"] = int(mc)
    return w


def program_of(name, device="h200"):
    """The fe_trace program of a bundled scenario ("pbfull" for the push-buffer-full run)."""
    if name == "pbfull":
        return "pbfull"
    from gpufe.sim.analysis.traces import read_fe_trace
    return read_fe_trace(scenario_paths(name, device)[1])[0]["scenario"]


def scenario_names(device="h200"):
    return sorted(p.name[:-len(".jsonl.gz")] for p in (HERE / device).glob("*.jsonl.gz"))


def scenario_paths(name, device="h200"):
    """(workload path, trace path) of a bundled scenario."""
    d = HERE / device
    return d / f"{name}.json", d / f"{name}.jsonl.gz"


def write_workloads(device="h200"):
    """(Re)write the workload of every bundled trace from its header."""
    from gpufe.sim.analysis.traces import read_fe_trace
    for name in scenario_names(device):
        wpath, tpath = scenario_paths(name, device)
        header = read_fe_trace(tpath)[0]
        w = workload_from_header(header, name)
        wpath.write_text(json.dumps(w, indent=1) + "\n")


#: pdl: (pdl, trigger) of the runs: no PDL, PDL, PDL with an early trigger
PDL_MODES = ((0, 0), (1, 0), (1, 1))

#: the fe_trace2 recordings bundled: actgap with and without CUPTI (in-kernel stamps) for
#: every A, 32 connections, 100 ms gates (with 20 ms gates the launches of 16 and 32
#: streams are not all queued when the gates end); procs with 1 and 2 processes, 20 x 1 ms
#: kernels (small), 3 x 20 ms (long), 2000 empty kernels (empty, P = 2 only: alone it is
#: chain_stream's launch-bound loop). The full-grid variants (full, half) are left out:
#: their kernels over-run their spin time at full occupancy, which is the SMs', not the
#: front end's. cond: the WHILE node and the host's launches of its body graph, 100 and
#: 1000 iterations, without CUPTI (and the host launches behind a gate: queued), and the
#: 100-iteration runs with it. threads: every T, own streams and a shared one, with and
#: without CUPTI.
#: pdl: the in-kernel stamp runs, every mode, stream (behind a gate) and graph,
#: without CUPTI, and with it for no PDL and PDL with an early trigger at ns = 2000.
#: devlaunch: every mode at m = 100, with and without CUPTI, and the host-launched and
#: fire-and-forget ones behind a gate too (tailff was recorded with CUPTI only)
FE_TRACE2_BUNDLE = ([f"actgap_c32_A{a}_g100" for a in (1, 2, 4, 8, 16, 32)]
                    + [f"nocupti_actgap_stamp_c32_A{a}_g100" for a in (1, 2, 4, 8, 16, 32)]
                    + ["procs_small_P1", "procs_small_P2", "procs_long_P1", "procs_long_P2",
                       "procs_empty_P2"]
                    + [f"{p}gupdate_n{n}" for p in ("", "nocupti_") for n in (10, 100)]
                    + [f"nocupti_pdl_stamp_p{p}_t{t}_ns{ns}_g{g}" for p, t in PDL_MODES
                       for ns in (0, 2000) for g in (0, 1)]
                    + [f"pdl_stamp_p{p}_t{t}_ns2000_g{g}" for p, t in ((0, 0), (1, 1))
                       for g in (0, 1)]
                    + [f"{p}threads_T{t}_sh{sh}" for p in ("", "nocupti_")
                       for t in (1, 2, 4, 8) for sh in (0, 1) if t > 1 or not sh]
                    + [f"{p}cond{h}_b1_m{m}{g}" for p in ("", "nocupti_") for h in ("", "host")
                       for m in (100, 1000) for g in ("", "_gate")
                       if not (g and not h) and (p or m == 100)]
                    + [f"{p}dl_{mode}_b1_m100{g}" for p in ("", "nocupti_")
                       for mode in DEVLAUNCH_MODES for g in ("", "_gate")
                       if not (g and mode in ("tail", "tailff"))
                       and not (p and mode == "tailff")])


#: the third recording's (probe ``third_recording``, issue 46) wider sizes, bundled as
#: validation scenarios: priority among A chains at 16 connections (and with the SMs held
#: full), host threads T = 3, 6, 12, graph update at n = 30, 300, 3,000, PDL chains of 5 and
#: 50 us kernels, conditional and device-launched bodies of 2 and 4 kernels; each with and
#: without CUPTI as the second set's programs were
PRIO_LOAD = ((1, 0), (1, 1), (4, 0), (4, 1), (4, 2))
THIRD_BUNDLE = ([f"{p}_c16_A{a}_g100_hi{h}" for p in ("actgap", "nocupti_actgap_stamp")
                 for a in (4, 12, 24) for h in (0, 1, 2)]
                + [f"{p}_c16_A{a}_g100_hi{h}_load100" for p in ("actgap", "nocupti_actgap_stamp")
                   for a, h in PRIO_LOAD]
                + [f"{p}threads_T{t}_sh{sh}" for p in ("", "nocupti_") for t in (3, 6, 12)
                   for sh in (0, 1)]
                + [f"{p}gupdate_n{n}" for p in ("", "nocupti_") for n in (30, 300, 3000)]
                + [f"{p}pdl_stamp_p{a}_t{t}_ns{ns}_g{g}" for p in ("", "nocupti_")
                   for a, t in PDL_MODES for ns in (5000, 50000) for g in (0, 1)]
                + [f"{p}cond{h}_b{b}_m{m}{g}" for p in ("", "nocupti_") for h in ("", "host")
                   for b in (2, 4) for m in (100, 1000) for g in ("", "_gate")
                   if not (g and not h) and (p or m == 100)]
                + [f"{p}dl_{mode}_b{b}_m100{g}" for p in ("", "nocupti_")
                   for mode in DEVLAUNCH_MODES for b in (2, 4) for g in ("", "_gate")
                   if not (g and mode in ("tail", "tailff"))
                   and not (p and mode == "tailff")])


def bundle_fe_trace2(src, device="h200", names=FE_TRACE2_BUNDLE):
    """Copy the fe_trace2 recordings ``names`` from ``src`` (the folder of ``fe_trace2.cu``'s
    output, gzipped) into the bundle: a one-process trace as it is, a procs run as the merge
    of its parent's and children's files; then write their workloads."""
    import shutil
    from gpufe.sim.analysis.traces import merge_processes, read_fe_trace, write_fe_trace
    src = pathlib.Path(src)
    for name in names:
        path = src / f"{name}.jsonl.gz"
        header = read_fe_trace(path)[0]
        out = scenario_paths(name, device)[1]
        if header.get("scenario") == "procs":
            P = _arg(header.get("params") or {}, "P", 2)
            kids = [src / f"{name}.p{i}.jsonl.gz" for i in range(P)]
            write_fe_trace(merge_processes(path, kids), out)
        else:
            shutil.copyfile(path, out)
    write_workloads(device)


if __name__ == "__main__":
    write_workloads(*(sys.argv[1:2] or ["h200"]))
