"""CUPTI's own cost, when the program runs under activity tracing (``profiler="cupti"``, as the
reference traces were taken; nothing with ``"off"``).

On the CPU: time inside every kernel launch call (the kernel's activity record is set up: the
call's record ends after it), time after every call, and time per node in a graph launch. On
the GPU side, which the co-simulation models (``cupti_kernel_ns``, ``cupti_graph_kernel_ns``,
``cupti_release_ns`` in the engines): longer kernels, and a stream kernel's completion
reaching the front end later (its end timestamp is written first).

With latency timestamps (``cupti_latency_timestamps``, on in the reference traces), every
stream launch is preceded in its channel by a time stamp: a semaphore release with a timestamp
and no WFI, which holds the channel for its round trip (``stamp_hold_ns``, and
``stamp_fetch_ns`` more while the PBDMA still has GPFIFO entries to fetch behind it: why a
dependent kernel waits longer with more than ~10 kernels queued), and the command processor
with it while it decodes that channel; the command processor may also spend
``cupti_launch_hold_ns`` after each launch (0 in h200: the stamp's wait accounts for it). In
the records, a stream kernel's "submitted" is when the front end dispatched it, right after its stamp, not its kickoff.

CUPTI's latency-timestamp slots: a context's stream launches take slots from a pool of
:data:`STAMP_SLOTS`, at most :data:`STAMP_SLOTS_PER_STREAM` a stream (a stream's later launches
reuse its own). Once the pool is full (launches on two streams or more: one stream alone never
fills it), every later "submitted" is recorded ``cupti_submitted_lead_ns`` before the
dispatch, for the rest of the run: on the H200, submitted -> start is 0.54 us until then and
0.64-0.77 us after (probe ``multistream_state``: 16 launches counting at most 8 a stream, in
every pattern of streams tried; the kernels' own timing does not move, only the record).

A stream kernel's end timestamp goes out through the front end's release path, behind a time
stamp whose round trip is under way: a kernel that ends while another launch's stamp is in
flight (written, its launch not yet dispatched) gets that launch's `submitted` as its end when
it is later. On the H200, with several channels of queued dependent kernels, a kernel's end is
the next launch's `submitted` (within 32 ns) 96-99% of the time, whatever the kernel's length
(probe ``multistream_state``, ``gap2``): empty kernels of actgap last 0.9-1.25 us, against 0.61
on one channel. The same holds for a launch the front end is still working towards as the
kernel ends (moving to its channel, fetching it): a kernel whose next launch is another
stream's, recorded `submitted` within ``cupti_end_wait_ns`` (1.18 us) after the kernel's end,
ends at that `submitted`. Its own stream's next launch waits for it, so the front end takes
that one up only after it ended and its end stays. Fitted on the H200's records of 8 threads'
private streams and of actgap's 16 channels of 4 streams (``calibrate.end_wait_ns``: 96 and
98% of the records end where the rule puts them); it predicts 2, 4 and 12 threads' (91, 87,
74%) and actgap's 24 streams (92%), where the wait alone (0) places 97, 78, 24 and 18%.
"""

from gpufe.sim.host.encode import PushBuffer

#: CUPTI latency-timestamp slots of a context, and the most one stream holds
STAMP_SLOTS, STAMP_SLOTS_PER_STREAM = 16, 8


