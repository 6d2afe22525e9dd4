"""Properties of :class:`~gpufe.rtl.pbdma.PbdmaUnits`: a channel is resident on at most one
PBDMA, and the resident bits the schedulers read are the channels the PBDMAs hold; proven by
k-induction for 2 PBDMAs and 4 channels."""

from amaranth import Elaboratable, Module, Signal, Const, ResetSignal, Value
from amaranth.asserts import AnySeq
from amaranth.lib import wiring

from ..pbdma import PbdmaUnits, PbdmaState
from . import Properties, Proof, small_config

__all__ = ["PbdmaHarness", "PROOFS", "SMALL_PBDMA"]

#: the sizes the properties are proven at
SMALL_PBDMA = small_config(pbdmas=2, pbdma_segments=2)


class PbdmaHarness(Elaboratable):
    """Every input free every cycle (which channels are served, pending, parked, stuck or in
    error, the contexts read, the segments advanced and popped, the CP's hold, the context
    save and load times, ``now``, the consumers' ``ready``): a superset of what the front end
    drives, so what holds here holds there.

    Asserted, every cycle:

    - ``one_pbdma_per_channel``: no two PBDMAs that hold a channel (any state but FREE: loading,
      running, draining or saving it) hold the same one;
    - ``resident_is_held``: the resident bits are exactly the channels the PBDMAs hold.

    Covered: both PBDMAs hold channels at once; a channel switched out of one PBDMA is loaded
    on the other."""

    def __init__(self, cfg=SMALL_PBDMA, dut=PbdmaUnits):
        self.cfg = cfg
        self.dut = dut(cfg)
        self.ports = []
        self.properties = None

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        m.submodules.dut = dut = self.dut
        p = self.properties = Properties(m, "pbdma")
        for path, member, value in dut.signature.flatten(dut):
            if member.flow is wiring.In:
                bits = Value.cast(value)
                m.d.comb += bits.eq(AnySeq(len(bits)))
        p.assume("no_reset", ~ResetSignal())

        held = [dut.state[i] != PbdmaState.FREE for i in range(cfg.pbdmas)]
        holding = Const(0, cfg.channels)
        for i in range(cfg.pbdmas):
            holding = holding | (held[i] << dut.channel[i])[:cfg.channels]
        for i in range(cfg.pbdmas):
            for j in range(i + 1, cfg.pbdmas):
                p.assert_(f"one_pbdma_per_channel{i}{j}",
                          ~(held[i] & held[j] & (dut.channel[i] == dut.channel[j])))
        p.assert_("resident_is_held", dut.resident == holding)

        p.cover("both_hold", held[0] & held[1])
        # a channel PBDMA 0 switched out is loaded on PBDMA 1 (PBDMA 0 holding another)
        left, left_valid = Signal(cfg.chan_bits), Signal()
        with m.If(dut.state[0] == PbdmaState.DRAIN):
            m.d.sync += [left.eq(dut.channel[0]), left_valid.eq(1)]
        p.cover("moves_between_pbdmas",
                left_valid & (dut.state[1] == PbdmaState.LOAD) & (dut.channel[1] == left))
        return m


PROOFS = [Proof("pbdma", "residency", PbdmaHarness, "prove", depth=3, cover_depth=12,
                sizes="2 PBDMAs, 4 channels, 2-entry segment queues")]
