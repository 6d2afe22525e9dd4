"""FrontEnd inside Amaranth's simulator, with a host memory, a KMD and engines around it.

For RTL tests, the demo and the benchmark: everything outside the RTL is a small behavioural
model stepped once per clock by one simulator process. One cycle is one ns of ``now``.

- :class:`HostMemory`: sparse dword store; reads outside the mapped regions answer ``error``.
- DMA reads are answered ``read_latency`` cycles after the request, one dword a cycle, in
  request order. DMA writes are stored at once and logged with their cycle.
- Compute and copy engines take every record at once and complete it ``run_cycles`` later,
  where a launch runs ``block_ns`` of its descriptor (plus ``launch_cycles``) and a copy
  ``length / copy_bytes_per_cycle``. Several run at once. A kernel whose descriptor holds
  device-side cudaGraphLaunch code makes its launch (:class:`DeviceGraph` read then) as it
  starts, in its first ``dgl_count`` runs that are not a tail launch's, as the engine model
  does.
- A channel's ring and push buffer live in host memory; :meth:`FrontEndBench.submit` writes a
  segment, its GPFIFO entry, then rings the doorbell by MMIO, like the UMD and KMD.
"""

from collections import deque
from dataclasses import dataclass, field
import heapq

from amaranth.sim import Simulator

from gpufe.rtl.frontend import FrontEnd
from gpufe.rtl.layouts import (ChannelReg, CHANNEL_REGS, GLOBAL_PAGE, DESCRIPTOR_ALIGN,
                               LaunchDescriptor, LAUNCH_DESCRIPTOR_DWORDS, DeviceGraph,
                               DEVICE_GRAPH_DWORDS)
from gpufe.sim.host.encode import gp_entry
from gpufe.sim.cosim.engines import decode
from gpufe.sim.cosim.hostmem import HostMemory


@dataclass
class ChannelRing:
    channel: int
    base: int
    log2: int
    put: int = 0

    @property
    def entries(self):
        return 1 << self.log2


@dataclass
class BenchLog:
    dispatches: list = field(default_factory=list)     # (cycle, "compute"/"copy", record dict)
    completions: list = field(default_factory=list)    # (cycle, kind, channel, seq)
    device_launches: list = field(default_factory=list)  # (cycle, device_launch payload)
    dma_writes: list = field(default_factory=list)     # (cycle, address, data, wide)
    dma_reads: list = field(default_factory=list)      # (cycle, address, count, tag)


