"""SyncpointUnit: releases (the pool, WFI, counters, host memory, timestamps), completion
releases, acquires (park, wake scan), work in flight per TSG."""

from amaranth import Elaboratable, Module, Array, Const

from gpufe.rtl.config import SMALL
from gpufe.rtl.doorbell import TSG_LOOKUPS
from gpufe.rtl.layouts import SemOp
from gpufe.rtl.syncpoint import SyncpointUnit, ReleaseKind
from tests.helpers import simulate, stream_put, stream_collect

CFG = SMALL                  # 8 channels, 4 TSGs, 4 release slots
#: the channel table: channel c belongs to TSG TSG_OF[c]
TSG_OF = [2, 0, 3, 1, 2, 0, 1, 3]


class WithChannelTable(Elaboratable):
    """The unit with its TSG lookups answered, as the channel table (the doorbell register
    file) answers them: ``lookup_tsg[i]`` = ``TSG_OF[lookup_channel[i]]``, combinationally."""

    def __init__(self, dut):
        self.dut = dut

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        table = Array(Const(t, CFG.tsg_bits) for t in TSG_OF)
        for i in range(TSG_LOOKUPS):
            m.d.comb += dut.lookup_tsg[i].eq(table[dut.lookup_channel[i]])
        return m


#: every channel on a PBDMA: parked ones are re-checked by the scanner, not polled
ON_PBDMAS = (1 << CFG.channels) - 1


def run(dut, tb):
    simulate(WithChannelTable(dut), tb)


def tsgs_of(*channels):
    """The TSG mask of ``channels``."""
    return sum(1 << TSG_OF[c] for c in set(channels))


async def dispatch(ctx, dut, channel):
    await stream_put(ctx, dut.dispatched, channel, within=1)


async def complete(ctx, dut, channel, seq, port="compute_done"):
    await stream_put(ctx, getattr(dut, port), {"channel": channel, "seq": seq}, within=1)


async def cycle(ctx, dut, dispatched=None, **done):
    """One edge with several sources at once: ``dispatched`` a channel, ``done`` port name ->
    (channel, seq)."""
    ports = {"dispatched": dispatched, **done}
    for name, value in ports.items():
        if value is None:
            continue
        port = getattr(dut, name)
        ctx.set(port.payload, value if name == "dispatched"
                else {"channel": value[0], "seq": value[1]})
        ctx.set(port.valid, 1)
        assert ctx.get(port.ready)
    await ctx.tick()
    for name in ports:
        ctx.set(getattr(dut, name).valid, 0)


def release_record(**fields):
    rec = {"channel": 0, "seq": 0, "address": 0, "payload": 0, "kind": ReleaseKind.SET,
           "wfi": 1, "timestamp": 0, "wide": 0, "to_counter": 1, "index": 0}
    rec.update(fields)
    return rec


async def release(ctx, dut, **fields):
    """Post a release; the channel must have none waiting and the pool room (ready at
    once)."""
    await stream_put(ctx, dut.release, release_record(**fields), within=1)


def test_release_waits_for_earlier_work_only():
    dut = SyncpointUnit(CFG)

    async def tb(ctx):
        await dispatch(ctx, dut, 0)          # seq 0
        await dispatch(ctx, dut, 0)          # seq 1
        await release(ctx, dut, seq=2, index=5, payload=42)
        await dispatch(ctx, dut, 0)          # seq 2: later than the release
        assert ctx.get(dut.release_busy) == 0b1 and not ctx.get(dut.release.ready)
        await complete(ctx, dut, 0, 1)
        await ctx.tick().repeat(3)
        assert ctx.get(dut.counter_data[5]) == 0
        await complete(ctx, dut, 0, 0, port="copy_done")
        await ctx.tick().repeat(2)
        assert ctx.get(dut.counter_data[5]) == 42      # seq 2 still runs, and does not hold it
        assert ctx.get(dut.release_busy) == 0
        assert ctx.get(dut.tsg_in_flight) == tsgs_of(0) and not ctx.get(dut.all_complete)
        await complete(ctx, dut, 0, 2)
        assert ctx.get(dut.all_complete) and ctx.get(dut.tsg_in_flight) == 0

    run(dut, tb)


