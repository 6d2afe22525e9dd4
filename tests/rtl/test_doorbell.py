"""DoorbellRegisterFile: MMIO writes and reads, the channels' ring contexts in SRAM, the
PBDMAs' write-back of GP_GET (and of the segment with ``save``), and the lookups the
PBDMAs, the command processor and the syncpoint unit make."""

import dataclasses

from gpufe.rtl.config import SMALL
from gpufe.rtl.doorbell import DoorbellRegisterFile, TSG_LOOKUPS
from gpufe.rtl.layouts import ChannelReg, GlobalReg, STATUS_BAD_CHANNEL, STATUS_BAD_PUT, \
    STATUS_BAD_VALUE
from tests.helpers import simulate, mmio_channel, mmio_global, stream_put

CFG = SMALL                         # 8 channels, 2 PBDMAs, 4 TSGs, rings up to 16 entries
ALL = (1 << CFG.channels) - 1


async def write(ctx, dut, address, data):
    # MMIO writes are never back-pressured: taken at the first edge
    await stream_put(ctx, dut.mmio, {"address": address, "data": data}, within=1)


async def writeback(ctx, dut, channel, get, save=0, seg_address=0, seg_left=0):
    # write-backs are never back-pressured either
    await stream_put(ctx, dut.writeback, {"channel": channel, "get": get, "save": save,
                                          "seg_address": seg_address, "seg_left": seg_left},
                     within=1)


async def together(ctx, dut, mmio, wb):
    """An MMIO write ``(address, data)`` and a write-back (a dict) offered in the same cycle,
    both taken at the next edge."""
    wb = {"save": 0, "seg_address": 0, "seg_left": 0, **wb}
    ctx.set(dut.mmio.payload, {"address": mmio[0], "data": mmio[1]})
    ctx.set(dut.writeback.payload, wb)
    ctx.set(dut.mmio.valid, 1)
    ctx.set(dut.writeback.valid, 1)
    assert ctx.get(dut.mmio.ready) and ctx.get(dut.writeback.ready)
    await ctx.tick()
    ctx.set(dut.mmio.valid, 0)
    ctx.set(dut.writeback.valid, 0)


def read(ctx, dut, address):
    ctx.set(dut.read_address, address)
    return ctx.get(dut.read_data)


def reg(ctx, dut, channel, r):
    return read(ctx, dut, mmio_channel(channel, r))


def context(ctx, dut, channel):
    ctx.set(dut.bind_channel, channel)
    return ctx.get(dut.bind_context)


def test_doorbell_sets_pending_and_writeback_moves_gp_get_until_it_reaches_gp_put():
    dut = DoorbellRegisterFile(CFG)

    async def tb(ctx):
        await write(ctx, dut, mmio_channel(2, ChannelReg.GPFIFO_BASE_LO), 0x1234_5678)
        await write(ctx, dut, mmio_channel(2, ChannelReg.GPFIFO_BASE_HI), 0x9A)
        await write(ctx, dut, mmio_channel(2, ChannelReg.GPFIFO_ENTRIES_LOG2), 2)
        c = context(ctx, dut, 2)
        assert c.base == 0x9A_1234_5678 & ~7 and c.entries_log2 == 2
        assert c.put == 0 and c.get == 0
        assert ctx.get(dut.pending) == 0
        await write(ctx, dut, mmio_channel(2, ChannelReg.GP_PUT), 3)
        assert ctx.get(dut.pending) == 0b0100
        assert reg(ctx, dut, 2, ChannelReg.GP_PUT) == 3
        assert context(ctx, dut, 2).put == 3
        # GP_GET moves only by write-back: entries decoded
        for get in (1, 2):
            await writeback(ctx, dut, 2, get)
            assert reg(ctx, dut, 2, ChannelReg.GP_GET) == get
            assert context(ctx, dut, 2).get == get
            assert ctx.get(dut.pending) == 0b0100          # GP_PUT not reached yet
        await writeback(ctx, dut, 2, 3)
        assert reg(ctx, dut, 2, ChannelReg.GP_GET) == 3
        assert ctx.get(dut.pending) == 0
        # the ring wraps at 4 entries
        await write(ctx, dut, mmio_channel(2, ChannelReg.GP_PUT), 0)
        assert ctx.get(dut.pending) == 0b0100
        await writeback(ctx, dut, 2, 0)
        assert reg(ctx, dut, 2, ChannelReg.GP_GET) == 0 and ctx.get(dut.pending) == 0
        # nothing leaked to another channel
        assert context(ctx, dut, 3).put == 0 and context(ctx, dut, 3).get == 0

    simulate(dut, tb)


