"""Co-simulation: the FrontEnd RTL between a CPU thread and the device back end.

One deterministic event queue (integer ps) holds everything outside the RTL: the CPU thread
running the host program, doorbell MMIO writes in flight, host-memory writes becoming visible,
kernels and copies on the engines. Inputs for the RTL are queued in the backend with the
cycle they are due at (see ``backend.py``); the backend runs the clock until the RTL offers a
transfer or the next event is due, and jumps over stretches where the RTL is idle
(``jumps=False`` clocks every cycle instead: the timeline is the same).

The CPU thread is a generator that yields what it waits for:

- ``("cpu", ns)``: it computes for ``ns``;
- ``("wait", predicate, why)``: it blocks until ``predicate()`` holds; the predicate is checked
  whenever host memory or a channel's free space changes. If nothing can ever change it (the
  event queue is empty and the RTL is idle), the run stops with :class:`Deadlock` naming
  ``why``.

What the front end dispatches is an address: the engines read the work's descriptor from host
memory as they take it (``engines.DescriptorReader``), so that the co-simulation needs none of
the driver's Python objects. Whoever wants to know of the work (the driver model's timeline,
``sim/host/records.py``) sets ``activity``: an object told ``dispatched(job, now_ns)`` and
``done(job)``.
"""

import sys

from gpufe.rtl.frontend import FrontEnd
from gpufe.rtl.layouts import (ChannelReg, CHANNEL_REGS, GLOBAL_PAGE, COPY_FLAG_DESCRIPTOR,
                               DESCRIPTOR_ALIGN, DeviceGraph, DEVICE_GRAPH_DWORDS)
from gpufe.sim.collector import collector_paused
from gpufe.sim.cosim.backend import PysimBackend, WAKE_NEVER
from gpufe.sim.cosim.compute import ComputeEngine, aggregate_applies
from gpufe.sim.cosim.engines import BlockComputeEngine, CopyEngines, DescriptorReader, decode
from gpufe.sim.cosim.events import EventQueue, ps
from gpufe.sim.host.encode import graph_launch_record, graph_launch_link, field_update
from gpufe.sim.cosim.hostmem import HostMemory, BlockPool


class Deadlock(RuntimeError):
    pass


#: "cupti": the program runs under CUPTI activity tracing (as the reference traces were
#: taken), which costs CPU time in every API call and GPU time per stream kernel
PROFILERS = ("off", "cupti")

#: the compute engine: "aggregate" (blocks placed in chunks and waves, where the parameters
#: allow: ``compute.aggregate_applies``) or "blocks" (its per-block reference); the same
#: timeline either way
COMPUTE_ENGINES = ("aggregate", "blocks")


