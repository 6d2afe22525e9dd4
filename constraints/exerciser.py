"""ExerciserTop: the whole FrontEnd on an FPGA, kept busy by an on-chip traffic generator.

Synthesis removes logic whose results go nowhere, so the FrontEnd alone would shrink to
nothing. This wrapper gives every port of the FrontEnd real work and folds every result into
the board's LEDs:

- ``MmioSequencer`` programs every channel's GPFIFO ring (base, size, priority) from a small
  ROM, then rings doorbells: one sweep over the channels at a time, advancing each GP_PUT by
  one entry, with a pseudo-random pause between writes; it also reads registers back and
  clears interrupts;
- ``HostMemory`` holds the GPFIFO rings, push-buffer segments and a graph table, all encoded
  by the host driver model's own encoder (``sim/host/encode.py``), and answers DMA reads one dword
  a cycle (an address outside it is answered with ``error``);
- two ``EngineStub``\\ s take compute and copy records, hold each for a pseudo-random number
  of cycles and complete it (completions also carry QMD-style releases);
- a ``now`` counter feeds timestamp releases; DMA writes, records, MMIO reads, ``irq`` and
  ``idle`` are folded into a checksum whose byte-wise XOR drives the LEDs.

Each channel's four push segments use every command the CP decodes: a launch with a
semaphore increment, a wait on the next channel's counter (after the first sweep it is always
met, so nothing deadlocks), a copy with a timestamp release, a graph launch (a three-node
fork: the walker's load, dispatch and completion paths), WFI and a non-stall interrupt.

Timing: the sequencer writes at most one register every other cycle; a DMA read returns its
first dword two cycles after the request is taken.
"""

from amaranth import Module, Signal, Cat, Const, ClockDomain
from amaranth.lib import wiring, data, io
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gpufe.rtl.frontend import FrontEnd
from gpufe.rtl.layouts import (ChannelReg, GlobalReg, GLOBAL_PAGE, CHANNEL_REGS, Method,
                               launch_record_layout, copy_record_layout, HOST_MEMORY_BASE,
                               DESCRIPTOR_ALIGN, LAUNCH_DESCRIPTOR_DWORDS)
from gpufe.sim.cosim import hostmem
from gpufe.sim.host.encode import (PushBuffer, gp_entry, syncpoint_address, launch_descriptor,
                                   encode_graph_node)

#: Byte address of the on-chip host memory as the FrontEnd sees it.
HOST_BASE = HOST_MEMORY_BASE
#: GPFIFO entries per channel ring (one push segment each).
RING_LOG2 = 2


def fold(value, width=32):
    """XOR of ``value``'s bits in ``width``-bit slices (a checksum input of any width)."""
    value = value.as_value() if hasattr(value, "as_value") else value
    out = Const(0, width)
    for i in range(0, len(value), width):
        out = out ^ value[i:i + width]
    return out


class Lfsr(wiring.Component):
    """32-bit Galois LFSR, one step a cycle: a cheap pseudo-random source."""

    value: Out(32)

    def __init__(self, seed):
        self._seed = seed
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        state = Signal(32, init=self._seed)
        m.d.sync += state.eq(Cat(state[1:], Const(0, 1)) ^ (0xA3000000 * state[0]))
        m.d.comb += self.value.eq(state)
        return m


