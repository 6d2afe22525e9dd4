"""The partitioned FIFO's properties hold for 14 cycles from power-up with every cover
reached, and a FIFO that loses track of its words is caught."""

import dataclasses

from gpufe.rtl.fifo_sram import PartitionedFifo
from gpufe.rtl.formal import fifo_sram
from gpufe.sim.prove import prove

PROOF = fifo_sram.PROOFS[0]


def test_partitioned_fifo_holds_and_every_cover_is_reached(tmp_path):
    r = prove(PROOF, tmp_path)
    assert (r.status, r.mode, r.depth) == ("holds", "bmc", 14), r
    assert r.properties == 10
    assert all(step is not None for step in r.covers.values()), r.covers
    # a repartition while the followed word was held, and a share given back
    assert r.covers["word_back_after_repartition"] <= 14
    assert r.covers["partition_shrinks"] <= 14


class _Zeroes(PartitionedFifo):
    """Reads back zeroes."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.read_data.eq(0)      # the last assignment wins
        return m


def test_a_fifo_that_loses_its_words_fails(tmp_path):
    proof = dataclasses.replace(PROOF, harness=lambda: fifo_sram.FifoHarness(dut=_Zeroes))
    r = prove(proof, tmp_path)
    assert r.status == "failed" and r.failed == ["tracked_word_in_order"], (r.status, r.failed)
    assert r.vcd.exists() and r.step <= PROOF.depth