def test_release_posted_as_older_work_completes_waits_for_the_rest_only():
    dut = SyncpointUnit(CFG)

    async def tb(ctx):
        await dispatch(ctx, dut, 3)          # seq 0
        await dispatch(ctx, dut, 3)          # seq 1
        # the release is posted in the cycle seq 0 completes: it waits for seq 1 alone
        ctx.set(dut.compute_done.payload, {"channel": 3, "seq": 0})
        ctx.set(dut.compute_done.valid, 1)
        await release(ctx, dut, channel=3, seq=2, index=1, payload=11)
        ctx.set(dut.compute_done.valid, 0)
        await ctx.tick().repeat(3)
        assert ctx.get(dut.counter_data[1]) == 0
        await complete(ctx, dut, 3, 1)
        await ctx.tick()
        assert ctx.get(dut.counter_data[1]) == 11

    run(dut, tb)


def test_work_in_flight_is_counted_per_tsg_through_the_channel_table():
    dut = SyncpointUnit(CFG)

    async def tb(ctx):
        # the lookups name the channels of the dispatch and of the three completion ports
        await cycle(ctx, dut, dispatched=0)                               # TSG 2
        assert ctx.get(dut.tsg_in_flight) == 0b0100
        await cycle(ctx, dut, dispatched=3)                               # TSG 1
        await cycle(ctx, dut, dispatched=4)                               # TSG 2 again
        assert ctx.get(dut.tsg_in_flight) == 0b0110
        await cycle(ctx, dut, dispatched=7, compute_done=(0, 0))          # TSG 3 in, 2: 1 left
        assert ctx.get(dut.tsg_in_flight) == 0b1110
        # all four sources at once, four different TSGs
        await cycle(ctx, dut, dispatched=1, compute_done=(4, 0), copy_done=(3, 0),
                    graph_done=(7, 0))
        assert ctx.get(dut.tsg_in_flight) == 0b0001
        assert not ctx.get(dut.all_complete)
        # a dispatch and a completion of one TSG (different channels) in one cycle
        await cycle(ctx, dut, dispatched=5, compute_done=(1, 0))
        assert ctx.get(dut.tsg_in_flight) == 0b0001
        await cycle(ctx, dut, copy_done=(5, 0))
        assert ctx.get(dut.tsg_in_flight) == 0 and ctx.get(dut.all_complete)
        # two completions of one TSG in one cycle
        await cycle(ctx, dut, dispatched=2)                               # TSG 3
        await cycle(ctx, dut, dispatched=7)                               # TSG 3
        assert ctx.get(dut.tsg_in_flight) == 0b1000
        await cycle(ctx, dut, compute_done=(2, 0), graph_done=(7, 1))
        assert ctx.get(dut.tsg_in_flight) == 0 and ctx.get(dut.all_complete)

    run(dut, tb)


def test_a_dispatch_counts_for_its_tsg_in_its_own_cycle():
    """The cycle a launch is dispatched its methods have left the channel's ``busy``: its TSG
    must already be in flight then, or the runlist scheduler sees it idle for that cycle and
    switches it out with its launch on the way (found in a two-process run)."""
    dut = SyncpointUnit(CFG)

    async def tb(ctx):
        assert ctx.get(dut.tsg_in_flight) == 0
        ctx.set(dut.dispatched.payload, 3)                                # TSG 1
        ctx.set(dut.dispatched.valid, 1)
        assert ctx.get(dut.tsg_in_flight) == 0b0010                       # before the edge
        await ctx.tick()
        ctx.set(dut.dispatched.valid, 0)
        assert ctx.get(dut.tsg_in_flight) == 0b0010

    run(dut, tb)


