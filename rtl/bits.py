"""Small helpers shared by the blocks for words with a bit per channel.

A loop of ``m.If`` over the channels, or a dynamic ``bit_select`` assigned in a clocked
domain, is what one writes naturally; for a bit per hardware channel it is hundreds of cells,
each evaluated every cycle by the simulators and timed by the FPGA tools. These build the same
functions from a few word-wide operations.
"""

from amaranth import Cat, Const, Mux, Signal, Value

__all__ = ["lowest_set", "BitVector"]


def lowest_set(bits, idx_bits):
    """Index of the lowest set bit of ``bits`` (0 when none is set).

    The lowest set bit is isolated as ``bits & -bits`` (one subtraction: the FPGA's carry
    chain), and each bit ``k`` of its index is whether that one-hot word meets the positions
    whose index has bit ``k`` set: ``idx_bits`` masked reductions. A handful of word-wide
    operations, whatever the width, where a tree of 2:1 multiplexers would be hundreds of
    cells for a bit per channel.

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
    n = len(bits)
    if n == 1:
        return Const(0, idx_bits)
    lowest = bits & (~bits + 1)[:n]
    index = [(lowest & Const(sum(1 << i for i in range(n) if i >> k & 1), n)).any()
             for k in range(max(1, (n - 1).bit_length()))]
    return Cat(*index, Const(0, idx_bits))[:idx_bits]


class BitVector:
    """A register with a bit per item, set and cleared at run-time indices from several places
    in one cycle.

    ``reg.bit_select(i, 1).eq(v)`` in a clocked domain is a demultiplexer: one assignment per
    bit of ``reg``, which for a bit per channel is hundreds of cells for the compiler and the
    simulator to evaluate. Here each place that sets or clears a bit drives a one-hot mask of
    its own (a constant shifted by the index: one wide operation), valid in the branch it is
    written in and 0 elsewhere, and the register takes every mask at the clock edge. A bit
    both set and cleared in one cycle ends cleared, or set with ``set_wins``.

    Use :meth:`set`, :meth:`clear` (and :meth:`clear_mask`) inside ``m.If`` blocks as one would
    write the assignments, then :meth:`commit` once, after the last of them; nothing else may
    assign ``reg``.
    """

    def __init__(self, m, reg, *, set_wins=False):
        self._m, self._reg, self._set_wins = m, reg, set_wins
        self._sets, self._clears = [], []

    def _mask(self, into, value):
        kind = "set" if into is self._sets else "clear"
        mask = Signal(len(self._reg), name=f"{self._reg.name}_{kind}{len(into)}")
        self._m.d.comb += mask.eq(value)
        into.append(mask)

    def _one_hot(self, index):
        return (Const(1, len(self._reg)) << index)[:len(self._reg)]

    def set(self, index):
        self._mask(self._sets, self._one_hot(index))

    def clear(self, index):
        self._mask(self._clears, self._one_hot(index))

    def clear_mask(self, mask):
        self._mask(self._clears, mask)

    def commit(self):
        reg = self._reg
        sets = _or(self._sets) if self._sets else Const(0, len(reg))
        clears = _or(self._clears) if self._clears else Const(0, len(reg))
        if self._set_wins:
            self._m.d.sync += reg.eq((reg & ~clears) | sets)
        else:
            self._m.d.sync += reg.eq((reg | sets) & ~clears)


def _or(values):
    out = values[0]
    for v in values[1:]:
        out = out | v
    return out
