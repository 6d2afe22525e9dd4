"""Properties of :class:`~gpufe.rtl.arbiter.PriorityRoundRobin`: the highest requesting
priority level wins, and within it every requester is served within ``n - 1`` grants to
others (no starvation), proven by k-induction for 4 requesters and 3 levels."""

from amaranth import Elaboratable, Module, Signal, Array, Mux, Cat

from ..arbiter import PriorityRoundRobin
from ..bits import lowest_set
from ..config import bits_for
from . import Properties, Proof

__all__ = ["ArbiterHarness", "PROOFS"]


class ArbiterHarness(Elaboratable):
    """``requests``, ``priority`` and ``advance`` free every cycle.

    Asserted, every cycle:

    - ``valid_iff_request``: ``valid`` exactly when some requester requests;
    - ``grant_requests``: the one granted requests;
    - ``highest_level``: no requester asks at a level above the grant's;
    - ``round_robin``: the grant is the first requester of that level after the last one
      served (cyclically), the lowest at first;
    - ``no_starvation``: a requester that keeps asking at the winning level waits at most
      ``n - 1`` grants to others (``waits[i]`` counts them; ``wait_bound`` is the inductive
      form: the grants it has waited plus its distance from the last one served are at
      most ``n``, since each grant to another moves the turn nearer to it);
    - ``turn_is_suffix``: the register of the last one served holds the requesters above
      one index (its only form).

    Covered: a grant wraps around to a lower index; a requester is served after waiting
    exactly ``n - 1`` grants (the bound is tight); a higher level takes the grant from the
    requester whose turn it was."""

    def __init__(self, n=4, levels=3, dut=PriorityRoundRobin):
        self.n, self.levels = n, levels
        self.dut = dut(n, levels)
        self.requests = Signal(n)
        self.advance = Signal()
        self.priority = Signal(n * bits_for(levels))
        self.ports = [self.requests, self.advance, self.priority]
        self.properties = None

    def elaborate(self, platform):
        m = Module()
        n, pb = self.n, bits_for(self.levels)
        m.submodules.dut = dut = self.dut
        m.d.comb += [dut.requests.eq(self.requests), dut.advance.eq(self.advance),
                     dut.priority.as_value().eq(self.priority)]
        p = self.properties = Properties(m, "arbiter")
        prio = Array(self.priority[i * pb:(i + 1) * pb] for i in range(n))
        req = self.requests
        p.assume("levels_in_range", Cat(prio[i] < self.levels for i in range(n)).all())

        # the winning level and the requesters at it
        level = 0
        for i in range(n):
            level = Mux(req[i] & (prio[i] > level), prio[i], level)
        level_ = Signal(pb, name="level")
        m.d.comb += level_.eq(level)
        level = level_
        top = Signal(n)
        m.d.comb += top.eq(Cat(req[i] & (prio[i] == level) for i in range(n)))
        # whose turn it is, from the register of the last one served
        above = dut.above
        first_after = Signal(n)
        m.d.comb += first_after.eq(Mux((top & above).any(), top & above, top))
        expected = lowest_set(first_after, bits_for(n), m)

        granted = dut.valid & self.advance
        p.assert_("valid_iff_request", dut.valid == req.any())
        p.assert_("grant_requests", ~dut.valid | req.bit_select(dut.grant, 1))
        p.assert_("highest_level", ~dut.valid | (prio[dut.grant] == level))
        p.assert_("round_robin", ~dut.valid | (dut.grant == expected))
        p.assert_("turn_is_suffix", ~above[0] & ~((above << 1)[:n] & ~above).any())

        # the last one served: the index below the register's lowest bit, n - 1 for none
        last = Signal(bits_for(n))
        m.d.comb += last.eq(Mux(above.any(), lowest_set(above, bits_for(n), m) - 1, n - 1))
        waits = [Signal(bits_for(n + 1), name=f"waits{i}") for i in range(n)]
        for i in range(n):
            waiting = req[i] & (prio[i] == level)
            with m.If(~waiting | (granted & (dut.grant == i))):
                m.d.sync += waits[i].eq(0)
            with m.Elif(granted):
                m.d.sync += waits[i].eq(waits[i] + 1)
            # how many grants from the last one served to i: 1 (next) .. n (i itself)
            distance = Signal(bits_for(n + 1), name=f"distance{i}")
            m.d.comb += distance.eq(Mux(i > last, i - last, i + n - last))
            p.assert_(f"wait_bound{i}", waits[i] + distance <= n)
            p.assert_(f"no_starvation{i}", waits[i] <= n - 1)
            p.cover(f"served_after_bound{i}",
                    granted & (dut.grant == i) & (waits[i] == n - 1))
        prev_grant = Signal(bits_for(n))
        prev_valid = Signal()
        m.d.sync += [prev_grant.eq(dut.grant), prev_valid.eq(granted)]
        p.cover("wraps_around", prev_valid & dut.valid & (dut.grant < prev_grant))
        p.cover("level_preempts_turn",
                dut.valid & Cat(req[i] & (prio[i] < level) & above[i] for i in range(n)).any())
        return m


PROOFS = [Proof("arbiter", "priority_round_robin", ArbiterHarness, "prove", depth=4,
                cover_depth=12, sizes="4 requesters, 3 priority levels")]
