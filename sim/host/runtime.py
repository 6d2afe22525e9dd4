"""The host driver model: a CUDA-like runtime over a user-mode driver (UMD) and the KMD.

API calls are named after the CUDA runtime calls they model and run on one CPU thread; each
is a generator (drive it with ``yield from``) that yields CPU time and waits to the
co-simulation (see ``cosim.py``).

UMD, as DESIGN.md section 2 describes it:

- streams are mapped round robin onto ``max_connections`` compute channels; H2D and D2H copies
  go to two copy channels of their own; D2D copies run on the stream's compute channel;
- every stream has a syncpoint counter: each piece of work releases it (value = the stream's
  work count) and the next piece of the same stream acquires it first, so kernels of one
  stream are ordered and kernels of two streams sharing a channel are not. A kernel carries
  its release in its launch (as a QMD's release fields: the counter is set as the kernel
  completes, and the channel goes on meanwhile); a copy's is a RELEASE_WFI behind it;
- an event record writes the event's host semaphore (a RELEASE with timestamp for a timing
  event, the payload only with ``cudaEventDisableTiming``). A record captures the stream's
  frontier: its syncpoint at the value it has then, and whatever the stream waited for since
  its latest work (so a dependency passes on through any number of events);
  ``stream_wait_event`` acquires every syncpoint of that frontier on the waiting stream's
  channel, and the stream's next work on another channel (a copy channel) acquires them
  again, since channel order does not reach there;
- host waits push a host-semaphore release behind the stream's work and poll it;
- kickoff policy: the commands of ``kickoff_batch`` API calls on a channel go out as one
  GPFIFO entry and one doorbell (1: every call at once); synchronizing calls, host sleeps and
  the end of the program flush every channel. A kickoff that finds the channel's ring or push
  buffer full blocks the calling thread until the GPU has read enough.
"""

from dataclasses import dataclass, field

from gpufe.rtl.layouts import ChannelReg, SemOp, Method
from gpufe.sim.host.encode import (PushBuffer, launch_descriptor, syncpoint_address, gp_entry,
                                   encode_graph_node)
from gpufe.sim.cosim.engines import Kernel, Copy
from gpufe.sim.cosim.hostmem import SegmentRing

RUNTIME_NAMES = {
    "launch_kernel": "cudaLaunchKernel_v7000",
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
}

# CUPTI synchronization types
SYNC_EVENT, SYNC_STREAM, SYNC_DEVICE = 1, 3, 4
COPY_KINDS = {"h2d": 1, "d2h": 2, "d2d": 8}
STREAM_ID_BASE = 13          # CUDA's first user stream id, as in the reference traces
NO_ID = 4294967295


class ApiError(ValueError):
    pass


class CaptureError(ApiError):
    """An operation that stream capture does not allow (CUDA fails the capture too)."""


@dataclass
class Capture:
    origin: "Stream"
    nodes: list = field(default_factory=list)       # GraphNodeSpec, in capture order
    frontier: dict = field(default_factory=dict)    # stream name -> set of node indices
    ended: bool = False


@dataclass
class GraphNodeSpec:
    kind: str                       # "kernel" or "copy"
    deps: frozenset
    name: str = ""
    grid: tuple = (1, 1, 1)
    block: tuple = (1, 1, 1)
    block_ns: float = 0
    copy_kind: str = ""
    nbytes: int = 0


@dataclass
class Graph:
    name: str
    nodes: list
    executable: "GraphExec" = None


@dataclass
class GraphExec:
    graph_id: int
    table: int                      # node table address in device-visible memory
    descriptors: list               # per node
    threads: list
    # (syncpoint, value) released behind the latest launch: CUDA orders each launch of an
    # executable graph behind its previous launch, whatever the streams
    last_launch: tuple = None


@dataclass
class Channel:
    id: int
    kind: str                       # "compute", "h2d", "d2h"
    ring_base: int
    ring_entries: int
    pb_bytes: int
    put: int = 0
    outstanding: int = 0            # GPFIFO entries the GPU has not finished reading
    pb_used: int = 0
    priority: int = 0
    pending: list = field(default_factory=list)     # (PushBuffer, record) not kicked off
    pb_ring: SegmentRing = None     # the push buffer in host memory, segments carved from it