def test_save_writeback_stores_the_segment_that_bind_context_returns():
    dut = DoorbellRegisterFile(CFG)

    async def tb(ctx):
        await write(ctx, dut, mmio_channel(5, ChannelReg.GP_PUT), 6)
        # switched out in the middle of entry 2's segment
        await writeback(ctx, dut, 5, 2, save=1, seg_address=0x40_0000_1230, seg_left=17)
        c = context(ctx, dut, 5)
        assert (c.put, c.get, c.seg_address, c.seg_left) == (6, 2, 0x40_0000_1230, 17)
        assert context(ctx, dut, 4).seg_left == 0              # another channel: untouched
        # a write-back without save moves GP_GET only
        await writeback(ctx, dut, 5, 3, save=0, seg_address=0x99_0000, seg_left=5)
        c = context(ctx, dut, 5)
        assert (c.get, c.seg_address, c.seg_left) == (3, 0x40_0000_1230, 17)
        # a save with no partial segment left
        await writeback(ctx, dut, 5, 4, save=1, seg_address=0, seg_left=0)
        c = context(ctx, dut, 5)
        assert (c.get, c.seg_address, c.seg_left) == (4, 0, 0)
        # clearing the channel's error drops the saved segment with the ring's entries
        await writeback(ctx, dut, 5, 4, save=1, seg_address=0x40_0000_2000, seg_left=3)
        await write(ctx, dut, mmio_channel(5, ChannelReg.STATE), 1)
        c = context(ctx, dut, 5)
        assert (c.put, c.get, c.seg_left) == (6, 6, 0)
        # and so does emptying the ring
        await writeback(ctx, dut, 5, 6, save=1, seg_address=0x40_0000_3000, seg_left=8)
        await write(ctx, dut, mmio_channel(5, ChannelReg.GPFIFO_ENTRIES_LOG2), 3)
        c = context(ctx, dut, 5)
        assert (c.put, c.get, c.seg_left, c.entries_log2) == (0, 0, 0, 3)

    simulate(dut, tb)


def test_bad_writes_are_flagged_and_change_nothing():
    dut = DoorbellRegisterFile(CFG)

    async def tb(ctx):
        missing = mmio_channel(CFG.channels, ChannelReg.GP_PUT)
        await write(ctx, dut, missing, 1)
        status = read(ctx, dut, mmio_global(GlobalReg.STATUS))
        assert status & 0xFF == STATUS_BAD_CHANNEL and status >> 16 == missing
        assert ctx.get(dut.pending) == 0
        # the missing channel's number modulo the channel count is channel 0: untouched
        assert reg(ctx, dut, 0, ChannelReg.GP_PUT) == 0
        await write(ctx, dut, mmio_global(GlobalReg.STATUS), 0xFF)
        assert read(ctx, dut, mmio_global(GlobalReg.STATUS)) & 0xFF == 0

        await write(ctx, dut, mmio_channel(1, ChannelReg.GPFIFO_ENTRIES_LOG2), 2)
        await write(ctx, dut, mmio_channel(1, ChannelReg.GP_PUT), 4)     # ring of 4: 0..3
        status = read(ctx, dut, mmio_global(GlobalReg.STATUS))
        assert status & 0xFF == STATUS_BAD_PUT
        assert status >> 16 == mmio_channel(1, ChannelReg.GP_PUT)
        assert ctx.get(dut.pending) == 0
        assert reg(ctx, dut, 1, ChannelReg.GP_PUT) == 0
        await write(ctx, dut, mmio_global(GlobalReg.STATUS), 0xFF)

        await write(ctx, dut, mmio_channel(1, ChannelReg.GP_PUT), 2)     # a good doorbell
        for bad in (0, CFG.gp_entries_log2_max + 1):
            await write(ctx, dut, mmio_channel(1, ChannelReg.GPFIFO_ENTRIES_LOG2), bad)
            assert read(ctx, dut, mmio_global(GlobalReg.STATUS)) & 0xFF == STATUS_BAD_VALUE
            # the refused size neither changes the ring nor empties it
            assert reg(ctx, dut, 1, ChannelReg.GPFIFO_ENTRIES_LOG2) == 2
            assert reg(ctx, dut, 1, ChannelReg.GP_PUT) == 2
            assert ctx.get(dut.pending) == 0b0010
            await write(ctx, dut, mmio_global(GlobalReg.STATUS), 0xFF)

    simulate(dut, tb)