def test_release_pool_holds_one_release_per_channel_and_refuses_when_full():
    assert CFG.release_slots == 4
    dut = SyncpointUnit(CFG)

    async def tb(ctx):
        for c in range(5):
            await dispatch(ctx, dut, c)                  # seq 0 on channels 0..4
        await release(ctx, dut, channel=2, seq=1, index=2, payload=12)
        assert ctx.get(dut.release_busy) == 0b0100 and not ctx.get(dut.release_full)
        # a second release of channel 2 waits; another channel's goes in
        ctx.set(dut.release.payload, release_record(channel=2, seq=1))
        assert not ctx.get(dut.release.ready)
        ctx.set(dut.release.payload, release_record(channel=4, seq=1))
        assert ctx.get(dut.release.ready)
        # slots 0..3: channels 2, 1, 0, 3
        for c in (1, 0, 3):
            await release(ctx, dut, channel=c, seq=1, index=c, payload=10 + c)
        assert ctx.get(dut.release_busy) == 0b1111 and ctx.get(dut.release_full)
        # the pool is full: channel 4, with no release waiting, must wait too
        ctx.set(dut.release.payload, release_record(channel=4, seq=1, index=4, payload=14))
        ctx.set(dut.release.valid, 1)
        assert not ctx.get(dut.release.ready)
        await ctx.tick().repeat(3)
        assert ctx.get(dut.release_busy) == 0b1111
        # channel 2's work completes: its release fires at the next edge, which frees its
        # slot; channel 4's release goes in at the edge after
        await complete(ctx, dut, 2, 0)
        assert ctx.get(dut.release_full) and ctx.get(dut.counter_data[2]) == 0
        await ctx.tick()
        assert ctx.get(dut.counter_data[2]) == 12
        assert ctx.get(dut.release_busy) == 0b1011 and not ctx.get(dut.release_full)
        assert ctx.get(dut.release.ready)
        await ctx.tick()
        ctx.set(dut.release.valid, 0)
        assert ctx.get(dut.release_busy) == 0b1_1011 and ctx.get(dut.release_full)
        # releases fire lowest pool entry first, not lowest channel: channel 4 took slot 0,
        # channel 3 is in slot 3
        await cycle(ctx, dut, compute_done=(3, 0), copy_done=(4, 0))
        await ctx.tick()
        assert ctx.get(dut.counter_data[4]) == 14 and ctx.get(dut.counter_data[3]) == 0
        await ctx.tick()
        assert ctx.get(dut.counter_data[3]) == 13
        assert ctx.get(dut.release_busy) == 0b0011
        await cycle(ctx, dut, compute_done=(0, 0), graph_done=(1, 0))
        await ctx.tick().repeat(2)
        assert (ctx.get(dut.counter_data[0]), ctx.get(dut.counter_data[1])) == (10, 11)
        assert ctx.get(dut.release_busy) == 0 and not ctx.get(dut.release_full)
        assert ctx.get(dut.all_complete) and ctx.get(dut.quiescent)

    run(dut, tb)


def test_increment_and_add_reductions():
    dut = SyncpointUnit(CFG)

    async def tb(ctx):
        for kind, payload in ((ReleaseKind.INC, 0), (ReleaseKind.INC, 0), (ReleaseKind.ADD, 10)):
            await release(ctx, dut, index=2, kind=kind, payload=payload, wfi=0)
            await ctx.tick()
        assert ctx.get(dut.counter_data[2]) == 12

    run(dut, tb)


def wake_cycles(retry):
    """Cycles from the satisfying release to the parked channel's wake-up."""
    dut = SyncpointUnit(CFG)
    out = []

    async def tb(ctx):
        ctx.set(dut.acquire_retry, retry)
        ctx.set(dut.resident, ON_PBDMAS)
        await stream_put(ctx, dut.acquire, {"channel": 3, "index": 1, "value": 1,
                                            "op": SemOp.ACQ_STRICT_GEQ}, within=1)
        await release(ctx, dut, channel=1, index=1, payload=1, wfi=0)
        waited = 0
        while ctx.get(dut.parked):
            assert not ctx.get(dut.quiescent)       # a retry pending is not idle
            await ctx.tick()
            waited += 1
        out.append(waited)

    run(dut, tb)
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

    run(dut, tb)


