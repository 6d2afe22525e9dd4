"""Small helpers shared by the blocks for words with a bit per channel.

A loop of ``m.If`` over the channels, or a dynamic ``bit_select`` assigned in a clocked
domain, is what one writes naturally; for a bit per hardware channel it is hundreds of cells,
each evaluated every cycle by the simulators and timed by the FPGA tools. These build the same
functions from a few word-wide operations.
"""

from amaranth import Cat, Const, Signal, Value

__all__ = ["lowest_set", "BitVector"]


def lowest_set(bits, idx_bits, m=None):
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
    m : Module or None
        Where to compute the isolated bit once (a signal read by every reduction); without,
        the expression is repeated in each, which matters only for wide ``bits``.

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
    # bit k of the index: the positions whose index has bit k set
    masks = [sum(1 << i for i in range(n) if i >> k & 1)
             for k in range(max(1, (n - 1).bit_length()))]
    if m is None:
        masks = [Const(mask, n) for mask in masks]
    else:
        isolated = Signal(n, name="lowest_bit")
        m.d.comb += isolated.eq(lowest)
        lowest = isolated
        masks = [_constant_word(m, mask, n, f"index_bit{k}_mask") for k, mask in enumerate(masks)]
    index = [(lowest & mask).any() for mask in masks]
    return Cat(*index, Const(0, idx_bits))[:idx_bits]


def _constant_word(m, value, width, name):
    """A word that always holds ``value``, for a wide AND with it.

    Amaranth simplifies ``x & Const`` bit by bit into a concatenation of the kept bits, which
    the compiled simulator then evaluates a bit at a time: for a mask of every other bit of a
    160-bit word, 80 slices a cycle (half of the whole design's evaluation time was two such
    reductions). Held in a register that keeps its value (no reset, D = Q), the mask stays one
    word and the AND one word-wide operation; synthesis removes such a register and folds the
    constant (Yosys ``opt_dff``), so the FPGA logic is the same."""
    word = Signal(width, init=value, reset_less=True, name=name)
    m.d.sync += word.eq(word)
    return word


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

    def __init__(self, m, reg, *, set_wins=False, one_hots=None):
        self._m, self._reg, self._set_wins = m, reg, set_wins
        self._sets, self._clears = [], []
        # index expression -> its one-hot word, computed once (a dict may be shared by the
        # vectors of one module that are as wide)
        self._one_hots = {} if one_hots is None else one_hots

    def _mask(self, into, value):
        kind = "set" if into is self._sets else "clear"
        mask = Signal(len(self._reg), name=f"{self._reg.name}_{kind}{len(into)}")
        self._m.d.comb += mask.eq(value)
        into.append(mask)

    def one_hot(self, index):
        """The one-hot word of ``index``: a signal per index expression, assigned (whatever
        the branch it is first asked for in) by :meth:`commit`."""
        key = repr(Value.cast(index))
        if key not in self._one_hots:
            word = Signal(len(self._reg), name=f"one_hot{len(self._one_hots)}")
            self._one_hots[key] = [word, index, False]
        return self._one_hots[key][0]

    def set(self, index):
        self._mask(self._sets, self.one_hot(index))

    def clear(self, index):
        self._mask(self._clears, self.one_hot(index))

    def set_mask(self, mask):
        self._mask(self._sets, mask)

    def clear_mask(self, mask):
        self._mask(self._clears, mask)

    def commit(self):
        """The register's update, and the one-hot words not assigned yet; at the top level of
        the module (outside any ``m.If``)."""
        reg = self._reg
        for entry in self._one_hots.values():
            word, index, assigned = entry
            if not assigned:
                self._m.d.comb += word.eq((Const(1, len(word)) << index)[:len(word)])
                entry[2] = True
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