def test_entries_log2_write_empties_the_ring():
    dut = DoorbellRegisterFile(CFG)

    async def tb(ctx):
        # reset: every ring is the largest
        assert reg(ctx, dut, 6, ChannelReg.GPFIFO_ENTRIES_LOG2) == CFG.gp_entries_log2_max
        await write(ctx, dut, mmio_channel(6, ChannelReg.GP_PUT), 9)
        await writeback(ctx, dut, 6, 4)
        assert ctx.get(dut.pending) == 0b0100_0000
        await write(ctx, dut, mmio_channel(6, ChannelReg.GPFIFO_ENTRIES_LOG2), 3)
        assert reg(ctx, dut, 6, ChannelReg.GPFIFO_ENTRIES_LOG2) == 3
        assert reg(ctx, dut, 6, ChannelReg.GP_PUT) == 0
        assert reg(ctx, dut, 6, ChannelReg.GP_GET) == 0
        assert ctx.get(dut.pending) == 0
        # the new size bounds GP_PUT: 8 entries, 0..7
        await write(ctx, dut, mmio_channel(6, ChannelReg.GP_PUT), 8)
        assert read(ctx, dut, mmio_global(GlobalReg.STATUS)) & 0xFF == STATUS_BAD_PUT
        await write(ctx, dut, mmio_channel(6, ChannelReg.GP_PUT), 7)
        assert reg(ctx, dut, 6, ChannelReg.GP_PUT) == 7 and ctx.get(dut.pending) == 0b0100_0000

    simulate(dut, tb)


def test_state_write_clears_error_and_drops_queued_entries():
    dut = DoorbellRegisterFile(CFG)

    async def tb(ctx):
        await write(ctx, dut, mmio_channel(3, ChannelReg.GP_PUT), 5)
        await writeback(ctx, dut, 3, 2)
        assert ctx.get(dut.pending) == 0b1000
        # a STATE write of 0 does nothing
        ctx.set(dut.mmio.payload, {"address": mmio_channel(3, ChannelReg.STATE), "data": 0})
        ctx.set(dut.mmio.valid, 1)
        assert not ctx.get(dut.clear_error.valid)
        await ctx.tick()
        assert ctx.get(dut.pending) == 0b1000 and reg(ctx, dut, 3, ChannelReg.GP_GET) == 2
        # by hand: clear_error is combinational, seen while the write is offered
        ctx.set(dut.mmio.payload, {"address": mmio_channel(3, ChannelReg.STATE), "data": 1})
        assert ctx.get(dut.clear_error.valid) and ctx.get(dut.clear_error.payload) == 3
        await ctx.tick()
        ctx.set(dut.mmio.valid, 0)
        assert not ctx.get(dut.clear_error.valid)           # a pulse: the write's cycle only
        assert ctx.get(dut.pending) == 0
        assert reg(ctx, dut, 3, ChannelReg.GP_GET) == 5      # GP_GET = GP_PUT
        assert reg(ctx, dut, 3, ChannelReg.GP_PUT) == 5

    simulate(dut, tb)


