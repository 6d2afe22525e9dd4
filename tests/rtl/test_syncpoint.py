from gpufe.rtl.config import SMALL
from gpufe.rtl.layouts import SemOp
from gpufe.rtl.syncpoint import SyncpointUnit, ReleaseKind
from tests.helpers import simulate, stream_put, stream_collect

CFG = SMALL


async def dispatch(ctx, dut, channel):
    await stream_put(ctx, dut.dispatched, channel, within=1)


async def complete(ctx, dut, channel, seq, port="compute_done"):
    await stream_put(ctx, getattr(dut, port), {"channel": channel, "seq": seq}, within=1)


async def release(ctx, dut, **fields):
    """Post a release; the channel's slot must be free (ready at once)."""
    rec = {"channel": 0, "seq": 0, "address": 0, "payload": 0, "kind": ReleaseKind.SET,
           "wfi": 1, "timestamp": 0, "wide": 0, "to_counter": 1, "index": 0}
    rec.update(fields)
    await stream_put(ctx, dut.release, rec, within=1)


def test_release_waits_for_earlier_work_only():
    dut = SyncpointUnit(CFG)

    async def tb(ctx):
        await dispatch(ctx, dut, 0)          # seq 0
        await dispatch(ctx, dut, 0)          # seq 1
        await release(ctx, dut, seq=2, index=5, payload=42)
        await dispatch(ctx, dut, 0)          # seq 2: later than the release
        assert ctx.get(dut.release_busy) & 1 and not ctx.get(dut.release.ready)
        await complete(ctx, dut, 0, 1)
        await ctx.tick().repeat(3)
        assert ctx.get(dut.counter_data[5]) == 0
        await complete(ctx, dut, 0, 0, port="copy_done")
        await ctx.tick().repeat(2)
        assert ctx.get(dut.counter_data[5]) == 42      # seq 2 still runs, and does not hold it
        assert ctx.get(dut.in_flight[0]) == 1 and not ctx.get(dut.all_complete)
        await complete(ctx, dut, 0, 2)
        assert ctx.get(dut.all_complete)

    simulate(dut, tb)


def test_increment_and_add_reductions():
    dut = SyncpointUnit(CFG)

    async def tb(ctx):
        for kind, payload in ((ReleaseKind.INC, 0), (ReleaseKind.INC, 0), (ReleaseKind.ADD, 10)):
            await release(ctx, dut, index=2, kind=kind, payload=payload, wfi=0)
            await ctx.tick()
        assert ctx.get(dut.counter_data[2]) == 12

    simulate(dut, tb)


def wake_cycles(retry):
    """Cycles from the satisfying release to the parked channel's wake-up."""
    dut = SyncpointUnit(CFG)
    out = []

    async def tb(ctx):
        ctx.set(dut.acquire_retry, retry)
        await stream_put(ctx, dut.acquire, {"channel": 3, "index": 1, "value": 1,
                                            "op": SemOp.ACQ_STRICT_GEQ}, within=1)
        await release(ctx, dut, channel=1, index=1, payload=1, wfi=0)
        waited = 0
        while ctx.get(dut.parked):
            assert not ctx.get(dut.quiescent)       # a retry pending is not idle
            await ctx.tick()
            waited += 1
        out.append(waited)

    simulate(dut, tb)
    return out[0]


def test_acquire_retry_interval_delays_the_wake_up():
    assert wake_cycles(40) == wake_cycles(0) + 40


def test_acquire_parks_then_wakes_on_release():
    dut = SyncpointUnit(CFG)

    async def tb(ctx):
        acquire = {"channel": 3, "index": 1, "value": 2, "op": SemOp.ACQ_STRICT_GEQ}
        ctx.set(dut.acquire.payload, acquire)
        assert not ctx.get(dut.acquire_met)             # whatever valid: it is the payload's
        await stream_put(ctx, dut.acquire, acquire, within=1)
        assert ctx.get(dut.parked) == 0b1000
        await release(ctx, dut, channel=1, index=1, payload=1, wfi=0)
        await ctx.tick().repeat(CFG.channels + 2)
        assert ctx.get(dut.parked) == 0b1000        # 1 < 2: still waiting
        await release(ctx, dut, channel=1, index=1, payload=2, wfi=0)
        for waited in range(CFG.channels + 3):
            if not ctx.get(dut.parked):
                break
            await ctx.tick()
        assert not ctx.get(dut.parked) and waited <= CFG.channels + 2
        assert ctx.get(dut.quiescent)

    simulate(dut, tb)


