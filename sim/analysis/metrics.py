"""Metrics of a timeline, computed by the same code on measured and simulated traces.

This is the one definition of every figure gpufe reports about a timeline: ``gpufe metrics``,
``gpufe validate``, ``gpufe calibrate`` and the summary of ``gpufe run`` (text and ``--json``)
all take their numbers from :class:`TimelineDigest`, which gathers them one record at a time
(so that a streamed run needs no list of its records); :func:`metrics` feeds it a list.

Every metric is a median unless its name says otherwise; times in us. Where the trace marks
repetitions (``rep_begin``/``rep_end``), only what starts inside them counts (the marks
themselves included): warm-ups and one-off costs (the first launch loads the module) stay
out. A repetition runs from a ``rep_begin`` mark to the next ``rep_end`` (the oldest one open
ends first; an end with none open is ignored); one still open when the trace ends counts what
starts in it but has no wall time. Medians of fewer than :data:`MIN_SAMPLES` values are not
reported, except wall time and GPU span per repetition. A metric that the trace has no data
for is left out (a graph-only trace has no stream gaps; a Kineto trace has no channels or
queued/submitted times).

A timeline of several processes (records with a ``pid``) keeps them apart where it matters:
each process's ``rep_end`` closes its own repetition, and streams and channels are the
process's own. The figures of one program that need the whole timeline (fe_trace2's
``actgap`` and ``procs``: per-stream periods, time slices, context switches) are
:func:`scenario_metrics`, beside the digest (:data:`SCENARIO_METRICS`).
"""

import heapq
import statistics
from array import array

from gpufe.rtl.layouts import COPY_KINDS as COPY_KIND_CODES

#: metric -> what it is (units in the name)
METRICS = {
    "repetitions": "repetitions marked, rep_begin to rep_end (count; when marked, the other "
                   "metrics count only what starts inside them)",
    "wall_per_rep_us": "wall time of a repetition, rep_begin to rep_end mark",
    "gpu_span_us": "first kernel/copy start to last end, per repetition when marked",
    "trace_us": "header to footer mark: the whole trace, repetitions or not (a model run's "
                "simulated time)",
    "api_calls": "CUDA runtime API calls (count)",
    "kernels": "kernels in the trace (count)",
    "copies": "copies in the trace (count)",
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
    "copy_h2d_bytes": "size of the largest host-to-device copy (bytes)",
    "copy_h2d_gbps": "bandwidth of the largest host-to-device copy (GB/s)",
    "copy_d2h_bytes": "size of the largest device-to-host copy (bytes)",
    "copy_d2h_gbps": "bandwidth of the largest device-to-host copy (GB/s)",
    "copy_d2d_bytes": "size of the largest device-to-device copy (bytes)",
    "copy_d2d_gbps": "bandwidth of the largest device-to-device copy (GB/s)",
    "sync_return_us": "kernel end (or the call, if later) -> the synchronize call returns",
}