def host_image(cfg, mem_words):
    """Dwords of the exerciser's host memory, and each channel's ring byte address."""
    memory = hostmem.HostMemory(base=HOST_BASE)
    end = HOST_BASE + 4 * mem_words

    def alloc(n_words, align=1):          # align in dwords
        address = memory.alloc(4 * n_words, align=4 * align)
        if address + 4 * n_words > end:
            raise ValueError(f"the exerciser's host image needs more than {mem_words} dwords "
                             f"for {cfg.channels} channels")
        return address

    put = memory.write_dwords

    descriptor = alloc(LAUNCH_DESCRIPTOR_DWORDS, align=DESCRIPTOR_ALIGN // 4)
    put(descriptor, launch_descriptor(grid=(4, 1, 1), block=(128, 1, 1), block_ns=100))
    # a three-node fork graph: 0 -> 1, 0 -> 2 (edges follow the node records)
    graph = alloc(3 * 4 + 2, align=DESCRIPTOR_ALIGN // 4)
    put(graph, encode_graph_node("kernel", 0, 2, 0, descriptor)
        + encode_graph_node("kernel", 1, 0, 2, descriptor)
        + encode_graph_node("kernel", 1, 0, 2, descriptor) + [1, 2])
    scratch = alloc(64)
    rings = []
    for c in range(cfg.channels):
        own = syncpoint_address(cfg, c % cfg.syncpoints)
        other = syncpoint_address(cfg, (c + 1) % cfg.syncpoints)
        segments = [
            PushBuffer().launch(descriptor).sem_increment(own, wfi=False),
            PushBuffer().sem_acquire(other, 1).launch(descriptor),
            PushBuffer().copy(scratch, scratch + 128, 64)
                        .sem_release(scratch + 8 * (c % 8), c, timestamp=True),
            PushBuffer().incr(Method.GRAPH_TABLE_LO, graph & 0xFFFFFFFF, graph >> 32)
                        .immd(Method.GRAPH_LAUNCH, 3).wfi().non_stall_interrupt().nop(),
        ]
        ring = alloc(2 << RING_LOG2, align=2)
        entries = []
        for pb in segments:
            seg = alloc(len(pb))
            put(seg, pb.words)
            e = gp_entry(seg, len(pb))
            entries += [e & 0xFFFFFFFF, e >> 32]
        put(ring, entries)
        rings.append(ring)
    return memory.read_dwords(HOST_BASE, mem_words), rings


def setup_writes(cfg, rings):
    """(MMIO dword address, data) pairs that program every channel's ring."""
    writes = []
    for c, ring in enumerate(rings):
        base = c * CHANNEL_REGS
        writes += [(base + ChannelReg.GPFIFO_BASE_LO.value, ring & 0xFFFFFFFF),
                   (base + ChannelReg.GPFIFO_BASE_HI.value, ring >> 32),
                   (base + ChannelReg.GPFIFO_ENTRIES_LOG2.value, RING_LOG2),
                   (base + ChannelReg.PRIORITY.value, c % cfg.priority_levels)]
    return writes


class MmioSequencer(wiring.Component):
    """Programs the channels from a ROM, then rings doorbells forever (see module doc)."""

    def __init__(self, cfg, writes, mmio_signature):
        self.cfg, self._writes = cfg, writes
        super().__init__({"mmio": Out(mmio_signature), "random": In(32),
                          "read_address": Out(16)})

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        n_setup = len(self._writes)
        m.submodules.rom = rom = Memory(shape=48, depth=n_setup,
                                        init=[a | d << 16 for a, d in self._writes])
        rd = rom.read_port(domain="comb")
        index = Signal(range(n_setup + 1))
        channel = Signal(range(cfg.channels))
        put = Signal(RING_LOG2)
        pause = Signal(4)
        action = Signal(2)      # 0, 1: doorbell; 2: clear interrupts; 3: clear status
        m.d.comb += [rd.addr.eq(index), self.read_address.eq(self.random[8:24])]
        payload = self.mmio.payload
        with m.If(pause != 0):
            m.d.sync += pause.eq(pause - 1)
        with m.Elif(index < n_setup):
            m.d.comb += [self.mmio.valid.eq(1), payload.address.eq(rd.data[:16]),
                         payload.data.eq(rd.data[16:])]
            with m.If(self.mmio.ready):
                m.d.sync += index.eq(index + 1)
        with m.Else():
            m.d.comb += self.mmio.valid.eq(1)
            with m.Switch(action):
                with m.Case(2):
                    m.d.comb += [payload.address.eq(GLOBAL_PAGE + GlobalReg.INTERRUPT.value),
                                 payload.data.eq(3)]
                with m.Case(3):
                    m.d.comb += [payload.address.eq(GLOBAL_PAGE + GlobalReg.STATUS.value),
                                 payload.data.eq(7)]
                with m.Default():
                    m.d.comb += [payload.address.eq(channel * CHANNEL_REGS
                                                    + ChannelReg.GP_PUT.value),
                                 payload.data.eq(put + 1)]
            with m.If(self.mmio.ready):
                m.d.sync += [pause.eq(self.random[:4]), action.eq(self.random[4:6])]
                with m.If(action[1] == 0):
                    with m.If(channel == cfg.channels - 1):
                        m.d.sync += [channel.eq(0), put.eq(put + 1)]
                    with m.Else():
                        m.d.sync += channel.eq(channel + 1)
        return m


class HostMemory(wiring.Component):
    """On-chip host memory answering the FrontEnd's DMA reads, one dword a cycle."""

    def __init__(self, image, req_signature, resp_signature):
        self._image = image
        super().__init__({"req": In(req_signature), "resp": Out(resp_signature)})

    def elaborate(self, platform):
        m = Module()
        depth = len(self._image)
        if depth & (depth - 1):
            raise ValueError("the host memory depth must be a power of two")
        m.submodules.mem = mem = Memory(shape=32, depth=depth, init=self._image)
        rd = mem.read_port()
        word = Signal(range(depth))
        remaining = Signal.like(self.req.payload.count)
        tag = Signal.like(self.req.payload.tag)
        error = Signal()
        out_valid, out_last = Signal(), Signal()
        step = ~out_valid | self.resp.ready
        m.d.comb += [rd.en.eq(step), rd.addr.eq(word), self.req.ready.eq(remaining == 0),
                     self.resp.valid.eq(out_valid), self.resp.payload.data.eq(rd.data),
                     self.resp.payload.tag.eq(tag), self.resp.payload.last.eq(out_last),
                     self.resp.payload.error.eq(error)]
        req = self.req.payload
        window = (4 * depth - 1).bit_length()        # HOST_BASE is aligned to the memory
        with m.If(self.req.valid & self.req.ready):
            m.d.sync += [word.eq(req.address[2:window]), remaining.eq(req.count),
                         tag.eq(req.tag), error.eq((req.address >> window) != HOST_BASE >> window)]
        with m.If(step):                         # never together with a new request
            m.d.sync += [out_valid.eq(remaining != 0), out_last.eq(remaining == 1)]
            with m.If(remaining != 0):
                m.d.sync += [word.eq(word + 1), remaining.eq(remaining - 1)]
        return m


class EngineStub(wiring.Component):
    """Takes dispatch records, holds each 1..16 cycles, completes them in order."""

    def __init__(self, record_signature, done_signature, depth=4):
        self._depth = depth
        super().__init__({"record": In(record_signature), "done": Out(done_signature),
                          "random": In(32), "folded": Out(32)})

    def elaborate(self, platform):
        m = Module()
        layout = self.record.payload.shape()
        m.submodules.queue = q = SyncFIFOBuffered(width=layout.size, depth=self._depth)
        head = data.View(layout, q.r_data)
        wait = Signal(4)
        loaded = Signal()
        m.d.comb += [q.w_en.eq(self.record.valid), q.w_data.eq(self.record.payload),
                     self.record.ready.eq(q.w_rdy),
                     self.folded.eq(Cat(self.record.valid & q.w_rdy, fold(self.record.payload)))]
        done = self.done.payload
        m.d.comb += [done.channel.eq(head.channel), done.seq.eq(head.seq),
                     done.node.eq(head.node), done.graph.eq(head.graph),
                     done.release.eq(self.random[0]), done.index.eq(head.channel),
                     done.value.eq(head.seq | 1)]
        with m.If(q.r_rdy & ~loaded):
            m.d.sync += [wait.eq(self.random[4:8]), loaded.eq(1)]
        with m.Elif(loaded & (wait != 0)):
            m.d.sync += wait.eq(wait - 1)
        with m.Elif(loaded):
            m.d.comb += self.done.valid.eq(1)
            with m.If(self.done.ready):
                m.d.comb += q.r_en.eq(1)
                m.d.sync += loaded.eq(0)
        return m


class ExerciserTop(wiring.Component):
    """FrontEnd + traffic generator + host memory + engine stubs; ``leds`` shows the
    checksum of everything the FrontEnd produced."""

    leds: Out(8)
    checksum: Out(32)

    def __init__(self, cfg, host_words=None, settings=None):
        self.cfg = cfg
        self.frontend = FrontEnd(cfg)
        # a ring and four segments per channel (about 64 dwords), a power of two of them
        self.host_words = host_words or max(2048, 1 << (64 * cfg.channels - 1).bit_length())
        # acquire retry and timestamp hold in cycles; registers a driver would program
        self.settings = settings or {"acquire_retry": 32, "timestamp_hold": 16}
        super().__init__()

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        m.submodules.frontend = fe = self.frontend
        image, rings = host_image(cfg, self.host_words)
        m.submodules.rand_mmio = r0 = Lfsr(0x1234_5678)
        m.submodules.rand_engines = r1 = Lfsr(0x9E37_79B9)
        m.submodules.sequencer = seq = MmioSequencer(cfg, setup_writes(cfg, rings),
                                                     fe.mmio.signature.flip())
        m.submodules.host = host = HostMemory(image, fe.dma_read_req.signature,
                                              fe.dma_read_resp.signature.flip())
        m.submodules.compute = ce = EngineStub(fe.compute.signature,
                                               fe.compute_done.signature.flip())
        m.submodules.copy = ye = EngineStub(fe.copy.signature,
                                            fe.copy_done.signature.flip())
        wiring.connect(m, seq.mmio, fe.mmio)
        wiring.connect(m, fe.dma_read_req, host.req)
        wiring.connect(m, host.resp, fe.dma_read_resp)
        wiring.connect(m, fe.compute, ce.record)
        wiring.connect(m, ce.done, fe.compute_done)
        wiring.connect(m, fe.copy, ye.record)
        wiring.connect(m, ye.done, fe.copy_done)

        now = Signal(64)
        m.d.sync += now.eq(now + 1)
        m.d.comb += [seq.random.eq(r0.value), ce.random.eq(r1.value),
                     ye.random.eq(Cat(r1.value[16:], r1.value[:16])),
                     fe.now.eq(now), fe.mmio_read_address.eq(seq.read_address),
                     fe.acquire_retry.eq(self.settings["acquire_retry"]),
                     fe.timestamp_hold.eq(self.settings["timestamp_hold"]),
                     fe.dma_write.ready.eq(1)]

        checksum = Signal(32)
        wr = fe.dma_write
        m.d.sync += checksum.eq(Cat(checksum[31], checksum[:31])
                                ^ fold(Cat(wr.valid, wr.payload)) ^ ce.folded
                                ^ Cat(ye.folded[16:], ye.folded[:16])
                                ^ fe.mmio_read_data ^ Cat(fe.irq, fe.idle))
        m.d.comb += [self.checksum.eq(checksum), self.leds.eq(fold(checksum, 8))]
        return m


class BoardTop(wiring.Component):
    """ExerciserTop on a board: its LEDs on the board's LEDs; its clock from the board's
    oscillator through a PLL at ``clock_mhz`` (None: the oscillator itself)."""

    def __init__(self, exerciser, board, clock_mhz=None):
        self.exerciser = exerciser
        self.board = board
        self.clock_mhz = clock_mhz
        super().__init__({})

    def elaborate(self, platform):
        from gpufe.constraints.ecp5_pll import Ecp5Pll
        m = Module()
        m.submodules.exerciser = ex = self.exerciser
        if self.clock_mhz:
            m.submodules.clk_buf = clk = io.Buffer("i", platform.request(platform.default_clk,
                                                                          dir="-"))
            f_in = platform.default_clk_frequency / 1e6
            m.domains.sync = cd = ClockDomain("sync")
            m.submodules.pll = Ecp5Pll(clk.i, f_in, self.clock_mhz, cd)
        for i in range(self.board.leds):
            m.submodules[f"led_buf{i}"] = led = io.Buffer("o", platform.request("led", i,
                                                                              dir="-"))
            m.d.comb += led.o.eq(ex.leds[i])
        return m
