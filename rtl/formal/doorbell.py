"""Properties of :class:`~gpufe.rtl.doorbell.DoorbellRegisterFile`: a bad write is flagged
and changes no channel's state, GP_PUT stays inside its ring, and the bit vectors the
schedulers read agree with the channel contexts in memory; proven by k-induction for 4
channels, 2 priority levels, 2 TSGs and rings of up to 8 entries."""

from amaranth import Elaboratable, Module, Signal, Cat, Const, ResetSignal
from amaranth.asserts import AnyConst

from ..doorbell import DoorbellRegisterFile
from ..layouts import (ChannelReg, GLOBAL_PAGE, STATUS_BAD_CHANNEL, STATUS_BAD_PUT,
                       STATUS_BAD_VALUE)
from . import Properties, Proof, small_config

__all__ = ["DoorbellHarness", "PROOFS", "SMALL_DOORBELL"]

#: the sizes the properties are proven at
SMALL_DOORBELL = small_config()


class DoorbellHarness(Elaboratable):
    """MMIO writes and PBDMA write-backs free every cycle; one channel ``k``, any but fixed,
    watched through the lookup ports (its ring context, priority and TSG).

    Asserted, every cycle:

    - ``bad_write_changes_nothing``: the cycle after a refused write (a channel that does not
      exist, a GP_PUT outside the ring, a ring size, TSG or priority out of range) with no
      write-back beside it, channel ``k``'s context, priority, TSG and pending bit, and every
      channel's priority and TSG masks, are what they were;
    - ``bad_write_flagged``: and STATUS holds the refusal's bit and its address;
    - ``put_in_ring``: ``k``'s GP_PUT is inside its ring (below 2 ** GPFIFO_ENTRIES_LOG2);
    - ``pending_is_put_ne_get``: ``k``'s pending bit is whether its GP_PUT differs from its
      GP_GET (the schedulers read the bit, the PBDMAs the context);
    - ``one_level``, ``one_tsg``: ``k`` is in exactly one priority level's mask, the one its
      PRIORITY register holds, and in exactly one TSG's, its TSG register's.

    Covered: each kind of refusal; a doorbell that makes ``k`` pending; a write-back that
    drains it; a doorbell and a write-back to ``k`` in the same cycle."""

    def __init__(self, cfg=SMALL_DOORBELL, dut=DoorbellRegisterFile):
        self.cfg = cfg
        self.dut = dut(cfg)
        self.mmio_valid, self.mmio_address, self.mmio_data = Signal(), Signal(16), Signal(32)
        self.wb_valid, self.wb_channel = Signal(), Signal(cfg.chan_bits)
        self.wb_get, self.wb_save = Signal(cfg.gp_bits), Signal()
        self.wb_seg_address, self.wb_seg_left = Signal(40), Signal(21)
        self.ports = [self.mmio_valid, self.mmio_address, self.mmio_data, self.wb_valid,
                      self.wb_channel, self.wb_get, self.wb_save, self.wb_seg_address,
                      self.wb_seg_left]
        self.properties = None

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        m.submodules.dut = dut = self.dut
        p = self.properties = Properties(m, "doorbell")
        k = Signal(cfg.chan_bits)
        m.d.comb += k.eq(AnyConst(cfg.chan_bits))
        p.assume("k_exists", k < cfg.channels)
        # the channel contexts are memories, which a reset does not clear (the KMD writes
        # them again): the registers start at their power-up values and stay out of reset
        p.assume("no_reset", ~ResetSignal())
        wb = dut.writeback.payload
        m.d.comb += [dut.mmio.valid.eq(self.mmio_valid),
                     dut.mmio.payload.address.eq(self.mmio_address),
                     dut.mmio.payload.data.eq(self.mmio_data),
                     dut.writeback.valid.eq(self.wb_valid), wb.channel.eq(self.wb_channel),
                     wb.get.eq(self.wb_get), wb.save.eq(self.wb_save),
                     wb.seg_address.eq(self.wb_seg_address), wb.seg_left.eq(self.wb_seg_left),
                     dut.bind_channel.eq(k), dut.pbdma_channel[0].eq(k),
                     dut.lookup_channel[0].eq(k)]

        # what the write is, and whether the register file must refuse it
        addr, value = self.mmio_address, self.mmio_data
        channel_reg = addr < GLOBAL_PAGE
        reg = addr[:3]
        bad_channel = channel_reg & (addr[3:15] >= cfg.channels)
        # the written channel's ring size, through the MMIO read port
        m.d.comb += dut.read_address.eq(Cat(Const(ChannelReg.GPFIFO_ENTRIES_LOG2.value, 3),
                                            addr[3:]))
        ring_log2 = dut.read_data[:5]
        known = channel_reg & ~bad_channel
        bad_put = known & (reg == ChannelReg.GP_PUT) & ((value >> ring_log2) != 0)
        bad_value = known & (
            ((reg == ChannelReg.GPFIFO_ENTRIES_LOG2)
             & ((value == 0) | (value > cfg.gp_entries_log2_max)))
            | ((reg == ChannelReg.TSG) & (value >= cfg.tsgs))
            | ((reg == ChannelReg.PRIORITY) & (value >= cfg.priority_levels)))
        refused = self.mmio_valid & (bad_channel | bad_put | bad_value)
        flag = Signal(3)
        m.d.comb += flag.eq(Cat(bad_channel, bad_put, bad_value))

        # channel k as the lookups show it, and the masks of every channel
        ctx = dut.bind_context
        state = Cat(ctx.as_value(), dut.pbdma_priority[0], dut.lookup_tsg[0],
                    dut.pending.bit_select(k, 1), dut.prio_mask.as_value(),
                    dut.tsg_mask.as_value())
        prev_state = Signal(len(state))
        prev_refused, prev_alone = Signal(), Signal()
        prev_flag, prev_addr = Signal(3), Signal(16)
        m.d.sync += [prev_state.eq(state), prev_refused.eq(refused),
                     prev_alone.eq(~self.wb_valid), prev_flag.eq(flag), prev_addr.eq(addr)]
        status = dut.status
        p.assert_("bad_write_changes_nothing",
                  ~(prev_refused & prev_alone) | (state == prev_state))
        p.assert_("bad_write_flagged",
                  ~prev_refused | (((status[:3] & prev_flag) != 0) & (status[16:] == prev_addr)))
        p.assert_("put_in_ring", (ctx.put >> ctx.entries_log2) == 0)
        p.assert_("pending_is_put_ne_get", dut.pending.bit_select(k, 1) == (ctx.put != ctx.get))
        levels = Cat(dut.prio_mask[lvl].bit_select(k, 1) for lvl in range(cfg.priority_levels))
        tsgs = Cat(dut.tsg_mask[g].bit_select(k, 1) for g in range(cfg.tsgs))
        p.assert_("one_level", levels == (1 << dut.pbdma_priority[0]))
        p.assert_("one_tsg", tsgs == (1 << dut.lookup_tsg[0]))

        for bit, name in ((STATUS_BAD_CHANNEL, "bad_channel"), (STATUS_BAD_PUT, "bad_put"),
                          (STATUS_BAD_VALUE, "bad_value")):
            p.cover(f"{name}_refused", prev_refused & ((prev_flag & bit) != 0))
        pending_k = dut.pending.bit_select(k, 1)
        prev_pending = Signal()
        m.d.sync += prev_pending.eq(pending_k)
        p.cover("doorbell_rings", ~prev_pending & pending_k)
        p.cover("write_back_drains", prev_pending & ~pending_k)
        p.cover("doorbell_meets_write_back",
                self.mmio_valid & self.wb_valid & channel_reg & (reg == ChannelReg.GP_PUT)
                & (addr[3:15] == k) & (self.wb_channel == k) & ~refused)
        return m


PROOFS = [Proof("doorbell", "register_file", DoorbellHarness, "prove", depth=3,
                cover_depth=6, sizes="4 channels, 2 priority levels, 2 TSGs, rings of 2-8 "
                                     "entries")]
