from gpufe.rtl.config import SMALL
from gpufe.rtl.doorbell import DoorbellRegisterFile
from gpufe.rtl.layouts import ChannelReg, GlobalReg, STATUS_BAD_CHANNEL, STATUS_BAD_PUT, \
    STATUS_BAD_VALUE
from tests.helpers import simulate, mmio_channel, mmio_global, stream_put


async def write(ctx, dut, address, data):
    # MMIO writes are never back-pressured: taken at the first edge
    await stream_put(ctx, dut.mmio, {"address": address, "data": data}, within=1)


def read(ctx, dut, address):
    ctx.set(dut.read_address, address)
    return ctx.get(dut.read_data)


def test_doorbell_sets_pending_and_fetch_clears_it():
    dut = DoorbellRegisterFile(SMALL)

    async def tb(ctx):
        await write(ctx, dut, mmio_channel(2, ChannelReg.GPFIFO_BASE_LO), 0x1234_5678)
        await write(ctx, dut, mmio_channel(2, ChannelReg.GPFIFO_BASE_HI), 0x9A)
        await write(ctx, dut, mmio_channel(2, ChannelReg.GPFIFO_ENTRIES_LOG2), 2)
        assert ctx.get(dut.gp_base[2]) == 0x9A_1234_5678 & ~7
        await write(ctx, dut, mmio_channel(2, ChannelReg.GP_PUT), 3)
        assert ctx.get(dut.pending) == 0b0100
        assert read(ctx, dut, mmio_channel(2, ChannelReg.GP_PUT)) == 3
        for expect_get in (1, 2, 3):
            await stream_put(ctx, dut.advance, 2, within=1)
            assert ctx.get(dut.gp_get[2]) == expect_get
        assert ctx.get(dut.pending) == 0
        # the ring wraps at 4 entries
        await write(ctx, dut, mmio_channel(2, ChannelReg.GP_PUT), 0)
        assert ctx.get(dut.pending) == 0b0100
        await stream_put(ctx, dut.advance, 2, within=1)
        assert ctx.get(dut.gp_get[2]) == 0 and ctx.get(dut.pending) == 0
        assert read(ctx, dut, mmio_global(GlobalReg.CHANNELS)) == SMALL.channels

    simulate(dut, tb)


def test_bad_writes_are_flagged_and_change_nothing():
    dut = DoorbellRegisterFile(SMALL)

    async def tb(ctx):
        missing = mmio_channel(SMALL.channels, ChannelReg.GP_PUT)
        await write(ctx, dut, missing, 1)
        status = read(ctx, dut, mmio_global(GlobalReg.STATUS))
        assert status & 0xFF == STATUS_BAD_CHANNEL and status >> 16 == missing
        assert ctx.get(dut.pending) == 0
        await write(ctx, dut, mmio_global(GlobalReg.STATUS), 0xFF)
        assert read(ctx, dut, mmio_global(GlobalReg.STATUS)) & 0xFF == 0

        await write(ctx, dut, mmio_channel(1, ChannelReg.GPFIFO_ENTRIES_LOG2), 2)
        await write(ctx, dut, mmio_channel(1, ChannelReg.GP_PUT), 4)     # ring of 4: 0..3
        assert read(ctx, dut, mmio_global(GlobalReg.STATUS)) & 0xFF == STATUS_BAD_PUT
        assert ctx.get(dut.pending) == 0
        assert read(ctx, dut, mmio_channel(1, ChannelReg.GP_PUT)) == 0

        await write(ctx, dut, mmio_channel(1, ChannelReg.GPFIFO_ENTRIES_LOG2),
                    SMALL.gp_entries_log2_max + 1)
        assert read(ctx, dut, mmio_global(GlobalReg.STATUS)) & STATUS_BAD_VALUE
        assert read(ctx, dut, mmio_channel(1, ChannelReg.GPFIFO_ENTRIES_LOG2)) == 2

    simulate(dut, tb)


def test_state_write_clears_error_and_drops_queued_entries():
    dut = DoorbellRegisterFile(SMALL)

    async def tb(ctx):
        await write(ctx, dut, mmio_channel(3, ChannelReg.GP_PUT), 5)
        assert ctx.get(dut.pending) == 0b1000
        # by hand: clear_error is combinational, seen while the write is offered
        ctx.set(dut.mmio.valid, 1)
        ctx.set(dut.mmio.payload, {"address": mmio_channel(3, ChannelReg.STATE), "data": 1})
        assert ctx.get(dut.clear_error.valid) and ctx.get(dut.clear_error.payload) == 3
        await ctx.tick()
        ctx.set(dut.mmio.valid, 0)
        assert ctx.get(dut.pending) == 0

    simulate(dut, tb)


def test_channel_table_and_scheduler_registers():
    dut = DoorbellRegisterFile(SMALL)

    async def tb(ctx):
        await write(ctx, dut, mmio_channel(3, ChannelReg.TSG), 2)
        assert ctx.get(dut.channel_tsg[3]) == 2 and ctx.get(dut.channel_tsg[0]) == 0
        assert read(ctx, dut, mmio_channel(3, ChannelReg.TSG)) == 2
        # a TSG the front end does not have is refused
        await write(ctx, dut, mmio_channel(1, ChannelReg.TSG), SMALL.tsgs)
        assert ctx.get(dut.channel_tsg[1]) == 0
        assert ctx.get(dut.status) & STATUS_BAD_VALUE
        values = {GlobalReg.TSG_TIMESLICE: 2_088_960, GlobalReg.TSG_SWITCH: 145_000,
                  GlobalReg.CTX_SAVE: 450, GlobalReg.CTX_LOAD: 451, GlobalReg.CH_TIMESLICE: 7,
                  GlobalReg.LAUNCH_HOLD: 700}
        ports = {GlobalReg.TSG_TIMESLICE: dut.timeslice, GlobalReg.TSG_SWITCH: dut.switch_time,
                 GlobalReg.CTX_SAVE: dut.ctx_save, GlobalReg.CTX_LOAD: dut.ctx_load,
                 GlobalReg.CH_TIMESLICE: dut.ch_timeslice,
                 GlobalReg.LAUNCH_HOLD: dut.launch_hold}
        for reg, v in values.items():
            await write(ctx, dut, mmio_global(reg), v)
        for reg, v in values.items():
            assert ctx.get(ports[reg]) == v
            assert read(ctx, dut, mmio_global(reg)) == v
        ctx.set(dut.scheduler_status, (1 << 31) | 2)
        assert read(ctx, dut, mmio_global(GlobalReg.ACTIVE_TSG)) == (1 << 31) | 2

    simulate(dut, tb)
