"""Priority arbiter with round robin within a level: :class:`PriorityRoundRobin`."""

from amaranth import Module, Signal, Mux, Cat
from amaranth.lib import wiring, data
from amaranth.lib.wiring import In, Out

from .bits import lowest_set
from .config import bits_for

__all__ = ["PriorityRoundRobin"]


class PriorityRoundRobin(wiring.Component):
    """Priority arbiter with round robin within a level.

    The highest priority level that has a request wins; within it, the first requester after
    the one granted last (``advance`` high on a cycle records ``grant`` as the last one served),
    wrapping around to the lowest index.

    Timing: combinational; ``grant`` and ``valid`` follow ``requests`` and ``priority`` in the
    same cycle, and a new grant can be taken every cycle. The record of the last one served is a
    register, updated at the clock edge of a cycle with ``advance`` and ``valid`` high.

    Parameters
    ----------
    n : int
        Number of requesters, at least 1.
    levels : int
        Number of priority levels, at least 1. With a single level there is no ``priority``
        port and the arbiter is a plain round robin.

    Attributes
    ----------
    requests : In(n)
        One bit per requester that wants a grant.
    priority : In(data.ArrayLayout(bits_for(levels), n))
        Priority level of each requester, greater first; ignored for requesters that do not
        request. Only present when ``levels > 1``.
    advance : In(1)
        The current grant is being used: the next grant goes to the next requester in turn.
    grant : Out(bits_for(n))
        Index of the requester granted; 0 while ``valid`` is low.
    valid : Out(1)
        Some requester requests: ``grant`` is meaningful.
    """

    def __init__(self, n, levels=1):
        for name, value in (("n", n), ("levels", levels)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"PriorityRoundRobin: {name} must be an int, "
                                f"not {type(value).__name__} {value!r}")
            if value < 1:
                raise ValueError(f"PriorityRoundRobin: {name} must be at least 1, not {value}")
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
        #: the requesters after the last one served (none at first: the lowest goes first); a
        #: register, an attribute so that the formal harness can state what it holds
        self.above = Signal(n, name="above")

    def elaborate(self, platform):
        m = Module()
        n = self.n
        above = self.above

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

        after = Signal(n)
        m.d.comb += after.eq(top & above)
        # the one granted: the first after the last one served, else the first of all
        pool = Signal(n)
        granted = Signal(n)
        m.d.comb += [pool.eq(Mux(after.any(), after, top)),
                     granted.eq(pool & (~pool + 1)[:n])]

        m.d.comb += [
            self.valid.eq(top.any()),
            self.grant.eq(lowest_set(granted, self._idx_bits, m)),
        ]
        with m.If(self.advance & self.valid):
            m.d.sync += above.eq(~(granted | (granted - 1)[:n]))
        return m