class CoSim:
    def __init__(self, params, max_connections=None, *, vcd=None, jumps=True, backend="pysim",
                 profiler="off", compute="aggregate"):
        if profiler not in PROFILERS:
            raise ValueError(f"profiler {profiler!r}: one of {', '.join(PROFILERS)}")
        if compute not in COMPUTE_ENGINES:
            raise ValueError(f"compute {compute!r}: one of {', '.join(COMPUTE_ENGINES)}")
        self.p = params.on_host()          # the driver's CPU times at this host's speed
        self.profiler = profiler
        self.max_connections = max_connections or params.max_connections
        self.cfg = params.frontend_config()
        self.dut = FrontEnd(self.cfg)
        self.cycle_ps = ps(params.cycle_ns)
        self.backend = make_backend(backend, self.dut, self.cycle_ps, jumps, vcd)
        self._resp_offsets = self.backend.offsets("dma_read_resp")
        # an MMIO write's payload packed here (as ``backend.pack`` would): one a launch
        mmio = {f: (o, m) for f, o, m in self.backend.fields("mmio")}
        self._mmio_fields = (mmio["address"], mmio["data"])     # (other fields: 0)
        self.backend.settings.update(params.frontend_settings(profiler == "cupti"))
        self.ev = EventQueue()
        self.mem = HostMemory()
        engine = (ComputeEngine if compute == "aggregate" and aggregate_applies(params)
                  else BlockComputeEngine)
        self.compute = engine(params, self.ev, self._kernel_done, profiled=profiler == "cupti")
        self.compute.on_device_launch = self._device_launch
        self.copies = CopyEngines(params, self.ev, self._copy_done)
        # the link's latencies in ps, once (they are looked up at every transfer)
        self._dma_write_ps = ps(params.dma_write_ns)
        self._dma_read_ps = ps(params.dma_read_latency_ns)
        # whole cycles: the front end writes at its clock's edges, and a write seen between
        # two would make a run that clocks every cycle see it later than one that jumps
        self._visible_ps = -(-ps(params.host_write_visible_ns) // self.cycle_ps) * self.cycle_ps
        self._dma_step_ps = max(self.cycle_ps, ps(4 / params.dma_read_bytes_per_ns))
        # DMA reads answered by the backend's own loop (the compiled one: no stop per read), or
        # here; the data path's busy time is the backend's then (``dma_free_ps``)
        self._dma_in_loop = self.backend.serve_dma_reads(self.mem, self._dma_read_ps,
                                                         self._dma_step_ps)
        self._resp_free_ps = 0            # DMA read data path busy until (answered here)
        # GP_GET updates need no stop of their own: the driver sees one `_visible_ps` later
        self.backend.log_retired(self._visible_ps)
        self._mmio_due = 0                # cycle of the latest MMIO write queued
        # the driver's descriptor blocks (launch and copy descriptors, graph launch records):
        # taken by the driver, given back by the engines once they have read them
        self.descriptors = BlockPool(self.mem, DESCRIPTOR_ALIGN, DESCRIPTOR_ALIGN)
        self.reader = DescriptorReader(self.mem, self.descriptors)
        self.retire_hooks = {}            # channel -> callback(GP_GET, t_ps) as it moves on
        self.write_hooks = {}             # host address -> callback(data, t_ns) as the front
                                          # end writes it (the profiler's time stamps)
        self._tracking = {}               # syncpoint -> its tracking semaphore in host memory
        # told of every kernel and copy dispatched and ended, or None
        self.activity = None
        # CPU threads: [generator, (predicate, why) it waits for or None, done]
        self._threads = []
        self.barriers = {}                # barrier key -> [arrived, generation]
        self.next_syncpoint = 0           # syncpoints handed to streams, across processes
        self.error = None
        self.stats = {"doorbells": 0, "context_switches": 0}
        self.channel_tsg = {}             # the KMD's channel table: channel -> TSG
        self.scheduler_configured = False

    # -- time ---------------------------------------------------------------------------------

    @property
    def now_ns(self):
        return self.ev.now // 1000

    def _cycle_of(self, t_ps):
        """The first RTL cycle at or after time ``t_ps``."""
        return -(-t_ps // self.cycle_ps)

    # -- KMD: MMIO -------------------------------------------------------------------------------

    def mmio_write(self, address, data, delay_ns=None):
        """A posted MMIO write; it reaches the register after ``mmio_write_ns`` (and after
        every write posted before it)."""
        d = self.p.mmio_write_ns if delay_ns is None else delay_ns
        if address < GLOBAL_PAGE and address % CHANNEL_REGS == ChannelReg.GP_PUT.value:
            self.stats["doorbells"] += 1
        # queued now with the cycle it lands at (the backend jumps straight to it: one host
        # round trip fewer than an event); posted writes arrive in order, never overtaking
        self._mmio_due = max(self._cycle_of(self.ev.now + ps(d)), self._mmio_due)
        (ao, am), (do, dm) = self._mmio_fields
        self.backend.push("mmio", self._mmio_due, (address & am) << ao | (data & dm) << do)

    def _push(self, port, payload):
        self.backend.push(port, self._cycle_of(self.ev.now), payload)

    def channel_register(self, channel, reg):
        return channel * CHANNEL_REGS + reg.value

    # -- the CPU thread ---------------------------------------------------------------------------

    def start_cpu(self, generator):
        """A CPU thread running ``generator``; threads run at once, each on its own CPU."""
        th = [generator, None, False]
        self._threads.append(th)
        self.ev.after(0, self._resume, th)

    @property
    def cpu_done(self):
        return all(th[2] for th in self._threads)

    def _resume(self, th):
        try:
            while True:
                req = next(th[0])
                if req[0] == "cpu":
                    if req[1] > 0:
                        self.ev.after(ps(req[1]), self._resume, th)
                        return
                elif req[0] == "wait":
                    _, pred, why = req
                    if pred():
                        continue
                    th[1] = (pred, why)
                    return
                else:
                    raise ValueError(f"CPU thread yielded {req!r}")
        except StopIteration:
            th[2] = True

    def poke_cpu(self):
        """Something a CPU thread may be waiting for changed: re-check the waits."""
        for th in self._threads:
            if th[1] and th[1][0]():
                th[1] = None
                self.ev.after(0, self._resume, th)

    def _waiting_for(self):
        """What the blocked CPU threads wait for, for a deadlock report."""
        whys = [th[1][1] for th in self._threads if th[1] and not th[2]]
        return "; ".join(whys) if whys else "the CPU thread"

    def barrier(self, key, parties, why):
        """Generator: wait until ``parties`` threads have reached barrier ``key`` (each
        meeting of the same key is a new one)."""
        b = self.barriers.setdefault(key, [0, 0])
        generation = b[1]
        b[0] += 1
        if b[0] == parties:
            b[0], b[1] = 0, generation + 1
            self.poke_cpu()
        yield ("wait", lambda: b[1] != generation, why)

    def thread_count(self):
        return len(self._threads)

    def take_syncpoint(self):
        """The next free syncpoint counter (one per stream, across every process)."""
        sp = self.next_syncpoint
        self.next_syncpoint += 1
        return sp

    def track_syncpoint(self, syncpoint):
        """Host memory that a kernel's release of ``syncpoint`` also reaches (its tracking
        semaphore: written as the kernel completes, seen ``host_write_visible_ns`` later);
        its address. Apart from the driver's own allocations, so that they do not move."""
        address = self.mem.alloc(8, align=8, lazy=True)
        self._tracking[syncpoint] = address
        return address

    def device_quiet(self):
        """Nothing outside the CPU thread is due and the RTL was quiet at its last cycle: idle
        and taking no input (``idle`` is settled before the edge, so a cycle that took an
        input, such as a completion whose release wakes a parked channel, says nothing of the
        state after it), with no timer of its own running."""
        return (self.backend.quiet and self.ev.next_time() is None
                and self.backend.queued() == 0 and self.backend.wake() == WAKE_NEVER)

    # -- host memory writes from the device --------------------------------------------------------

    def _host_write(self, address, data, wide, imax=False):
        if imax:
            data = self.mem.max64(address, data, wide)
        self.mem.write64(address, data, wide)
        self.poke_cpu()

    # -- engines ---------------------------------------------------------------------------------

    def _completion(self, port, key, release=None):
        channel, seq, node, graph, dwalk = key
        done = {"channel": channel, "seq": seq, "node": node, "graph": graph, "dwalk": dwalk}
        if release is not None:
            done.update(release=1, index=release[0], value=release[1])
        self._push(port, done)

    def _kernel_done(self, kernel):
        self._completion("compute_done", kernel.key, kernel.release)
        if kernel.release is not None and kernel.release[0] in self._tracking:
            # written as the completion reaches the front end (its next cycle), as the
            # front end's own writes are; a reduction IMAX, as every tracking release
            self.ev.at(self._cycle_of(self.ev.now) * self.cycle_ps + self._visible_ps,
                       self._host_write, self._tracking[kernel.release[0]],
                       kernel.release[1], False, True)
        if self.activity is not None:
            self.activity.done(kernel)

    def _device_launch(self, kernel):
        """Block 0 of ``kernel`` returned from device-side cudaGraphLaunch: the device
        runtime appends the launch's record (the launching run's correlation id, stream and
        priority) to the graph's device launch queue and hands the launch (the table its
        DeviceGraph record names now) to the front end."""
        tail, _, handle = kernel.dgl
        mem = self.mem
        g = decode(DeviceGraph, mem.read_dwords(handle, DEVICE_GRAPH_DWORDS))
        d = kernel.launch
        record = self.descriptors.take()
        mem.write_dwords(record, graph_launch_record(d["correlation_id"], d["stream_id"],
                                                     d["priority"]))
        offset, link = graph_launch_link(record)
        mem.write_dwords(g["last"] + offset, link)
        offset, last = field_update(DeviceGraph, "last", record)
        mem.write_dwords(handle + offset, last)
        channel, seq = kernel.key[:2]
        self._push("device_launch", {"channel": channel, "seq": seq, "table": g["table"],
                                     "nodes": g["nodes"], "tail": int(tail),
                                     "dwalk": int(kernel.dwalk)})

    def _copy_done(self, copy):
        self._completion("copy_done", copy.key)
        if self.activity is not None:
            self.activity.done(copy)

    # -- the harness: called by the backend whenever it stops -------------------------------------

    def _harness(self, backend, reason):
        t = backend.cycle * self.cycle_ps
        same_cycle = ()
        if backend.logged:
            # GP_GET updates the loop logged: those of earlier cycles first, as their own stops
            # would have come; one of this stop's cycle in its place among its transfers
            same_cycle = []
            for cycle, rec in backend.take_retired():
                if cycle < backend.cycle or reason != "transfer":
                    tr = cycle * self.cycle_ps
                    self.ev.now = max(self.ev.now, tr)
                    self._retired(rec, tr)
                else:
                    same_cycle.append(rec)
        if reason == "transfer":
            self.ev.now = max(self.ev.now, t)
            self._transfers(backend, t, same_cycle)
        elif reason == "idle":
            if not self.cpu_done:
                why = self._waiting_for()
                self.error = Deadlock(f"deadlock at {t // 1000} ns: {why} can never be "
                                      f"satisfied (the GPU is idle and nothing else is due)")
            return False
        else:
            self.ev.run_due(t)
            if backend.jumps:
                self._run_ahead(backend)
        if self.error:
            return False
        nxt = self.ev.next_time()
        return None if nxt is None else max(self._cycle_of(nxt), backend.cycle)

    def _run_ahead(self, backend):
        """While the RTL is quiet and has no input queued, its state cannot change: run the
        events (engines, CPU) ahead of it, until one gives it an input, instead of stopping
        it at every event (block placements come every few hundred picoseconds), up to the
        RTL's own next timer deadline."""
        wake_ps = None
        while backend.quiet and backend.queued() == 0 and not self.error:
            nxt = self.ev.next_time()
            if nxt is None:
                return
            if wake_ps is None:
                wake = backend.wake()
                wake_ps = wake * 1000 if wake != WAKE_NEVER else 1 << 127
            if nxt >= wake_ps:
                return
            self.ev.run_due(nxt)

    def _retired(self, rec, t):
        hook = self.retire_hooks.get(rec.channel)
        if hook is not None:
            hook(rec.get, t + self._visible_ps)

    def _transfers(self, b, t, retired=()):
        offers = b.offers()
        if "dma_read_req" in offers:
            self._dma_read(b.get("dma_read_req__payload"), t)
        if "dma_write" in offers:
            w = b.get("dma_write__payload")
            b.write_ready_from(self._cycle_of(t + self._dma_write_ps))
            hook = self.write_hooks.get(w.address)
            if hook is not None:
                hook(w.data, t // 1000)
            self.ev.at(t + self._visible_ps, self._host_write,
                       w.address, w.data, w.wide, w.imax)
        if "compute" in offers:
            # the engine reads the launch descriptor now, as it takes the launch: from here on
            # the driver may reuse its block
            rec = b.get("compute__payload")
            kernel = self.reader.kernel(rec.descriptor, (rec.channel, rec.seq, rec.node,
                                                         rec.graph, rec.dwalk), rec.graph,
                                        bool(rec.dwalk or rec.tail))
            kernel.dwalk, kernel.tail_run = bool(rec.dwalk), bool(rec.tail)
            kernel.dispatched = t // 1000
            kernel.tsg = self.channel_tsg.get(rec.channel, 0)
            if self.activity is not None:
                self.activity.dispatched(kernel, self.ev.now // 1000)
            self.compute.launch(kernel, graph=bool(rec.graph),
                                primary_key=self.reader.primary_key(kernel))
        if "copy" in offers:
            rec = b.get("copy__payload")
            if not rec.flags & COPY_FLAG_DESCRIPTOR:
                raise RuntimeError(f"a copy on channel {rec.channel} without a copy descriptor "
                                   f"(LAUNCH_DMA flags {rec.flags:#x}): the copy engines "
                                   f"need one")
            job = self.reader.copy(rec.src, (rec.channel, rec.seq, rec.node, rec.graph,
                                             rec.dwalk), rec.graph, bool(rec.dwalk or rec.tail))
            job.dispatched = t // 1000
            if self.activity is not None:
                self.activity.dispatched(job, self.ev.now // 1000)
            self.copies.launch(job)

        if "retired" in offers:
            self._retired(b.get("retired__payload"), t)
        for rec in retired:
            self._retired(rec, t)

        if "context" in offers:
            rec = b.get("context__payload")
            if not rec.run:
                self.stats["context_switches"] += 1
            self.compute.context_switch(rec.tsg, bool(rec.run))
            if self.activity is not None and hasattr(self.activity, "context_switch"):
                self.activity.context_switch(rec.tsg, bool(rec.run), t // 1000)

    def _dma_read(self, rq, t):
        if self._dma_in_loop:
            self._resp_free_ps = self.backend.dma_free_ps
        start = max(t + self._dma_read_ps, self._resp_free_ps)
        step = self._dma_step_ps
        error = not self.mem.mapped(rq.address, 4 * rq.count)
        o = self._resp_offsets
        fixed, shift = rq.tag << o["tag"] | int(error) << o["error"], o["data"]
        words = [0] * rq.count if error else self.mem.read_dwords(rq.address, rq.count)
        values = [fixed | d << shift for d in words]
        values[-1] |= 1 << o["last"]
        cps = self.cycle_ps                 # each word's cycle: _cycle_of, inlined
        self.backend.push_packed("dma_read_resp",
                                 [-(-(start + i * step) // cps) for i in range(rq.count)], values)
        self._resp_free_ps = start + rq.count * step
        if self._dma_in_loop:
            self.backend.dma_free_ps = self._resp_free_ps

    # -- running ---------------------------------------------------------------------------------

    def run(self):
        # records, events and payloads by the million, freed by reference counting
        with collector_paused():
            self.backend.drive(self._harness)
        self.stats.update(self.backend.stats)
        self.stats["jumped_ns"] = self.backend.stats["jumped_cycles"] * self.cycle_ps // 1000
        if self.error:
            raise self.error


def make_backend(kind, dut, cycle_ps, jumps, vcd):
    if kind == "pysim" or vcd:
        return PysimBackend(dut, cycle_ps, jumps, vcd=vcd)
    if kind == "compiled":
        from gpufe.sim.cosim.compiled import CxxrtlBackend, BackendUnavailable
        try:
            return CxxrtlBackend(dut, cycle_ps, jumps)
        except BackendUnavailable as e:
            print(f"gpufe: compiled backend unavailable ({e}); using Amaranth's simulator",
                  file=sys.stderr)
            return PysimBackend(dut, cycle_ps, jumps)
    raise ValueError(f"unknown backend {kind!r} (pysim or compiled)")
