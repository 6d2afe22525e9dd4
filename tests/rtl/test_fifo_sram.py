import dataclasses
import random
from collections import deque

import pytest

from gpufe.rtl.config import SMALL
from gpufe.rtl.fifo_sram import PartitionedFifo
from tests.helpers import simulate, stream_put

CFG = SMALL                                        # 2 PBDMAs, 8 slots
CFG4 = dataclasses.replace(SMALL, pbdmas=4)        # 4 partitions in the same 8 slots


def check_table(ctx, dut, cfg=CFG):
    base = [ctx.get(dut.partition_base[p]) for p in range(cfg.pbdmas)]
    slots = [ctx.get(dut.partition_slots[p]) for p in range(cfg.pbdmas)]
    taken = set()
    for b, s in zip(base, slots):
        run = set(range(b, b + s))
        assert not run & taken and all(x < cfg.n_slots for x in run)
        taken |= run
    active = sum(1 for s in slots if s)
    # the active count is a counter kept in step with the table, not recomputed from it
    assert ctx.get(dut.active_count) == active
    # the guarantee that lets any newcomer start at once
    assert sum(slots) <= cfg.n_slots - (cfg.pbdmas - active)
    return slots


# tables seen at least: with 2 partitions in 8 slots there are few shapes to take
@pytest.mark.parametrize("cfg, shapes", [(CFG, 3), (CFG4, 6)], ids=["2pbdmas", "4pbdmas"])
def test_random_traffic_with_changing_active_set_keeps_every_dword_in_order(cfg, shapes):
    rng = random.Random(7)
    dut = PartitionedFifo(cfg)
    n = cfg.pbdmas
    written = [0] * n                     # next sequence number to write per PBDMA
    expected = [deque() for _ in range(n)]
    popped = [0] * n
    reshapes = set()

    async def tb(ctx):
        pending_writes = deque()           # (pbdma, value) reserved, not yet written
        want = 0
        last_pop = None
        for cycle in range(3000):
            if cycle % 200 == 0:
                want = rng.randrange(1, 1 << n)
            # keep wanting while a PBDMA still has data or reserved writes
            busy = sum(1 << c for c in range(n)
                       if expected[c] or any(w[0] == c for w in pending_writes))
            ctx.set(dut.want, want | busy)
            reshapes.add(tuple(check_table(ctx, dut, cfg)))

            # pop a random nonempty PBDMA; check the word popped last cycle
            if last_pop is not None:
                c = last_pop
                assert ctx.get(dut.read_data) == expected[c].popleft()
                popped[c] += 1
            nonempty = [c for c in range(n) if ctx.get(dut.nonempty) >> c & 1]
            last_pop = None
            if nonempty and rng.random() < 0.6:
                last_pop = rng.choice(nonempty)
                ctx.set(dut.read_pbdma, last_pop)
            ctx.set(dut.read_pop, last_pop is not None)

            # reserve a burst on a PBDMA with room (as the fetcher does)
            ctx.set(dut.reserve.valid, 0)
            room = [c for c in range(n)
                    if (want >> c & 1) and ctx.get(dut.free[c]) > 0]
            if room and rng.random() < 0.5:
                c = rng.choice(room)
                k = rng.randint(1, min(cfg.dma_burst, ctx.get(dut.free[c])))
                ctx.set(dut.reserve.valid, 1)
                ctx.set(dut.reserve.payload, {"pbdma": c, "count": k})
                for _ in range(k):
                    pending_writes.append((c, (c << 24) | written[c]))
                    written[c] += 1

            # write one reserved dword a cycle, a few cycles late
            ctx.set(dut.write.valid, 0)
            if pending_writes and rng.random() < 0.8:
                c, value = pending_writes.popleft()
                ctx.set(dut.write.valid, 1)
                ctx.set(dut.write.payload, {"pbdma": c, "data": value})
                expected[c].append(value)
            await ctx.tick()

    simulate(dut, tb)
    assert sum(popped) > 1000
    assert all(p > 50 for p in popped)
    assert len(reshapes) >= shapes      # the table was reprogrammed many times