def test_mmio_write_of_gp_get_wins_over_a_same_cycle_writeback_of_its_channel():
    dut = DoorbellRegisterFile(CFG)

    async def tb(ctx):
        await write(ctx, dut, mmio_channel(4, ChannelReg.GPFIFO_ENTRIES_LOG2), 3)
        await write(ctx, dut, mmio_channel(4, ChannelReg.GP_PUT), 5)
        await writeback(ctx, dut, 4, 1)
        # STATE clear and a write-back (with a segment) of channel 4 in one cycle
        await together(ctx, dut, (mmio_channel(4, ChannelReg.STATE), 1),
                       {"channel": 4, "get": 3, "save": 1, "seg_address": 0x40_0000_0800,
                        "seg_left": 9})
        c = context(ctx, dut, 4)
        assert (c.put, c.get, c.seg_left) == (5, 5, 0)
        assert ctx.get(dut.pending) == 0

        await write(ctx, dut, mmio_channel(4, ChannelReg.GP_PUT), 7)
        assert ctx.get(dut.pending) == 0b1_0000
        # ENTRIES_LOG2 and a write-back of channel 4 in one cycle
        await together(ctx, dut, (mmio_channel(4, ChannelReg.GPFIFO_ENTRIES_LOG2), 2),
                       {"channel": 4, "get": 6, "save": 1, "seg_address": 0x40_0000_0900,
                        "seg_left": 4})
        c = context(ctx, dut, 4)
        assert (c.entries_log2, c.put, c.get, c.seg_left) == (2, 0, 0, 0)
        assert reg(ctx, dut, 4, ChannelReg.GP_GET) == 0
        assert ctx.get(dut.pending) == 0

        # MMIO to a register that is not GP_GET's does not override the write-back
        await write(ctx, dut, mmio_channel(4, ChannelReg.GP_PUT), 3)
        await together(ctx, dut, (mmio_channel(4, ChannelReg.PRIORITY), 2),
                       {"channel": 4, "get": 2, "save": 1, "seg_address": 0x40_0000_0A00,
                        "seg_left": 6})
        c = context(ctx, dut, 4)
        assert (c.get, c.seg_address, c.seg_left) == (2, 0x40_0000_0A00, 6)
        assert reg(ctx, dut, 4, ChannelReg.PRIORITY) == 2
        assert ctx.get(dut.pending) == 0b1_0000

    simulate(dut, tb)


def test_writeback_and_doorbell_of_different_channels_in_one_cycle_both_land():
    dut = DoorbellRegisterFile(CFG)

    async def tb(ctx):
        await write(ctx, dut, mmio_channel(2, ChannelReg.GP_PUT), 3)
        await writeback(ctx, dut, 2, 1)
        assert ctx.get(dut.pending) == 0b0100
        # channel 1 rung, channel 2 written back up to its GP_PUT: 1 pending, 2 not
        await together(ctx, dut, (mmio_channel(1, ChannelReg.GP_PUT), 2),
                       {"channel": 2, "get": 3})
        assert ctx.get(dut.pending) == 0b0010
        assert reg(ctx, dut, 1, ChannelReg.GP_PUT) == 2 and reg(ctx, dut, 2, ChannelReg.GP_GET) == 3
        # the other way round: channel 2 rung, channel 1 written back up to its GP_PUT
        await together(ctx, dut, (mmio_channel(2, ChannelReg.GP_PUT), 4),
                       {"channel": 1, "get": 2})
        assert ctx.get(dut.pending) == 0b0100
        assert reg(ctx, dut, 2, ChannelReg.GP_PUT) == 4 and reg(ctx, dut, 1, ChannelReg.GP_GET) == 2
        # a write-back short of GP_PUT keeps its channel pending next to a doorbell
        await together(ctx, dut, (mmio_channel(7, ChannelReg.GP_PUT), 1),
                       {"channel": 2, "get": 3})
        assert ctx.get(dut.pending) == 0b1000_0100
        assert reg(ctx, dut, 2, ChannelReg.GP_GET) == 3 and reg(ctx, dut, 7, ChannelReg.GP_PUT) == 1

    simulate(dut, tb)


