"""The timeline records a run makes, in the reference traces' schema (see
``sim/analysis/timeline.py``), as CUPTI would give them.

- runtime and sync records: made by the runtime as each API call returns, with the call's
  correlation id;
- kernel and memcpy (activity) records: made from what the engines report as they take the
  work, the fields they decoded from its descriptor in host memory (correlation id, stream,
  grid and block, queued and submitted times, copy kind and size, graph and node), the channel
  it was dispatched on and, for a kernel, its name from the driver's function table (kernel id
  -> name, one entry per kernel function). Their start and end are the engine's, read when
  the timeline is finished (``_kernel``/``_copy``), and under CUPTI a stream kernel's
  "submitted" becomes its dispatch by the front end (``_dispatched``; see ``profiler.py``).

Records go to ``records`` and ``marks``: lists, or a ``TimelineStream`` that hands each out as
soon as it is final (:meth:`Timeline.stream_to`).
"""

from collections import OrderedDict

from gpufe.sim.cosim.engines import Kernel

#: stamps remembered for the end timestamps behind them (only the latest can be in flight)
STAMPS_KEPT = 64

#: API call -> the CUDA runtime function CUPTI names
RUNTIME_NAMES = {
    "launch_kernel": "cudaLaunchKernel_v7000",
    "launch_kernel_ex": "cudaLaunchKernelExC_v11060",
    "memcpy_async": "cudaMemcpyAsync_v3020",
    "event_record": "cudaEventRecord_v3020",
    "stream_wait_event": "cudaStreamWaitEvent_v3020",
    "stream_synchronize": "cudaStreamSynchronize_v3020",
    "event_synchronize": "cudaEventSynchronize_v3020",
    "event_query": "cudaEventQuery_v3020",
    "device_synchronize": "cudaDeviceSynchronize_v3020",
    "stream_create": "cudaStreamCreateWithPriority_v5050",
    "event_create": "cudaEventCreateWithFlags_v3020",
    "stream_begin_capture": "cudaStreamBeginCapture_v10000",
    "stream_end_capture": "cudaStreamEndCapture_v10000",
    "graph_instantiate": "cudaGraphInstantiate_v12000",
    "graph_launch": "cudaGraphLaunch_v10000",
    "graph_exec_set_params": "cudaGraphExecKernelNodeSetParams_v10010",
    "graph_exec_update": "cudaGraphExecUpdate_v10020",
    "graph_exec_destroy": "cudaGraphExecDestroy_v10000",
    "graph_upload": "cudaGraphUpload_v11010",
    "graph_create": "cudaGraphCreate_v10000",
    "graph_add_conditional": "cudaGraphAddNode_v12030",
}

# CUPTI synchronization types
SYNC_EVENT, SYNC_STREAM, SYNC_DEVICE = 1, 3, 4
#: CUPTI's "no stream" / "no event"
NO_ID = 4294967295
#: CUPTI channel types: compute and copy (async memcpy) channels
CHANNEL_COMPUTE, CHANNEL_COPY = 1, 2
FIRST_CORRELATION_ID = 101


