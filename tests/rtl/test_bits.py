import random
import re

from amaranth import Module, Signal
from amaranth.back import rtlil
from amaranth.sim import Simulator

from gpufe.rtl.bits import lowest_set
from gpufe.rtl.config import bits_for


def lowest_set_outputs(width, patterns, in_module=False):
    """What lowest_set gives for each of ``patterns``, in Amaranth's simulator (with
    ``in_module``, given the module: its masks are then constant registers)."""
    bits, idx = Signal(width), Signal(bits_for(width))
    m = Module()
    m.d.comb += idx.eq(lowest_set(bits, len(idx), m if in_module else None))
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


def test_lowest_set_in_a_module_gives_the_same_indices():
    rng = random.Random(4)
    for width in (2, 5, 64, 160):
        patterns = [0, (1 << width) - 1] + [1 << i for i in range(width)]
        patterns += [rng.getrandbits(width) for _ in range(100)]
        expected = [(p & -p).bit_length() - 1 if p else 0 for p in patterns]
        assert lowest_set_outputs(width, patterns, in_module=True) == expected, width


def test_lowest_set_masks_each_index_bit_with_one_word_wide_and():
    # what keeps the compiled model fast: Amaranth turns `x & Const` into a concatenation of
    # single bits (CXXRTL then spends a slice and a concatenation on each), so the masks are
    # registers and each index bit is one AND of the whole word with one of them
    bits, idx = Signal(160), Signal(8)
    m = Module()
    m.d.comb += idx.eq(lowest_set(bits, len(idx), m))
    text = rtlil.convert(m, ports=[bits, idx])
    ands = re.findall(r"cell \$and \S+\n((?:    .*\n)*?)  end", text)
    masked = {k for k in range(8) for cell in ands
              if "Y_WIDTH 160" in cell and f"index_bit{k}_mask" in cell}
    assert masked == set(range(8))