#: metric -> what it is, for the figures of one program (:func:`scenario_metrics`): fe_trace2's
#: actgap and procs. Medians over every sample there is (no :data:`MIN_SAMPLES`: a sample of
#: stream_period_us is itself a mean over a chain).
SCENARIO_METRICS = {
    "stream_period_us": "actgap: a stream's mean period between chain kernel starts in a "
                        "repetition, (last start - first start) / (n - 1); median over the "
                        "streams of every repetition (from act_stamps where the trace has "
                        "them, else kernel starts)",
    "kernels_per_us": "actgap: chain kernels of all streams / (last start - first start) in a "
                      "repetition; median over repetitions",
    "hi_period_us": "actgap with hi=K: stream_period_us of the K streams of the greatest "
                    "priority alone",
    "lo_period_us": "actgap with hi=K: stream_period_us of the other streams alone",
    "hi_chain_us": "actgap with hi=K: a high-priority stream's gate end -> its last chain "
                   "kernel's start, median over streams and repetitions",
    "lo_chain_us": "actgap with hi or load: the same for the streams of the least priority "
                   "(with load, the SMs are held full by a low-priority kernel: what priority "
                   "buys shows against hi_chain_us)",
    "timeslice_run_us": "procs: a process's running stretch between two switches that "
                        "interrupted its work",
    "switched_out_us": "procs: a process's work interrupted: switched out -> running again",
    "switch_us": "procs: one context switch (model: a ctxsw record, into a process with work "
                 "waiting; H200: (switched_out - (P - 1) x timeslice_run) / P)",
    "run_len": "procs, empty kernels: consecutive kernels of one process, all processes' "
               "kernels in start order (count)",
    "switch_gap_us": "procs, empty kernels: start - previous end where the process changes",
    "kernel_span_us": "procs: a kernel's start to end (switched-out time included)",
    "makespan_us": "procs: first kernel start to last kernel end over all processes, per "
                   "repetition",
    "gu_capture_us": "gupdate: capturing the n-node chain (begin to end capture), first time",
    "gu_instantiate_us": "gupdate: cudaGraphInstantiate of it, first time",
    "gu_first_launch_sync_us": "gupdate: its first launch and the stream synchronisation",
    "gu_base_launch_sync_us": "gupdate: a later launch and synchronisation (median of reps)",
    "gu_set_per_node_us": "gupdate: cudaGraphExecKernelNodeSetParams on every node, per node",
    "gu_set_launch_sync_us": "gupdate: the launch and synchronisation after SetParams",
    "gu_update_capture_us": "gupdate: a recapture of the chain",
    "gu_update_us": "gupdate: cudaGraphExecUpdate from the recaptured graph",
    "gu_update_launch_sync_us": "gupdate: the launch and synchronisation after the update",
    "gu_destroy_us": "gupdate: cudaGraphExecDestroy",
    "gu_reinstantiate_us": "gupdate: cudaGraphInstantiate of a recaptured graph after the "
                           "destroy",
    "gu_reinst_launch_sync_us": "gupdate: the re-instantiated graph's first launch and "
                                "synchronisation",
    "thread_launch_us": "threads: a launching thread's loop time / its launches (median "
                        "over threads and repetitions)",
    "threads_launches_per_us": "threads: all threads' launches / (last loop end - first "
                               "loop start) in a repetition; median over repetitions",
    "cond_iteration_us": "cond: the control kernel's period, one iteration of the body "
                         "(its stamps; the model: its starts), median over iterations and "
                         "repetitions",
    "cond_wall_per_iter_us": "cond: a repetition's launch and synchronisation / its "
                             "iterations (runs without a gate)",
    "dl_period_us": "devlaunch: graph G's first kernel's start, one iteration to the next "
                    "(its stamps; the model: its starts), median over iterations and "
                    "repetitions",
    "dl_ctrl_to_next_us": "devlaunch: G's control kernel's start -> the next iteration's "
                          "first kernel's start",
    "dl_first_to_ctrl_us": "devlaunch: G's first kernel's start -> its control kernel's",
    "dl_call_us": "devlaunch: the launcher kernel's device-side cudaGraphLaunch "
                  "(fire-and-forget) call, timer read before to after",
    "dl_ret_to_first_us": "devlaunch: the launcher's call returned -> the launched G's first "
                          "kernel's start",
    "dl_wall_per_iter_us": "devlaunch: a repetition's launch and synchronisation / m "
                           "(runs without a gate)",
    "dl_issue_us": "devlaunch, modes launched m times from the host (host, ff, hostplain): "
                   "a repetition's issue (its start -> the ``issued`` mark, the host's "
                   "launches of k_set, the gate and the m graphs) / m, median over "
                   "repetitions; the host's time per graph launch where the trace has no API "
                   "records (unprofiled)",
    "pdl_exit_period_us": "pdl: exit of chain kernel i+1 - exit of kernel i (block 0's "
                          "stamps; the model: its last block's code end, the record's "
                          "``exit``), pooled over repetitions",
    "pdl_dep_latency_us": "pdl: exit of kernel i -> return of cudaGridDependencySynchronize "
                          "in kernel i+1",
    "pdl_resident_wait_us": "pdl: a kernel's entry -> return of its dependency wait (time "
                            "resident before its primary let it go on); only where the "
                            "median is above 1 us (an early trigger)",
}

#: CUPTI copy kind -> its name in the metrics (copy_<name>_gbps, copy_<name>_bytes)
#: copy-kind code (the wire format's, as CUPTI's) -> name
COPY_KIND_NAMES = {code: name for name, code in COPY_KIND_CODES.items()}
#: a launch call blocked for space if it took longer than this and 10 times the median
BLOCKED_NS = 50_000
#: medians of fewer samples are not reported (one launch delayed by the OS is not a figure)
MIN_SAMPLES = 5


def _same_process(a, b):
    """Whether two records' processes match (a record without one matches any)."""
    return a is None or b is None or a == b


def metrics(records):
    """The metrics of a timeline (a list of records in any order): {name: value}, in the
    order of :data:`METRICS`. The records are taken in timeline order (time, marks first),
    records of the same time as listed."""
    d = TimelineDigest()
    for r in sorted(records, key=_time_order):
        d.add(r)
    return d.metrics()


def _time_order(r):
    return (r.get("t", r.get("start")), r["kind"] != "meta")


def max_concurrent(jobs):
    """Most of ``jobs`` (records with start and end) running at once; an end at a time comes
    before a start at that time."""
    edges = sorted([(j["start"], 1) for j in jobs] + [(j["end"], -1) for j in jobs])
    run = best = 0
    for _, d in edges:
        run += d
        best = max(best, run)
    return best


def format_value(v):
    """A metric's value as gpufe shows it (``gpufe metrics``, the run summary)."""
    return f"{v:,.3f}" if isinstance(v, float) else f"{v:,d}"


def format_metrics(values):
    return "\n".join(f"  {k:24s} {format_value(v):>14s}   "
                     f"{METRICS.get(k) or SCENARIO_METRICS[k]}" for k, v in values.items())