class Profiler:
    def __init__(self, cosim, timeline):
        self.sim = cosim
        self.p = cosim.p
        self.timeline = timeline
        self.enabled = cosim.profiler == "cupti"
        self.latency = self.enabled and bool(self.p.cupti_latency_timestamps)
        self._stamps = None          # host buffer the `submitted` stamps are written to
        self._stamp_count = 0
        self._slots = {}             # stream id -> latency-timestamp slots it holds
        self._pool_full = False
        self._stamp_corr = {}        # stamp payload -> correlation id of its launch
        self.captured = False        # the call running was captured (capture_call)
        timeline.ends_behind_stamps = self.latency
        if self.latency:
            timeline.end_wait_ns = round(self.p.cupti_end_wait_ns)
            timeline.submitted_lead_ns = round(self.p.cupti_submitted_lead_ns)

    def stamp_submitted(self, pb: PushBuffer, stream_id, corr):
        """With latency timestamps, the launch's `submitted` time stamp, pushed before it: a
        release with a timestamp and no WFI (taken when the front end reaches it). Its slot
        taken, the record's `submitted` moves ``cupti_submitted_lead_ns`` earlier once the
        pool is full (module docstring)."""
        if not self.latency:
            return
        if not self._pool_full:
            held = self._slots.get(stream_id, 0)
            if held < STAMP_SLOTS_PER_STREAM:
                self._slots[stream_id] = held + 1
                self._pool_full = sum(self._slots.values()) >= STAMP_SLOTS
        if self._pool_full:
            self.timeline.submitted_lead[corr] = round(self.p.cupti_submitted_lead_ns)
        if self._stamps is None:
            self._stamps = self.sim.mem.alloc(16, align=16)
            self.sim.write_hooks[self._stamps] = self._stamp_written
        self._stamp_count = (self._stamp_count + 1) & 0xFFFFFFFF
        self._stamp_corr[self._stamp_count] = corr
        pb.sem_release(self._stamps, self._stamp_count, wfi=False, timestamp=True)

    def _stamp_written(self, payload, t_ns):
        """The front end writes a launch's stamp (its payload first)."""
        corr = self._stamp_corr.pop(payload & 0xFFFFFFFF, None)
        if corr is not None:
            self.timeline.stamp_written(corr, t_ns)

    def api_call(self, call):
        """Run one API call (a generator), then CUPTI's cost: time inside a launch call that
        launched (the end of its runtime record moves past it) and after every call. A call
        captured into a graph makes no kernel activity: its callbacks' own time inside it
        and after it instead (``cupti_captured_call_ns``, ``cupti_captured_gap_ns``; on the
        H200 a captured launch's record lasts 1.06 us and the next begins 0.52 us after, on
        a slow vCPU, against 0.59 us and nothing unprofiled)."""
        records = self.timeline.records
        n = len(records)
        result = yield from call
        if self.enabled:
            mine = [r for r in records[n:] if r["kind"] == "runtime"]
            captured, self.captured = self.captured, False
            if captured:
                inside, after = self.p.cupti_captured_call_ns, self.p.cupti_captured_gap_ns
            elif mine and mine[-1]["name"].startswith("cudaLaunchKernel"):
                inside, after = self.p.cupti_launch_ns, self.p.cupti_call_gap_ns
            else:
                inside, after = 0, self.p.cupti_call_gap_ns
            if mine and inside:
                yield ("cpu", inside)
                mine[-1]["end"] = self.sim.now_ns
            yield ("cpu", after)
        return result

    def capture_call(self):
        """The call running was captured into a graph: no kernel activity to record."""
        self.captured = True

    def call_gap_ns(self):
        """CUPTI's CPU time after an API call (for an op that makes several calls)."""
        return self.p.cupti_call_gap_ns if self.enabled else 0

    def graph_operation_ns(self, operation):
        """CUPTI's CPU time per node of a graph ``operation``: ``update``
        (cudaGraphExecUpdate), ``set_params`` (a SetParams call's one node), ``destroy``
        (cudaGraphExecDestroy) or ``reinstantiate``."""
        if not self.enabled:
            return 0
        return getattr(self.p, {"update": "cupti_graph_update_node_ns",
                                "set_params": "cupti_graph_set_params_ns",
                                "destroy": "cupti_graph_destroy_node_ns",
                                "reinstantiate": "cupti_graph_reinstantiate_node_ns"}[operation])

    def graph_node_ns(self):
        """CPU time per node of a graph launch: CUPTI makes each node's records."""
        return self.p.cupti_graph_node_ns if self.enabled else 0

    def submitted_at_dispatch(self):
        """Under CUPTI, a stream kernel's "submitted" is when the GPU's front end reached its
        launch (the traces show it 0.5 us before the start even behind a 100 ms gate), not
        the doorbell: the front end's dispatch time, kept in the record (a streamed timeline
        does the same as each kernel ends)."""
        if not self.enabled:
            return
        for rec in self.timeline.records:
            if rec["kind"] == "kernel" and rec.get("_dispatched") is not None:
                rec["submitted"] = rec["_dispatched"]
