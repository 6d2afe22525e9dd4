"""Small combinational helpers shared by the blocks, built as balanced trees.

A chain of ``Mux`` as long as the channel count is what a loop of ``m.If`` writes naturally
and what an FPGA times worst: N levels of logic where log2(N) will do.
"""

from amaranth import Cat, Const, Mux, Value

__all__ = ["lowest_set"]


def lowest_set(bits, idx_bits):
    """Index of the lowest set bit of ``bits`` (0 when none is set), as a balanced tree.

    Combinational: log2(len(bits)) levels of 2:1 multiplexers, where a chain of ``Mux`` would
    take len(bits) levels.

    Parameters
    ----------
    bits : Value
        The bits to search.
    idx_bits : int
        Width of the result, at least 1; the index is truncated to it (``bits_for(len(bits))``
        holds every index).

    Returns
    -------
    Value
        ``idx_bits`` wide: the index of the lowest set bit of ``bits``, or 0 when none is set.
    """
    if not isinstance(bits, Value):
        raise TypeError(f"lowest_set: bits must be an Amaranth Value, not {bits!r}")
    if not isinstance(idx_bits, int) or isinstance(idx_bits, bool):
        raise TypeError(f"lowest_set: idx_bits must be an int, not {idx_bits!r}")
    if idx_bits < 1:
        raise ValueError(f"lowest_set: idx_bits must be at least 1, not {idx_bits}")
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