class TimelineDigest:
    """The metrics of a timeline gathered one record at a time, in timeline order (by time,
    marks before the other records of their time; kernels therefore in order of start), in
    memory that does not grow with the timeline's length (medians keep a count per distinct
    value, :class:`Samples`). :meth:`metrics` may be called at any point."""

    def __init__(self):
        self._header_t = None
        self._footer_t = None
        self._marked = False             # a rep_begin was seen: only what is inside counts
        self._windows = []               # repetitions still taking records (see _inside)
        self._walls = Samples()          # closed repetitions, end - begin
        self._spans = Samples()          # GPU span of each finished repetition with work
        self._figures = _Figures()       # what the counted records give

    def add(self, r):
        kind = r["kind"]
        if kind == "meta":
            self._meta(r)
        elif kind in ("kernel", "memcpy", "runtime"):
            start = r["start"]
            pid = r.get("pid")
            if self._marked and not self._inside(start, pid):
                return
            f = self._figures
            if kind == "runtime":
                f.call(r)
                return
            if kind == "kernel":
                f.kernel(r)
            else:
                f.copy(r)
            for w in self._windows:
                if w[1] is not None and w[1] < start:
                    continue           # closed before (a window of another process)
                if not _same_process(w[4], pid):
                    continue
                if w[2] is None:
                    w[2] = start
                if w[3] is None or r["end"] > w[3]:
                    w[3] = r["end"]

    def _meta(self, r):
        what = r["what"]
        if what == "rep_begin":
            if not self._marked:
                # from the first repetition on, only what starts inside one counts: what came
                # before it (all of it outside) is forgotten
                self._marked = True
                self._figures = _Figures()
            # begin, end, first, last, process
            self._windows.append([r["t"], None, None, None, r.get("pid")])
        elif what == "rep_end":
            pid = r.get("pid")
            for w in self._windows:
                if w[1] is None and w[4] == pid:
                    w[1] = r["t"]
                    self._walls.add(w[1] - w[0])
                    break
        elif what == "header":
            self._header_t = r["t"]
        elif what == "footer":
            self._footer_t = r["t"]

    def _inside(self, start, pid=None):
        """Whether a record of process ``pid`` starting at ``start`` is inside one of that
        process's repetitions (another process's repetition does not take it: its copies
        after its own end mark are outside, whatever the others do meanwhile). The windows
        kept are the open ones and the closed ones whose end is not before ``start`` (a
        record at a repetition's end mark is inside it); an end closes the oldest open window
        of its process, so with one process the closed ones come first, in order of end (with
        several, a closed one may follow an open one of another process)."""
        ws = self._windows
        while ws and ws[0][1] is not None and ws[0][1] < start:
            self._close(ws.pop(0))
        if any(w[1] is not None and w[1] < start for w in ws):
            for w in [w for w in ws if w[1] is not None and w[1] < start]:
                ws.remove(w)
                self._close(w)
        return any(_same_process(w[4], pid) for w in ws)

    def _close(self, w):
        if w[2] is not None:
            self._spans.add(w[3] - w[2])

    def metrics(self):
        """The metrics of what was added so far: {name: value}, in the order of
        :data:`METRICS`."""
        out = self._figures.values()
        if self._walls.n:
            out["wall_per_rep_us"] = self._walls.median() / 1e3
        if self._marked:
            spans = self._spans.copy()
            for w in self._windows:
                if w[2] is not None:
                    spans.add(w[3] - w[2])
            out["gpu_span_us"] = spans.median() / 1e3 if spans.n else None
            out["repetitions"] = self._walls.n
        elif self._figures.first_start is not None:
            f = self._figures
            out["gpu_span_us"] = (f.last_end - f.first_start) / 1e3
        if self._header_t is not None and self._footer_t is not None:
            out["trace_us"] = (self._footer_t - self._header_t) / 1e3
        return {k: out[k] for k in METRICS if out.get(k) is not None}

    #: the run summary's name for :meth:`metrics`
    summary = metrics