def scan_wake_ticks(retry):
    """Channels 6, 1, 4 park (in that order) on counter 3: 1 and 6 for 1, 4 for 5; counter 3
    is set to 1. Returns {channel: edges from the release's post to its wake-up}, None for
    one still parked 20 edges on."""
    dut = SyncpointUnit(CFG)
    woke = {}

    async def tb(ctx):
        ctx.set(dut.acquire_retry, retry)
        ctx.set(dut.resident, ON_PBDMAS)
        for c, value in ((6, 1), (1, 1), (4, 5)):
            await stream_put(ctx, dut.acquire, {"channel": c, "index": 3, "value": value,
                                                "op": SemOp.ACQ_STRICT_GEQ}, within=1)
        assert ctx.get(dut.parked) == 0b0101_0010
        await release(ctx, dut, channel=0, index=3, payload=1, wfi=0)
        for edge in range(1, retry + 21):
            await ctx.tick()
            parked = ctx.get(dut.parked)
            for c in (1, 4, 6):
                if c not in woke and not parked >> c & 1:
                    woke[c] = edge
        assert ctx.get(dut.quiescent)

    run(dut, tb)
    return {c: woke.get(c) for c in (1, 4, 6)}


def test_wake_scan_visits_only_the_parked_channels_lowest_first():
    # the counter is written at the first edge; the scan starts retry edges after it, one
    # parked channel an edge, lowest first: channel 1 first, 4 (not met: stays parked)
    # second, 6 third, whatever the channels in between
    for retry in (0, 7):
        assert scan_wake_ticks(retry) == {1: 2 + retry, 4: None, 6: 4 + retry}


def test_halted_channel_is_no_longer_parked():
    dut = SyncpointUnit(CFG)

    async def tb(ctx):
        for c in (2, 5):
            await stream_put(ctx, dut.acquire, {"channel": c, "index": 0, "value": 1,
                                                "op": SemOp.ACQUIRE}, within=1)
        assert ctx.get(dut.parked) == 0b10_0100
        ctx.set(dut.halt, 0b100)
        await ctx.tick()
        ctx.set(dut.halt, 0)
        assert ctx.get(dut.parked) == 0b10_0000
        # the counter change wakes channel 5; channel 2, halted, stays out of the parked set
        await release(ctx, dut, channel=0, index=0, payload=1, wfi=0)
        await ctx.tick().repeat(6)
        assert ctx.get(dut.parked) == 0

    run(dut, tb)


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

    run(dut, tb)


def test_timestamp_release_writes_payload_then_now():
    dut = SyncpointUnit(CFG)
    writes = []

    async def tb(ctx):
        ctx.set(dut.now, 1000)
        ctx.set(dut.dma_write.ready, 0)
        await dispatch(ctx, dut, 2)
        await release(ctx, dut, channel=2, seq=1, to_counter=0, address=0x40_0000_0100,
                      payload=0x1234_5678_9ABC, wide=1, timestamp=1)
        assert ctx.get(dut.release_stall) == 0b100      # the channel is held from the post
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
            ctx.set(dut.now, 1234 + 1 + _)
        assert not ctx.get(dut.release_busy) and not ctx.get(dut.release_stall)

    run(dut, tb)
    assert writes == [(0x40_0000_0100, 0x1234_5678_9ABC, 1), (0x40_0000_0108, 1235, 1)]


