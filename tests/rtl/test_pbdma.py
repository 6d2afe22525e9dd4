"""PbdmaUnits: binding channels, the segment queue and its write-backs, switch-out policies."""

from dataclasses import replace

from amaranth.sim import Simulator

from gpufe.rtl.config import SMALL
from gpufe.rtl.pbdma import PbdmaUnits, PbdmaState
from gpufe.rtl.runlist import NEVER

ONE = replace(SMALL, pbdmas=1)
ALL = (1 << SMALL.channels) - 1


def bench(cfg, body, contexts=None, load_ns=30, save_ns=20):
    """Run ``body(ctx, dut, tick)`` against a PbdmaUnits whose ring contexts come from
    ``contexts`` (channel -> dict of ring_context_layout fields; ring of 16 entries by
    default). ``tick()`` advances one cycle and `now` by 1 ns, answering ``bind_context``
    and ``put`` lookups as a channel table would, and returns the write-backs of that cycle."""
    dut = PbdmaUnits(cfg)
    contexts = contexts or {}

    def ring(c):
        d = {"base": 0x1000 * (c + 1), "entries_log2": 4, "put": 0, "get": 0,
             "seg_address": 0, "seg_left": 0}
        d.update(contexts.get(c, {}))
        return d

    async def tb(ctx):
        now = [0]
        ctx.set(dut.ctx_load, load_ns)
        ctx.set(dut.ctx_save, save_ns)
        ctx.set(dut.served, ALL)
        ctx.set(dut.prio_mask[0], ALL)

        def lookups():
            for f, v in ring(ctx.get(dut.bind_channel)).items():
                ctx.set(getattr(dut.bind_context, f), v)
            for i in range(cfg.pbdmas):
                ctx.set(dut.put[i], ring(ctx.get(dut.channel[i]))["put"])

        async def tick():
            lookups()
            wb = None
            if ctx.get(dut.writeback.valid):
                wb = {f: ctx.get(getattr(dut.writeback.payload, f))
                      for f in ("channel", "get", "save", "seg_address", "seg_left")}
            await ctx.tick()
            now[0] += 1
            ctx.set(dut.now, now[0])
            lookups()
            return wb

        tick.settle = lookups
        await body(ctx, dut, tick, now)

    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(tb)
    sim.run()


def test_a_waiting_channel_is_loaded_for_ctx_load_ns_then_fetched_from_its_ring_position():
    async def body(ctx, dut, tick, now):
        ctx.set(dut.pending, 1 << 5)
        assert ctx.get(dut.bind_channel) == 5
        await tick()
        assert ctx.get(dut.channel[0]) == 5 and ctx.get(dut.resident) == 1 << 5
        assert ctx.get(dut.state[0]) == PbdmaState.LOAD
        assert not ctx.get(dut.running[0]) and ctx.get(dut.fetch_halt[0])
        assert ctx.get(dut.wake_at) == 30 and ctx.get(dut.quiescent)
        while not ctx.get(dut.running[0]):
            await tick()
        assert now[0] == 31       # the edge after `now` reaches the load's deadline (30)
        assert ctx.get(dut.fetch_get[0]) == 3 and ctx.get(dut.gp_base[0]) == 0x6000
        assert ctx.get(dut.fetch_pending[0])        # GP_PUT 7 != 3
    bench(ONE, body, {5: {"put": 7, "get": 3}})


def test_entries_wait_behind_as_soon_as_more_are_unfetched_than_the_queue_has_room_for():
    # fetch_behind (a time stamp's round trip waits behind the prefetch) counts the entries
    # still to fetch against the room left, from the first cycle after a load, not once the
    # queue has filled
    d = ONE.pbdma_segments

    async def body(ctx, dut, tick, now):
        ctx.set(dut.pending, (1 << 5) | (1 << 6))
        await run_loaded(ctx, dut, tick)
        assert ctx.get(dut.channel[0]) == 5
        assert ctx.get(dut.fetch_pending[0]) and ctx.get(dut.fetch_behind[0])
        for k in range(d):                   # the queue fills: still behind
            advance(ctx, dut, 0, 0x100 * k, 4)
            await tick()
        ctx.set(dut.advance.valid, 0)
        assert not ctx.get(dut.fetch_pending[0]) and ctx.get(dut.fetch_behind[0])
    bench(ONE, body, {5: {"put": d + 1}})

    async def exact(ctx, dut, tick, now):
        ctx.set(dut.pending, 1 << 5)
        await run_loaded(ctx, dut, tick)
        # room for every entry left: nothing waits beyond the queue
        assert ctx.get(dut.fetch_pending[0]) and not ctx.get(dut.fetch_behind[0])
        advance(ctx, dut, 0, 0x100, 4)
        await tick()
        ctx.set(dut.advance.valid, 0)
        assert not ctx.get(dut.fetch_behind[0])
    bench(ONE, exact, {5: {"put": d}})