@dataclass
class Stream:
    name: str
    id: int
    priority: int                   # CUDA: 0 least, negative greater
    channel: Channel
    syncpoint: int
    work: int = 0                   # releases of its syncpoint so far
    last_channel: Channel = None    # channel of its latest work
    capture: "Capture" = None       # the capture it takes part in, if any
    host_sem: int = 0
    host_value: int = 0
    # syncpoint -> value acquired by stream_wait_event since the stream's latest work, on its
    # compute channel: later work on that channel is behind them in channel order, work on
    # a copy channel acquires them again; the stream's next release stands for them
    waits: dict = field(default_factory=dict)


@dataclass
class Event:
    name: str
    id: int
    timing: bool
    # the host semaphore and payload the latest record writes: the recording stream's own
    # semaphore, which only its channel writes, in order, so the value never goes back (an
    # event semaphore of its own would: records on two streams may complete out of order)
    done: tuple = None
    stream: Stream = None           # stream of the latest record
    deps: dict = field(default_factory=dict)    # syncpoint -> value the latest record follows
    captured: tuple = None          # (capture, node set) when recorded during a capture


class Runtime:
    def __init__(self, cosim):
        self.sim = cosim
        self.p = cosim.p
        self.records = []            # timeline records (dicts), in the order they are made
        self.marks = []
        self.streams = {}
        self.events = {}
        self.graphs = {}
        self._graph_ids = 0
        self.blocked_launches = 0
        self._corr = 100
        mc = cosim.max_connections
        self.compute_channels = [self._make_channel(i, "compute") for i in range(mc)]
        self.copy_channels = {"h2d": self._make_channel(mc, "h2d"),
                              "d2h": self._make_channel(mc + 1, "d2h")}
        self._next_device_address = 0x80_0000_0000

    # -- set-up -----------------------------------------------------------------------------------

    def _make_channel(self, cid, kind):
        entries = self.p.gpfifo_entries
        base = self.sim.mem.alloc(8 * entries)
        ch = Channel(cid, kind, base, entries, self.p.pushbuffer_bytes,
                     pb_ring=SegmentRing(self.sim.mem, self.p.pushbuffer_bytes))
        reg = lambda r: self.sim.channel_register(cid, r)
        # programmed by the KMD at context creation, before the program starts
        for r, v in ((ChannelReg.GPFIFO_BASE_LO, base & 0xFFFFFFFF),
                     (ChannelReg.GPFIFO_BASE_HI, base >> 32),
                     (ChannelReg.GPFIFO_ENTRIES_LOG2, (entries - 1).bit_length())):
            self.sim.mmio_write(reg(r), v, delay_ns=0)
        return ch

    def _corr_id(self):
        self._corr += 1
        return self._corr

    def now(self):
        return self.sim.now_ns

    def cupti_submitted(self):
        """Under CUPTI, a stream kernel's "submitted" is when the GPU's front end reached its
        launch (the traces show it 0.5 us before the start even behind a 100 ms gate), not
        the doorbell: the front end's dispatch time, kept by the harness."""
        if self.sim.profiler != "cupti":
            return
        for rec in self.records:
            if rec["kind"] == "kernel" and rec.get("_dispatched") is not None:
                rec["submitted"] = rec["_dispatched"]

    def api_call(self, call):
        """Run one API call (a generator); under CUPTI, add the tracer's cost: time inside
        a launch call (on its record: the kernel's activity record is set up) and after
        every call."""
        n = len(self.records)
        result = yield from call
        if self.sim.profiler == "cupti":
            mine = [r for r in self.records[n:] if r["kind"] == "runtime"]
            if mine and mine[-1]["name"].startswith("cudaLaunchKernel"):
                yield ("cpu", self.p.cupti_launch_ns)
                mine[-1]["end"] = self.now()
            yield ("cpu", self.p.cupti_call_gap_ns)
        return result

    def _runtime_record(self, api, start, corr, **extra):
        rec = {"kind": "runtime", "name": RUNTIME_NAMES[api], "corr": corr, "tid": 1,
               "start": start, "end": self.now()}
        rec.update(extra)
        self.records.append(rec)
        return rec

    # -- the UMD: commands, kickoff, space ------------------------------------------------------------

    def _submit(self, ch, pb, record=None):
        """Queue commands on a channel; kick off when the policy says so. Returns whether
        the CPU had to wait for space."""
        ch.pending.append((pb, record))
        if len(ch.pending) >= self.p.kickoff_batch:
            return (yield from self._kickoff(ch))
        return False

    def _flush_all(self, cost=None):
        for ch in self.compute_channels + list(self.copy_channels.values()):
            if ch.pending:
                yield ("cpu", self.p.kickoff_ns if cost is None else cost)
                yield from self._kickoff(ch)

    def _kickoff(self, ch):
        """One GPFIFO entry for everything queued on the channel, then the doorbell; block
        while the ring or the push buffer is full."""
        words = [w for pb, _ in ch.pending for w in pb.words]
        nbytes = 4 * len(words)
        full = lambda: (ch.outstanding >= ch.ring_entries - 1
                        or ch.pb_used + nbytes > ch.pb_bytes)
        blocked = full()
        yield ("wait", lambda: not full(),
               f"a kickoff on channel {ch.id} waiting for GPFIFO or push-buffer space")
        seg = ch.pb_ring.place(nbytes)      # fits: at most pb_bytes are in flight
        self.sim.mem.write_dwords(seg, words)
        entry = gp_entry(seg, len(words))
        self.sim.mem.write_dwords(ch.ring_base + 8 * ch.put, [entry & 0xFFFFFFFF, entry >> 32])
        ch.put = (ch.put + 1) % ch.ring_entries
        ch.outstanding += 1
        ch.pb_used += nbytes
        for _, rec in ch.pending:
            if rec is not None:
                rec["submitted"] = self.now()
        ch.pending = []

        def consumed():
            ch.outstanding -= 1
            ch.pb_used -= nbytes
            ch.pb_ring.release()
            self.sim.poke_cpu()
        self.sim.segment_ends[seg + nbytes] = consumed
        self.sim.mmio_write(self.sim.channel_register(ch.id, ChannelReg.GP_PUT), ch.put)
        return blocked

    def _order_after_stream(self, pb, stream, ch):
        """Acquire the stream's syncpoint when its latest work may still run, and, on a
        channel other than the stream's own, what the stream has waited for since (on its
        own channel those acquires are already ahead in the channel)."""
        if stream.work:
            pb.sem_acquire(syncpoint_address(self.sim.cfg, stream.syncpoint), stream.work,
                           SemOp.ACQ_CIRC_GEQ)
        if ch is not stream.channel:
            for sp, value in sorted(stream.waits.items()):
                pb.sem_acquire(syncpoint_address(self.sim.cfg, sp), value, SemOp.ACQ_CIRC_GEQ)

    def _stream_frontier(self, stream):
        """Syncpoint -> value: everything issued to the stream so far, waits included."""
        deps = dict(stream.waits)
        if stream.work:
            deps[stream.syncpoint] = stream.work
        return deps

    def _release_stream_on_completion(self, stream, ch):
        """A kernel's own release of its stream's syncpoint (a QMD release: set by the engine
        as the kernel completes; no channel release waits for it, so the channel runs on)."""
        stream.work += 1
        stream.last_channel = ch
        stream.waits = {}
        return (stream.syncpoint, stream.work)

    def _release_stream(self, pb, stream, ch):
        stream.work += 1
        stream.last_channel = ch
        stream.waits = {}
        pb.sem_release(syncpoint_address(self.sim.cfg, stream.syncpoint), stream.work, wfi=True)

    def _stream(self, name):
        try:
            return self.streams[name]
        except KeyError:
            raise ApiError(f"unknown stream {name!r}") from None

    def _event(self, name):
        try:
            return self.events[name]
        except KeyError:
            raise ApiError(f"unknown event {name!r}") from None

    # -- the API --------------------------------------------------------------------------------------

    def stream_create(self, name, priority=0):
        if name in self.streams:
            raise ApiError(f"stream {name!r} already exists")
        start, corr = self.now(), self._corr_id()
        idx = len(self.streams)
        if idx >= self.sim.cfg.syncpoints:
            raise ApiError(f"more streams than syncpoints ({self.sim.cfg.syncpoints})")
        ch = self.compute_channels[idx % len(self.compute_channels)]
        s = Stream(name, STREAM_ID_BASE + idx, priority, ch, syncpoint=idx,
                   host_sem=self.sim.mem.alloc(16, align=16))
        self.streams[name] = s
        level = min(max(-priority, 0), self.sim.cfg.priority_levels - 1)
        if level > ch.priority:
            ch.priority = level
            self.sim.mmio_write(self.sim.channel_register(ch.id, ChannelReg.PRIORITY), level)
        yield ("cpu", self.p.stream_create_cpu_ns)
        self._runtime_record("stream_create", start, corr)

    def event_create(self, name, timing=True):
        if name in self.events:
            raise ApiError(f"event {name!r} already exists")
        start, corr = self.now(), self._corr_id()
        self.events[name] = Event(name, len(self.events) + 1, bool(timing))
        yield ("cpu", self.p.event_create_cpu_ns)
        self._runtime_record("event_create", start, corr)

    def launch_kernel(self, name, grid, block, block_ns, stream):
        s = self._stream(stream)
        if s.capture is not None:
            yield from self._capture_node(s, "launch_kernel", GraphNodeSpec(
                "kernel", frozenset(), name=name, grid=tuple(grid), block=tuple(block),
                block_ns=block_ns))
            return
        start, corr = self.now(), self._corr_id()
        ch = s.channel
        threads = block[0] * block[1] * block[2]
        if not 0 < threads <= self.p.max_threads_per_sm:
            raise ApiError(f"block {block} has {threads} threads; 1..{self.p.max_threads_per_sm}")
        desc = self.sim.descriptors.take()     # back to the pool once dispatched
        self.sim.mem.write_dwords(desc, launch_descriptor(grid, block, int(block_ns),
                                                          kernel_id=corr))
        pb = PushBuffer()
        self._order_after_stream(pb, s, ch)
        pb.launch(desc)
        release = self._release_stream_on_completion(s, ch)
        yield ("cpu", self.p.launch_encode_ns)
        rec = {"kind": "kernel", "name": name, "corr": corr, "stream": s.id, "channel": ch.id,
               "channel_type": 1, "queued": self.now(), "submitted": None, "start": None,
               "end": None, "grid": list(grid), "block": list(block), "graph_id": 0,
               "graph_node": 0}
        kernel = Kernel(None, grid[0] * grid[1] * grid[2], threads, block_ns,
                        priority=-s.priority, release=release)
        self.sim.launches[desc] = (kernel, rec)
        rec["_kernel"] = kernel
        self.records.append(rec)
        flushing = len(ch.pending) + 1 >= self.p.kickoff_batch
        if flushing:
            yield ("cpu", self.p.kickoff_ns)
        blocked = yield from self._submit(ch, pb, rec)
        self.blocked_launches += bool(blocked)
        spent = self.p.launch_encode_ns + (self.p.kickoff_ns if flushing else 0)
        yield ("cpu", max(self.p.launch_cpu_ns - spent, 0))
        self._runtime_record("launch_kernel", start, corr, **({"blocked": True} if blocked else {}))

    def memcpy_async(self, kind, nbytes, stream):
        if kind not in COPY_KINDS:
            raise ApiError(f"memcpy kind {kind!r}: one of {sorted(COPY_KINDS)}")
        s = self._stream(stream)
        if s.capture is not None:
            yield from self._capture_node(s, "memcpy_async", GraphNodeSpec(
                "copy", frozenset(), name=f"memcpy {kind}", copy_kind=kind, nbytes=nbytes))
            return
        start, corr = self.now(), self._corr_id()
        ch = self.copy_channels.get(kind, s.channel)
        dst = self._next_device_address
        self._next_device_address += max(256, (nbytes + 255) // 256 * 256)
        pb = PushBuffer()
        self._order_after_stream(pb, s, ch)
        pb.copy(0x90_0000_0000, dst, nbytes)
        self._release_stream(pb, s, ch)
        yield ("cpu", self.p.memcpy_cpu_ns)
        yield from self._submit(ch, pb)
        rec = {"kind": "memcpy", "copy_kind": COPY_KINDS[kind], "bytes": nbytes, "corr": corr,
               "stream": s.id, "channel": ch.id, "channel_type": 1 if kind == "d2d" else 2,
               "start": None, "end": None, "graph_id": 0, "graph_node": 0}
        job = Copy(None, kind, nbytes)
        rec["_copy"] = job
        self.sim.copy_jobs[dst] = (job, rec)
        self.records.append(rec)
        self._runtime_record("memcpy_async", start, corr)

    def event_record(self, event, stream):
        e, s = self._event(event), self._stream(stream)
        start, corr = self.now(), self._corr_id()
        if s.capture is not None:
            # inside a capture an event is a point in the graph, not a semaphore
            e.captured = (s.capture, frozenset(s.capture.frontier[s.name]))
            yield ("cpu", self.p.capture_call_cpu_ns)
            self._runtime_record("event_record", start, corr)
            return
        e.captured = None
        ch = s.channel
        s.host_value += 1
        e.done = (s.host_sem, s.host_value)
        e.stream, e.deps = s, self._stream_frontier(s)
        pb = PushBuffer()
        if s.last_channel is not None and s.last_channel is not ch:
            self._order_after_stream(pb, s, ch)
        pb.sem_release(s.host_sem, s.host_value, wfi=True, timestamp=e.timing, wide=e.timing)
        yield ("cpu", self.p.event_record_timing_cpu_ns if e.timing
               else self.p.event_record_cpu_ns)
        yield from self._submit(ch, pb)
        self._runtime_record("event_record", start, corr)

    def stream_wait_event(self, stream, event):
        s, e = self._stream(stream), self._event(event)
        start, corr = self.now(), self._corr_id()
        if e.captured is not None:
            cap, nodes = e.captured
            self._refuse_ended_capture(e, "stream_wait_event")
            if s.capture is None:
                # the stream joins the capture: its work now depends on the event's nodes
                s.capture = cap
                cap.frontier[s.name] = set(nodes)
            elif s.capture is cap:
                cap.frontier[s.name] |= nodes
            else:
                raise CaptureError(f"stream {stream!r} is capturing another graph than event "
                                   f"{event!r} (cudaErrorStreamCaptureIsolation)")
            yield ("cpu", self.p.capture_call_cpu_ns)
            self._runtime_record("stream_wait_event", start, corr)
            return
        if s.capture is not None:
            raise CaptureError(f"stream {stream!r} is capturing and event {event!r} was not "
                               f"recorded in that capture (cudaErrorStreamCaptureIsolation)")
        if e.deps:
            pb = PushBuffer()
            for sp, value in sorted(e.deps.items()):
                pb.sem_acquire(syncpoint_address(self.sim.cfg, sp), value, SemOp.ACQ_CIRC_GEQ)
                s.waits[sp] = max(s.waits.get(sp, 0), value)
            yield ("cpu", self.p.stream_wait_event_cpu_ns)
            yield from self._submit(s.channel, pb)
        else:
            yield ("cpu", self.p.stream_wait_event_cpu_ns)
        self._runtime_record("stream_wait_event", start, corr)

    def _refuse_ended_capture(self, e, api):
        if e.captured is not None and e.captured[0].ended:
            raise CaptureError(f"{api}: event {e.name!r} was last recorded in a capture that "
                               f"has ended (cudaErrorCapturedEvent)")

    def _host_fence(self, s):
        """Commands that write the stream's host semaphore once its work, and what it waits
        for, is done."""
        if s.work == 0 and not s.waits:
            return None
        s.host_value += 1
        pb = PushBuffer()
        self._order_after_stream(pb, s, s.channel)
        pb.sem_release(s.host_sem, s.host_value, wfi=False)
        return pb

    def _wait_host(self, address, value, why):
        yield ("wait", lambda: self.sim.mem.read_dword(address) >= value, why)

    def stream_synchronize(self, stream):
        self._refuse_while_capturing("stream_synchronize")
        s = self._stream(stream)
        start, corr = self.now(), self._corr_id()
        yield ("cpu", self.p.sync_call_ns)
        sync_start = self.now()
        pb = self._host_fence(s)
        if pb is not None:
            s.channel.pending.append((pb, None))
            yield from self._flush_all(self.p.sync_kickoff_ns)
            yield from self._wait_host(s.host_sem, s.host_value,
                                       f"stream_synchronize({stream!r})")
            yield ("cpu", self.p.sync_return_ns)
        self.records.append({"kind": "sync", "type": SYNC_STREAM, "corr": corr, "stream": s.id,
                             "event": NO_ID, "start": sync_start, "end": self.now()})
        self._runtime_record("stream_synchronize", start, corr)

    def event_synchronize(self, event):
        self._refuse_while_capturing("event_synchronize")
        e = self._event(event)
        self._refuse_ended_capture(e, "event_synchronize")
        start, corr = self.now(), self._corr_id()
        yield ("cpu", self.p.sync_call_ns)
        yield from self._flush_all()
        sync_start = self.now()
        if e.done:
            yield from self._wait_host(*e.done, f"event_synchronize({event!r})")
            yield ("cpu", self.p.sync_return_ns)
        self.records.append({"kind": "sync", "type": SYNC_EVENT, "corr": corr,
                             "stream": NO_ID, "event": e.id, "start": sync_start,
                             "end": self.now()})
        self._runtime_record("event_synchronize", start, corr)

    def event_query(self, event):
        """Spin on cudaEventQuery until the event has completed (one record per query)."""
        self._refuse_while_capturing("event_query")
        e = self._event(event)
        self._refuse_ended_capture(e, "event_query")
        yield from self._flush_all()
        while True:
            start, corr = self.now(), self._corr_id()
            yield ("cpu", self.p.query_cpu_ns)
            done = e.done is None or self.sim.mem.read_dword(e.done[0]) >= e.done[1]
            self.records.append({"kind": "sync", "type": SYNC_EVENT, "corr": corr,
                                 "stream": NO_ID, "event": e.id, "start": start,
                                 "end": self.now()})
            self._runtime_record("event_query", start, corr)
            if done:
                return
            if self.sim.device_quiet():
                raise ApiError(f"event_query({event!r}) can never succeed: the GPU is idle "
                               f"and nothing else is due")

    def device_synchronize(self):
        self._refuse_while_capturing("device_synchronize")
        start, corr = self.now(), self._corr_id()
        yield ("cpu", self.p.sync_call_ns)
        sync_start = self.now()
        waits = []
        for s in self.streams.values():
            pb = self._host_fence(s)
            if pb is not None:
                s.channel.pending.append((pb, None))
                waits.append((s.host_sem, s.host_value))
        yield from self._flush_all(self.p.sync_kickoff_ns)
        if waits:
            yield ("wait", lambda: all(self.sim.mem.read_dword(a) >= v for a, v in waits),
                   "device_synchronize()")
            yield ("cpu", self.p.sync_return_ns)
        self.records.append({"kind": "sync", "type": SYNC_DEVICE, "corr": corr,
                             "stream": NO_ID, "event": NO_ID, "start": sync_start,
                             "end": self.now()})
        self._runtime_record("device_synchronize", start, corr)

    # -- CUDA graphs ----------------------------------------------------------------------------------

    def _refuse_while_capturing(self, api):
        capturing = sorted(n for n, st in self.streams.items() if st.capture is not None)
        if capturing:
            raise CaptureError(f"{api} is not permitted while stream {capturing[0]!r} is "
                               f"capturing; the capture is invalidated "
                               f"(cudaErrorStreamCaptureUnsupported)")

    def _capture_node(self, s, api, spec):
        start, corr = self.now(), self._corr_id()
        cap = s.capture
        spec.deps = frozenset(cap.frontier[s.name])
        cap.nodes.append(spec)
        cap.frontier[s.name] = {len(cap.nodes) - 1}
        yield ("cpu", self.p.capture_call_cpu_ns)
        self._runtime_record(api, start, corr)

    def stream_begin_capture(self, stream):
        s = self._stream(stream)
        if s.capture is not None:
            raise CaptureError(f"stream {stream!r} is already capturing")
        start, corr = self.now(), self._corr_id()
        s.capture = Capture(origin=s, frontier={s.name: set()})
        yield ("cpu", self.p.begin_capture_cpu_ns)
        self._runtime_record("stream_begin_capture", start, corr)

    def stream_end_capture(self, stream, graph):
        s = self._stream(stream)
        cap = s.capture
        if cap is None or cap.origin is not s:
            raise CaptureError(f"stream {stream!r} did not begin a capture")
        if graph in self.graphs:
            raise ApiError(f"graph {graph!r} already exists")
        # every stream that joined must have joined back into the origin stream
        ends = cap.frontier[s.name]
        reach = set()
        todo = list(ends)
        while todo:
            n = todo.pop()
            if n not in reach:
                reach.add(n)
                todo.extend(cap.nodes[n].deps)
        for name, front in cap.frontier.items():
            if not front <= reach:
                raise CaptureError(f"stream {name!r} joined the capture of {stream!r} but its "
                                   f"work was not joined back (cudaErrorStreamCaptureUnjoined)")
        for st in self.streams.values():
            if st.capture is cap:
                st.capture = None
        cap.ended = True
        start, corr = self.now(), self._corr_id()
        self.graphs[graph] = Graph(graph, cap.nodes)
        yield ("cpu", self.p.end_capture_cpu_ns)
        self._runtime_record("stream_end_capture", start, corr)

    def _graph(self, name):
        try:
            return self.graphs[name]
        except KeyError:
            raise ApiError(f"unknown graph {name!r}") from None

    def graph_instantiate(self, graph):
        """Write every node's descriptor and the node table (dependencies) into
        device-visible memory, ahead of any launch."""
        g = self._graph(graph)
        cfg = self.sim.cfg
        n = len(g.nodes)
        succs = [[] for _ in range(n)]
        for i, node in enumerate(g.nodes):
            for d in sorted(node.deps):
                succs[d].append(i)
        n_edges = sum(len(x) for x in succs)
        if n > cfg.graph_nodes_max or n_edges > cfg.graph_edges_max:
            raise ApiError(f"graph {graph!r} has {n} nodes and {n_edges} edges; the front "
                           f"end holds {cfg.graph_nodes_max} and {cfg.graph_edges_max}")
        if any(len(node.deps) >= 1 << 14 for node in g.nodes):
            raise ApiError(f"graph {graph!r}: a node has more than 16383 predecessors")
        start, corr = self.now(), self._corr_id()
        mem = self.sim.mem
        descriptors, threads = [], []
        for node in g.nodes:
            if node.kind == "kernel":
                d = mem.alloc(256, align=256)
                mem.write_dwords(d, launch_descriptor(node.grid, node.block,
                                                      int(node.block_ns)))
                threads.append(node.block[0] * node.block[1] * node.block[2])
            else:
                d = mem.alloc(256, align=256)
                dst = self._next_device_address
                self._next_device_address += max(256, (node.nbytes + 255) // 256 * 256)
                mem.write_dwords(d, [0, 0x90, dst & 0xFFFFFFFF, dst >> 32, node.nbytes])
                threads.append(0)
            descriptors.append(d)
        table = mem.alloc(16 * n + 4 * n_edges, align=256)
        first = 0
        words = []
        for i, node in enumerate(g.nodes):
            words += encode_graph_node(node.kind, len(node.deps), len(succs[i]), first,
                                       descriptors[i])
            first += len(succs[i])
        words += [j for x in succs for j in x]
        mem.write_dwords(table, words)
        self._graph_ids += 1
        g.executable = GraphExec(self._graph_ids, table, descriptors, threads)
        yield ("cpu", self.p.instantiate_cpu_ns + self.p.instantiate_per_node_ns * n)
        self._runtime_record("graph_instantiate", start, corr)

    def graph_launch(self, graph, stream):
        """One push-buffer entry that points at the instantiated graph, one doorbell."""
        g, s = self._graph(graph), self._stream(stream)
        if g.executable is None:
            raise ApiError(f"graph {graph!r} was not instantiated")
        if s.capture is not None:
            raise CaptureError(f"graph_launch into capturing stream {stream!r} is not "
                               f"modelled (child graphs)")
        x = g.executable
        start, corr = self.now(), self._corr_id()
        if not g.nodes:
            # an empty graph (CUDA captures one from a capture that issued no work): the call
            # costs its CPU time and gives the GPU nothing
            yield ("cpu", self.p.graph_launch_cpu_ns)
            self._runtime_record("graph_launch", start, corr)
            return
        ch = s.channel
        pb = PushBuffer()
        self._order_after_stream(pb, s, ch)
        if x.last_launch is not None and x.last_launch[0] != s.syncpoint:
            pb.sem_acquire(syncpoint_address(self.sim.cfg, x.last_launch[0]), x.last_launch[1],
                           SemOp.ACQ_CIRC_GEQ)
        pb.incr(Method.GRAPH_TABLE_LO, x.table & 0xFFFFFFFF, x.table >> 32)
        if len(g.nodes) < (1 << 13):
            pb.immd(Method.GRAPH_LAUNCH, len(g.nodes))
        else:
            pb.incr(Method.GRAPH_LAUNCH, len(g.nodes))
        self._release_stream(pb, s, ch)
        x.last_launch = (s.syncpoint, s.work)
        for i, node in enumerate(g.nodes):
            ids = {"graph_id": x.graph_id, "graph_node": (x.graph_id << 32) | i}
            if node.kind == "kernel":
                rec = {"kind": "kernel", "name": node.name, "corr": corr, "stream": s.id,
                       "channel": ch.id, "channel_type": 1, "queued": 0, "submitted": 0,
                       "start": None, "end": None, "grid": list(node.grid),
                       "block": list(node.block), **ids}
                job = Kernel(None, node.grid[0] * node.grid[1] * node.grid[2], x.threads[i],
                             node.block_ns, priority=-s.priority)
                rec["_kernel"] = job
            else:
                rec = {"kind": "memcpy", "copy_kind": COPY_KINDS[node.copy_kind],
                       "bytes": node.nbytes, "corr": corr, "stream": s.id, "channel": ch.id,
                       "channel_type": 1, "start": None, "end": None, **ids}
                job = Copy(None, node.copy_kind, node.nbytes)
                rec["_copy"] = job
            self.sim.graph_launches[x.descriptors[i], ch.id].append((job, rec))
            self.records.append(rec)
        # the work is submitted after the fixed part; the per-node part of the call (its
        # bookkeeping, and CUPTI's per-node records) runs while the GPU already executes
        yield ("cpu", self.p.graph_launch_cpu_ns)
        yield from self._submit(ch, pb)
        per_node = self.p.graph_launch_per_node_ns + (
            self.p.cupti_graph_node_ns if self.sim.profiler == "cupti" else 0)
        yield ("cpu", per_node * len(g.nodes))
        self._runtime_record("graph_launch", start, corr)

    def host_sleep(self, ns):
        yield from self._flush_all()
        yield ("cpu", ns)

    def finish(self):
        """End of the program: whatever is still queued is kicked off."""
        yield from self._flush_all()

    def mark(self, what):
        self.marks.append({"kind": "meta", "what": what, "t": self.now()})
        return
        yield
