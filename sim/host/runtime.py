"""The host driver model's CUDA-like runtime: the API a workload calls.

API calls are named after the CUDA runtime calls they model and run on one CPU thread; each
is a generator (drive it with ``yield from``) that yields CPU time and waits to the
co-simulation (see ``sim/cosim/harness.py``). A call checks its arguments, spends the CPU time
the parameter set gives it, and leaves its records (``records.py``); what it does to the GPU
is the driver's:

- ``umd.py``: the user-mode driver: streams on channels, push buffers, kickoff policy;
- ``streams.py``: how the UMD orders work: a syncpoint per stream, events as frontiers;
- ``kmd.py``: the kernel-mode driver: MMIO, doorbells;
- ``graphs.py``: stream capture, and CUDA graphs in memory;
- ``profiler.py``: what CUPTI adds when the program runs under it.

A kernel launch writes a launch descriptor into host memory and pushes its address; the
engines read the descriptor when the front end dispatches it, as the GPU reads a QMD. A
kernel's name reaches the timeline through the driver's function table (one entry per kernel
function), not the launch.
"""

from dataclasses import dataclass, field, replace
import math

from gpufe.rtl.layouts import COPY_KINDS, HOST_COPY_BUFFER, DESCRIPTOR_ALIGN
from gpufe.sim.host.encode import PushBuffer, launch_descriptor, copy_descriptor
from gpufe.sim.host.graphs import (GraphNodeSpec, Capture, Graph, instantiate, push_launch,
                                   queue_launch, writes_for, same_topology, table_nodes,
                                   changed_nodes, update_refused, hand_over)
from gpufe.sim.host.kmd import Kmd
from gpufe.sim.host.profiler import Profiler
from gpufe.sim.host.records import (Timeline, SYNC_EVENT, SYNC_STREAM, SYNC_DEVICE,
                                    CHANNEL_COMPUTE, CHANNEL_COPY)
from gpufe.sim.host.streams import (Stream, acquire, order_after_stream, stream_frontier,
                                    release_on_completion, release_stream, host_wait,
                                    pdl_primary)
from gpufe.sim.host.umd import Umd

STREAM_ID_BASE = 13          # CUDA's first user stream id, as in the reference traces

#: the calls whose code leaves the host CPU's caches between uses (``Params.cold_call_factor``):
#: API record name -> the path it runs (cudaLaunchKernel and cudaLaunchKernelEx share theirs)
COLD_KINDS = {"launch_kernel": "launch", "launch_kernel_ex": "launch",
              "graph_launch": "graph_launch"}


class ApiError(ValueError):
    """A call the runtime refuses (CUDA would return an error)."""


class CaptureError(ApiError):
    """An operation that stream capture does not allow (CUDA fails the capture too)."""


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


@dataclass(frozen=True)
class Process:
    """A process's CUDA context: its name (the timeline's ``pid``), its TSG on the GPU, the
    first of its channels and its CUDA_DEVICE_MAX_CONNECTIONS."""
    name: str
    tsg: int
    channel_base: int
    max_connections: int


class DriverLock:
    """A lock of the CUDA driver shared by a process's host threads (a stream's, held for a
    whole launch call). It is not fair: the threads waiting for it sleep, and one that a
    release wakes runs ``wake_ns`` later; by then the thread that released it, asking again,
    has taken it back, unless a waiter has waited ``turn_ns`` or more: then it is handed to
    the oldest waiter, which takes it once awake."""

    def __init__(self, rt, what, turn_ns, wake_ns):
        self.rt, self.what, self.turn_ns, self.wake_ns = rt, what, turn_ns, wake_ns
        self.owner = None
        self.reserved = None             # the waiter it was handed to
        self.waiting = {}                # thread -> since (ns)

    def acquire(self):
        me = self.rt.current
        free = lambda: self.owner is None and self.reserved in (None, me)
        if not free():
            self.waiting[me] = self.rt.now()
            self.rt.blocked.add(me)
            # (several waiters may be woken by one release: the first awake takes it)
            while not free():
                while not free():
                    yield ("wait", free, f"thread {me!r} waiting for the {self.what} lock")
                yield ("cpu", self.wake_ns)
            del self.waiting[me]
            self.rt.blocked.discard(me)
        self.owner, self.reserved = me, None

    def release(self):
        self.owner = None
        if self.waiting:
            oldest = min(self.waiting, key=lambda t: (self.waiting[t], str(t)))
            if self.rt.now() - self.waiting[oldest] >= self.turn_ns:
                self.reserved = oldest
        self.rt.sim.poke_cpu()