def test_a_channel_switched_out_mid_segment_resumes_with_the_rest_of_it():
    async def body(ctx, dut, tick, now):
        ctx.set(dut.pending, 1 << 2)
        tick.settle()
        assert ctx.get(dut.load.valid)
        assert ctx.get(dut.load.payload.address) == 0x4444
        assert ctx.get(dut.load.payload.length) == 9
        await tick()
        # the partial entry (index 3) is decoded before the entries after it are fetched
        assert ctx.get(dut.fetch_get[0]) == 4
    bench(ONE, body, {2: {"put": 6, "get": 3, "seg_address": 0x4444, "seg_left": 9}})


def test_the_greater_priority_is_bound_first_and_a_level_takes_turns():
    async def body(ctx, dut, tick, now):
        ctx.set(dut.prio_mask[0], ALL & ~(1 << 6))
        ctx.set(dut.prio_mask[1], 1 << 6)
        ctx.set(dut.pending, (1 << 1) | (1 << 3) | (1 << 6))
        await tick()
        assert ctx.get(dut.channel[0]) == 6 and ctx.get(dut.resident) == 1 << 6
        # the context port loads one channel at a time: the second PBDMA waits for it
        while ctx.get(dut.state[0]) == PbdmaState.LOAD:
            assert ctx.get(dut.state[1]) == PbdmaState.FREE
            await tick()
        await tick()
        assert ctx.get(dut.channel[1]) == 1 and ctx.get(dut.state[1]) == PbdmaState.LOAD
        assert now[0] == 32       # load 6 at 0..30 (RUN from 31), then channel 1's bind
    bench(SMALL, body, {c: {"put": 1} for c in (1, 3, 6)})


def advance(ctx, dut, pbdma, address, length):
    ctx.set(dut.advance.valid, 1)
    ctx.set(dut.advance.payload.pbdma, pbdma)
    ctx.set(dut.advance.payload.address, address)
    ctx.set(dut.advance.payload.length, length)


async def run_loaded(ctx, dut, tick):
    while not ctx.get(dut.running[0]):
        await tick()


def test_popping_an_entry_to_its_end_retires_it_and_writes_gp_get_back():
    async def body(ctx, dut, tick, now):
        ctx.set(dut.pending, 1 << 4)
        await tick()
        await run_loaded(ctx, dut, tick)
        advance(ctx, dut, 0, 0x8000, 2)           # entry 0: two dwords
        await tick()
        advance(ctx, dut, 0, 0, 0)                # entry 1: a NOP control entry behind it
        await tick()
        ctx.set(dut.advance.valid, 0)
        assert ctx.get(dut.fetch_get[0]) == 2
        ctx.set(dut.pop.valid, 1)
        ctx.set(dut.pop.payload, 0)
        assert await tick() is None
        wbs = [await tick()]                      # the last dword: entry 0 and the NOP retire
        ctx.set(dut.pop.valid, 0)
        wbs.append(await tick())
        wbs = [w for w in wbs if w]
        assert wbs == [{"channel": 4, "get": 2, "save": 0, "seg_address": 0, "seg_left": 0}]
        # a control entry with nothing before it retires as it is read
        advance(ctx, dut, 0, 0, 0)
        await tick()
        ctx.set(dut.advance.valid, 0)
        assert (await tick())["get"] == 3
    bench(ONE, body, {4: {"put": 5}})


def test_a_stuck_channel_is_drained_saved_at_its_decode_position_and_freed():
    async def body(ctx, dut, tick, now):
        ctx.set(dut.pending, 1 << 1)
        await tick()
        await run_loaded(ctx, dut, tick)
        advance(ctx, dut, 0, 0x9000, 5)            # entry 0
        await tick()
        advance(ctx, dut, 0, 0xA000, 4)            # entry 1, fetched beyond
        await tick()
        ctx.set(dut.advance.valid, 0)
        ctx.set(dut.pop.valid, 1)
        ctx.set(dut.pop.payload, 0)
        await tick()
        await tick()                               # two dwords of entry 0 decoded
        ctx.set(dut.pop.valid, 0)
        # parked, and another channel has work: switch out; the CP still holds the context
        ctx.set(dut.parked, 1 << 1)
        ctx.set(dut.stuck, 1 << 1)
        ctx.set(dut.pending, (1 << 1) | (1 << 7))
        ctx.set(dut.cp_holding, 1)
        ctx.set(dut.in_flight, 1)
        await tick()
        assert ctx.get(dut.state[0]) == PbdmaState.DRAIN and ctx.get(dut.fetch_halt[0])
        for _ in range(3):
            assert await tick() is None            # draining: the read and the CP
        ctx.set(dut.in_flight, 0)
        assert await tick() is None
        ctx.set(dut.cp_holding, 0)
        assert ctx.get(dut.discard[0]) and ctx.get(dut.drop.valid)
        wb = await tick()
        assert wb == {"channel": 1, "get": 0, "save": 1, "seg_address": 0x9008, "seg_left": 3}
        saved_at = now[0]
        assert ctx.get(dut.wake_at) == saved_at - 1 + 20
        while ctx.get(dut.resident) & (1 << 1):
            await tick()
        assert now[0] == saved_at + 20            # the edge after the save's deadline
        # free again: the waiting channel 7 is loaded next (the parked one is not)
        await tick()
        assert ctx.get(dut.channel[0]) == 7
    bench(ONE, body, {1: {"put": 2}, 7: {"put": 1}})


