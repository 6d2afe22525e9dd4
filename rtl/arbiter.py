"""Priority arbiter with round robin within a level.

Combinational: ``grant``/``valid`` follow ``requests`` and ``priority`` in the same cycle.
The highest priority level that has a request wins; within it, the first requester after the
one granted last (``advance`` high on a cycle records ``grant`` as the last one served).
"""

from amaranth import Module, Signal, Const, Mux, Cat
from amaranth.lib import wiring, data
from amaranth.lib.wiring import In, Out

from .bits import lowest_set
from .config import bits_for


class PriorityRoundRobin(wiring.Component):
    def __init__(self, n, levels=1):
        self.n = n
        self.levels = levels
        self._idx_bits = bits_for(n)
        ports = {
            "requests": In(n),
            "advance": In(1),
            "grant": Out(self._idx_bits),
            "valid": Out(1),
        }
        if levels > 1:
            ports["priority"] = In(data.ArrayLayout(bits_for(levels), n))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        n = self.n
        last = Signal(self._idx_bits, init=n - 1)

        # Keep only the requesters of the highest requesting level.
        if self.levels > 1:
            level_masks = [Cat(self.requests[i] & (self.priority[i] == p) for i in range(n))
                           for p in range(self.levels)]
            top = Signal(n)
            m.d.comb += top.eq(level_masks[0])
            for p in range(1, self.levels):
                with m.If(level_masks[p].any()):
                    m.d.comb += top.eq(level_masks[p])
        else:
            top = self.requests

        above = Signal(n)
        m.d.comb += above.eq(Cat(Const(i, self._idx_bits) > last for i in range(n)))
        after = Signal(n)
        m.d.comb += after.eq(top & above)

        m.d.comb += [
            self.valid.eq(top.any()),
            self.grant.eq(Mux(after.any(), lowest_set(after, self._idx_bits),
                              lowest_set(top, self._idx_bits))),
        ]
        with m.If(self.advance & self.valid):
            m.d.sync += last.eq(self.grant)
        return m