class _Figures:
    """What the counted records (kernels, copies, runtime calls) give, record by record."""

    def __init__(self):
        self.kernels = self.copies = self.calls = 0
        self.first_start = self.last_end = None        # kernels and copies
        self.last_end_of = {}            # stream (or graph and stream) -> its latest kernel end
        self.gaps, self.durations = Samples(), Samples()
        self.launch_api, self.graph_api, self.event_api = Samples(), Samples(), Samples()
        self.queued_to_submitted, self.submitted_to_start = Samples(), Samples()
        self.queued_to_start = Samples()
        self.running = []                # heap: ends of kernels started and still running
        self.ended = None                # latest end of the kernels no longer in `running`
        self.most_running = 0
        self.channels = set()
        self.largest = {}                # copy kind -> (bytes, -start, record)
        self.syncs = []                  # synchronize calls still open: [end, start, last end]
        self.sync_returns = Samples()

    def call(self, r):
        self.calls += 1
        name, start, end = r["name"], r["start"], r["end"]
        if name.startswith("cudaLaunchKernel"):
            self.launch_api.add(end - start)
        elif name.startswith("cudaGraphLaunch"):
            self.graph_api.add(end - start)
        elif name.startswith("cudaEventRecord"):
            self.event_api.add(end - start)
        if "Synchronize" in name:
            # its figure is the latest kernel end not after its return: kernels that start
            # later than now may still end before it, so it waits (_retire) until a kernel
            # starts after its end
            self._retire(start)
            last = self.ended
            for e in self.running:
                if e <= end and (last is None or e > last):
                    last = e
            self.syncs.append([end, start, last])

    def _retire(self, now):
        """Kernels that ended at or before ``now`` leave ``running`` (every later record is at
        or after ``now``)."""
        running = self.running
        while running and running[0] <= now:
            e = heapq.heappop(running)
            if self.ended is None or e > self.ended:
                self.ended = e

    def _work(self, r):
        start, end = r["start"], r["end"]
        if self.first_start is None:
            self.first_start = start
        if self.last_end is None or end > self.last_end:
            self.last_end = end
        ch = r.get("channel", -1)
        if ch >= 0:
            # CUPTI numbers each context's channels apart: two processes may both have a 3
            self.channels.add((r["pid"], ch) if "pid" in r else ch)

    def kernel(self, k):
        self.kernels += 1
        self._work(k)
        start, end = k["start"], k["end"]
        key = (k["graph_id"], k["stream"]) if k.get("graph_id") else k["stream"]
        if "pid" in k:                    # streams are each process's own
            key = (k["pid"], key)
        prev = self.last_end_of.get(key)
        if prev is not None:
            self.gaps.add(start - prev)
        self.last_end_of[key] = end
        self.durations.add(end - start)
        queued, submitted = k.get("queued"), k.get("submitted")
        if queued and submitted:
            self.queued_to_submitted.add(submitted - queued)
            self.submitted_to_start.add(start - submitted)
            self.queued_to_start.add(start - queued)
        if self.syncs:
            self._kernel_for_syncs(start, end)
        # most running at once: kernels come in order of start; an end at a time comes
        # before a start at that time
        self._retire(start)
        if end > start:
            heapq.heappush(self.running, end)
        elif self.ended is None or end > self.ended:
            self.ended = end
        if len(self.running) > self.most_running:
            self.most_running = len(self.running)

    def _kernel_for_syncs(self, start, end):
        still = []
        for s in self.syncs:
            if start > s[0]:              # this kernel and every later one end after it
                self._sync_done(s)
                continue
            if end <= s[0] and (s[2] is None or end > s[2]):
                s[2] = end
            still.append(s)
        self.syncs = still

    def _sync_done(self, s, into=None):
        end, start, last = s
        if last is not None:
            (into or self.sync_returns).add(end - max(last, start))

    def copy(self, c):
        self.copies += 1
        self._work(c)
        kind = c["copy_kind"]
        key = (c["bytes"], -c["start"])
        best = self.largest.get(kind)
        if best is None or key > best[:2]:
            self.largest[kind] = key + (c,)

    def values(self):
        out = {"kernels": self.kernels, "api_calls": self.calls, "copies": self.copies}
        if self.kernels:
            out["median_gap_us"] = _median_us(self.gaps)
            out["median_kernel_us"] = _median_us(self.durations)
            out["max_concurrent"] = self.most_running
        out["launch_api_us"] = _median_us(self.launch_api)
        out["graph_launch_api_us"] = _median_us(self.graph_api)
        out["event_record_api_us"] = _median_us(self.event_api)
        out["queued_to_submitted_us"] = _median_us(self.queued_to_submitted)
        out["submitted_to_start_us"] = _median_us(self.submitted_to_start)
        out["queued_to_start_us"] = _median_us(self.queued_to_start)
        if self.channels:
            out["channels_used"] = len(self.channels)
        if self.launch_api.n:
            limit = max(BLOCKED_NS, 10 * self.launch_api.median())
            out["launches_blocked"] = self.launch_api.count_above(limit)
        for kind, name in COPY_KIND_NAMES.items():
            if kind in self.largest:
                c = self.largest[kind][2]
                out[f"copy_{name}_gbps"] = c["bytes"] / max(c["end"] - c["start"], 1)
                out[f"copy_{name}_bytes"] = c["bytes"]
        returns = self.sync_returns
        if self.syncs:
            returns = returns.copy()
            for s in self.syncs:
                self._sync_done(s, returns)
        out["sync_return_us"] = _median_us(returns)
        return out


def _median_us(samples):
    return samples.median() / 1e3 if samples.n >= MIN_SAMPLES else None


class _Column:
    """Integers appended one by one, 8 bytes each (a list if one is not an integer)."""

    def __init__(self, values=None):
        self.values = array("q") if values is None else values

    def append(self, v):
        try:
            self.values.append(v)
        except TypeError:
            self.values = list(self.values) + [v]

    def __len__(self):
        return len(self.values)


