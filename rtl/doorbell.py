"""Doorbell register file, the MMIO face of the channels and their contexts in SRAM:
:class:`DoorbellRegisterFile`."""

from amaranth import Module, Signal, Cat, Mux
from amaranth.lib import wiring, stream, data
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .bits import BitVector
from .config import FrontEndConfig
from .layouts import (MmioWrite, ChannelReg, GlobalReg, GLOBAL_PAGE, ADDR_BITS,
                      STATUS_BAD_CHANNEL, STATUS_BAD_PUT, STATUS_BAD_VALUE)

__all__ = ["DoorbellRegisterFile", "ring_context_layout", "writeback_layout", "TSG_LOOKUPS"]

#: Channels whose TSG can be looked up in one cycle (``lookup_channel``): the dispatch and the
#: three completion ports, whose work in flight is counted per TSG.
TSG_LOOKUPS = 4


def ring_context_layout(cfg):
    """A channel's ring context as a PBDMA loads it: the ring (``base``, ``entries_log2``),
    ``put``, ``get`` (the next entry not decoded to its end) and the rest of the segment being
    decoded when it was switched out (``seg_address``, ``seg_left`` dwords; 0 for none:
    the entry at ``get`` is then read afresh)."""
    return data.StructLayout({"base": ADDR_BITS, "entries_log2": 5, "put": cfg.gp_bits,
                              "get": cfg.gp_bits, "seg_address": ADDR_BITS, "seg_left": 21})


def writeback_layout(cfg):
    """A PBDMA writes a channel's ring context back: ``get`` always (an entry decoded to its
    end, or the channel switched out), the segment (``seg_address``, ``seg_left``) with
    ``save``."""
    return data.StructLayout({"channel": cfg.chan_bits, "get": cfg.gp_bits, "save": 1,
                              "seg_address": ADDR_BITS, "seg_left": 21})


