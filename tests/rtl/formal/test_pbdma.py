"""The PBDMAs' residency properties hold (k-induction) with every cover reached, and units
that break them are caught."""

import dataclasses

import pytest

from gpufe.rtl.formal import pbdma
from gpufe.rtl.pbdma import PbdmaUnits
from gpufe.sim.prove import prove

PROOF = pbdma.PROOFS[0]


def test_residency_is_proven_and_every_cover_reached(tmp_path):
    r = prove(PROOF, tmp_path)
    assert r.status == "proven", r
    assert r.properties == 2
    assert all(step is not None for step in r.covers.values()), r.covers


class _Twice(PbdmaUnits):
    """Says PBDMA 1 holds whatever PBDMA 0 does."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.channel[1].eq(self.channel[0])     # the last assignment wins
        return m


class _NotResident(PbdmaUnits):
    """Tells the schedulers no channel is resident."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.resident.eq(0)
        return m


@pytest.mark.parametrize("dut, fails", [(_Twice, "one_pbdma_per_channel01"),
                                        (_NotResident, "resident_is_held")])
def test_broken_units_fail(tmp_path, dut, fails):
    # bounded, deep enough for both PBDMAs to hold channels (the proof's base case is shorter)
    proof = dataclasses.replace(PROOF, mode="bmc", depth=8,
                                harness=lambda: pbdma.PbdmaHarness(dut=dut))
    r = prove(proof, tmp_path)
    assert r.status == "failed" and fails in r.failed, (r.status, r.failed)
    assert r.vcd.exists()