class Samples:
    """Samples kept for a median: a count per distinct value while there are few of them
    (a model's timeline repeats a few durations millions of times), else a :class:`_Column`.
    :meth:`median` is ``statistics.median`` of them."""

    DISTINCT = 4096

    def __init__(self):
        self.n = 0
        self._counts = {}
        self._column = None

    def __len__(self):
        return self.n

    def add(self, v):
        self.n += 1
        if self._column is not None:
            self._column.append(v)
            return
        c = self._counts
        c[v] = c.get(v, 0) + 1
        if len(c) > self.DISTINCT:
            col = self._column = _Column()
            for value, k in c.items():
                for _ in range(k):
                    col.append(value)
            self._counts = None

    def copy(self):
        s = Samples()
        s.n = self.n
        if self._column is None:
            s._counts = dict(self._counts)
        else:
            s._counts = None
            s._column = _Column(self._column.values[:])
        return s

    def count_above(self, limit):
        """How many samples are greater than ``limit``."""
        if self._column is None:
            return sum(k for v, k in self._counts.items() if v > limit)
        return sum(1 for v in self._column.values if v > limit)

    def median(self):
        n = self.n
        if n == 0:
            raise statistics.StatisticsError("no median for empty data")
        want = [n // 2] if n % 2 else [n // 2 - 1, n // 2]
        if self._column is None:
            vals, seen = [], 0
            for value in sorted(self._counts):
                seen += self._counts[value]
                while len(vals) < len(want) and want[len(vals)] < seen:
                    vals.append(value)
                if len(vals) == len(want):
                    break
        elif isinstance(self._column.values, array):
            import numpy as np
            part = np.partition(np.frombuffer(self._column.values, dtype=np.int64), want)
            vals = [int(part[i]) for i in want]
        else:
            ordered = sorted(self._column.values)
            vals = [ordered[i] for i in want]
        return vals[0] if n % 2 else (vals[0] + vals[1]) / 2


# ------------------------------------------------------------------ one program's figures
# fe_trace2's actgap and procs: figures of a whole timeline (a list), beside the digest's


def scenario_metrics(records, program, params=None):
    """The figures of ``program`` (``actgap``, ``procs``; {} for the others) on a timeline
    (a list of records in any order), the same code on a reference trace and on a model's
    timeline: {name: value}, in the order of :data:`SCENARIO_METRICS`. ``params``: the
    program's parameters (a trace header's ``params``; default: the first record's, which a
    trace header has and a model's timeline does not)."""
    fn = _SCENARIO_FIGURES.get(program)
    if params is None:
        params = records[0].get("params") if records else None
        params = params if params and "params" not in params else {}
    if fn in (_actgap, _devlaunch):
        out = fn(records, params)
    else:
        out = fn(records) if fn else {}
    return {k: out[k] for k in SCENARIO_METRICS if out.get(k) is not None}


def repetitions(records):
    """{process: [(begin, end), ...]}: each process's repetitions, a ``rep_begin`` mark to the
    next ``rep_end`` of the same process (``pid``; None for a one-process timeline), the
    oldest open one ending first, in order of begin. Repetitions still open are left out."""
    marks = sorted((r for r in records if r["kind"] == "meta"
                    and r["what"] in ("rep_begin", "rep_end")), key=lambda r: r["t"])
    opened, out = {}, {}
    for r in marks:
        pid = r.get("pid")
        if r["what"] == "rep_begin":
            opened.setdefault(pid, []).append(r["t"])
        elif opened.get(pid):
            out.setdefault(pid, []).append((opened[pid].pop(0), r["t"]))
    return {pid: sorted(ws) for pid, ws in out.items()}


def _kernels_by_rep(records):
    """{process: [[kernel, ...] of repetition 0, ...]}: each process's kernels that start
    inside its repetitions (begin <= start <= end), by start."""
    by_pid = {}
    for r in records:
        if r["kind"] == "kernel":
            by_pid.setdefault(r.get("pid"), []).append(r)
    out = {}
    for pid, windows in repetitions(records).items():
        ks = sorted(by_pid.get(pid, ()), key=lambda k: k["start"])
        out[pid] = [[k for k in ks if b <= k["start"] <= e] for b, e in windows]
    return out


def _median(xs):
    return statistics.median(xs) if xs else None


def _us(ns):
    return None if ns is None else ns / 1e3


#: actgap: kernels whose name holds this are the gates (k_gate, k_gate2), not chain kernels
GATE = "k_gate"


#: actgap with load: the full-GPU kernel that holds the SMs (not a chain kernel)
LOAD = "k_spin"


def _actgap(records, params):
    """Per-stream period and aggregate rate of the chains. A trace with act_stamps records
    (fe_trace2 stamp=1: each chain kernel's start, %globaltimer, one record a stream and
    repetition) gives the starts; any other (CUPTI, the model) its kernel records: in each
    repetition, the kernels of a stream but the gates and the load. The streams are in
    creation order (act_stamps' index; kernel records: stream ids, which CUPTI and the model
    give in creation order), the first ``hi`` of the greatest priority: with hi or load, the
    periods and chain ends (gate end -> last chain start) of each class too."""
    hi, load = int(params.get("hi", 0)), int(params.get("load", 0))
    reps = []            # per repetition: [(stream index, gate end, [starts]), ...]
    stamps = [r for r in records if r["kind"] == "meta" and r["what"] == "act_stamps"]
    if stamps:
        chains = {}                     # (process, repetition) -> [starts of each stream]
        for x in stamps:
            chains.setdefault((x.get("pid"), x["rep"]), []).append(
                (x["stream_idx"], x.get("gate_end"), x["stamps"]))
        reps = list(chains.values())
    else:
        for pid_reps in _kernels_by_rep(records).values():
            for ks in pid_reps:
                by_stream, gate_end = {}, {}
                for k in ks:
                    if GATE in k["name"]:
                        gate_end[k["stream"]] = k["end"]
                    elif LOAD not in k["name"]:
                        by_stream.setdefault(k["stream"], []).append(k["start"])
                reps.append([(i, gate_end.get(s), by_stream[s])
                             for i, s in enumerate(sorted(by_stream))])
    periods, rates = {True: [], False: []}, []
    ends = {True: [], False: []}
    for chains in reps:
        for i, gate_end, v in chains:
            if len(v) >= 2:
                periods[i < hi].append((v[-1] - v[0]) / (len(v) - 1))
            if v and gate_end:
                ends[i < hi].append(v[-1] - gate_end)
        starts = [t for *_, v in chains for t in v]
        if len(starts) >= 2 and max(starts) > min(starts):
            rates.append(len(starts) / ((max(starts) - min(starts)) / 1e3))
    out = {"stream_period_us": _us(_median(periods[True] + periods[False])),
           "kernels_per_us": _median(rates)}
    if hi:
        out.update(hi_period_us=_us(_median(periods[True])),
                   lo_period_us=_us(_median(periods[False])),
                   hi_chain_us=_us(_median(ends[True])))
    if hi or load:
        out["lo_chain_us"] = _us(_median(ends[False]))
    return out


#: procs: run_len and switch_gap_us count only kernels whose name holds this (fe_trace2's
#: empty variant); the start order of preempted millisecond kernels says little
EMPTY = "k_empty"


def _procs(records):
    """Time slices, switches and what they do to the kernels of P processes. A reference
    trace holds fe_trace2's kspan records (k_work's block 0 thread 0: its timer jumps of
    more than 20 us, the process's switched-out intervals, per repetition in kernel order);
    a model's timeline its ctxsw records instead. Kernel figures (run_len, switch_gap_us,
    kernel_span_us, makespan_us) come from the kernel records of both, the kernels that
    start inside their process's repetitions; repetition r of every process is taken
    together."""
    by_rep = _kernels_by_rep(records)
    pids = sorted(by_rep, key=str)
    nrep = min((len(v) for v in by_rep.values()), default=0)
    makespan, spans, runs, switch_gaps = [], [], [], []
    for r in range(nrep):
        ks = [by_rep[p][r] for p in pids]
        if not all(ks):
            continue
        makespan.append(max(k["end"] for kk in ks for k in kk)
                        - min(k["start"] for kk in ks for k in kk))
        spans += [k["end"] - k["start"] for kk in ks for k in kk]
        if len(pids) < 2 or not all(EMPTY in k["name"] for kk in ks for k in kk):
            continue
        merged = sorted((k["start"], k["end"], i) for i, kk in enumerate(ks) for k in kk)
        n = 1
        for (s0, e0, p0), (s1, e1, p1) in zip(merged, merged[1:]):
            if p1 == p0:
                n += 1
            else:
                runs.append(n)
                n = 1
                switch_gaps.append(s1 - e0)
        runs.append(n)
    out = {"makespan_us": _us(_median(makespan)), "kernel_span_us": _us(_median(spans)),
           "run_len": _median(runs), "switch_gap_us": _us(_median(switch_gaps))}
    kspans = [r for r in records if r["kind"] == "meta" and r["what"] == "kspan"]
    if kspans:
        out.update(_switches_in_kernel(kspans))
    else:
        out.update(_switches_of_model(records, by_rep, pids, nrep))
    return out


def _switches_in_kernel(kspans):
    """fe_trace2's in-kernel view: a process's switched-out intervals (its timer jumps, in
    order across its kernels of one repetition); its runs lie between two consecutive ones.
    A jump covers the switch out, the other processes' runs and the switch back, so with P
    processes one switch is (switched_out - (P - 1) x run) / P."""
    by = {}
    for x in kspans:
        by.setdefault((x.get("pid"), x["rep"]), []).append(x)
    out_, run = [], []
    for recs in by.values():
        jumps = [g for x in sorted(recs, key=lambda x: x["i"]) for g in x["gaps"]]
        out_ += [g1 - g0 for g0, g1 in jumps]
        run += [b[0] - a[1] for a, b in zip(jumps, jumps[1:])]
    P = len({x.get("pid") for x in kspans})
    so, ts = _median(out_), _median(run)
    sw = (so - (P - 1) * ts) / P if so is not None and ts is not None and P > 1 else None
    return {"switched_out_us": _us(so), "timeslice_run_us": _us(ts), "switch_us": _us(sw)}


def _switches_of_model(records, by_rep, pids, nrep):
    """The model's ctxsw records in repetition r (starting between the first rep_begin and
    the last rep_end of repetition r over all processes). Process p has work outstanding
    across a switch when one of its kernels of the repetition was queued (or started) at or
    before the switch's start and ends after the switch's end. A switch-out of p interrupts
    it when p has work outstanding across it; switched_out runs from the interruption's
    start to the end of the switch that lets p in again, a run from there to the start of
    p's next switch-out if that one interrupts p too (as between two timer jumps of
    fe_trace2's kernels). switch_us: the switches from one process to another that has work
    outstanding across it (not a wait for work)."""
    sws = sorted((r for r in records if r["kind"] == "ctxsw"), key=lambda r: r["start"])
    if not sws:
        return {}
    windows = repetitions(records)
    switched, run, cost = [], [], []
    for r in range(nrep):
        lo = min(windows[p][r][0] for p in pids)
        hi = max(windows[p][r][1] for p in pids)
        in_rep = [w for w in sws if lo <= w["start"] <= hi]

        def outstanding(p, w):
            return any((k.get("queued") or k["start"]) <= w["start"] and k["end"] > w["end"]
                       for k in by_rep[p][r])

        cost += [w["end"] - w["start"] for w in in_rep
                 if w.get("pid_out") is not None and w.get("pid_in") in by_rep
                 and w["pid_out"] != w["pid_in"] and outstanding(w["pid_in"], w)]
        for p in pids:
            interrupted = resumed = None
            for w in in_rep:
                if w.get("pid_out") == p:
                    if outstanding(p, w):
                        if resumed is not None:
                            run.append(w["start"] - resumed)
                        interrupted = w["start"]
                    else:
                        interrupted = None
                    resumed = None
                elif w.get("pid_in") == p:
                    if interrupted is not None:
                        switched.append(w["end"] - interrupted)
                        resumed = w["end"]
                    interrupted = None
    return {"switched_out_us": _us(_median(switched)), "timeslice_run_us": _us(_median(run)),
            "switch_us": _us(_median(cost))}


#: gupdate: (metric, the trace's gu_* record, its field or a function of it) and the same
#: interval between the model's ``gu:<phase>:<point>`` marks (phase, from point, to point)
GUPDATE_INTERVALS = (("gu_capture_us", "gu_build", "capture_ns", ("build", "a", "b")),
       ("gu_instantiate_us", "gu_build", "instantiate_ns", ("build", "b", "c")),
       ("gu_first_launch_sync_us", "gu_build", "first_launch_sync_ns", ("build", "c", "d")),
       ("gu_base_launch_sync_us", "gu_base", "launch_sync_ns", ("base", "a", "b")),
       ("gu_set_per_node_us", "gu_set", "set_per_node", ("set", "a", "b")),
       ("gu_set_launch_sync_us", "gu_set", "launch_sync_ns", ("set", "b", "c")),
       ("gu_update_capture_us", "gu_update", "capture_ns", ("update", "a", "b")),
       ("gu_update_us", "gu_update", "update_ns", ("update", "b", "c")),
       ("gu_update_launch_sync_us", "gu_update", "launch_sync_ns", ("update", "c", "d")),
       ("gu_destroy_us", "gu_reinst", "destroy_ns", ("reinst", "b", "c")),
       ("gu_reinstantiate_us", "gu_reinst", "instantiate_ns", ("reinst", "c", "d")),
       ("gu_reinst_launch_sync_us", "gu_reinst", "launch_sync_ns", ("reinst", "d", "e")))


def _gupdate(records):
    """gupdate's intervals: from the trace's gu_* records (the program's own clock), or from
    the model's marks where the program reads it; medians over repetitions. SetParams per
    node: the interval over the nodes (the record's ``nodes``; the model: its SetParams
    runtime records in the interval)."""
    out = {}
    metas = [r for r in records if r["kind"] == "meta" and r["what"].startswith("gu_")]
    if metas:
        for name, what, key, _ in GUPDATE_INTERVALS:
            xs = [(r["set_ns"] / r["nodes"] if key == "set_per_node" else r[key])
                  for r in metas if r["what"] == what and r.get("nodes", 1)]
            out[name] = _us(_median(xs))
        return out
    # the model: each phase's runs of marks, a new run at its point "a"
    runs = {}
    for r in sorted((r for r in records if r["kind"] == "meta"
                     and r["what"].startswith("gu:")), key=lambda r: r["t"]):
        _, phase, point = r["what"].split(":")
        if point == "a" or phase not in runs:
            runs.setdefault(phase, []).append({})
        runs[phase][-1][point] = r["t"]
    sets = sorted(r["start"] for r in records if r["kind"] == "runtime"
                  and r["name"].startswith("cudaGraphExecKernelNodeSetParams"))
    for name, _, key, (phase, a, b) in GUPDATE_INTERVALS:
        xs = []
        for run in runs.get(phase, ()):
            if a in run and b in run:
                d = run[b] - run[a]
                if key == "set_per_node":
                    n = sum(1 for t in sets if run[a] <= t <= run[b])
                    d = d / n if n else None
                if d is not None:
                    xs.append(d)
        out[name] = _us(_median(xs))
    return out


#: pdl: the chain's kernels (the gates are k_gate)
PDL_KERNEL = "k_pdl"


def _pdl(records):
    """The chain's period and dependency latency: from the trace's pdl_stamps records (block
    0's entry, wait return and exit of each kernel, per repetition), or the model's kernel
    records (start, ``sync``, ``exit``) in each repetition; medians over all pairs."""
    chains = []                          # per repetition: [(entry, wait return, exit), ...]
    stamps = [r for r in records if r["kind"] == "meta" and r["what"] == "pdl_stamps"]
    if stamps:
        for x in stamps:
            v = x["in_wait_out"]
            chains.append([tuple(v[i:i + 3]) for i in range(0, len(v) - 2, 3)])
    else:
        for pid_reps in _kernels_by_rep(records).values():
            for ks in pid_reps:
                chains.append([(k["start"], k["sync"], k["exit"]) for k in ks
                               if k["name"] == PDL_KERNEL and "sync" in k])
    period, dep, wait = [], [], []
    for c in chains:
        for (e0, w0, x0), (e1, w1, x1) in zip(c, c[1:]):
            period.append(x1 - x0)
            dep.append(w1 - x0)
        wait += [w - e for e, w, _ in c]
    resident = _median(wait)
    return {"pdl_exit_period_us": _us(_median(period)), "pdl_dep_latency_us": _us(_median(dep)),
            # only where kernels wait at all (an early trigger): else it is the prologue's
            # few timer reads
            "pdl_resident_wait_us": _us(resident) if resident and resident > 1000 else None}


def _threads(records):
    """Each launching thread's loop: from the trace's thread_loop records (its launches: the
    header's ``n``), or the model's ``loop_start`` / ``loop_end`` marks of each thread (its
    launch calls between them)."""
    loops = {}                           # repetition -> [(start, end, launches), ...]
    metas = [r for r in records if r["kind"] == "meta" and r["what"] == "thread_loop"]
    if metas:
        n = int((records[0].get("params") or {}).get("n", 2000))
        for r in metas:
            loops.setdefault(r["rep"], []).append((r["loop_start"], r["loop_end"], n))
    else:
        launches = {}
        for r in records:
            if r["kind"] == "runtime" and r["name"].startswith("cudaLaunchKernel"):
                launches.setdefault(r.get("tid"), []).append(r["start"])
        marks = sorted((r for r in records if r["kind"] == "meta"
                        and r["what"] in ("loop_start", "loop_end")), key=lambda r: r["t"])
        opened, count = {}, {}
        for r in marks:
            tid = r.get("tid")
            if r["what"] == "loop_start":
                opened[tid] = r["t"]
            elif tid in opened:
                a = opened.pop(tid)
                rep = count.get(tid, 0)
                count[tid] = rep + 1
                n = sum(1 for t in launches.get(tid, ()) if a <= t <= r["t"])
                loops.setdefault(rep, []).append((a, r["t"], n))
    per, agg = [], []
    for ls in loops.values():
        per += [(e - a) / n for a, e, n in ls if n]
        span = max(e for _, e, _ in ls) - min(a for a, _, _ in ls)
        if span > 0:
            agg.append(sum(n for *_, n in ls) / (span / 1e3))
    return {"thread_launch_us": _us(_median(per)), "threads_launches_per_us": _median(agg)}


#: cond: the body's control kernels (WHILE node, host launches)
COND_CONTROL = ("k_cond_dec", "k_dec")


def _cond(records):
    """The body's period: the trace's cond_rep records (the control kernel's %globaltimer
    stamps, the repetition's wall time), or the model's control kernels' starts and
    repetition marks; a run with a gate has no wall figure (the gate is in it)."""
    periods, walls = [], []
    reps = [r for r in records if r["kind"] == "meta" and r["what"] == "cond_rep"]
    if reps:
        gated = int((records[0].get("params") or {}).get("gate", 0)) > 0
        for r in reps:
            st = r["stamps"]
            periods += [b - a for a, b in zip(st, st[1:])]
            if not gated and r["iters"]:
                walls.append(r["wall_ns"] / r["iters"])
    else:
        windows = repetitions(records).get(None, [])
        ks = sorted((r for r in records if r["kind"] == "kernel"), key=lambda r: r["start"])
        for a, e in windows:
            mine = [k for k in ks if a <= k["start"] <= e]
            ctl = [k["start"] for k in mine if k["name"] in COND_CONTROL]
            periods += [y - x for x, y in zip(ctl, ctl[1:])]
            if ctl and not any(GATE in k["name"] for k in mine):
                walls.append((e - a) / len(ctl))
    return {"cond_iteration_us": _us(_median(periods)),
            "cond_wall_per_iter_us": _us(_median(walls))}


#: devlaunch: graph G's kernels (each stamps its start) and the launcher of mode 1 and 3
DL_GRAPH_KERNELS = ("k_stamp", "k_ctrl", "k_ctrl_plain")
DL_LAUNCHER = "k_launcher"
#: devlaunch's modes whose repetition launches a graph m times from the host (host, ff,
#: hostplain: scenarios.DEVLAUNCH_MODES)
DL_HOST_MODES = (0, 1, 4)


def _devlaunch(records, p):
    """Graph G's iterations: from the trace's dl_rep records (each of G's kernels' start
    stamps, b + 1 an iteration; the launcher's timer reads around its device-side call), or
    the model's kernel records in each repetition (G's kernels' starts by start, the
    launchers' starts and ``graph_launched``); a run with a gate has no wall figure. ``p``:
    the program's parameters."""
    b, gated = int(p.get("b", 1)), int(p.get("gate", 0)) > 0
    runs = []            # per repetition: (G's starts, [(call, return)], wall, iterations)
    reps = [r for r in records if r["kind"] == "meta" and r["what"] == "dl_rep"]
    if reps:
        for r in reps:
            ls = r["lstamps"]
            runs.append((r["stamps"], list(zip(ls[::2], ls[1::2])), r["wall_ns"],
                         int(p.get("m", 10))))
    else:
        windows = repetitions(records).get(None, [])
        for (a, e), ks in zip(windows, _kernels_by_rep(records).get(None, [])):
            ctrl = sum(1 for k in ks if k["name"] in DL_GRAPH_KERNELS[1:])
            b = sum(1 for k in ks if k["name"] == DL_GRAPH_KERNELS[0]) // max(ctrl, 1)
            gated = gated or any(k["name"] == GATE for k in ks)
            runs.append(([k["start"] for k in ks if k["name"] in DL_GRAPH_KERNELS],
                         [(k["start"], k["graph_launched"]) for k in ks
                          if k["name"] == DL_LAUNCHER and "graph_launched" in k], e - a, ctrl))
    period, to_next, to_ctrl, call, ret, walls = [], [], [], [], [], []
    stride = b + 1
    for starts, launcher, wall, m in runs:
        firsts = starts[::stride]
        ctrls = starts[b::stride]
        period += [y - x for x, y in zip(firsts, firsts[1:]) if x and y]
        to_next += [y - x for x, y in zip(ctrls, firsts[1:]) if x and y]
        to_ctrl += [c - f for f, c in zip(firsts, ctrls) if f and c]
        call += [t1 - t0 for t0, t1 in launcher if t0 and t1]
        ret += [f - t1 for (_, t1), f in zip(launcher, firsts) if t1 and f]
        if not gated and m:
            walls.append(wall / m)
    issue = []
    if p.get("mode") is not None and int(p["mode"]) in DL_HOST_MODES:
        m = int(p.get("m", 10))
        issue = [(i - a) / m for a, i in _marked_spans(records, "rep_begin", "issued")]
    return {"dl_period_us": _us(_median(period)), "dl_ctrl_to_next_us": _us(_median(to_next)),
            "dl_first_to_ctrl_us": _us(_median(to_ctrl)), "dl_call_us": _us(_median(call)),
            "dl_ret_to_first_us": _us(_median(ret)), "dl_wall_per_iter_us": _us(_median(walls)),
            "dl_issue_us": _us(_median(issue))}


def _marked_spans(records, begin, end):
    """(t of a ``begin`` mark, t of the next ``end`` mark) pairs, in time order."""
    spans, t0 = [], None
    for r in sorted((r for r in records if r["kind"] == "meta"
                     and r.get("what") in (begin, end)), key=lambda r: r["t"]):
        if r["what"] == begin:
            t0 = r["t"]
        elif t0 is not None:
            spans.append((t0, r["t"]))
            t0 = None
    return spans


_SCENARIO_FIGURES = {"actgap": _actgap, "procs": _procs, "gupdate": _gupdate, "pdl": _pdl,
                     "threads": _threads, "cond": _cond, "devlaunch": _devlaunch}