class DoorbellRegisterFile(wiring.Component):
    """Doorbell register file: the MMIO face of the channels, whose contexts live in SRAM.

    One register block per hardware channel (GP_PUT doorbell, GP_GET, GPFIFO base and size,
    priority, state, and its TSG: the KMD's channel table) and a global page (status, error
    mask, interrupt, and the host scheduler's configuration: TSG timeslice and switch time, the
    PBDMA's context save and load times, channel timeslice, launch hold); the map is
    :class:`~gpufe.rtl.layouts.ChannelReg` and :class:`~gpufe.rtl.layouts.GlobalReg`.

    The channels' ring contexts (RAMFC-like: base, size, GP_PUT, GP_GET, the segment a PBDMA
    was decoding when it switched the channel out) are memories indexed by channel, read
    combinationally, so the channel count costs memory bits, not registers and multiplexers.
    Kept as bit vectors beside them, because the schedulers look at every channel at once:
    ``pending`` (GP_PUT differs from GP_GET: entries not decoded yet), the channels of each
    priority level (``prio_mask``) and of each TSG (``tsg_mask``).

    GP_GET counts entries *decoded*: a PBDMA writes it back (``writeback``) as it finishes an
    entry's segment, and when it switches the channel out with the rest of its position; the
    entries it had fetched beyond are fetched again when the channel comes back, so the driver
    may reuse ring and push-buffer space up to GP_GET.

    A write to a channel that does not exist, a GP_PUT outside the channel's ring, or a ring
    size, priority level or TSG out of range sets a bit in STATUS (with the offending
    address) and changes nothing else (proven: :mod:`gpufe.rtl.formal.doorbell`). Writing GPFIFO_ENTRIES_LOG2 empties the ring (GP_PUT = GP_GET = 0); writing 1 to STATE
    clears the channel's error and drops what its ring still holds (GP_GET = GP_PUT).

    Timing: one MMIO write a cycle, taking effect at the clock edge that takes it (``pending``
    shows a doorbell the cycle after); reads are combinational.

    Parameters
    ----------
    cfg : FrontEndConfig
        Sizes: ``channels``, ``pbdmas``, ``tsgs``, ``gp_entries_log2_max`` (largest ring, and
        the size after reset), ``priority_levels``.

    Attributes
    ----------
    mmio : In(stream.Signature(MmioWrite))
        Register writes: dword ``address`` and 32-bit ``data``. Always ready.
    read_address : In(16)
        Dword address of the register read.
    read_data : Out(32)
        The register at ``read_address``, combinationally; 0 for an address that maps nothing.
    read_channel : Out(cfg.chan_bits)
        The channel ``read_address`` selects (its bits 3 and up), for the command processor to
        answer with ``read_state``.
    read_state : In(8)
        State word of ``read_channel`` (``ChannelState | ErrorCause << 4``), returned by a
        STATE read.
    error_mask : In(cfg.channels)
        Channels in error, from the command processor; an ERROR_MASK read returns the first 32.
    interrupt_status : In(2)
        Interrupt status bits from the command processor; returned by an INTERRUPT read.
    pending : Out(cfg.channels)
        Channels whose GP_PUT differs from their GP_GET.
    prio_mask : Out(data.ArrayLayout(cfg.channels, cfg.priority_levels))
        For each priority level, the channels at that level.
    tsg_mask : Out(data.ArrayLayout(cfg.channels, cfg.tsgs))
        For each TSG, its channels.
    bind_channel : In(cfg.chan_bits)
        A channel a PBDMA is about to load.
    bind_context : Out(ring_context_layout(cfg))
        Its ring context, combinationally.
    pbdma_channel : In(data.ArrayLayout(cfg.chan_bits, cfg.pbdmas))
        The channel resident on each PBDMA.
    pbdma_put : Out(data.ArrayLayout(cfg.gp_bits, cfg.pbdmas))
        GP_PUT of each of those, combinationally (a doorbell reaches a resident channel at once).
    pbdma_priority : Out(data.ArrayLayout(cfg.prio_bits, cfg.pbdmas))
        PRIORITY of each of those.
    writeback : In(stream.Signature(writeback_layout(cfg)))
        A PBDMA writes a channel's GP_GET (and with ``save`` its segment) back. Always ready.
    lookup_channel : In(data.ArrayLayout(cfg.chan_bits, TSG_LOOKUPS))
        Channels whose TSG is looked up.
    lookup_tsg : Out(data.ArrayLayout(cfg.tsg_bits, TSG_LOOKUPS))
        Their TSGs, combinationally.
    clear_error : Out(stream.Signature(cfg.chan_bits))
        Valid for the cycle of a STATE write with bit 0 set: the channel whose error is
        cleared. ``ready`` is not looked at.
    clear_interrupt : Out(2)
        The bits written to INTERRUPT during the cycle of that write (write 1 to clear), else 0.
    scheduler_status : In(32)
        Returned by an ACTIVE_TSG read: the TSG served, bit 31 set during a switch.
    timeslice, switch_time, preempt_time : Out(32)
        TSG_TIMESLICE, TSG_SWITCH and TSG_PREEMPT (ns).
    ctx_save, ctx_load, ch_timeslice, launch_hold, cp_switch, graph_start, cond_start : Out(16)
        CTX_SAVE, CTX_LOAD, CH_TIMESLICE, LAUNCH_HOLD, CP_SWITCH, GRAPH_START, COND_START (ns).
    device_start, tail_start, runtime_start, graph_prepare, cond_record : Out(16)
        DEVICE_START, TAIL_START, RUNTIME_START, GRAPH_PREPARE, COND_RECORD (ns).
    status : Out(32)
        The STATUS register: bits 2:0 ``STATUS_BAD_CHANNEL``, ``STATUS_BAD_PUT``,
        ``STATUS_BAD_VALUE`` (a STATUS write of 1s clears them); bits 31:16 the address of the
        last refused write.
    """

    def __init__(self, cfg):
        if not isinstance(cfg, FrontEndConfig):
            raise TypeError(f"DoorbellRegisterFile: cfg must be a FrontEndConfig, "
                            f"not {type(cfg).__name__}")
        self.cfg = cfg
        n, cb, r = cfg.channels, cfg.chan_bits, cfg.pbdmas
        super().__init__({
            "mmio": In(stream.Signature(MmioWrite)),
            "read_address": In(16),
            "read_data": Out(32),
            # channel the read address selects, and its state word from the CP
            "read_channel": Out(cb),
            "read_state": In(8),
            "error_mask": In(n),
            "interrupt_status": In(2),
            # to the runlist scheduler and the PBDMAs
            "pending": Out(n),
            "prio_mask": Out(data.ArrayLayout(n, cfg.priority_levels)),
            "tsg_mask": Out(data.ArrayLayout(n, cfg.tsgs)),
            "bind_channel": In(cb),
            "bind_context": Out(ring_context_layout(cfg)),
            "pbdma_channel": In(data.ArrayLayout(cb, r)),
            "pbdma_put": Out(data.ArrayLayout(cfg.gp_bits, r)),
            "pbdma_priority": Out(data.ArrayLayout(cfg.prio_bits, r)),
            "writeback": In(stream.Signature(writeback_layout(cfg))),
            "lookup_channel": In(data.ArrayLayout(cb, TSG_LOOKUPS)),
            "lookup_tsg": Out(data.ArrayLayout(cfg.tsg_bits, TSG_LOOKUPS)),
            # to the command processor
            "clear_error": Out(stream.Signature(cb)),
            "clear_interrupt": Out(2),
            "scheduler_status": In(32),
            "timeslice": Out(32),
            "switch_time": Out(32),
            "preempt_time": Out(32),
            "ctx_save": Out(16),
            "ctx_load": Out(16),
            "ch_timeslice": Out(16),
            "launch_hold": Out(16),
            "cp_switch": Out(16),
            "graph_start": Out(16),
            "cond_start": Out(16),
            "device_start": Out(16),
            "tail_start": Out(16),
            "runtime_start": Out(16),
            "graph_prepare": Out(16),
            "cond_record": Out(16),
            "status": Out(32),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        n, gpb, r = cfg.channels, cfg.gp_bits, cfg.pbdmas

        def memory(name, width, init=0):
            mem = Memory(shape=width, depth=n, init=[init] * n)
            m.submodules[name] = mem
            return mem

        # the channels' contexts, one memory per field (each read where it is needed)
        put_mem, get_mem = memory("gp_put", gpb), memory("gp_get", gpb)
        base_mem = memory("gp_base", ADDR_BITS - 3)
        log2_mem = memory("gp_log2", 5, cfg.gp_entries_log2_max)
        prio_mem, tsg_mem = memory("priority", cfg.prio_bits), memory("tsg", cfg.tsg_bits)
        seg_addr_mem, seg_left_mem = memory("seg_address", ADDR_BITS), memory("seg_left", 21)
        # write ports: the PBDMAs' write-back and MMIO (which wins a collision: see below)
        get_wb, get_w = get_mem.write_port(), get_mem.write_port()
        seg_addr_wb = seg_addr_mem.write_port()
        seg_left_wb, seg_left_w = seg_left_mem.write_port(), seg_left_mem.write_port()
        put_w, base_w, log2_w = put_mem.write_port(), base_mem.write_port(), log2_mem.write_port()
        prio_w, tsg_w = prio_mem.write_port(), tsg_mem.write_port()

        def read(mem, addr):
            port = mem.read_port(domain="comb")
            m.d.comb += port.addr.eq(addr)
            return port.data

        pending = Signal(n)
        pending_bits = BitVector(m, pending)
        # after reset every channel is at priority level 0, in TSG 0
        prio_mask = [Signal(n, init=(1 << n) - 1 if lvl == 0 else 0, name=f"prio{lvl}_mask")
                     for lvl in range(cfg.priority_levels)]
        tsg_mask = [Signal(n, init=(1 << n) - 1 if g == 0 else 0, name=f"tsg{g}_mask")
                    for g in range(cfg.tsgs)]
        m.d.comb += [self.pending.eq(pending), self.prio_mask.as_value().eq(Cat(*prio_mask)),
                     self.tsg_mask.as_value().eq(Cat(*tsg_mask))]

        # the host scheduler's configuration registers (GlobalReg name -> register)
        config = {GlobalReg.TSG_TIMESLICE: self.timeslice, GlobalReg.TSG_SWITCH: self.switch_time,
                  GlobalReg.TSG_PREEMPT: self.preempt_time,
                  GlobalReg.CTX_SAVE: self.ctx_save, GlobalReg.CTX_LOAD: self.ctx_load,
                  GlobalReg.CH_TIMESLICE: self.ch_timeslice,
                  GlobalReg.LAUNCH_HOLD: self.launch_hold, GlobalReg.CP_SWITCH: self.cp_switch,
                  GlobalReg.GRAPH_START: self.graph_start, GlobalReg.COND_START: self.cond_start,
                  GlobalReg.DEVICE_START: self.device_start, GlobalReg.TAIL_START: self.tail_start,
                  GlobalReg.RUNTIME_START: self.runtime_start,
                  GlobalReg.GRAPH_PREPARE: self.graph_prepare,
                  GlobalReg.COND_RECORD: self.cond_record}
        config_regs = {reg: Signal(len(port), name=reg.name.lower())
                       for reg, port in config.items()}
        for reg, port in config.items():
            m.d.comb += port.eq(config_regs[reg])

        # -- lookups --
        bc = self.bind_channel
        m.d.comb += [
            self.bind_context.base.eq(read(base_mem, bc) << 3),
            self.bind_context.entries_log2.eq(read(log2_mem, bc)),
            self.bind_context.put.eq(read(put_mem, bc)),
            self.bind_context.get.eq(read(get_mem, bc)),
            self.bind_context.seg_address.eq(read(seg_addr_mem, bc)),
            self.bind_context.seg_left.eq(read(seg_left_mem, bc)),
        ]
        for i in range(r):
            m.d.comb += [self.pbdma_put[i].eq(read(put_mem, self.pbdma_channel[i])),
                         self.pbdma_priority[i].eq(read(prio_mem, self.pbdma_channel[i]))]
        for i in range(TSG_LOOKUPS):
            m.d.comb += self.lookup_tsg[i].eq(read(tsg_mem, self.lookup_channel[i]))

        m.d.comb += [self.mmio.ready.eq(1), self.writeback.ready.eq(1)]

        # -- MMIO writes --
        status = Signal(32)
        m.d.comb += self.status.eq(status)
        w = self.mmio.payload
        is_global = w.address >= GLOBAL_PAGE
        wchan = Signal(16 - 3)
        wreg = Signal(ChannelReg)
        m.d.comb += [wchan.eq(w.address[3:15]), wreg.eq(w.address[:3])]
        c = wchan[:cfg.chan_bits]
        w_put, w_get, w_log2 = read(put_mem, c), read(get_mem, c), read(log2_mem, c)
        for port in (put_w, get_w, base_w, log2_w, prio_w, tsg_w, seg_left_w):
            m.d.comb += port.addr.eq(c)
        m.d.comb += [put_w.data.eq(w.data), log2_w.data.eq(w.data),
                     prio_w.data.eq(w.data), tsg_w.data.eq(w.data), seg_left_w.data.eq(0)]
        # the base is written a half at a time: the other half is read and written back
        base_hi_w = Signal()
        w_base = read(base_mem, c)
        m.d.comb += base_w.data.eq(Mux(base_hi_w, Cat(w_base[:29], w.data[:8]),
                                       Cat(w.data[3:], w_base[29:])))
        # the channel's new GP_PUT and GP_GET after this write (None: unchanged)
        new_put, new_get = Signal(gpb), Signal(gpb)
        m.d.comb += [new_put.eq(w_put), new_get.eq(w_get)]
        touched = Signal()          # GP_PUT or GP_GET of channel c changes

        def flag(bit):
            m.d.sync += status.eq((status & 0xFFFF) | bit | (w.address << 16))

        one_hot = pending_bits.one_hot(c)

        def move_to(masks, value):
            """Channel c leaves its mask and joins masks[value]."""
            for i, mask in enumerate(masks):
                m.d.sync += mask.eq(Mux(value == i, mask | one_hot, mask & ~one_hot))

        def set_pending(channel, value):
            with m.If(value):
                pending_bits.set(channel)
            with m.Else():
                pending_bits.clear(channel)

        with m.If(self.mmio.valid):
            with m.If(is_global):
                with m.Switch(w.address - GLOBAL_PAGE):
                    with m.Case(GlobalReg.STATUS):
                        m.d.sync += status[:3].eq(status[:3] & ~w.data[:3])
                    with m.Case(GlobalReg.INTERRUPT):
                        m.d.comb += self.clear_interrupt.eq(w.data[:2])
                    for reg, cfg_reg in config_regs.items():
                        with m.Case(reg):
                            m.d.sync += cfg_reg.eq(w.data)
            with m.Elif(wchan >= n):
                flag(STATUS_BAD_CHANNEL)
            with m.Else():
                with m.Switch(wreg):
                    with m.Case(ChannelReg.GP_PUT):
                        with m.If((w.data >> w_log2) != 0):
                            flag(STATUS_BAD_PUT)
                        with m.Else():
                            m.d.comb += [put_w.en.eq(1), new_put.eq(w.data), touched.eq(1)]
                    with m.Case(ChannelReg.GPFIFO_BASE_LO):
                        m.d.comb += base_w.en.eq(1)
                    with m.Case(ChannelReg.GPFIFO_BASE_HI):
                        m.d.comb += [base_w.en.eq(1), base_hi_w.eq(1)]
                    with m.Case(ChannelReg.GPFIFO_ENTRIES_LOG2):
                        with m.If((w.data == 0) | (w.data > cfg.gp_entries_log2_max)):
                            flag(STATUS_BAD_VALUE)
                        with m.Else():
                            m.d.comb += [log2_w.en.eq(1), put_w.en.eq(1), put_w.data.eq(0),
                                         get_w.en.eq(1), get_w.data.eq(0), seg_left_w.en.eq(1),
                                         new_put.eq(0), new_get.eq(0), touched.eq(1)]
                    with m.Case(ChannelReg.PRIORITY):
                        # a level that does not exist would take the channel out of every
                        # level's mask while its register kept the value's low bits
                        with m.If(w.data >= cfg.priority_levels):
                            flag(STATUS_BAD_VALUE)
                        with m.Else():
                            m.d.comb += prio_w.en.eq(1)
                            move_to(prio_mask, w.data)
                    with m.Case(ChannelReg.TSG):
                        with m.If(w.data >= cfg.tsgs):
                            flag(STATUS_BAD_VALUE)
                        with m.Else():
                            m.d.comb += tsg_w.en.eq(1)
                            move_to(tsg_mask, w.data)
                    with m.Case(ChannelReg.STATE):
                        with m.If(w.data[0]):
                            # clear the error and drop whatever the ring still holds
                            m.d.comb += [self.clear_error.valid.eq(1),
                                         self.clear_error.payload.eq(c),
                                         get_w.en.eq(1), get_w.data.eq(w_put),
                                         seg_left_w.en.eq(1), new_get.eq(w_put),
                                         touched.eq(1)]

        # -- write-back from the PBDMAs (MMIO to the same channel in the same cycle wins) --
        wb = self.writeback.payload
        wb_put = read(put_mem, wb.channel)
        m.d.comb += [get_wb.addr.eq(wb.channel), get_wb.data.eq(wb.get),
                     seg_addr_wb.addr.eq(wb.channel), seg_addr_wb.data.eq(wb.seg_address),
                     seg_left_wb.addr.eq(wb.channel), seg_left_wb.data.eq(wb.seg_left)]
        collides = wb.channel == c       # the same channel: MMIO's write of a field wins
        with m.If(self.writeback.valid):
            m.d.comb += get_wb.en.eq(~(get_w.en & collides))
            with m.If(wb.save):
                m.d.comb += [seg_addr_wb.en.eq(1),
                             seg_left_wb.en.eq(~(seg_left_w.en & collides))]
            with m.If(~touched | (wb.channel != c)):
                set_pending(wb.channel, wb_put != wb.get)
        with m.If(touched):
            # a write-back to the same channel in this cycle counts for GP_GET unless MMIO
            # writes GP_GET itself
            eff_get = Mux(self.writeback.valid & (wb.channel == c) & ~get_w.en, wb.get, new_get)
            set_pending(c, new_put != eff_get)
        pending_bits.commit()

        # -- MMIO reads (combinational) --
        ra = self.read_address
        rchan = ra[3:15]
        rc = rchan[:cfg.chan_bits]
        m.d.comb += self.read_channel.eq(rchan)
        with m.If(ra >= GLOBAL_PAGE):
            with m.Switch(ra - GLOBAL_PAGE):
                with m.Case(GlobalReg.STATUS):
                    m.d.comb += self.read_data.eq(status)
                with m.Case(GlobalReg.ERROR_MASK):
                    m.d.comb += self.read_data.eq(self.error_mask[:32])
                with m.Case(GlobalReg.INTERRUPT):
                    m.d.comb += self.read_data.eq(self.interrupt_status)
                with m.Case(GlobalReg.CHANNELS):
                    m.d.comb += self.read_data.eq(n)
                with m.Case(GlobalReg.ACTIVE_TSG):
                    m.d.comb += self.read_data.eq(self.scheduler_status)
                for reg, cfg_reg in config_regs.items():
                    with m.Case(reg):
                        m.d.comb += self.read_data.eq(cfg_reg)
        with m.Elif(rchan < n):
            r_base = read(base_mem, rc)
            with m.Switch(ra[:3]):
                with m.Case(ChannelReg.GP_PUT):
                    m.d.comb += self.read_data.eq(read(put_mem, rc))
                with m.Case(ChannelReg.GP_GET):
                    m.d.comb += self.read_data.eq(read(get_mem, rc))
                with m.Case(ChannelReg.GPFIFO_BASE_LO):
                    m.d.comb += self.read_data.eq((r_base << 3)[:32])
                with m.Case(ChannelReg.GPFIFO_BASE_HI):
                    m.d.comb += self.read_data.eq(r_base[29:])
                with m.Case(ChannelReg.GPFIFO_ENTRIES_LOG2):
                    m.d.comb += self.read_data.eq(read(log2_mem, rc))
                with m.Case(ChannelReg.PRIORITY):
                    m.d.comb += self.read_data.eq(read(prio_mem, rc))
                with m.Case(ChannelReg.STATE):
                    m.d.comb += self.read_data.eq(self.read_state)
                with m.Case(ChannelReg.TSG):
                    m.d.comb += self.read_data.eq(read(tsg_mem, rc))
        return m