class Timeline:
    """The records of one run. ``channel_types``: CUPTI channel type by channel id."""

    def __init__(self, channel_types):
        self.records = []           # timeline records (dicts), in the order they are made
        self.marks = []
        self.kernel_names = {}      # kernel id -> name: the driver's function table
        self._channel_types = channel_types
        self._tracker = None        # a TimelineStream told of work dispatched and done
        self._corr = FIRST_CORRELATION_ID - 1
        #: correlation id -> ns by which CUPTI's "submitted" precedes the kernel's dispatch
        #: (``profiler.py``: its latency-timestamp slots)
        self.submitted_lead = {}
        # CUPTI's end timestamps behind the stamps in flight (``profiler.py``): the latest
        # stamps, correlation id -> [written ns, its launch's dispatch ns and recorded
        # `submitted`, None until dispatched], in the order written; kernels ended while one
        # was in flight, by its launch's correlation id
        self._stamps = OrderedDict()
        self._end_waits = {}
        self._records = {}          # id(job) -> record, while the front end has it
        self.ends_behind_stamps = False   # set by the profiler with latency timestamps
        # a kernel's end behind the launch the front end is working towards: how long after
        # the end that launch's `submitted` may come (ns; the profiler sets
        # ``cupti_end_wait_ns``, and ``cupti_submitted_lead_ns``), and the kernels ended
        # since the last launch was dispatched: (end ns, job, record)
        self.end_wait_ns = self.submitted_lead_ns = 0
        self._ends_pending = []
        # graph id -> the table index of its conditional node's body's first node: CUPTI
        # records those kernels on the device runtime's stream and channel, which run them
        # (the H200: stream 15 and channel 0 for a WHILE node's body, the graph's own kernel
        # on stream 13 and channel 2)
        self._bodies = {}
        self._device_runtime = None       # (stream id, channel id) once a graph needs it

    def stream_to(self, stream):
        """Hand records out through a ``TimelineStream`` instead of keeping them."""
        self.records, self.marks, self._tracker = stream, stream.marks, stream

    def conditional_body(self, graph_id, first, stream_id):
        """Graph ``graph_id``'s table holds a conditional node's body from index ``first``:
        its kernels are recorded on the device runtime's stream (``stream_id``, taken by the
        runtime the first time) and its own channel."""
        if self._device_runtime is None:
            channel = max(self._channel_types) + 1
            self._channel_types[channel] = CHANNEL_COMPUTE
            self._device_runtime = (stream_id, channel)
        self._bodies[graph_id] = first

    @property
    def device_runtime_stream(self):
        """The device runtime's stream id, None until a graph needs the device runtime."""
        return None if self._device_runtime is None else self._device_runtime[0]

    def correlation_id(self):
        self._corr += 1
        return self._corr

    # -- what the runtime makes ------------------------------------------------------------------

    def runtime(self, api, start, corr, end, **extra):
        rec = {"kind": "runtime", "name": RUNTIME_NAMES[api], "corr": corr, "tid": 1,
               "start": start, "end": end}
        rec.update(extra)
        self.records.append(rec)
        return rec

    def sync(self, sync_type, corr, start, end, stream=NO_ID, event=NO_ID):
        self.records.append({"kind": "sync", "type": sync_type, "corr": corr, "stream": stream,
                             "event": event, "start": start, "end": end})

    def mark(self, what, t, tid=None):
        rec = {"kind": "meta", "what": what, "t": t}
        if tid is not None:
            rec["tid"] = tid
        self.marks.append(rec)

    # -- what the engines report (CoSim.activity) -------------------------------------------------

    def dispatched(self, job, now_ns):
        """The front end dispatched ``job`` (an engine's Kernel or Copy, with its decoded
        descriptor): its activity record."""
        d = job.launch
        channel, node = job.key[0], job.key[2]
        graph = d["graph_id"]
        ids = (graph, graph << 32 | node) if graph else (0, 0)
        if graph and node >= self._bodies.get(graph, node + 1):
            stream, channel = self._device_runtime
        else:
            stream = d["stream_id"]
        if isinstance(job, Kernel):
            rec = {"kind": "kernel", "name": self.kernel_names[d["kernel_id"]],
                   "corr": d["correlation_id"], "stream": stream, "channel": channel,
                   "channel_type": self._channel_types[channel], "queued": d["queued_ns"],
                   "submitted": d["submitted_ns"], "start": None, "end": None,
                   "grid": [d["grid_x"], d["grid_y"], d["grid_z"]],
                   "block": [d["block_x"], d["block_y"], d["block_z"]],
                   "graph_id": ids[0], "graph_node": ids[1], "_kernel": job}
            if not graph:
                rec["_dispatched"] = job.dispatched - self.submitted_lead.pop(
                    d["correlation_id"], 0)
                if self.ends_behind_stamps:
                    self._records[id(job)] = rec
                    self._launch_dispatched(d["correlation_id"], job.dispatched,
                                            rec["_dispatched"], stream)
        else:
            rec = {"kind": "memcpy", "copy_kind": d["kind"], "bytes": d["length"],
                   "corr": d["correlation_id"], "stream": stream, "channel": channel,
                   "channel_type": self._channel_types[channel], "start": None, "end": None,
                   "graph_id": ids[0], "graph_node": ids[1], "_copy": job}
        if job.device:
            rec["device_launched"] = True
        self.records.append(rec)
        if self._tracker is not None:
            self._tracker.dispatched(job, rec, now_ns)

    def done(self, job):
        rec = self._records.pop(id(job), None)
        if rec is not None:
            end = job.end // 1000
            self._expire_pending(end, self.submitted_lead_ns)
            stamp = self._stamp_in_flight(end)
            if stamp is not None:
                corr, (_, dispatched, _) = stamp
                if dispatched is None:
                    self._end_waits.setdefault(corr, []).append((job, rec))
                    return                   # final once that launch is dispatched
                rec["_end"] = max(end, self._stamps[corr][2])
            elif self.end_wait_ns > 0:
                # a launch the front end is working towards may yet be dispatched
                self._ends_pending.append((end, job, rec))
                return
        if self._tracker is not None:
            self._tracker.done(job)

    # -- end timestamps behind the stamps in flight -----------------------------------------------

    def stamp_written(self, corr, t_ns):
        """The profiler's stamp for launch ``corr`` was written at ``t_ns``."""
        self._stamps[corr] = [t_ns, None, None]     # written, dispatched, submitted
        if len(self._stamps) > STAMPS_KEPT:
            self._stamps.popitem(last=False)

    def _stamp_in_flight(self, t_ns):
        """``(corr, [written, dispatched, submitted])`` of the stamp in flight at ``t_ns``:
        the latest written by then, its launch not dispatched by then; or None."""
        for corr, stamp in reversed(self._stamps.items()):
            written, dispatched, _ = stamp
            if written <= t_ns:
                return (corr, stamp) if dispatched is None or dispatched > t_ns else None
        return None

    def _launch_dispatched(self, corr, t_ns, submitted, stream):
        stamp = self._stamps.get(corr)
        if stamp is not None:
            stamp[1:] = [t_ns, submitted]
        # the kernels that ended while the front end worked towards this launch (one of
        # their own stream's waited for them: the front end took it up after they ended)
        self._expire_pending(submitted, 0)
        for end, job, rec in self._ends_pending:
            if rec["stream"] != stream:
                rec["_end"] = max(end, submitted)
            if self._tracker is not None:
                self._tracker.done(job)
        self._ends_pending.clear()
        for job, rec in self._end_waits.pop(corr, ()):
            rec["_end"] = max(job.end // 1000, submitted)
            if self._tracker is not None:
                self._tracker.done(job)

    def _expire_pending(self, t_ns, slack):
        """Kernels ended more than ``end_wait_ns`` before ``t_ns - slack`` with no launch
        dispatched since: final, at their own end. ``t_ns``: a launch's `submitted` (slack
        0), or the time now (a launch dispatched from now is recorded as `submitted` at most
        ``submitted_lead_ns`` earlier)."""
        if not self._ends_pending:
            return
        keep = []
        for item in self._ends_pending:
            if item[0] + self.end_wait_ns < t_ns - slack:
                if self._tracker is not None:
                    self._tracker.done(item[1])
            else:
                keep.append(item)
        self._ends_pending[:] = keep

    def release_end_waits(self):
        """The run has ended: kernels still waiting for a launch that never came keep their
        own end."""
        pending = [(job, rec) for _, job, rec in self._ends_pending]
        for waits in (*self._end_waits.values(), pending):
            for job, _ in waits:
                if self._tracker is not None:
                    self._tracker.done(job)
        self._end_waits.clear()
        self._ends_pending.clear()
