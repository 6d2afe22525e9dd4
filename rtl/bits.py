"""Small combinational helpers shared by the blocks, built as balanced trees.

A chain of ``Mux`` as long as the channel count is what a loop of ``m.If`` writes naturally
and what an FPGA times worst: N levels of logic where log2(N) will do.
"""

from amaranth import Cat, Const, Mux


def lowest_set(bits, idx_bits):
    """Index of the lowest set bit of ``bits`` (0 when none is set), ``idx_bits`` wide;
    log2(len(bits)) levels of 2:1 multiplexers."""
    items = [bits[i] for i in range(len(bits))]
    while len(items) & (len(items) - 1) or len(items) < 2:
        items.append(Const(0, 1))

    def tree(b):
        # (any bit of b set, index of the lowest set bit of b; all ones when none is)
        if len(b) == 2:
            return b[0] | b[1], ~b[0]
        h = len(b) // 2
        lo_any, lo_idx = tree(b[:h])
        hi_any, hi_idx = tree(b[h:])
        return lo_any | hi_any, Cat(Mux(lo_any, lo_idx, hi_idx), ~lo_any)

    any_set, idx = tree(items)
    return Mux(any_set, idx, 0)[:idx_bits]
