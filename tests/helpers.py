"""Helpers shared by the tests: running a component in Amaranth's simulator, driving its
valid/ready streams from a testbench, MMIO addresses."""

from amaranth.sim import Simulator


def simulate(dut, *testbenches, processes=(), vcd=None, traces=()):
    """Run ``testbenches`` (async functions of ctx) against ``dut`` to completion."""
    sim = Simulator(dut)
    sim.add_clock(1e-9)
    for tb in testbenches:
        sim.add_testbench(tb)
    for p in processes:
        sim.add_process(p)
    if vcd:
        with sim.write_vcd(vcd, traces=traces):
            sim.run()
    else:
        sim.run()
    return sim


# -- valid/ready streams (amaranth.lib.stream interfaces) from a testbench --------------------
#
# A transfer happens at a clock edge where valid and ready are both high, as sampled at that
# edge. The helpers leave the stream as they found it (valid or ready low) when they return,
# right after the edge that transferred, so calls back to back keep valid (or ready) high on
# every edge: one transfer a cycle, exactly as a hand-written loop that holds it high.

async def stream_put(ctx, stream, payload, *, within=None):
    """Offer ``payload`` on ``stream`` (the testbench is the producer) until a clock edge takes
    it; returns the number of edges that took (1: taken at the first edge).

    ``within``: fail with an AssertionError if it is not taken within that many edges (1: the
    sink must be ready at once).
    """
    ctx.set(stream.payload, payload)
    ctx.set(stream.valid, 1)
    edges = 0
    while True:
        _, _, ready = await ctx.tick().sample(stream.ready)
        edges += 1
        if ready:
            break
        if within is not None and edges >= within:
            ctx.set(stream.valid, 0)
            raise AssertionError(f"stream_put: payload {payload!r} not taken within "
                                 f"{within} cycle(s)")
    ctx.set(stream.valid, 0)
    return edges


async def stream_get(ctx, stream, *, within=None):
    """Hold ``ready`` on ``stream`` (the testbench is the consumer) until a clock edge
    transfers a payload; returns that payload.

    ``within``: fail with an AssertionError if nothing is transferred within that many edges.
    """
    ctx.set(stream.ready, 1)
    edges = 0
    while True:
        _, _, valid, payload = await ctx.tick().sample(stream.valid, stream.payload)
        edges += 1
        if valid:
            break
        if within is not None and edges >= within:
            ctx.set(stream.ready, 0)
            raise AssertionError(f"stream_get: nothing offered within {within} cycle(s)")
    ctx.set(stream.ready, 0)
    return payload


async def stream_collect(ctx, stream, cycles):
    """Hold ``ready`` on ``stream`` for exactly ``cycles`` clock edges; returns the payloads
    transferred at those edges, in order."""
    ctx.set(stream.ready, 1)
    taken = []
    for _ in range(cycles):
        _, _, valid, payload = await ctx.tick().sample(stream.valid, stream.payload)
        if valid:
            taken.append(payload)
    ctx.set(stream.ready, 0)
    return taken


def mmio_channel(channel, reg):
    from gpufe.rtl.layouts import CHANNEL_REGS
    return channel * CHANNEL_REGS + reg.value


def mmio_global(reg):
    from gpufe.rtl.layouts import GLOBAL_PAGE
    return GLOBAL_PAGE + reg.value