def test_acquire_conditions_including_wraparound():
    dut = SyncpointUnit(CFG)
    cases = [  # (counter, value, op, met)
        (5, 5, SemOp.ACQUIRE, True), (6, 5, SemOp.ACQUIRE, False),
        (6, 5, SemOp.ACQ_STRICT_GEQ, True), (4, 5, SemOp.ACQ_STRICT_GEQ, False),
        (0x0000_0003, 0xFFFF_FFF0, SemOp.ACQ_CIRC_GEQ, True),     # wrapped past
        (0x0000_0003, 0xFFFF_FFF0, SemOp.ACQ_STRICT_GEQ, False),
        (0xFFFF_FFF0, 0x0000_0003, SemOp.ACQ_CIRC_GEQ, False),
    ]

    async def tb(ctx):
        for counter, value, op, met in cases:
            await release(ctx, dut, index=0, payload=counter, wfi=0)
            await ctx.tick()
            ctx.set(dut.acquire.payload, {"channel": 0, "index": 0, "value": value, "op": op})
            assert bool(ctx.get(dut.acquire_met)) == met, (hex(counter), hex(value), op)

    simulate(dut, tb)


def test_timestamp_release_writes_payload_then_now():
    dut = SyncpointUnit(CFG)
    writes = []

    async def tb(ctx):
        ctx.set(dut.now, 1000)
        ctx.set(dut.dma_write.ready, 0)
        await dispatch(ctx, dut, 2)
        await release(ctx, dut, channel=2, seq=1, to_counter=0, address=0x40_0000_0100,
                      payload=0x1234_5678_9ABC, wide=1, timestamp=1)
        await ctx.tick().repeat(4)
        assert not ctx.get(dut.dma_write.valid)     # its kernel still runs
        await complete(ctx, dut, 2, 0)
        ctx.set(dut.now, 1234)
        ctx.set(dut.dma_write.ready, 1)
        for _ in range(12):
            if ctx.get(dut.dma_write.valid):
                w = ctx.get(dut.dma_write.payload)
                writes.append((w.address, w.data, w.wide))
            await ctx.tick()
            ctx.set(dut.now, 1234 + 1)
        assert not ctx.get(dut.release_busy)

    simulate(dut, tb)
    assert writes == [(0x40_0000_0100, 0x1234_5678_9ABC, 1), (0x40_0000_0108, 1235, 1)]


def test_completion_release_sets_its_counter_and_wins_the_write_port():
    dut = SyncpointUnit(CFG)

    async def tb(ctx):
        # a channel release to counter 2 and a completion releasing counter 5, same cycle
        await release(ctx, dut, payload=7, wfi=0, index=2)
        await stream_put(ctx, dut.compute_done, {"channel": 1, "seq": 0, "release": 1,
                                                 "index": 5, "value": 9}, within=1)
        assert ctx.get(dut.counter_data[5]) == 9
        assert ctx.get(dut.counter_data[2]) == 0        # held back a cycle
        await ctx.tick()
        assert ctx.get(dut.counter_data[2]) == 7

    simulate(dut, tb)


def test_release_without_wfi_is_not_held_by_older_work_completing_while_it_waits_to_fire():
    """A release without WFI waits for nothing, but may wait its turn to fire (the DMA write
    of another channel's release is busy); an older completion of its channel arriving
    meanwhile must not count against it (it once wrapped its wait count: the release never
    fired and the channel stalled for good)."""
    dut = SyncpointUnit(CFG)

    async def tb(ctx):
        await dispatch(ctx, dut, 0)                                  # seq 0, in flight
        await release(ctx, dut, channel=1, wfi=0, to_counter=0, address=0x100, payload=7)
        await ctx.tick()
        assert ctx.get(dut.dma_write.valid)                          # held: ready is low
        await release(ctx, dut, channel=0, seq=1, wfi=0, to_counter=0, address=0x200,
                      payload=9)
        await complete(ctx, dut, 0, 0)                               # older than the release
        written = [w.address for w in await stream_collect(ctx, dut.dma_write, 8)]
        assert written == [0x100, 0x200]
        assert ctx.get(dut.release_busy) == 0

    simulate(dut, tb)