def held_edges(wfi, behind=None, pbdma_channel=(6, 3)):
    """Edges a timestamp release of channel 6 stalls its channel, with the holds 5 ns
    (RELEASE_WFI), 9 ns (without) and 20 ns more while its PBDMA has entries to fetch;
    ``behind``: the PBDMAs with entries to fetch beyond their segment queue (bits). ``now``
    counts 1 ns an edge, from 100. Also checks that the unit is quiescent through the round
    trip, with ``wake_at`` its end. Returns (edge of the last write, edges stalled)."""
    dut = SyncpointUnit(CFG)
    out = {}
    waits = set()

    async def tb(ctx):
        now = 100
        ctx.set(dut.now, now)
        ctx.set(dut.timestamp_hold, 5)
        ctx.set(dut.stamp_hold, 9)
        ctx.set(dut.stamp_fetch, 20)
        ctx.set(dut.fetch_behind, behind or 0)
        for i, c in enumerate(pbdma_channel):
            ctx.set(dut.pbdma_channel[i], c)
        ctx.set(dut.dma_write.ready, 1)
        await release(ctx, dut, channel=6, to_counter=0, address=0x200, wfi=wfi, timestamp=1)
        now += 1
        ctx.set(dut.now, now)
        edges = 0
        last_write = None
        while ctx.get(dut.release_stall):
            if ctx.get(dut.dma_write.valid):
                last_write = edges
            elif last_write is not None and edges > last_write + 1:
                # the round trip: nothing to do but wait for ``now`` to reach wake_at
                wake = ctx.get(dut.wake_at)
                assert ctx.get(dut.quiescent) == (now < wake)
                waits.add(wake)
            await ctx.tick()
            edges += 1
            now += 1
            ctx.set(dut.now, now)
        out.update(last=last_write, edges=edges)
        # it ended at the edge of the cycle whose ``now`` reached the deadline
        assert waits == {now - 1}
        assert not ctx.get(dut.release_busy)
        assert ctx.get(dut.wake_at) == (1 << 64) - 1

    run(dut, tb)
    return out["last"], out["edges"]


def test_timestamp_release_holds_its_channel_for_its_round_trip_after_its_writes():
    # payload written at edge 2, timestamp at edge 3, then the round trip and one edge to
    # retire: an event's (RELEASE_WFI) 5 ns, a front-end stamp's (no WFI) 9 ns
    assert held_edges(wfi=1) == (2, 2 + 1 + 5 + 1)
    assert held_edges(wfi=0) == (2, 2 + 1 + 9 + 1)


def test_round_trip_is_longer_while_the_channels_pbdma_has_entries_to_fetch():
    # channel 6 on PBDMA 0 with entries waiting beyond its queue: 20 ns more, either kind
    assert held_edges(wfi=0, behind=0b01) == (2, 2 + 1 + 9 + 20 + 1)
    assert held_edges(wfi=1, behind=0b01) == (2, 2 + 1 + 5 + 20 + 1)
    # the other PBDMA's channel is behind, not this one's
    assert held_edges(wfi=0, behind=0b10) == (2, 2 + 1 + 9 + 1)


def test_completion_release_sets_its_counter_and_wins_the_write_port():
    dut = SyncpointUnit(CFG)

    async def tb(ctx):
        # a channel release to counter 2 and a completion releasing counter 5, same cycle
        await dispatch(ctx, dut, 1)
        await release(ctx, dut, payload=7, wfi=0, index=2)
        await stream_put(ctx, dut.compute_done, {"channel": 1, "seq": 0, "release": 1,
                                                 "index": 5, "value": 9}, within=1)
        assert ctx.get(dut.counter_data[5]) == 9
        assert ctx.get(dut.counter_data[2]) == 0        # held back a cycle
        assert ctx.get(dut.tsg_in_flight) == 0          # the completion counts as one
        await ctx.tick()
        assert ctx.get(dut.counter_data[2]) == 7

    run(dut, tb)


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

    run(dut, tb)


def poll_wake_edges(poll, resident=0, rounds=1):
    """Channels 6, 1, 4 park (in that order) on counter 3: 1 and 6 for 1, 4 for 5, on no PBDMA
    but those in ``resident``; counter 3 is set to 1 (``rounds`` times, the channels parking
    again between). ``now`` moves 1 ns an edge. Returns, per round, {channel: edges from the
    release's post to its wake-up}, None for one still parked."""
    dut = SyncpointUnit(CFG)
    out = []

    async def tb(ctx):
        now = 0

        async def tick():
            nonlocal now
            await ctx.tick()
            now += 1
            ctx.set(dut.now, now)

        ctx.set(dut.acquire_poll, poll)
        ctx.set(dut.resident, resident)
        for _ in range(rounds):
            for c, value in ((6, 1), (1, 1), (4, 5)):
                await stream_put(ctx, dut.acquire, {"channel": c, "index": 3, "value": value,
                                                    "op": SemOp.ACQ_STRICT_GEQ}, within=1)
                now += 1
                ctx.set(dut.now, now)
            await release(ctx, dut, channel=0, index=3, payload=1, wfi=0)
            woke = {}
            for edge in range(1, 4 * poll + 20):
                await tick()
                parked = ctx.get(dut.parked)
                for c in (1, 4, 6):
                    if c not in woke and not parked >> c & 1:
                        woke[c] = edge
                if 1 in woke and 6 in woke and ctx.get(dut.quiescent):
                    break
            out.append({c: woke.get(c) for c in (1, 4, 6)})
            # counter 3 back to 0 for the next round, and channel 4 let go
            await release(ctx, dut, channel=0, index=3, payload=5, wfi=0)
            for _ in range(4 * poll + 20):
                await tick()
            await release(ctx, dut, channel=0, index=3, payload=0, wfi=0)
            await tick()
            await tick()

    run(dut, tb)
    return out