def test_a_channel_in_error_is_dropped_without_a_save():
    async def body(ctx, dut, tick, now):
        ctx.set(dut.pending, 1 << 3)
        await tick()
        await run_loaded(ctx, dut, tick)
        ctx.set(dut.error, 1 << 3)
        seen = [await tick() for _ in range(4)]
        assert seen == [None] * 4
        assert not ctx.get(dut.resident)
    bench(ONE, body, {3: {"put": 2}})


def test_a_channel_whose_tsg_is_no_longer_served_leaves_and_others_are_not_loaded():
    async def body(ctx, dut, tick, now):
        ctx.set(dut.pending, (1 << 0) | (1 << 2))
        await tick()
        await run_loaded(ctx, dut, tick)
        ctx.set(dut.served, 0)
        saves = [w for w in [await tick() for _ in range(6)] if w]
        assert [w["save"] for w in saves] == [1]
        for _ in range(30):
            await tick()
        assert not ctx.get(dut.resident) and ctx.get(dut.quiescent)
        assert ctx.get(dut.wake_at) == NEVER
    bench(ONE, body, {0: {"put": 1}, 2: {"put": 1}})


def test_an_idle_channel_keeps_its_pbdma_until_another_waits_then_leaves_with_no_save_wait():
    async def body(ctx, dut, tick, now):
        ctx.set(dut.pending, 1 << 5)
        await tick()
        await run_loaded(ctx, dut, tick)
        ctx.set(dut.pending, 0)                    # its work is done (GP_PUT == GP_GET)
        for _ in range(10):
            assert await tick() is None
        assert ctx.get(dut.running[0]) and ctx.get(dut.quiescent)
        ctx.set(dut.pending, 1 << 6)
        await tick()
        assert not ctx.get(dut.running[0])         # draining for channel 6
        # it ran dry: its GP_GET is saved, with no ctx_save wait (20 ns in this bench)
        wb = None
        while wb is None:
            wb = await tick()
        assert wb["channel"] == 5 and wb["save"] == 1
        saved_at = now[0]
        while ctx.get(dut.resident) & (1 << 5):
            await tick()
        assert now[0] == saved_at + 1
        await tick()
        assert ctx.get(dut.channel[0]) == 6 and ctx.get(dut.state[0]) == PbdmaState.LOAD
    bench(ONE, body, {5: {"put": 0}, 6: {"put": 1}})


def test_with_no_channel_ready_a_free_pbdma_takes_a_parked_one_and_gives_it_up_for_a_ready_one():
    async def body(ctx, dut, tick, now):
        # channel 2 is parked on an acquire (as a TSG's channel is when its context comes
        # back), on no PBDMA, and nothing else has work: it is loaded, to wait there
        ctx.set(dut.pending, 1 << 2)
        ctx.set(dut.parked, 1 << 2)
        ctx.set(dut.stuck, 1 << 2)
        await tick()
        assert ctx.get(dut.channel[0]) == 2 and ctx.get(dut.state[0]) == PbdmaState.LOAD
        await run_loaded(ctx, dut, tick)
        for _ in range(10):
            await tick()
        assert ctx.get(dut.running[0]) and ctx.get(dut.resident) == 1 << 2
        # a channel ready to run: the parked one leaves for it
        ctx.set(dut.pending, (1 << 2) | (1 << 4))
        while ctx.get(dut.resident) & (1 << 2):
            await tick()
        await tick()
        assert ctx.get(dut.channel[0]) == 4 and ctx.get(dut.state[0]) == PbdmaState.LOAD
    bench(ONE, body, {2: {"put": 1}, 4: {"put": 1}})


def test_a_ready_channel_is_bound_before_a_parked_one():
    async def body(ctx, dut, tick, now):
        ctx.set(dut.pending, (1 << 1) | (1 << 6))
        ctx.set(dut.parked, 1 << 1)
        ctx.set(dut.stuck, 1 << 1)
        assert ctx.get(dut.bind_channel) == 6
        await tick()
        assert ctx.get(dut.channel[0]) == 6
    bench(SMALL, body, {1: {"put": 1}, 6: {"put": 1}})
