import random

from amaranth import Module, Signal
from amaranth.sim import Simulator

from gpufe.rtl.bits import lowest_set
from gpufe.rtl.config import bits_for


def lowest_set_outputs(width, patterns):
    """What lowest_set gives for each of ``patterns``, in Amaranth's simulator."""
    bits, idx = Signal(width), Signal(bits_for(width))
    m = Module()
    m.d.comb += idx.eq(lowest_set(bits, len(idx)))
    out = []

    async def tb(ctx):
        for p in patterns:
            ctx.set(bits, p)
            out.append(ctx.get(idx))

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    return out


def test_lowest_set_is_the_index_of_the_lowest_one_bit_or_zero():
    rng = random.Random(3)
    for width in (1, 2, 3, 5, 8, 13, 32, 64, 160, 256):
        patterns = [0, (1 << width) - 1] + [1 << i for i in range(width)]
        patterns += [rng.getrandbits(width) for _ in range(200)]
        expected = [(p & -p).bit_length() - 1 if p else 0 for p in patterns]
        assert lowest_set_outputs(width, patterns) == expected, width
