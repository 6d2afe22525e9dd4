"""Simulation backends for the FrontEnd: the harness's narrow interface to the RTL.

A backend runs the clock and calls the harness back before the edges it must see:

    backend.run(on_cycle)

``on_cycle(io)`` pokes inputs with ``io.set(port, value)`` and peeks settled outputs with
``io.get(port)`` (what the coming edge will transfer), then returns how many cycles the RTL
may run on its own before the next call (``0`` ends the run). While running on its own the
inputs stay as set, ``now`` advances by ``io.cycle_ns`` per cycle, and the backend stops early
as soon as the RTL needs the host: a DMA request or write, a dispatch, or ``idle``.
``io.cycles`` counts the cycles run so far.

:class:`PysimBackend` is Amaranth's Python simulator. A compiled backend implements the same
``run`` with the free-running loop in C.
"""

from amaranth.sim import Simulator


class PysimBackend:
    name = "pysim"

    def __init__(self, dut, cycle_ns=1.0, vcd=None):
        self.dut = dut
        self.cycle_ns = cycle_ns
        self.vcd = vcd
        self.cycles = 0
        self.time_ns = 0.0            # the harness's time for the coming edge, set by on_cycle

    def _needs_host(self, ctx):
        d = self.dut
        return (ctx.get(d.dma_read_req.valid) or ctx.get(d.dma_write.valid)
                or ctx.get(d.compute.valid) or ctx.get(d.copy.valid) or ctx.get(d.idle))

    def run(self, on_cycle):
        sim = Simulator(self.dut)
        sim.add_clock(1e-9)
        backend = self

        class IO:
            cycle_ns = self.cycle_ns

            def __init__(self, ctx):
                self.ctx = ctx

            def set(self, port, value):
                self.ctx.set(port, value)

            def get(self, port):
                return self.ctx.get(port)

            @property
            def cycles(self):
                return backend.cycles

        async def testbench(ctx):
            io = IO(ctx)
            while True:
                free = on_cycle(io)
                if not free:
                    return
                await ctx.tick()
                backend.cycles += 1
                t = backend.time_ns
                for _ in range(free - 1):
                    if self._needs_host(ctx):
                        break
                    t += self.cycle_ns
                    ctx.set(self.dut.now, int(t))
                    await ctx.tick()
                    backend.cycles += 1

        sim.add_testbench(testbench)
        if self.vcd:
            with sim.write_vcd(self.vcd):
                sim.run()
        else:
            sim.run()
