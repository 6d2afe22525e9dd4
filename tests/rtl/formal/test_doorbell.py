"""The doorbell register file's properties hold (k-induction) with every cover reached, and
register files that break them are caught: the proof is not vacuous. (The priority level
the proof found unchecked has its simulation test in tests/rtl/test_doorbell.py.)"""

import dataclasses

import pytest

from gpufe.rtl.doorbell import DoorbellRegisterFile
from gpufe.rtl.formal import doorbell
from gpufe.sim.prove import prove

PROOF = doorbell.PROOFS[0]


def test_register_file_is_proven_and_every_cover_reached(tmp_path):
    r = prove(PROOF, tmp_path)
    assert r.status == "proven", r
    assert r.properties == 6
    assert set(r.covers) == {"bad_channel_refused", "bad_put_refused", "bad_value_refused",
                             "doorbell_rings", "write_back_drains",
                             "doorbell_meets_write_back"}
    assert all(step is not None for step in r.covers.values()), r.covers


class _NoPending(DoorbellRegisterFile):
    """Never tells the schedulers a channel has work."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.pending.eq(0)        # the last assignment wins
        return m


class _Silent(DoorbellRegisterFile):
    """Refuses bad writes without saying so."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.status.eq(0)
        return m


@pytest.mark.parametrize("dut, fails", [(_NoPending, "pending_is_put_ne_get"),
                                        (_Silent, "bad_write_flagged")])
def test_a_broken_register_file_fails_with_a_counterexample(tmp_path, dut, fails):
    proof = dataclasses.replace(PROOF, harness=lambda: doorbell.DoorbellHarness(dut=dut))
    r = prove(proof, tmp_path)
    assert r.status == "failed" and r.failed == [fails], (r.status, r.failed)
    assert r.step is not None and r.step <= PROOF.depth
    assert f"assert_{fails}" in r.vcd.read_text()