class Runtime:
    """The API over a driver model for the co-simulation ``cosim``: its KMD, UMD, timeline
    and profiler. ``process``: the CUDA context it runs in (None: the only one, with all of
    ``cosim``'s channels); ``threads``: the names of its host threads (None: one thread),
    each running its program through :meth:`thread`."""

    def __init__(self, cosim, process=None, threads=None):
        self.sim = cosim
        self.p = cosim.p
        self.cfg = cosim.cfg
        self.process = process or Process("p0", 0, 0, cosim.max_connections)
        self.kmd = Kmd(cosim)
        if not cosim.scheduler_configured:
            self.kmd.configure_scheduler(cosim.p.scheduler_registers(cosim.profiler == "cupti"))
            cosim.scheduler_configured = True
        self.umd = Umd(cosim, self.kmd, self.process)
        self.timeline = Timeline({ch.id: CHANNEL_COMPUTE if ch.kind == "compute"
                                  else CHANNEL_COPY for ch in self.umd.channels})
        cosim.activity = self.timeline
        self.profiler = Profiler(cosim, self.timeline)
        self.streams = {}
        self._stream_ids = 0        # stream ids given out (the device runtime's included)
        self.events = {}
        self.graphs = {}
        self._graph_ids = 0
        # graph nodes' worth of device memory freed by cudaGraphExecDestroy: an instantiation
        # that fits in it allocates nothing
        self._graph_pool_free = 0
        # the most nodes a capture has held (the driver's node store) and whether the
        # capture machinery is set up: a process's first capture and growth cost more
        self._capture_high = None
        self._kernel_ids = {}        # kernel name -> id in the function table
        self._loaded = set()         # kernel functions loaded (lazily, at a first use)
        self.blocked_launches = 0
        # host threads: which one is running, which are inside an API call, inside a launch,
        # waiting for a driver lock (the locks are the streams')
        self.threads = list(threads) if threads else [None]
        self.current = self.threads[0]
        self.in_call, self.launching, self.blocked = set(), set(), set()
        # (thread, call kind) -> when the thread's latest such call returned
        self._call_ended = {}

    @property
    def threaded(self):
        """More than one host thread: the driver's locks and shared state count."""
        return len(self.threads) > 1

    def thread(self, name, program):
        """``program`` (a generator of ops) run as host thread ``name``: the generator the
        co-simulation runs (the program itself when it is the only thread)."""
        if not self.threaded:
            return program
        return self._as_thread(name, program)

    def _as_thread(self, name, program):
        while True:
            self.current = name
            try:
                req = next(program)
            except StopIteration:
                return
            yield req

    # -- what callers read ---------------------------------------------------------------------

    @property
    def records(self):
        return self.timeline.records

    @property
    def marks(self):
        return self.timeline.marks

    @property
    def compute_channels(self):
        return self.umd.compute_channels

    @property
    def copy_channels(self):
        return self.umd.copy_channels

    def now(self):
        return self.sim.now_ns

    def api_call(self, call):
        """Run one API call (a generator), with CUPTI's cost when profiled."""
        if not self.threaded:
            return self.profiler.api_call(call)
        return self._threaded_call(self.profiler.api_call(call))

    def _threaded_call(self, call):
        """A call of one of several host threads: it counts as inside the driver (the
        other threads' launches see the shared state move) until it returns."""
        me = self.current
        self.in_call.add(me)
        try:
            yield from call
        finally:
            self.in_call.discard(me)

    def cupti_submitted(self):
        """Under CUPTI, a kernel's "submitted" is its dispatch (see ``profiler.py``)."""
        self.profiler.submitted_at_dispatch()

    # -- helpers ---------------------------------------------------------------------------------

    def _record(self, api, start, corr, **extra):
        if self.threaded:
            extra["tid"] = self.current
        self.timeline.runtime(api, start, corr, self.now(), **extra)
        kind = COLD_KINDS.get(api)
        if kind is not None:
            self._call_ended[(self.current, kind)] = self.now()

    def _cold(self, kind, start, warm_ns):
        """Generator: a call of ``kind`` (:data:`COLD_KINDS`) that began at ``start``, its code
        and data leaving the host CPU's caches since its thread's latest such call returned
        (or since the program began), refills them: ``cold_call_factor`` x (1 - exp(-idle /
        ``cold_decay_ns``)) of its warm CPU time ``warm_ns`` more. (A wait inside the call,
        for a driver lock, is not idle: the call has begun.)"""
        idle = start - self._call_ended.get((self.current, kind), 0)
        extra = (self.p.cold_call_factor * -math.expm1(-idle / self.p.cold_decay_ns)
                 * warm_ns)
        if extra > 0:
            yield ("cpu", extra)

    def _kernel_id(self, name):
        """The kernel function's id, registered in the function table at its first launch."""
        kid = self._kernel_ids.get(name)
        if kid is None:
            kid = self._kernel_ids[name] = len(self._kernel_ids) + 1
            self.timeline.kernel_names[kid] = name
        return kid

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

    def _graph(self, name):
        try:
            return self.graphs[name]
        except KeyError:
            raise ApiError(f"unknown graph {name!r}") from None

    # -- streams and events -----------------------------------------------------------------------

    def _stream_id(self):
        """The next stream id, as CUDA numbers them (the first user stream's is 13)."""
        self._stream_ids += 1
        return STREAM_ID_BASE + self._stream_ids - 1

    def stream_create(self, name, priority=0):
        if name in self.streams:
            raise ApiError(f"stream {name!r} already exists")
        start, corr = self.now(), self.timeline.correlation_id()
        if self.sim.next_syncpoint >= self.cfg.syncpoints:
            raise ApiError(f"more streams than syncpoints ({self.cfg.syncpoints})")
        ch = self.umd.stream_channel()
        s = Stream(name, self._stream_id(), priority, ch, syncpoint=self.sim.take_syncpoint(),
                   host_sem=self.sim.mem.alloc(16, align=16))
        s.tracking = self.sim.track_syncpoint(s.syncpoint)
        s.lock = DriverLock(self, f"stream {name!r}", self.p.lock_turn_ns,
                            self.p.lock_wake_ns)
        self.streams[name] = s
        yield ("cpu", self.p.stream_create_cpu_ns)
        self._record("stream_create", start, corr)

    def event_create(self, name, timing=True):
        if name in self.events:
            raise ApiError(f"event {name!r} already exists")
        start, corr = self.now(), self.timeline.correlation_id()
        self.events[name] = Event(name, len(self.events) + 1, bool(timing))
        yield ("cpu", self.p.event_create_cpu_ns)
        self._record("event_create", start, corr)

    # -- work --------------------------------------------------------------------------------------

    def _launch_locked(self, s):
        """Generator: a launch's first steps when several host threads share the process:
        the stream's lock (held to the call's end), then the driver's shared state, which
        comes over from other CPUs' caches when other threads are inside calls
        (``thread_contention_ns``) and more so the more of them are launching
        (``thread_contention_per_thread_ns`` each, not counting those waiting for a lock)."""
        me = self.current
        self.launching.add(me)
        yield from s.lock.acquire()
        others = self.in_call - {me}
        if others:
            busy = len((self.launching & others) - self.blocked)
            yield ("cpu", self.p.thread_contention_ns
                   + busy * self.p.thread_contention_per_thread_ns)

    def _hold(self, s):
        """Generator: with several host threads, take stream ``s``'s driver lock, as every call
        that reads or moves the stream's order and pushes its commands does, from the one to
        the other (:meth:`_let_go`): a call on the stream that begins later, in another
        thread, cannot read the order half moved nor push its commands ahead of this one's.
        (A launch takes it in :meth:`_launch_locked`, with the contention for the driver's
        shared state.)"""
        if self.threaded:
            yield from s.lock.acquire()

    def _hold_op(self, s):
        """Generator: :meth:`_hold`, for an op that is no kernel launch: once the lock is
        held, the stream's latest op is no kernel launch (PDL). Marked under the lock, not as
        the call begins: another thread's launch that holds the lock meanwhile marks it a
        kernel again, and a PDL launch after this op would take the op for its primary."""
        yield from self._hold(s)
        s.after_kernel = False

    def _let_go(self, s):
        if self.threaded:
            s.lock.release()

    def launch_kernel(self, name, grid, block, block_ns, stream, pdl=False, trigger_ns=None,
                      prologue_ns=0, device_graph_launch=None):
        """``pdl``: the launch attribute programmaticStreamSerialization (cudaLaunchKernelEx):
        the kernel may start once the kernel before it in the stream triggers (each block
        ``trigger_ns`` after it starts, None: as it exits), and its blocks wait for that
        kernel's exit after ``prologue_ns`` of their own work. ``device_graph_launch``: the
        kernel holds device-side cudaGraphLaunch code, ``{"graph", "mode", "count"}`` (mode
        "tail" or "fire_and_forget"; it calls it in its first ``count`` runs after a launch
        from the host)."""
        s = self._stream(stream)
        api = "launch_kernel_ex" if pdl else "launch_kernel"
        dgl = None
        if device_graph_launch is not None:
            d = device_graph_launch
            dgl = (d["graph"], d["mode"] == "tail", d.get("count", 1))
        if s.capture is not None:
            self._loaded.add(name)      # loaded with the graph (its capture's fitted costs)
            yield from self._capture_node(s, api, GraphNodeSpec(
                "kernel", frozenset(), name=name, grid=tuple(grid), block=tuple(block),
                block_ns=block_ns, trigger_ns=trigger_ns, prologue_ns=prologue_ns, dgl=dgl),
                pdl=pdl and s.after_kernel)
            s.after_kernel = True
            return
        if dgl is not None and dgl[2]:
            raise ApiError(f"kernel {name!r} launched into stream {stream!r} calls device-side "
                           f"cudaGraphLaunch of graph {dgl[0]!r}: CUDA launches graphs from the "
                           f"device only from kernels of a graph (capture the launch; count 0: "
                           f"the code is there but not called)")
        start, corr = self.now(), self.timeline.correlation_id()
        threads = block[0] * block[1] * block[2]
        if not 0 < threads <= self.p.max_threads_per_sm:
            raise ApiError(f"block {block} has {threads} threads; 1..{self.p.max_threads_per_sm}")
        if self.threaded:
            yield from self._launch_locked(s)
        yield from self._cold("launch", start, self.p.launch_call_ns(1.0, self.profiler.enabled))
        if name not in self._loaded:
            self._loaded.add(name)
            yield ("cpu", self.p.function_load_cpu_ns)
        ch = self.umd.launch_channel(s, s.launched)
        s.launched = True
        desc = self.umd.take_descriptor()     # the engine gives it back once it has read it
        pb = PushBuffer()
        primary = pdl_primary(s, ch) if pdl else None
        # a programmatic launch is held by the compute work distributor behind its primary;
        # the channel waits only for the kernel pdl_window launches back
        order_after_stream(self.cfg, pb, s, ch,
                           behind=0 if primary is None else self.p.pdl_window - 1)
        self.profiler.stamp_submitted(pb, s.id, corr)
        pb.launch(desc)
        release = release_on_completion(s, ch)
        s.channel = ch          # ordered behind the stream's earlier work, wherever that was
        s.after_kernel = True
        yield ("cpu", self.p.launch_encode_ns)
        self.sim.mem.write_dwords(desc, launch_descriptor(
            grid, block, block_ns, self._kernel_id(name), priority=s.priority, release=release,
            correlation_id=corr, stream_id=s.id, queued_ns=self.now(), pdl_primary=primary,
            trigger_ns=trigger_ns, prologue_ns=prologue_ns,
            device_graph_launch=None if dgl is None else (dgl[1], 0, 0)))
        if dgl is not None:
            # the driver sets up the device runtime's environment for the launch
            yield ("cpu", self.p.device_runtime_launch_cpu_ns)
        flushing = len(ch.pending) + 1 >= self.p.kickoff_batch
        if flushing:
            yield ("cpu", self.p.kickoff_ns)
        blocked = yield from self.umd.submit(ch, pb, desc)
        self.blocked_launches += bool(blocked)
        spent = self.p.launch_encode_ns + (self.p.kickoff_ns if flushing else 0)
        yield ("cpu", max(self.p.launch_cpu_ns - spent, 0))
        if self.threaded:
            s.lock.release()
            self.launching.discard(self.current)
        self._record(api, start, corr, **({"blocked": True} if blocked else {}))

    def memcpy_async(self, kind, nbytes, stream):
        if kind not in COPY_KINDS:
            raise ApiError(f"memcpy kind {kind!r}: one of {sorted(COPY_KINDS)}")
        s = self._stream(stream)
        if s.capture is not None:
            s.after_kernel = False      # PDL: the latest op is no kernel launch
            yield from self._capture_node(s, "memcpy_async", GraphNodeSpec(
                "copy", frozenset(), name=f"memcpy {kind}", copy_kind=kind, nbytes=nbytes))
            return
        start, corr = self.now(), self.timeline.correlation_id()
        yield from self._hold_op(s)
        ch = self.umd.copy_channel(kind, s)
        dst = self.umd.device_alloc(nbytes)
        desc = self.umd.take_descriptor()     # the copy engine gives it back once read
        self.sim.mem.write_dwords(desc, copy_descriptor(HOST_COPY_BUFFER, dst, nbytes, kind,
                                                        correlation_id=corr, stream_id=s.id))
        pb = PushBuffer()
        order_after_stream(self.cfg, pb, s, ch)
        pb.copy_by_descriptor(desc, dst, nbytes)
        release_stream(self.cfg, pb, s, ch)
        yield ("cpu", self.p.memcpy_cpu_ns)
        yield from self.umd.submit(ch, pb)
        self._let_go(s)
        self._record("memcpy_async", start, corr)

    def event_record(self, event, stream):
        e, s = self._event(event), self._stream(stream)
        start, corr = self.now(), self.timeline.correlation_id()
        if s.capture is not None:
            # inside a capture an event is a point in the graph, not a semaphore
            e.captured = (s.capture, frozenset(s.capture.frontier[s.name]))
            s.after_kernel = False
            yield ("cpu", self.p.capture_call_cpu_ns)
            self._record("event_record", start, corr)
            return
        e.captured = None
        yield from self._hold_op(s)
        ch = s.channel
        s.host_value += 1
        done = (s.host_sem, s.host_value)
        pb = PushBuffer()
        if s.last_channel is not None and s.last_channel is not ch:
            order_after_stream(self.cfg, pb, s, ch)
        pb.sem_release(s.host_sem, s.host_value, wfi=True, timestamp=e.timing, wide=e.timing)
        # a wait for the event waits for this release (time stamp and all), not for the work
        # before it: the stream's counter is released right behind it
        release_stream(self.cfg, pb, s, ch)
        deps = stream_frontier(s)
        yield ("cpu", self.p.event_record_timing_cpu_ns if e.timing
               else self.p.event_record_cpu_ns)
        yield from self.umd.submit(ch, pb)
        # the event is this record from now on: a wait for it in another thread, or on
        # another stream of the channel, comes behind the release just pushed
        e.done, e.stream, e.deps = done, s, deps
        self._let_go(s)
        self._record("event_record", start, corr)

    def stream_wait_event(self, stream, event):
        s, e = self._stream(stream), self._event(event)
        start, corr = self.now(), self.timeline.correlation_id()
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
            s.after_kernel = False
            yield ("cpu", self.p.capture_call_cpu_ns)
            self._record("stream_wait_event", start, corr)
            return
        if s.capture is not None:
            raise CaptureError(f"stream {stream!r} is capturing and event {event!r} was not "
                               f"recorded in that capture (cudaErrorStreamCaptureIsolation)")
        yield from self._hold_op(s)
        if e.deps:
            pb = PushBuffer()
            for sp, value in sorted(e.deps.items()):
                acquire(self.cfg, pb, sp, value)
                s.waits[sp] = max(s.waits.get(sp, 0), value)
            yield ("cpu", self.p.stream_wait_event_cpu_ns)
            yield from self.umd.submit(s.channel, pb)
        else:
            yield ("cpu", self.p.stream_wait_event_cpu_ns)
        self._let_go(s)
        self._record("stream_wait_event", start, corr)

    # -- host synchronization ----------------------------------------------------------------------

    def _refuse_ended_capture(self, e, api):
        if e.captured is not None and e.captured[0].ended:
            raise CaptureError(f"{api}: event {e.name!r} was last recorded in a capture that "
                               f"has ended (cudaErrorCapturedEvent)")

    def _host_wait(self, s):
        """Generator: ``(address, value)`` a host wait for stream ``s`` polls, its fence
        queued on the stream's channel first if it needs one (:func:`host_wait`), under the
        stream's lock (:meth:`_hold`); None: nothing to wait for."""
        yield from self._hold(s)
        wait = host_wait(self.cfg, s)
        if wait is not None and wait[2] is not None:
            self.umd.queue(s.channel, wait[2])
        self._let_go(s)
        return None if wait is None else wait[:2]

    def _wait_host(self, address, value, why):
        yield ("wait", lambda: self.sim.mem.read_dword(address) >= value, why)

    def stream_synchronize(self, stream):
        self._refuse_while_capturing("stream_synchronize")
        s = self._stream(stream)
        start, corr = self.now(), self.timeline.correlation_id()
        yield ("cpu", self.p.sync_call_ns)
        sync_start = self.now()
        wait = yield from self._host_wait(s)
        if wait is not None:
            yield from self.umd.flush_all()
            yield from self._wait_host(*wait, f"stream_synchronize({stream!r})")
            yield ("cpu", self.p.sync_return_ns)
        self.timeline.sync(SYNC_STREAM, corr, sync_start, self.now(), stream=s.id)
        self._record("stream_synchronize", start, corr)

    def event_synchronize(self, event):
        self._refuse_while_capturing("event_synchronize")
        e = self._event(event)
        self._refuse_ended_capture(e, "event_synchronize")
        start, corr = self.now(), self.timeline.correlation_id()
        yield ("cpu", self.p.sync_call_ns)
        yield from self.umd.flush_all()
        sync_start = self.now()
        if e.done:
            yield from self._wait_host(*e.done, f"event_synchronize({event!r})")
            yield ("cpu", self.p.sync_return_ns)
        self.timeline.sync(SYNC_EVENT, corr, sync_start, self.now(), event=e.id)
        self._record("event_synchronize", start, corr)

    def event_query(self, event):
        """Spin on cudaEventQuery until the event has completed (one record per query)."""
        self._refuse_while_capturing("event_query")
        e = self._event(event)
        self._refuse_ended_capture(e, "event_query")
        yield from self.umd.flush_all()
        while True:
            start, corr = self.now(), self.timeline.correlation_id()
            yield ("cpu", self.p.query_cpu_ns)
            done = e.done is None or self.sim.mem.read_dword(e.done[0]) >= e.done[1]
            self.timeline.sync(SYNC_EVENT, corr, start, self.now(), event=e.id)
            self._record("event_query", start, corr)
            if done:
                return
            if self.sim.device_quiet():
                raise ApiError(f"event_query({event!r}) can never succeed: the GPU is idle "
                               f"and nothing else is due")

    def device_synchronize(self):
        self._refuse_while_capturing("device_synchronize")
        start, corr = self.now(), self.timeline.correlation_id()
        yield ("cpu", self.p.sync_call_ns)
        sync_start = self.now()
        waits = []
        for s in self.streams.values():
            wait = yield from self._host_wait(s)
            if wait is not None:
                waits.append(wait)
        yield from self.umd.flush_all()
        if waits:
            yield ("wait", lambda: all(self.sim.mem.read_dword(a) >= v for a, v in waits),
                   "device_synchronize()")
            yield ("cpu", self.p.sync_return_ns)
        self.timeline.sync(SYNC_DEVICE, corr, sync_start, self.now())
        self._record("device_synchronize", start, corr)

    # -- CUDA graphs ------------------------------------------------------------------------------

    def _refuse_while_capturing(self, api):
        capturing = sorted(n for n, st in self.streams.items() if st.capture is not None)
        if capturing:
            raise CaptureError(f"{api} is not permitted while stream {capturing[0]!r} is "
                               f"capturing; the capture is invalidated "
                               f"(cudaErrorStreamCaptureUnsupported)")

    def _capture_node(self, s, api, spec, pdl=False):
        start, corr = self.now(), self.timeline.correlation_id()
        self.profiler.capture_call()
        s.capture.add(s.name, spec, pdl)
        held = len(s.capture.nodes)
        grow = held > self._capture_high
        self._capture_high = max(self._capture_high, held)
        # (beyond the nodes whose state fits the host's cache, each added node misses)
        yield ("cpu", self.p.capture_call_cpu_ns
               + (self.p.capture_grow_per_node_ns if grow else 0)
               + (self.p.capture_miss_ns if held > self.p.graph_cache_nodes else 0))
        self._record(api, start, corr)

    def _upload_ns(self, nodes):
        """CPU time of uploading ``nodes`` nodes of an executable graph."""
        return self.p.graph_walk_ns(self.p.graph_upload_per_node_ns,
                                    self.p.graph_upload_miss_ns, nodes)

    def stream_begin_capture(self, stream):
        s = self._stream(stream)
        s.after_kernel = False          # PDL: the latest op is no kernel launch
        if s.capture is not None:
            raise CaptureError(f"stream {stream!r} is already capturing")
        start, corr = self.now(), self.timeline.correlation_id()
        s.capture = Capture(origin=s, frontier={s.name: set()})
        first = self._capture_high is None
        if first:
            self._capture_high = 0
        yield ("cpu", self.p.begin_capture_cpu_ns + (self.p.capture_first_cpu_ns if first
                                                     else 0))
        self._record("stream_begin_capture", start, corr)

    def stream_end_capture(self, stream, graph):
        s = self._stream(stream)
        cap = s.capture
        if cap is None or cap.origin is not s:
            raise CaptureError(f"stream {stream!r} did not begin a capture")
        if graph in self.graphs:
            raise ApiError(f"graph {graph!r} already exists")
        # every stream that joined must have joined back into the origin stream
        unjoined = cap.unjoined()
        if unjoined is not None:
            raise CaptureError(f"stream {unjoined!r} joined the capture of {stream!r} but its "
                               f"work was not joined back (cudaErrorStreamCaptureUnjoined)")
        for st in self.streams.values():
            if st.capture is cap:
                st.capture = None
                st.after_kernel = False
        cap.ended = True
        start, corr = self.now(), self.timeline.correlation_id()
        self.graphs[graph] = Graph(graph, cap.nodes)
        yield ("cpu", self.p.end_capture_cpu_ns)
        self._record("stream_end_capture", start, corr)

    def graph_instantiate(self, graph, device_launch=False):
        """Write every node's descriptor, the node table (dependencies) and the launch queue
        into device-visible memory, ahead of any launch. ``device_launch``
        (cudaGraphInstantiateFlagDeviceLaunch): kernels may launch it from the device; it is
        uploaded now."""
        g = self._graph(graph)
        conds = [node for node in g.nodes if node.kind == "conditional"]
        if len(conds) > 1:
            raise ApiError(f"graph {graph!r} has {len(conds)} conditional nodes; the model's "
                           f"graph walker runs one (not modelled: several)")
        if any(b.kind == "conditional" for c in conds for b in c.body):
            raise ApiError(f"graph {graph!r}: a conditional node's body holds a conditional "
                           f"node (not modelled: nested conditionals)")
        if any(b.dgl is not None and b.dgl[2] for c in conds for b in c.body):
            raise ApiError(f"graph {graph!r}: a conditional node's body launches graphs from "
                           f"the device (not modelled)")
        flat = [node for node, _ in table_nodes(g.nodes)[0]]
        n = len(flat)
        n_edges = sum(len(node.deps) for node in flat)
        if n > self.cfg.graph_nodes_max or n_edges > self.cfg.graph_edges_max:
            raise ApiError(f"graph {graph!r} has {n} nodes and {n_edges} edges; the front "
                           f"end holds {self.cfg.graph_nodes_max} and "
                           f"{self.cfg.graph_edges_max}")
        if any(len(node.deps) >= 1 << 14 for node in flat):
            raise ApiError(f"graph {graph!r}: a node has more than 16383 predecessors")
        if device_launch and any(n.dgl is not None and not n.dgl[1] and n.dgl[2]
                                 for n in flat):
            raise ApiError(f"graph {graph!r} is instantiated for device launch and its kernels "
                           f"launch graphs fire-and-forget (not modelled: fire-and-forget "
                           f"launches from device-launched graphs)")
        handle = (self.sim.mem.alloc(DESCRIPTOR_ALIGN, align=DESCRIPTOR_ALIGN)
                  if device_launch else 0)

        def device_launch_of(node):
            """A kernel node's device-side launch: (tail?, count, DeviceGraph address)."""
            if node.dgl is None:
                return None
            target, tail, count = node.dgl
            if not count:
                return (tail, 0, 0)
            if target == graph:
                addr = handle
            else:
                t = self.graphs.get(target)
                if t is None:
                    raise ApiError(f"graph {graph!r}: kernel {node.name!r} launches graph "
                                   f"{target!r} from the device, which no stream_end_capture "
                                   f"or graph_create has made")
                addr = t.executable.handle if t.executable else 0
            if not addr:
                raise ApiError(f"graph {graph!r}: kernel {node.name!r} launches graph "
                               f"{target!r} from the device, which is not instantiated with "
                               f"device_launch (cudaGraphInstantiateFlagDeviceLaunch)")
            return (tail, count, addr)

        for node in flat:
            device_launch_of(node)          # refused now, not at a later update
        start, corr = self.now(), self.timeline.correlation_id()
        self._graph_ids += 1
        g.executable = instantiate(self.umd, g, self._graph_ids, self._kernel_id,
                                   device_launch_of, handle)
        if conds:
            # the device runtime runs its conditional node's body (the first time it is
            # needed, it takes a stream id)
            rt = self.timeline.device_runtime_stream
            self.timeline.conditional_body(self._graph_ids, len(g.nodes),
                                           self._stream_id() if rt is None else rt)
        if n and self._graph_pool_free >= n:
            # the memory of a destroyed executable graph: the writes only
            self._graph_pool_free -= n
            yield ("cpu", self.p.graph_walk_ns(self.p.graph_reinstantiate_per_node_ns
                                               + self.profiler.graph_operation_ns("reinstantiate"),
                                               self.p.graph_reinstantiate_miss_ns, n))
        else:
            yield ("cpu", self.p.instantiate_cpu_ns + self.p.instantiate_per_node_ns * n)
        if device_launch:
            # a device graph is uploaded before any launch (cudaGraphUpload)
            g.executable.uploaded = True
            yield ("cpu", self._upload_ns(n))
        self._record("graph_instantiate", start, corr)

    def graph_create(self, graph):
        """cudaGraphCreate: an empty graph, which nodes are added to."""
        if graph in self.graphs:
            raise ApiError(f"graph {graph!r} already exists")
        start, corr = self.now(), self.timeline.correlation_id()
        self.graphs[graph] = Graph(graph, [])
        yield ("cpu", self.p.capture_call_cpu_ns)
        self._record("graph_create", start, corr)

    def graph_add_conditional(self, graph, kind, body, iterations):
        """cudaGraphAddNode of a conditional node (``kind`` "while" or "if") after all of
        ``graph``'s nodes, whose body is graph ``body``'s nodes, run ``iterations`` times each
        launch (the device-side condition's outcome)."""
        g, b = self._graph(graph), self._graph(body)
        if b is g:
            raise ApiError(f"graph {graph!r} cannot be its own conditional node's body")
        if kind == "if" and iterations > 1:
            raise ApiError(f"an IF conditional node runs its body 0 or 1 times, not "
                           f"{iterations}")
        start, corr = self.now(), self.timeline.correlation_id()
        has_succ = {d for node in g.nodes for d in node.deps}
        sinks = frozenset(i for i in range(len(g.nodes)) if i not in has_succ)
        g.nodes = g.nodes + [GraphNodeSpec("conditional", sinks, name=f"{kind} {body}",
                                           cond_kind=kind, body=list(b.nodes),
                                           iterations=iterations)]
        yield ("cpu", self.p.capture_call_cpu_ns)
        self._record("graph_add_conditional", start, corr)

    def _executable(self, graph):
        g = self._graph(graph)
        if g.executable is None:
            raise ApiError(f"graph {graph!r} has no executable graph (not instantiated, or "
                           f"destroyed)")
        return g, g.executable

    def graph_exec_set_params(self, graph, nodes, block_ns):
        """cudaGraphExecKernelNodeSetParams on each of ``nodes`` ("all": every kernel node; or
        indices in capture order), one call and one record each: the executable graph's
        kernel nodes take the new work per block (``block_ns``; None: unchanged) from its next
        launch on."""
        g, x = self._executable(graph)
        index = [i for i, node in enumerate(x.nodes) if node.kind == "kernel"] \
            if nodes == "all" else nodes
        for i in index:
            if i >= len(x.nodes):
                raise ApiError(f"graph {graph!r} has {len(x.nodes)} nodes; there is no "
                               f"node {i}")
            if x.nodes[i].kind != "kernel":
                raise ApiError(f"node {i} of graph {graph!r} is a {x.nodes[i].kind} node, "
                               f"not a kernel node (cudaErrorInvalidValue)")
        for k, i in enumerate(index):
            start, corr = self.now(), self.timeline.correlation_id()
            if block_ns is not None and x.nodes[i].block_ns != block_ns:
                x.nodes[i] = replace(x.nodes[i], block_ns=block_ns)
                x.changed.add(i)
            yield ("cpu", self.p.graph_set_params_cpu_ns
                   + self.profiler.graph_operation_ns("set_params"))
            self._record("graph_exec_set_params", start, corr)
            if k < len(index) - 1:
                # one API call a node: CUPTI's time after each (the op's last is the run's)
                yield ("cpu", self.profiler.call_gap_ns())

    def graph_exec_update(self, graph, source):
        """cudaGraphExecUpdate: graph's executable graph takes the node parameters of graph
        ``source``, which must have the same topology (else the call fails, as CUDA's)."""
        g, x = self._executable(graph)
        src = self._graph(source)
        why = same_topology(x.nodes, src.nodes)
        if why is not None:
            raise ApiError(f"graph {source!r} does not have the topology of graph {graph!r}'s "
                           f"executable graph: {why} (cudaErrorGraphExecUpdateFailure)")
        why = update_refused(x.nodes, src.nodes)
        if why is not None:
            raise ApiError(f"the executable graph of {graph!r} cannot take the parameters of "
                           f"graph {source!r}: {why} (cudaErrorGraphExecUpdateFailure)")
        changed = changed_nodes(x.nodes, src.nodes)
        flat = table_nodes(src.nodes)[0]
        for i in sorted(changed):
            if flat[i][0].kind == "kernel":
                x.device_launch_of(flat[i][0])      # refused now, not at the next launch
        start, corr = self.now(), self.timeline.correlation_id()
        # every node's new parameters, a conditional node's body's too (its table indices)
        x.nodes = list(src.nodes)
        x.changed |= changed
        n = len(x.nodes)
        yield ("cpu", self.p.graph_update_cpu_ns
               + self.p.graph_walk_ns(self.p.graph_update_per_node_ns
                                      + self.profiler.graph_operation_ns("update"),
                                      self.p.graph_update_miss_ns, n))
        self._record("graph_exec_update", start, corr)

    def graph_exec_destroy(self, graph):
        """cudaGraphExecDestroy: the executable graph is gone; its memory goes back to the
        graph pool (a later instantiation of as many nodes or fewer allocates nothing)."""
        g, x = self._executable(graph)
        start, corr = self.now(), self.timeline.correlation_id()
        n = len(x.nodes)
        g.executable = None
        self._graph_pool_free += n
        yield ("cpu", self.p.graph_exec_destroy_cpu_ns
               + self.p.graph_walk_ns(self.p.graph_exec_destroy_per_node_ns
                                      + self.profiler.graph_operation_ns("destroy"),
                                      self.p.graph_exec_destroy_miss_ns, n))
        self._record("graph_exec_destroy", start, corr)

    def graph_launch(self, graph, stream):
        """One push-buffer entry that points at the instantiated graph, one doorbell; the
        launch's record in the graph's launch queue."""
        g, s = self._graph(graph), self._stream(stream)
        if g.executable is None:
            raise ApiError(f"graph {graph!r} was not instantiated")
        if s.capture is not None:
            raise CaptureError(f"graph_launch into capturing stream {stream!r} is not "
                               f"modelled (child graphs)")
        x = g.executable
        start, corr = self.now(), self.timeline.correlation_id()
        yield from self._hold_op(s)
        yield from self._cold("graph_launch", start, self.p.graph_launch_cpu_ns)
        if not g.nodes:
            # an empty graph (CUDA captures one from a capture that issued no work): the call
            # costs its CPU time and gives the GPU nothing
            yield ("cpu", self.p.graph_launch_cpu_ns)
            self._let_go(s)
            self._record("graph_launch", start, corr)
            return
        # nodes updated since the last launch: new descriptors and node table; a device
        # graph's record pointed at it in stream order, behind the stream's earlier work
        writes = writes_for(self.umd, x, self._kernel_id, s)
        ch = s.channel
        pb = PushBuffer()
        # (under CUPTI each launch waits for the one before: queued launches of a small
        # graph take ~1.1 us more each on the H200, its first kernel no later alone)
        order_after_stream(self.cfg, pb, s, ch, graph=not self.profiler.enabled and not writes)
        size = len(x.descriptors)            # the table: the graph's nodes and its bodies'
        push_launch(self.cfg, pb, x, size, s, release_on_completion(s, ch), writes)
        s.after_graph = True
        x.last_launch = (s.syncpoint, s.work)
        queue_launch(self.umd, x, corr, s)
        # the fixed part, then under CUPTI the profiler's records of every node of the first
        # branch, then the submission: profiled, a graph's first kernel starts ~4 us after the
        # call returns whatever its size (up to 1,000 nodes); the driver's own per-node part
        # (a few ns: the executable graph is in device memory already) runs after the
        # kickoff; a graph whose kernels hold device-runtime code has the driver set up the
        # device runtime's environment for the launch (unprofiled, its host launches issue
        # 2.8 us slower)
        first, *later = x.branch_nodes
        word = x.handover                    # this launch's table's hand-over count
        yield ("cpu", self.p.graph_launch_cpu_ns + self.profiler.graph_node_ns() * first
               + (self.p.device_runtime_launch_cpu_ns if x.device_runtime else 0))
        if not x.uploaded:
            # its first launch uploads the executable graph
            x.uploaded = True
            yield ("cpu", self._upload_ns(size))
        yield from self.umd.submit(ch, pb)
        for nodes in later:
            # each later branch handed over after the one before (probe graph_branches: ~1 us
            # apart unprofiled, the call ~1 us longer a branch; under CUPTI after its nodes'
            # records)
            yield ("cpu", self.p.graph_branch_cpu_ns + self.profiler.graph_node_ns() * nodes)
            hand_over(self.sim.mem, x, word)
        yield ("cpu", self.p.graph_launch_per_node_ns * size)
        self._let_go(s)
        self._record("graph_launch", start, corr)

    def graph_upload(self, graph, stream):
        """cudaGraphUpload: the executable graph's memory set up in ``stream`` ahead of its
        launches (a first upload's cost per node), and the nodes updated since its last launch
        or upload written: for a graph instantiated for device launch, its DeviceGraph record
        points at the new table once the stream's earlier work is done (the device launches of
        launches queued before keep the old; those after take the new)."""
        g, s = self._graph(graph), self._stream(stream)
        if s.capture is not None:
            raise CaptureError(f"graph_upload into capturing stream {stream!r} is not "
                               f"modelled")
        x = self._executable(graph)[1]
        start, corr = self.now(), self.timeline.correlation_id()
        yield from self._hold_op(s)
        changed = len(x.changed)
        writes = writes_for(self.umd, x, self._kernel_id, s)
        size = len(x.descriptors)
        nodes = changed if x.uploaded else size
        x.uploaded = True
        yield ("cpu", self._upload_ns(nodes))
        if writes:
            ch = s.channel
            pb = PushBuffer()
            order_after_stream(self.cfg, pb, s, ch)
            if x.last_launch is not None and x.last_launch[0] != s.syncpoint:
                acquire(self.cfg, pb, *x.last_launch)
            for address, word in writes:
                pb.sem_release(address, word, wfi=False)
            release_stream(self.cfg, pb, s, ch)
            yield from self.umd.submit(ch, pb)
        elif x.last_launch is not None and x.last_launch[0] != s.syncpoint:
            # nothing to write, but the upload is still ordered behind the graph's earlier
            # launch (on another stream), and the stream's later work behind the upload: an
            # acquire, as a stream_wait_event of that launch is
            sp, value = x.last_launch
            pb = PushBuffer()
            acquire(self.cfg, pb, sp, value)
            s.waits[sp] = max(s.waits.get(sp, 0), value)
            yield from self.umd.submit(s.channel, pb)
        self._let_go(s)
        self._record("graph_upload", start, corr)

    # -- the rest ---------------------------------------------------------------------------------

    def host_sleep(self, ns):
        yield from self.umd.flush_all()
        yield ("cpu", ns)

    def finish(self):
        """End of the program: whatever is still queued is kicked off."""
        yield from self.umd.flush_all()

    def barrier(self, name):
        """Wait for every thread of this process at barrier ``name`` (of every process, for
        a name starting with ``global:``); commands not yet kicked off go out first."""
        yield from self.umd.flush_all()
        if name.startswith("global:"):
            key, parties = ("global", name), self.sim.thread_count()
        else:
            key, parties = (self.process.name, name), len(self.threads)
        yield from self.sim.barrier(key, parties, f"barrier {name!r}")

    def mark(self, what):
        self.timeline.mark(what, self.now(), self.current if self.threaded else None)
        return
        yield