def test_writeback_with_a_same_cycle_doorbell_on_its_channel_gives_the_right_pending():
    dut = DoorbellRegisterFile(CFG)

    async def tb(ctx):
        await write(ctx, dut, mmio_channel(3, ChannelReg.GPFIFO_ENTRIES_LOG2), 3)
        await write(ctx, dut, mmio_channel(3, ChannelReg.GP_PUT), 3)
        await writeback(ctx, dut, 3, 2)
        # the write-back reaches the old GP_PUT as the doorbell moves it on: still pending
        await together(ctx, dut, (mmio_channel(3, ChannelReg.GP_PUT), 6),
                       {"channel": 3, "get": 3})
        assert reg(ctx, dut, 3, ChannelReg.GP_PUT) == 6
        assert reg(ctx, dut, 3, ChannelReg.GP_GET) == 3
        assert ctx.get(dut.pending) == 0b1000
        # the write-back reaches GP_PUT as the driver rings the same GP_PUT again: done
        await together(ctx, dut, (mmio_channel(3, ChannelReg.GP_PUT), 6),
                       {"channel": 3, "get": 6})
        assert reg(ctx, dut, 3, ChannelReg.GP_GET) == 6
        assert ctx.get(dut.pending) == 0
        # a doorbell moving GP_PUT on while the write-back stays short of it
        await together(ctx, dut, (mmio_channel(3, ChannelReg.GP_PUT), 1),
                       {"channel": 3, "get": 6})
        assert ctx.get(dut.pending) == 0b1000

    simulate(dut, tb)


def test_pbdma_put_and_priority_lookups_follow_the_resident_channels():
    dut = DoorbellRegisterFile(CFG)

    async def tb(ctx):
        await write(ctx, dut, mmio_channel(5, ChannelReg.GP_PUT), 7)
        await write(ctx, dut, mmio_channel(5, ChannelReg.PRIORITY), 3)
        await write(ctx, dut, mmio_channel(2, ChannelReg.GP_PUT), 4)
        await write(ctx, dut, mmio_channel(2, ChannelReg.PRIORITY), 1)
        ctx.set(dut.pbdma_channel, [5, 2])
        assert list(ctx.get(dut.pbdma_put)) == [7, 4]
        assert list(ctx.get(dut.pbdma_priority)) == [3, 1]
        ctx.set(dut.pbdma_channel, [0, 5])
        assert list(ctx.get(dut.pbdma_put)) == [0, 7]
        assert list(ctx.get(dut.pbdma_priority)) == [0, 3]
        # a doorbell reaches a resident channel's PBDMA the cycle after it is written
        await write(ctx, dut, mmio_channel(5, ChannelReg.GP_PUT), 9)
        assert list(ctx.get(dut.pbdma_put)) == [0, 9]
        # the priority masks: one level per channel, all at level 0 after reset
        masks = list(ctx.get(dut.prio_mask))
        assert masks[0] == ALL & ~0b10_0100
        assert masks[1] == 0b100 and masks[2] == 0 and masks[3] == 0b10_0000
        await write(ctx, dut, mmio_channel(5, ChannelReg.PRIORITY), 0)
        masks = list(ctx.get(dut.prio_mask))
        assert masks == [ALL & ~0b100, 0b100, 0, 0]

    simulate(dut, tb)


def test_priority_level_out_of_range_is_refused():
    # found by the formal proof (gpufe.rtl.formal.doorbell, one_level): the write took the
    # channel out of every level's mask, so that no scheduler saw it again, while its
    # PRIORITY register kept the value's low bits
    dut = DoorbellRegisterFile(CFG)

    async def tb(ctx):
        await write(ctx, dut, mmio_channel(2, ChannelReg.PRIORITY), 1)
        for bad in (CFG.priority_levels, CFG.priority_levels + 1, 0xFFFF_FFFF):
            await write(ctx, dut, mmio_channel(2, ChannelReg.PRIORITY), bad)
            assert ctx.get(dut.status) & 0xFF == STATUS_BAD_VALUE
            assert ctx.get(dut.status) >> 16 == mmio_channel(2, ChannelReg.PRIORITY)
            assert reg(ctx, dut, 2, ChannelReg.PRIORITY) == 1
            assert list(ctx.get(dut.prio_mask)) == [ALL & ~0b100, 0b100, 0, 0]
            await write(ctx, dut, mmio_global(GlobalReg.STATUS), 0xFF)

    simulate(dut, tb)