def test_channels_parked_on_no_pbdma_are_polled_one_at_a_time_acquire_poll_ns_each():
    # the counter is written at the first edge; the poll of channel 1 (lowest first) starts
    # the edge after and ends at its deadline, then channel 4 (not met), then 6: a poll
    # every acquire_poll + 1 edges
    assert poll_wake_edges(10) == [{1: 12, 4: None, 6: 34}]
    assert poll_wake_edges(30) == [{1: 32, 4: None, 6: 94}]
    # on a PBDMA, the same channels are re-checked by the scanner, a cycle each
    assert poll_wake_edges(30, resident=ON_PBDMAS) == [{1: 2, 4: None, 6: 4}]


def test_the_poll_goes_round_robin_from_the_channel_after_the_last_polled():
    first, second = poll_wake_edges(10, rounds=2)
    assert first == {1: 12, 4: None, 6: 34}
    # the second round starts after 4 (polled last, at channel 4's let-go): 6, then 1
    assert second == {1: 23, 4: None, 6: 12}


def test_a_channel_put_on_a_pbdma_before_its_poll_is_still_polled():
    # channels 6, 1, 4 parked on no PBDMA; the release makes 1 and 6 due for a poll; channel 6
    # is bound to a PBDMA while channel 1 is polled: that change's scan is past, so the
    # poller must still check it (it used to be dropped, parked for ever: a lost wake-up)
    dut = SyncpointUnit(CFG)
    woke = {}

    async def tb(ctx):
        now = 0
        ctx.set(dut.acquire_poll, 10)
        for c, value in ((6, 1), (1, 1), (4, 5)):
            await stream_put(ctx, dut.acquire, {"channel": c, "index": 3, "value": value,
                                                "op": SemOp.ACQ_STRICT_GEQ}, within=1)
        await release(ctx, dut, channel=0, index=3, payload=1, wfi=0)
        for edge in range(1, 100):
            if edge == 3:
                ctx.set(dut.resident, 1 << 6)
            await ctx.tick()
            now += 1
            ctx.set(dut.now, now)
            for c in (1, 4, 6):
                if c not in woke and not ctx.get(dut.parked) >> c & 1:
                    woke[c] = edge

    run(dut, tb)
    assert set(woke) == {1, 6}
    assert woke[1] < woke[6] <= 40


def test_a_max_reduction_never_lowers_a_counter_nor_host_memory():
    dut = SyncpointUnit(CFG)
    writes = []

    async def tb(ctx):
        await release(ctx, dut, index=2, kind=ReleaseKind.SET, payload=10, wfi=0)
        await ctx.tick()
        for payload in (5, 12):
            await release(ctx, dut, index=2, kind=ReleaseKind.MAX, payload=payload, wfi=0)
            await ctx.tick()
            writes.append(ctx.get(dut.counter_data[2]))
        # to host memory: the write carries imax, for the memory's atomic to apply
        await release(ctx, dut, channel=1, index=0, address=0x4000, to_counter=0,
                      kind=ReleaseKind.MAX, payload=3, wfi=0)
        ctx.set(dut.dma_write.ready, 1)
        for _ in range(5):
            await ctx.tick()
            if ctx.get(dut.dma_write.valid):
                p = ctx.get(dut.dma_write.payload)
                writes.append((p.address, p.data, p.imax))
                break

    run(dut, tb)
    assert writes == [10, 12, (0x4000, 3, 1)]