def test_newcomer_gets_a_slot_while_others_hold_data():
    cfg = CFG4
    dut = PartitionedFifo(cfg)

    async def tb(ctx):
        # PBDMA 0 alone takes its share and fills it; nothing ever pops it
        ctx.set(dut.want, 0b0001)
        await ctx.tick().repeat(cfg.n_slots + 4)
        free0 = ctx.get(dut.free[0])
        assert free0 > cfg.slot_words            # more than one slot
        await stream_put(ctx, dut.reserve, {"pbdma": 0, "count": free0}, within=1)
        for i in range(free0):
            await stream_put(ctx, dut.write, {"pbdma": 0, "data": i}, within=1)
        # every other PBDMA arrives; each gets room without PBDMA 0 draining
        ctx.set(dut.want, 0b1111)
        await ctx.tick().repeat(3 * (cfg.n_slots + 4))
        for c in (1, 2, 3):
            assert ctx.get(dut.free[c]) >= cfg.slot_words, c
        assert ctx.get(dut.level[0]) == free0
        slots = check_table(ctx, dut, cfg)
        assert slots[0] > 1                       # not shrunk: it holds data
        assert ctx.get(dut.free[0]) == 0          # but it takes nothing more

    simulate(dut, tb)


def test_a_pbdma_between_channels_keeps_its_run_while_the_free_slots_cover_a_newcomer():
    """Two PBDMAs taking turns (a channel switched out of one, another loaded into the other):
    the idle one keeps its run and the other allocates from the free slots, so neither waits
    for a scan again at the next turn; with four PBDMAs in 8 slots the free slots do not cover
    a newcomer's share, and an idle run is given back for it."""
    dut = PartitionedFifo(CFG)

    async def tb(ctx):
        ctx.set(dut.want, 0b01)
        await ctx.tick().repeat(CFG.n_slots + 4)
        first = check_table(ctx, dut)
        assert first[0] > 0 and first[1] == 0
        for turn in range(4):
            ctx.set(dut.want, 0b10 if turn % 2 == 0 else 0b01)
            await ctx.tick().repeat(CFG.n_slots + 4)
            slots = check_table(ctx, dut)
            assert slots[0] == first[0] and slots[1] > 0, (turn, slots)
        # the turns cost no scan once both hold a run: the allocator stays idle
        ctx.set(dut.want, 0b10)
        await ctx.tick()
        assert ctx.get(dut.quiescent)

    simulate(dut, tb)

    dut4 = PartitionedFifo(CFG4)

    async def tb4(ctx):
        ctx.set(dut4.want, 0b0011)
        await ctx.tick().repeat(2 * (CFG4.n_slots + 4))
        before = check_table(ctx, dut4, CFG4)
        assert before[0] > 0 and before[1] > 0
        # PBDMAs 0 and 1 go idle, 2 and 3 arrive: the idle runs make room for them
        ctx.set(dut4.want, 0b1100)
        await ctx.tick().repeat(4 * (CFG4.n_slots + 4))
        after = check_table(ctx, dut4, CFG4)
        assert after[2] > 0 and after[3] > 0
        assert sum(after) <= CFG4.n_slots

    simulate(dut4, tb4)


def test_discard_empties_a_partition_and_drops_its_late_writes():
    dut = PartitionedFifo(CFG)

    async def tb(ctx):
        ctx.set(dut.want, 0b0011)
        await ctx.tick().repeat(2 * CFG.n_slots + 8)
        for c in (0, 1):
            await stream_put(ctx, dut.reserve, {"pbdma": c, "count": 4}, within=1)
        for c in (0, 1):
            for i in range(2):
                await stream_put(ctx, dut.write, {"pbdma": c, "data": 10 * c + i}, within=1)
        ctx.set(dut.discard, 0b01)
        for c in (0, 1):
            for i in range(2, 4):
                await stream_put(ctx, dut.write, {"pbdma": c, "data": 10 * c + i}, within=1)
        await ctx.tick()
        assert ctx.get(dut.level[0]) == 0 and not ctx.get(dut.nonempty) & 1
        assert ctx.get(dut.level[1]) == 4
        got = []
        for _ in range(4):
            ctx.set(dut.read_pbdma, 1)
            ctx.set(dut.read_pop, 1)
            await ctx.tick()
            got.append(ctx.get(dut.read_data))
        assert got == [10, 11, 12, 13]

    simulate(dut, tb)
