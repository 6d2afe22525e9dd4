import random

import pytest

from gpufe.rtl.stream_mux import StreamMux
from tests.helpers import simulate, stream_put, stream_get


def source(port, values, seed=None):
    """A testbench putting ``values`` on ``port``; with a seed, pausing now and then."""
    async def tb(ctx):
        gaps = random.Random(seed)
        for v in values:
            if seed is not None and gaps.random() < 0.3:
                await ctx.tick().repeat(gaps.randint(1, 5))
            await stream_put(ctx, port, v)
    return tb


def test_both_sources_offering_take_turns_one_payload_a_cycle():
    dut = StreamMux(16)
    got = []

    async def sink(ctx):
        got.append(await stream_get(ctx, dut.out))
        for _ in range(11):
            got.append(await stream_get(ctx, dut.out, within=1))    # no bubble

    simulate(dut, source(dut.a, [0xA0 + i for i in range(6)]),
             source(dut.b, [0xB0 + i for i in range(6)]), sink)
    assert got == [v for i in range(6) for v in (0xA0 + i, 0xB0 + i)]


def test_a_source_not_chosen_waits_one_cycle_then_keeps_the_output():
    dut = StreamMux(8)
    edges = []

    async def tb(ctx):
        ctx.set(dut.out.ready, 1)
        for v in (1, 2, 3):
            edges.append(await stream_put(ctx, dut.b, v))

    simulate(dut, tb)
    assert edges == [2, 1, 1]           # `a` is chosen after reset


def test_payload_stays_on_the_output_until_taken_under_back_pressure():
    rng = random.Random(5)
    dut = StreamMux(16)
    sent_a = [0x1000 + i for i in range(40)]
    sent_b = [0x2000 + i for i in range(40)]
    got, held_checked = [], []

    async def sink(ctx):
        while len(got) < len(sent_a) + len(sent_b):
            if rng.random() < 0.5:
                await ctx.tick().repeat(rng.randint(1, 4))      # not ready for a while
            got.append(await stream_get(ctx, dut.out))

    async def monitor(ctx):
        held = None
        async for _, _, valid, ready, payload in ctx.tick().sample(
                dut.out.valid, dut.out.ready, dut.out.payload):
            if held is not None:
                assert valid and payload == held, (held, valid, payload)
                held_checked.append(held)
            held = payload if valid and not ready else None

    simulate(dut, source(dut.a, sent_a, seed=1), source(dut.b, sent_b, seed=2), sink,
             processes=[monitor])
    assert [v for v in got if v < 0x2000] == sent_a
    assert [v for v in got if v >= 0x2000] == sent_b
    assert len(held_checked) > 20       # back-pressure really held payloads


def test_stream_put_within_fails_when_the_sink_is_not_ready():
    dut = StreamMux(8)

    async def tb(ctx):
        await stream_put(ctx, dut.a, 7, within=3)

    with pytest.raises(AssertionError, match="not taken within 3"):
        simulate(dut, tb)