def test_channel_table_and_scheduler_registers():
    dut = DoorbellRegisterFile(CFG)

    async def tb(ctx):
        # after reset every channel is in TSG 0
        assert list(ctx.get(dut.tsg_mask)) == [ALL, 0, 0, 0]
        await write(ctx, dut, mmio_channel(3, ChannelReg.TSG), 2)
        await write(ctx, dut, mmio_channel(6, ChannelReg.TSG), 1)
        await write(ctx, dut, mmio_channel(7, ChannelReg.TSG), 2)
        assert list(ctx.get(dut.tsg_mask)) == [ALL & ~0b1100_1000, 0b0100_0000, 0b1000_1000, 0]
        assert reg(ctx, dut, 3, ChannelReg.TSG) == 2
        # the TSG lookups (dispatch and completions)
        assert TSG_LOOKUPS == 4
        ctx.set(dut.lookup_channel, [3, 6, 0, 7])
        assert list(ctx.get(dut.lookup_tsg)) == [2, 1, 0, 2]
        ctx.set(dut.lookup_channel, [6, 6, 3, 1])
        assert list(ctx.get(dut.lookup_tsg)) == [1, 1, 2, 0]
        # moving a channel: out of its old TSG's mask, into the new one's
        await write(ctx, dut, mmio_channel(3, ChannelReg.TSG), 3)
        assert list(ctx.get(dut.tsg_mask)) == [ALL & ~0b1100_1000, 0b0100_0000, 0b1000_0000,
                                               0b1000]
        assert list(ctx.get(dut.lookup_tsg)) == [1, 1, 3, 0]
        # a TSG the front end does not have is refused
        await write(ctx, dut, mmio_channel(1, ChannelReg.TSG), CFG.tsgs)
        assert ctx.get(dut.status) & STATUS_BAD_VALUE
        assert list(ctx.get(dut.lookup_tsg)) == [1, 1, 3, 0]
        assert list(ctx.get(dut.tsg_mask))[0] == ALL & ~0b1100_1000

        values = {GlobalReg.TSG_TIMESLICE: 2_088_960, GlobalReg.TSG_SWITCH: 145_000,
                  GlobalReg.TSG_PREEMPT: 17_000, GlobalReg.CTX_SAVE: 450,
                  GlobalReg.CTX_LOAD: 451, GlobalReg.CH_TIMESLICE: 7, GlobalReg.LAUNCH_HOLD: 700,
                  GlobalReg.CP_SWITCH: 427, GlobalReg.GRAPH_START: 3_100}
        ports = {GlobalReg.TSG_TIMESLICE: dut.timeslice, GlobalReg.TSG_SWITCH: dut.switch_time,
                 GlobalReg.TSG_PREEMPT: dut.preempt_time,
                 GlobalReg.CTX_SAVE: dut.ctx_save, GlobalReg.CTX_LOAD: dut.ctx_load,
                 GlobalReg.CH_TIMESLICE: dut.ch_timeslice,
                 GlobalReg.LAUNCH_HOLD: dut.launch_hold, GlobalReg.CP_SWITCH: dut.cp_switch,
                 GlobalReg.GRAPH_START: dut.graph_start}
        for r in values:
            assert ctx.get(ports[r]) == 0                  # reset: no cost, no slicing
        for r, v in values.items():
            await write(ctx, dut, mmio_global(r), v)
        for r, v in values.items():
            assert ctx.get(ports[r]) == v
            assert read(ctx, dut, mmio_global(r)) == v
        ctx.set(dut.scheduler_status, (1 << 31) | 2)
        assert read(ctx, dut, mmio_global(GlobalReg.ACTIVE_TSG)) == (1 << 31) | 2

    simulate(dut, tb)