class FrontEndBench:
    def __init__(self, cfg, *, read_latency=20, launch_cycles=10, copy_bytes_per_cycle=64,
                 vcd=None):
        self.cfg = cfg
        self.dut = FrontEnd(cfg)
        self.mem = HostMemory()
        self.read_latency = read_latency
        self.launch_cycles = launch_cycles
        self.copy_bytes_per_cycle = copy_bytes_per_cycle
        self.log = BenchLog()
        self.mmio_log = []              # (cycle, address, data) MMIO writes as issued
        self.rings = {}
        self.cycle = 0
        self._mmio = deque()            # pending (address, data) MMIO writes
        self._actions = []              # (cycle, order, callable) host actions
        self._order = 0
        self._reads = deque()           # (ready_cycle, address, count, tag)
        self._engine = []               # heap of (done_cycle, order, kind, channel, seq)
        self._device_launches = deque()  # (cycle, payload) device-side graph launches
        self._calls_left = {}           # (graph, node) -> device-side launches left
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-9)
        self._requests = deque()
        self.hold_compute = False       # True: the compute engine refuses new launches
        self._idle_streak = 0           # run_until_idle: quiet cycles in a row
        self._stop_when_idle = False
        self.sim.add_testbench(self._testbench)
        self._vcd = None
        if vcd is not None:
            self._vcd = self.sim.write_vcd(vcd)
            self._vcd.__enter__()

    def close(self):
        """Finish the VCD, if one is being written."""
        if self._vcd is not None:
            self._vcd.__exit__(None, None, None)
            self._vcd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- host side ------------------------------------------------------------------------------

    def mmio_write(self, address, data):
        self._mmio.append((address, data))

    def channel_register(self, channel, reg):
        return channel * CHANNEL_REGS + reg.value

    def global_register(self, reg):
        return GLOBAL_PAGE + reg.value

    def setup_channel(self, channel, log2=None, priority=0):
        """Allocate a GPFIFO ring for ``channel`` and program its registers."""
        log2 = log2 or self.cfg.gp_entries_log2_max
        base = self.mem.alloc(8 << log2)
        self.rings[channel] = ChannelRing(channel, base, log2)
        reg = lambda r: self.channel_register(channel, r)
        self.mmio_write(reg(ChannelReg.GPFIFO_BASE_LO), base & 0xFFFFFFFF)
        self.mmio_write(reg(ChannelReg.GPFIFO_BASE_HI), base >> 32)
        self.mmio_write(reg(ChannelReg.GPFIFO_ENTRIES_LOG2), log2)
        self.mmio_write(reg(ChannelReg.PRIORITY), priority)
        return self.rings[channel]

    def put_descriptor(self, dwords):
        address = self.mem.alloc(4 * len(dwords), align=DESCRIPTOR_ALIGN)
        self.mem.write_dwords(address, dwords)
        return address

    def submit(self, channel, pushbuffer, *, ring=True):
        """Write a push-buffer segment and its GPFIFO entry; ring the doorbell."""
        words = pushbuffer.words if hasattr(pushbuffer, "words") else list(pushbuffer)
        seg = self.mem.alloc(4 * len(words), align=4)
        self.mem.write_dwords(seg, words)
        r = self.rings[channel]
        entry = gp_entry(seg, len(words))
        self.mem.write_dwords(r.base + 8 * r.put, [entry & 0xFFFFFFFF, entry >> 32])
        r.put = (r.put + 1) % r.entries
        if ring:
            self.ring_doorbell(channel)
        return seg

    def ring_doorbell(self, channel):
        self.mmio_write(self.channel_register(channel, ChannelReg.GP_PUT), self.rings[channel].put)

    def at(self, cycle, action):
        """Run ``action(bench)`` when the simulation reaches ``cycle``."""
        heapq.heappush(self._actions, (cycle, self._order, action))
        self._order += 1

    # -- running --------------------------------------------------------------------------------

    def run(self, cycles):
        self.sim.run_until((self.cycle + cycles) * 1e-9)

    def run_until_idle(self, max_cycles=100_000, settle=4):
        """Run until the front end and every model have had nothing to do for ``settle``
        cycles; raise if that does not happen within ``max_cycles``."""
        self._idle_streak = 0
        self._settle = settle
        self._stop_when_idle = True
        limit = self.cycle + max_cycles
        while self.cycle < limit and self._idle_streak < settle:
            self.sim.run_until((self.cycle + min(64, limit - self.cycle)) * 1e-9)
        self._stop_when_idle = False
        if self._idle_streak < settle:
            raise TimeoutError(f"front end not idle after {max_cycles} cycles")
        return self.cycle

    def models_busy(self):
        return bool(self._mmio or self._actions or self._reads or self._engine
                    or self._device_launches)

    # -- the per-cycle loop -----------------------------------------------------------------------
    #
    # A testbench rather than a process: it sees settled values, so what it reads before a
    # clock edge is exactly what the edge will transfer, and peeks return settled values.

    def peek(self, *signals):
        """Settled values of ``signals`` one cycle from now (runs one cycle)."""
        box = []
        self._requests.append(("peek", signals, box))
        self.run(1)
        return box[0] if len(signals) > 1 else box[0][0]

    def mmio_read(self, address):
        """MMIO register read (runs one cycle)."""
        box = []
        self._requests.append(("read", address, box))
        self.run(1)
        return box[0]

    async def _testbench(self, ctx):
        dut = self.dut
        for port in (dut.dma_read_req, dut.dma_write, dut.copy):
            ctx.set(port.ready, 1)
        resp = None           # [tag, address, remaining, error] being streamed
        while True:
            now = self.cycle
            ctx.set(dut.now, now)
            while self._requests:
                kind, arg, box = self._requests.popleft()
                if kind == "peek":
                    box.append([ctx.get(s) for s in arg])
                else:
                    ctx.set(dut.mmio_read_address, arg)
                    box.append(ctx.get(dut.mmio_read_data))

            # what the DUT offers now is taken at the coming edge (our readies are all 1)
            if ctx.get(dut.dma_read_req.valid):
                rq = ctx.get(dut.dma_read_req.payload)
                self.log.dma_reads.append((now, rq.address, rq.count, rq.tag))
                self._reads.append((now + self.read_latency, rq.address, rq.count, rq.tag))
            if ctx.get(dut.dma_write.valid):
                wr = ctx.get(dut.dma_write.payload)
                self.mem.write64(wr.address, wr.data, bool(wr.wide))
                self.log.dma_writes.append((now, wr.address, wr.data, wr.wide))
            ctx.set(dut.compute.ready, not self.hold_compute)
            if ctx.get(dut.compute.valid) and not self.hold_compute:
                cm = ctx.get(dut.compute.payload)
                desc = decode(LaunchDescriptor,
                              self.mem.read_dwords(cm.descriptor, LAUNCH_DESCRIPTOR_DWORDS))
                rec = {"channel": cm.channel, "seq": cm.seq, "descriptor": cm.descriptor,
                       "kernel_id": desc["kernel_id"], "node": cm.node, "graph": cm.graph,
                       "dwalk": cm.dwalk, "tail": cm.tail}
                self.log.dispatches.append((now, "compute", rec))
                self._device_launch(now + self.launch_cycles, desc, rec)
                block_cycles = -(-desc["block_ps"] // 1000)          # a cycle is one ns
                self._start_engine(now + self.launch_cycles + block_cycles, "compute", rec)
            if ctx.get(dut.copy.valid):
                cp = ctx.get(dut.copy.payload)
                rec = {"channel": cp.channel, "seq": cp.seq, "src": cp.src, "dst": cp.dst,
                       "length": cp.length, "node": cp.node, "graph": cp.graph,
                       "dwalk": cp.dwalk, "tail": cp.tail}
                self.log.dispatches.append((now, "copy", rec))
                cycles = -(-cp.length // self.copy_bytes_per_cycle)
                self._start_engine(now + self.launch_cycles + cycles, "copy", rec)

            # DMA read responses: one dword a cycle, oldest request first
            if resp is None and self._reads and self._reads[0][0] <= now:
                _, address, count, tag = self._reads.popleft()
                resp = [tag, address, count, not self.mem.mapped(address, 4 * count)]
            if resp is not None:
                tag, address, remaining, error = resp
                ctx.set(dut.dma_read_resp.valid, 1)
                ctx.set(dut.dma_read_resp.payload,
                        {"data": 0 if error else self.mem.read_dword(address), "tag": tag,
                         "last": remaining == 1, "error": error})
                resp = None if remaining == 1 else [tag, address + 4, remaining - 1, error]
            else:
                ctx.set(dut.dma_read_resp.valid, 0)

            # engine completions: at most one per engine per cycle
            due = {}
            while self._engine and self._engine[0][0] <= now and len(due) < 2:
                item = heapq.heappop(self._engine)
                if item[2] in due:
                    due.setdefault("held", []).append(item)
                    continue
                due[item[2]] = item
            for item in due.pop("held", []):
                heapq.heappush(self._engine, item)
            for kind, port in (("compute", dut.compute_done), ("copy", dut.copy_done)):
                item = due.get(kind)
                ctx.set(port.valid, item is not None)
                if item is not None:
                    ctx.set(port.payload, {"channel": item[3], "seq": item[4], "node": item[5],
                                           "graph": item[6], "dwalk": item[7]})
                    if ctx.get(port.ready):
                        self.log.completions.append((now, kind, item[3], item[4]))
                    else:
                        heapq.heappush(self._engine, item)       # offered again next cycle

            # device-side graph launches, one at a time, held until taken
            dl = self._device_launches
            if dl and dl[0][0] <= now:
                ctx.set(dut.device_launch.valid, 1)
                ctx.set(dut.device_launch.payload, dl[0][1])
                if ctx.get(dut.device_launch.ready):
                    self.log.device_launches.append((now, dl.popleft()[1]))
            else:
                ctx.set(dut.device_launch.valid, 0)

            # host actions and MMIO writes (one write a cycle)
            while self._actions and self._actions[0][0] <= now:
                heapq.heappop(self._actions)[2](self)
            if self._mmio:
                address, value = self._mmio.popleft()
                self.mmio_log.append((now, address, value))
                ctx.set(dut.mmio.valid, 1)
                ctx.set(dut.mmio.payload, {"address": address, "data": value})
            else:
                ctx.set(dut.mmio.valid, 0)

            if self._stop_when_idle:
                # (a deadline still ahead is work to come: the clock must reach it)
                quiet = (ctx.get(dut.idle) and not self.models_busy() and resp is None
                         and not ctx.get(dut.mmio.valid)
                         and ctx.get(dut.wake_at) == (1 << 64) - 1)
                self._idle_streak = self._idle_streak + 1 if quiet else 0

            await ctx.tick()
            self.cycle += 1

    def _start_engine(self, done, kind, rec):
        heapq.heappush(self._engine, (done, self._order, kind, rec["channel"], rec["seq"],
                                      rec["node"], rec["graph"], rec["dwalk"]))
        self._order += 1

    def _device_launch(self, start, desc, rec):
        """A kernel starting at cycle ``start``: its device-side graph launch, if this run
        makes one (as :class:`~gpufe.sim.cosim.compute.ComputeEngine` counts them)."""
        if not desc["device_runtime"] or not desc["dgl_count"]:
            return
        key = (desc["graph_id"], rec["node"])      # (a node's, whatever its descriptor)
        left = self._calls_left.get(key, desc["dgl_count"]) if rec["tail"] else \
            desc["dgl_count"]
        self._calls_left[key] = max(left - 1, 0)
        if left:
            g = decode(DeviceGraph, self.mem.read_dwords(desc["dgl_graph"],
                                                         DEVICE_GRAPH_DWORDS))
            self._device_launches.append((start, {
                "channel": rec["channel"], "seq": rec["seq"], "table": g["table"],
                "nodes": g["nodes"], "tail": desc["dgl_tail"], "dwalk": rec["dwalk"]}))
