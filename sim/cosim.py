"""Co-simulation: the FrontEnd RTL between a CPU thread and the device back end.

One deterministic event queue (integer ps) holds everything outside the RTL: the CPU thread
running the host program, doorbell MMIO writes in flight, DMA read responses, host-memory
writes becoming visible, kernels and copies on the engines. The RTL is stepped one clock at a
time while it has something to do; when it is ``idle`` and no input is due, time jumps to the
next external event (``jumps=False`` steps every cycle instead: the timeline is the same).

The CPU thread is a generator that yields what it waits for:

- ``("cpu", ns)``: it computes for ``ns``;
- ``("wait", predicate, why)``: it blocks until ``predicate()`` holds; the predicate is checked
  whenever host memory or a channel's free space changes. If nothing can ever change it (the
  event queue is empty and the RTL is idle), the run stops with :class:`Deadlock` naming
  ``why``.
"""

from collections import deque, defaultdict

from rtl.frontend import FrontEnd
from rtl.layouts import ChannelReg, CHANNEL_REGS, COPY_FLAG_DESCRIPTOR
from .backend import PysimBackend
from .engines import ComputeEngine, CopyEngines
from .events import EventQueue, ps
from .hostmem import HostMemory


class Deadlock(RuntimeError):
    pass


class CoSim:
    def __init__(self, params, max_connections=None, *, vcd=None, jumps=True, backend=None):
        self.p = params
        self.max_connections = max_connections or params.max_connections
        self.cfg = params.frontend_config(self.max_connections)
        self.dut = FrontEnd(self.cfg)
        self.cycle_ps = ps(params.cycle_ns)
        self.backend = backend or PysimBackend(self.dut, params.cycle_ns, vcd=vcd)
        self.jumps = jumps
        self.ev = EventQueue()
        self.mem = HostMemory()
        self.compute = ComputeEngine(params, self.ev, self._kernel_done)
        self.copies = CopyEngines(params, self.ev, self._copy_done)
        # inputs waiting for the RTL
        self._mmio = deque()
        self._resp = deque()              # (ready_ps, dword payload dict)
        self._resp_free_ps = 0            # read data path busy until
        self._done = {"compute": deque(), "copy": deque()}
        self._write_busy_until = 0
        # what a dispatch refers to
        self.launches = {}                # descriptor address -> (Kernel, record)
        self.copy_jobs = {}               # dst address -> (Copy, record)
        # graph nodes: descriptor address -> (Kernel or Copy, record) per launch, in order
        self.graph_launches = defaultdict(deque)
        self.segment_ends = {}            # push-buffer byte address past a segment -> callback
        # CPU thread
        self._cpu = None
        self._cpu_wait = None
        self.cpu_done = False
        self.error = None
        self._rtl_idle = True
        # statistics
        self.stats = {"rtl_cycles": 0, "jumps": 0, "jumped_ns": 0, "doorbells": 0}

    # -- time ---------------------------------------------------------------------------------

    @property
    def now_ns(self):
        return self.ev.now // 1000

    # -- KMD: MMIO -------------------------------------------------------------------------------

    def mmio_write(self, address, data, delay_ns=None):
        """A posted MMIO write; it reaches the register after ``mmio_write_ns``."""
        d = self.p.mmio_write_ns if delay_ns is None else delay_ns
        if address % CHANNEL_REGS == ChannelReg.GP_PUT.value:
            self.stats["doorbells"] += 1
        self.ev.after(ps(d), self._mmio.append, (address, data))

    def channel_register(self, channel, reg):
        return channel * CHANNEL_REGS + reg.value

    # -- the CPU thread ---------------------------------------------------------------------------

    def start_cpu(self, generator):
        self._cpu = generator
        self.ev.after(0, self._resume)

    def _resume(self):
        try:
            while True:
                req = next(self._cpu)
                if req[0] == "cpu":
                    if req[1] > 0:
                        self.ev.after(ps(req[1]), self._resume)
                        return
                elif req[0] == "wait":
                    _, pred, why = req
                    if pred():
                        continue
                    self._cpu_wait = (pred, why)
                    return
                else:
                    raise ValueError(f"CPU thread yielded {req!r}")
        except StopIteration:
            self.cpu_done = True

    def poke_cpu(self):
        """Something the CPU may be waiting for changed: re-check its wait."""
        if self._cpu_wait and self._cpu_wait[0]():
            self._cpu_wait = None
            self.ev.after(0, self._resume)

    def device_quiet(self):
        """Nothing outside the CPU thread is due and the RTL was idle at its last cycle."""
        return (self._rtl_idle and self.ev.next_time() is None and not self._mmio
                and not self._resp and not self._done["compute"] and not self._done["copy"])

    # -- host memory writes from the device --------------------------------------------------------

    def _host_write(self, address, data, wide):
        self.mem.write64(address, data, wide)
        self.poke_cpu()

    # -- engines ---------------------------------------------------------------------------------

    def _kernel_done(self, kernel):
        self._done["compute"].append(kernel.key)

    def _copy_done(self, copy):
        self._done["copy"].append(copy.key)

    # -- one RTL cycle -----------------------------------------------------------------------------

    def _on_cycle(self, io):
        dut = self.dut
        # time of the coming edge: the previous call's edge plus the edges run since
        ran = io.cycles - self._last_cycles
        self._last_cycles = io.cycles
        t = self._edge_ps + ran * self.cycle_ps if self._started else 0
        self._started = True
        self._edge_ps = t
        self.ev.run_due(t)
        if self.error:
            return 0

        # inputs for the coming edge
        io.set(dut.now, t // 1000)
        self.backend.time_ns = t / 1000
        busy_inputs = False
        if self._mmio:
            a, d = self._mmio.popleft()
            io.set(dut.mmio.valid, 1)
            io.set(dut.mmio.payload, {"address": a, "data": d})
            busy_inputs = True
        else:
            io.set(dut.mmio.valid, 0)
        if self._resp and self._resp[0][0] <= t:
            io.set(dut.dma_read_resp.valid, 1)
            io.set(dut.dma_read_resp.payload, self._resp.popleft()[1])
            busy_inputs = True
        else:
            io.set(dut.dma_read_resp.valid, 0)
        for kind, port in (("compute", dut.compute_done), ("copy", dut.copy_done)):
            q = self._done[kind]
            if q:
                channel, seq, node, graph = q[0]
                io.set(port.valid, 1)
                io.set(port.payload, {"channel": channel, "seq": seq, "node": node,
                                      "graph": graph})
                if io.get(port.ready):
                    q.popleft()
                busy_inputs = True
            else:
                io.set(port.valid, 0)
        write_ready = self._write_busy_until <= t
        io.set(dut.dma_write.ready, write_ready)
        io.set(dut.dma_read_req.ready, 1)
        io.set(dut.compute.ready, 1)
        io.set(dut.copy.ready, 1)

        # what the edge transfers
        if io.get(dut.dma_read_req.valid):
            self._dma_read(io.get(dut.dma_read_req.payload), t)
        if write_ready and io.get(dut.dma_write.valid):
            w = io.get(dut.dma_write.payload)
            self._write_busy_until = t + ps(self.p.dma_write_ns)
            self.ev.at(t + ps(self.p.host_write_visible_ns), self._host_write,
                       w.address, w.data, w.wide)
        if io.get(dut.compute.valid):
            rec = io.get(dut.compute.payload)
            if rec.graph:
                kernel, record = self.graph_launches[rec.descriptor].popleft()
            else:
                kernel, record = self.launches.pop(rec.descriptor)
            kernel.key = (rec.channel, rec.seq, rec.node, rec.graph)
            self.compute.launch(kernel, graph=bool(rec.graph))
        if io.get(dut.copy.valid):
            rec = io.get(dut.copy.payload)
            if rec.flags & COPY_FLAG_DESCRIPTOR:
                job, record = self.graph_launches[rec.src].popleft()
            else:
                job, record = self.copy_jobs.pop(rec.dst)
            job.key = (rec.channel, rec.seq, rec.node, rec.graph)
            self.copies.launch(job)

        # how long the RTL may run on its own
        idle = io.get(dut.idle)
        self._rtl_idle = idle and not busy_inputs
        if busy_inputs or self._inputs_waiting():
            return 1
        if idle and self.jumps:
            return self._jump(t)
        nxt = self._next_external()
        if nxt is None:
            if idle:
                return self._finish(t)
            return 1 << 20
        return max(1, (nxt - t) // self.cycle_ps)

    def _inputs_waiting(self):
        return bool(self._mmio or self._done["compute"] or self._done["copy"])

    def _next_external(self):
        times = [x for x in (self.ev.next_time(), self._resp[0][0] if self._resp else None)
                 if x is not None]
        return min(times) if times else None

    def _finish(self, t):
        """Nothing is due and the RTL is idle: the run is over, or stuck."""
        if not self.cpu_done:
            why = self._cpu_wait[1] if self._cpu_wait else "the CPU thread"
            self.error = Deadlock(f"deadlock at {t // 1000} ns: {why} can never be satisfied "
                                  f"(the GPU is idle and nothing else is due)")
        return 0

    def _jump(self, t):
        """The RTL is idle: run the outside world's events, without clocking the RTL, until
        one of them gives the RTL an input; the next cycle is the one of that input."""
        while True:
            nxt = self._next_external()
            if nxt is None:
                return self._finish(t)
            if self._resp and self._resp[0][0] == nxt:
                target = nxt                    # a DMA response dword becomes due
                break
            self.ev.run_due(nxt)
            if self.error:
                return 0
            if self._inputs_waiting():
                target = self.ev.now
                break
        cycles = -(-(target - t) // self.cycle_ps)
        if cycles > 1:
            self.stats["jumps"] += 1
            self.stats["jumped_ns"] += (cycles - 1) * self.cycle_ps // 1000
            self._edge_ps = t + (cycles - 1) * self.cycle_ps     # next call: at the input
        return 1

    def _dma_read(self, rq, t):
        start = max(t + ps(self.p.dma_read_latency_ns), self._resp_free_ps)
        step = max(self.cycle_ps, ps(4 / self.p.dma_read_bytes_per_ns))
        error = not self.mem.mapped(rq.address, 4 * rq.count)
        for i in range(rq.count):
            a = rq.address + 4 * i
            self._resp.append((start + i * step, {
                "data": 0 if error else self.mem.read_dword(a), "tag": rq.tag,
                "last": i == rq.count - 1, "error": error}))
        self._resp_free_ps = start + rq.count * step
        end = rq.address + 4 * rq.count
        cb = self.segment_ends.pop(end, None)
        if cb is not None:
            # the GPU has read the whole segment: its ring entry and buffer are free again
            # once GP_GET is written back
            self.ev.at(start + rq.count * step + ps(self.p.host_write_visible_ns), cb)

    # -- running ---------------------------------------------------------------------------------

    def run(self):
        self._edge_ps = 0
        self._last_cycles = 0
        self._started = False
        self.backend.run(self._on_cycle)
        self.stats["rtl_cycles"] = self.backend.cycles
        if self.error:
            raise self.error