def test_register_reads():
    dut = DoorbellRegisterFile(CFG)

    async def tb(ctx):
        await write(ctx, dut, mmio_channel(6, ChannelReg.GPFIFO_BASE_LO), 0xDEAD_BEEF)
        await write(ctx, dut, mmio_channel(6, ChannelReg.GPFIFO_BASE_HI), 0x7F)
        await write(ctx, dut, mmio_channel(6, ChannelReg.GPFIFO_ENTRIES_LOG2), 3)
        await write(ctx, dut, mmio_channel(6, ChannelReg.GP_PUT), 5)
        await writeback(ctx, dut, 6, 2)
        await write(ctx, dut, mmio_channel(6, ChannelReg.PRIORITY), 2)
        await write(ctx, dut, mmio_channel(6, ChannelReg.TSG), 3)
        expect = {ChannelReg.GP_PUT: 5, ChannelReg.GP_GET: 2,
                  ChannelReg.GPFIFO_BASE_LO: 0xDEAD_BEE8, ChannelReg.GPFIFO_BASE_HI: 0x7F,
                  ChannelReg.GPFIFO_ENTRIES_LOG2: 3, ChannelReg.PRIORITY: 2, ChannelReg.TSG: 3}
        for r, v in expect.items():
            assert reg(ctx, dut, 6, r) == v, r
        # the base halves are written one at a time: each keeps the other
        await write(ctx, dut, mmio_channel(6, ChannelReg.GPFIFO_BASE_HI), 0x12)
        assert reg(ctx, dut, 6, ChannelReg.GPFIFO_BASE_LO) == 0xDEAD_BEE8
        await write(ctx, dut, mmio_channel(6, ChannelReg.GPFIFO_BASE_LO), 0x100)
        assert reg(ctx, dut, 6, ChannelReg.GPFIFO_BASE_HI) == 0x12
        assert context(ctx, dut, 6).base == 0x12_0000_0100
        # another channel reads its reset values
        assert reg(ctx, dut, 1, ChannelReg.GP_PUT) == 0
        assert reg(ctx, dut, 1, ChannelReg.GPFIFO_ENTRIES_LOG2) == CFG.gp_entries_log2_max
        # STATE: the command processor answers for the channel the address selects
        ctx.set(dut.read_state, 0x23)
        assert reg(ctx, dut, 6, ChannelReg.STATE) == 0x23
        assert ctx.get(dut.read_channel) == 6
        # a channel that does not exist reads 0
        assert read(ctx, dut, mmio_channel(CFG.channels + 6, ChannelReg.GP_PUT)) == 0
        assert read(ctx, dut, mmio_global(GlobalReg.CHANNELS)) == CFG.channels
        ctx.set(dut.interrupt_status, 0b10)
        assert read(ctx, dut, mmio_global(GlobalReg.INTERRUPT)) == 0b10
        ctx.set(dut.error_mask, 0b1001_0000)
        assert read(ctx, dut, mmio_global(GlobalReg.ERROR_MASK)) == 0b1001_0000
        # INTERRUPT write 1s to clear: a pulse to the command processor
        ctx.set(dut.mmio.payload, {"address": mmio_global(GlobalReg.INTERRUPT), "data": 0b11})
        ctx.set(dut.mmio.valid, 1)
        assert ctx.get(dut.clear_interrupt) == 0b11
        await ctx.tick()
        ctx.set(dut.mmio.valid, 0)
        assert ctx.get(dut.clear_interrupt) == 0

    simulate(dut, tb)


def test_error_mask_read_returns_the_first_32_channels():
    cfg = dataclasses.replace(CFG, channels=40)
    dut = DoorbellRegisterFile(cfg)

    async def tb(ctx):
        ctx.set(dut.error_mask, (1 << 35) | (1 << 31) | (1 << 3))
        assert read(ctx, dut, mmio_global(GlobalReg.ERROR_MASK)) == (1 << 31) | (1 << 3)
        assert read(ctx, dut, mmio_global(GlobalReg.CHANNELS)) == 40
        # channels past 32 have their registers
        await write(ctx, dut, mmio_channel(37, ChannelReg.GP_PUT), 3)
        assert reg(ctx, dut, 37, ChannelReg.GP_PUT) == 3
        assert ctx.get(dut.pending) == 1 << 37

    simulate(dut, tb)
