"""Doorbell register file, the MMIO face of the channels: :class:`DoorbellRegisterFile`."""

from amaranth import Module, Signal, Const, Array
from amaranth.lib import wiring, stream, data
from amaranth.lib.wiring import In, Out

from .config import FrontEndConfig
from .layouts import (MmioWrite, ChannelReg, GlobalReg, GLOBAL_PAGE, ADDR_BITS,
                      STATUS_BAD_CHANNEL, STATUS_BAD_PUT, STATUS_BAD_VALUE)

__all__ = ["DoorbellRegisterFile"]


class DoorbellRegisterFile(wiring.Component):
    """Doorbell register file: the MMIO face of the channels.

    One register block per channel (GP_PUT doorbell, GP_GET, GPFIFO base and size, priority,
    state, and its TSG: the KMD's channel table) and a global page (status, error mask,
    interrupt, and the host scheduler's configuration: TSG timeslice and switch time, the
    PBDMA's context save and load cycles, channel timeslice, launch hold); the map is
    :class:`~gpufe.rtl.layouts.ChannelReg` and :class:`~gpufe.rtl.layouts.GlobalReg`.
    ``pending`` has a bit per channel whose GP_PUT differs from its GP_GET: new GPFIFO entries
    the fetcher has not read yet.

    A write to a channel that does not exist, a GP_PUT outside the channel's ring, or a ring
    size out of range sets a bit in STATUS (with the offending address) and changes nothing
    else. Writing GPFIFO_ENTRIES_LOG2 empties the ring (GP_PUT = GP_GET = 0); writing 1 to STATE
    clears the channel's error and drops what its ring still holds (GP_GET = GP_PUT).

    Timing: one MMIO write a cycle, taking effect at the clock edge that takes it (``pending``
    shows a doorbell the cycle after); reads are combinational.

    Parameters
    ----------
    cfg : FrontEndConfig
        Sizes: ``channels``, ``gp_entries_log2_max`` (largest ring, and the size after reset),
        ``priority_levels``.

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
        Channels in error, from the command processor; returned by an ERROR_MASK read.
    interrupt_status : In(2)
        Interrupt status bits from the command processor; returned by an INTERRUPT read.
    pending : Out(cfg.channels)
        Channels whose GP_PUT differs from their GP_GET.
    gp_get : Out(data.ArrayLayout(cfg.gp_bits, cfg.channels))
        GP_GET of each channel: the next GPFIFO entry to read.
    gp_base : Out(data.ArrayLayout(ADDR_BITS, cfg.channels))
        Byte address of each channel's GPFIFO ring (8-byte aligned).
    gp_entries_log2 : Out(data.ArrayLayout(5, cfg.channels))
        log2 of each channel's ring size in entries.
    advance : In(stream.Signature(cfg.chan_bits))
        The fetcher has read one GPFIFO entry of this channel: its GP_GET steps by one,
        wrapping at the ring size. Always ready.
    priority : Out(data.ArrayLayout(cfg.prio_bits, cfg.channels))
        PRIORITY register of each channel.
    clear_error : Out(stream.Signature(cfg.chan_bits))
        Valid for the cycle of a STATE write with bit 0 set: the channel whose error is
        cleared. ``ready`` is not looked at.
    clear_interrupt : Out(2)
        The bits written to INTERRUPT during the cycle of that write (write 1 to clear), else 0.
    channel_tsg : Out(data.ArrayLayout(cfg.tsg_bits, cfg.channels))
        TSG register of each channel: the context it belongs to.
    scheduler_status : In(32)
        Returned by an ACTIVE_TSG read: the TSG served, bit 31 set during a switch.
    timeslice, switch_time : Out(32)
        TSG_TIMESLICE and TSG_SWITCH (ns).
    ctx_save, ctx_load, ch_timeslice, launch_hold : Out(16)
        CTX_SAVE, CTX_LOAD, CH_TIMESLICE, LAUNCH_HOLD (ns).
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
        n, cb = cfg.channels, cfg.chan_bits
        super().__init__({
            "mmio": In(stream.Signature(MmioWrite)),
            "read_address": In(16),
            "read_data": Out(32),
            # channel the read address selects, and its state word from the CP
            "read_channel": Out(cb),
            "read_state": In(8),
            "error_mask": In(n),
            "interrupt_status": In(2),
            # to the fetcher
            "pending": Out(n),
            "gp_get": Out(data.ArrayLayout(cfg.gp_bits, n)),
            "gp_base": Out(data.ArrayLayout(ADDR_BITS, n)),
            "gp_entries_log2": Out(data.ArrayLayout(5, n)),
            "advance": In(stream.Signature(cb)),
            # to the command processor
            "priority": Out(data.ArrayLayout(cfg.prio_bits, n)),
            "clear_error": Out(stream.Signature(cb)),
            "clear_interrupt": Out(2),
            # to the runlist scheduler and the PBDMA
            "channel_tsg": Out(data.ArrayLayout(cfg.tsg_bits, n)),
            "scheduler_status": In(32),
            "timeslice": Out(32),
            "switch_time": Out(32),
            "ctx_save": Out(16),
            "ctx_load": Out(16),
            "ch_timeslice": Out(16),
            "launch_hold": Out(16),
            "status": Out(32),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        n, gpb = cfg.channels, cfg.gp_bits

        gp_put = Array(Signal(gpb, name=f"gp_put{i}") for i in range(n))
        gp_get = Array(Signal(gpb, name=f"gp_get{i}") for i in range(n))
        base = Array(Signal(ADDR_BITS - 3, name=f"gp_base{i}") for i in range(n))
        size_log2 = Array(Signal(5, init=cfg.gp_entries_log2_max, name=f"gp_log2_{i}")
                          for i in range(n))
        prio = Array(Signal(cfg.prio_bits, name=f"prio{i}") for i in range(n))
        tsg = Array(Signal(cfg.tsg_bits, name=f"tsg{i}") for i in range(n))
        # the host scheduler's configuration registers (GlobalReg name -> register)
        config = {GlobalReg.TSG_TIMESLICE: self.timeslice, GlobalReg.TSG_SWITCH: self.switch_time,
                  GlobalReg.CTX_SAVE: self.ctx_save, GlobalReg.CTX_LOAD: self.ctx_load,
                  GlobalReg.CH_TIMESLICE: self.ch_timeslice,
                  GlobalReg.LAUNCH_HOLD: self.launch_hold}
        config_regs = {reg: Signal(len(port), name=reg.name.lower())
                       for reg, port in config.items()}
        for reg, port in config.items():
            m.d.comb += port.eq(config_regs[reg])

        for i in range(n):
            m.d.comb += [
                self.pending[i].eq(gp_put[i] != gp_get[i]),
                self.gp_get[i].eq(gp_get[i]),
                self.gp_base[i].eq(base[i] << 3),
                self.gp_entries_log2[i].eq(size_log2[i]),
                self.priority[i].eq(prio[i]),
                self.channel_tsg[i].eq(tsg[i]),
            ]

        def ring_mask(log2):
            return (Const(1, gpb + 1) << log2) - 1

        # These inputs are never back-pressured.
        m.d.comb += [self.mmio.ready.eq(1), self.advance.ready.eq(1)]

        # GP_GET advance from the fetcher (one entry consumed)
        with m.If(self.advance.valid):
            c = self.advance.payload
            m.d.sync += gp_get[c].eq((gp_get[c] + 1) & ring_mask(size_log2[c]))

        # -- MMIO writes --
        status = Signal(32)
        m.d.comb += self.status.eq(status)
        w = self.mmio.payload
        is_global = w.address >= GLOBAL_PAGE
        wchan = Signal(16 - 3)
        wreg = Signal(ChannelReg)
        m.d.comb += [wchan.eq(w.address[3:15]), wreg.eq(w.address[:3])]

        def flag(bit):
            m.d.sync += status.eq((status & 0xFFFF) | bit | (w.address << 16))

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
                c = wchan[:cfg.chan_bits]
                with m.Switch(wreg):
                    with m.Case(ChannelReg.GP_PUT):
                        with m.If((w.data >> size_log2[c]) != 0):
                            flag(STATUS_BAD_PUT)
                        with m.Else():
                            m.d.sync += gp_put[c].eq(w.data)
                    with m.Case(ChannelReg.GPFIFO_BASE_LO):
                        m.d.sync += base[c][:29].eq(w.data[3:])
                    with m.Case(ChannelReg.GPFIFO_BASE_HI):
                        m.d.sync += base[c][29:].eq(w.data[:8])
                    with m.Case(ChannelReg.GPFIFO_ENTRIES_LOG2):
                        with m.If((w.data == 0) | (w.data > cfg.gp_entries_log2_max)):
                            flag(STATUS_BAD_VALUE)
                        with m.Else():
                            m.d.sync += [size_log2[c].eq(w.data), gp_put[c].eq(0),
                                         gp_get[c].eq(0)]
                    with m.Case(ChannelReg.PRIORITY):
                        m.d.sync += prio[c].eq(w.data)
                    with m.Case(ChannelReg.TSG):
                        with m.If(w.data >= cfg.tsgs):
                            flag(STATUS_BAD_VALUE)
                        with m.Else():
                            m.d.sync += tsg[c].eq(w.data)
                    with m.Case(ChannelReg.STATE):
                        with m.If(w.data[0]):
                            # clear the error and drop whatever the ring still holds
                            m.d.comb += [self.clear_error.valid.eq(1),
                                         self.clear_error.payload.eq(c)]
                            m.d.sync += gp_get[c].eq(gp_put[c])

        # -- MMIO reads (combinational) --
        r = self.read_address
        rchan = r[3:15]
        m.d.comb += self.read_channel.eq(rchan)
        with m.If(r >= GLOBAL_PAGE):
            with m.Switch(r - GLOBAL_PAGE):
                with m.Case(GlobalReg.STATUS):
                    m.d.comb += self.read_data.eq(status)
                with m.Case(GlobalReg.ERROR_MASK):
                    m.d.comb += self.read_data.eq(self.error_mask)
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
            c = rchan[:cfg.chan_bits]
            with m.Switch(r[:3]):
                with m.Case(ChannelReg.GP_PUT):
                    m.d.comb += self.read_data.eq(gp_put[c])
                with m.Case(ChannelReg.GP_GET):
                    m.d.comb += self.read_data.eq(gp_get[c])
                with m.Case(ChannelReg.GPFIFO_BASE_LO):
                    m.d.comb += self.read_data.eq((base[c] << 3)[:32])
                with m.Case(ChannelReg.GPFIFO_BASE_HI):
                    m.d.comb += self.read_data.eq(base[c][29:])
                with m.Case(ChannelReg.GPFIFO_ENTRIES_LOG2):
                    m.d.comb += self.read_data.eq(size_log2[c])
                with m.Case(ChannelReg.PRIORITY):
                    m.d.comb += self.read_data.eq(prio[c])
                with m.Case(ChannelReg.STATE):
                    m.d.comb += self.read_data.eq(self.read_state)
                with m.Case(ChannelReg.TSG):
                    m.d.comb += self.read_data.eq(tsg[c])
        return m
