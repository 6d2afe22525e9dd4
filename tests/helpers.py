"""Helpers shared by the tests: running a component in Amaranth's simulator."""

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


def mmio_channel(channel, reg):
    from gpufe.rtl.layouts import CHANNEL_REGS
    return channel * CHANNEL_REGS + reg.value


def mmio_global(reg):
    from gpufe.rtl.layouts import GLOBAL_PAGE
    return GLOBAL_PAGE + reg.value
