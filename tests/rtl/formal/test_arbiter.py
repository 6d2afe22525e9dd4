"""The arbiter's properties hold (k-induction), every cover is reached, and an arbiter that
breaks them is caught: the proof is not vacuous."""

import dataclasses

from gpufe.rtl.arbiter import PriorityRoundRobin
from gpufe.rtl.formal import arbiter
from gpufe.sim.prove import prove

PROOF = arbiter.PROOFS[0]


def _with(dut):
    return dataclasses.replace(PROOF, harness=lambda: arbiter.ArbiterHarness(dut=dut))


def test_priority_round_robin_is_proven_and_every_cover_reached(tmp_path):
    r = prove(PROOF, tmp_path)
    assert r.status == "proven", r
    assert r.properties == 13
    assert all(step is not None for step in r.covers.values()), r.covers
    # the starvation bound is tight: a requester is served after exactly n - 1 grants
    assert {f"served_after_bound{i}" for i in range(4)} <= set(r.covers)
    assert r.vcd is None and not list(tmp_path.iterdir())


class _NoTurn(PriorityRoundRobin):
    """Forgets the one it served: the lowest requester of a level always wins."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.sync += self.above.eq(0)          # the last assignment wins
        return m


class _NoPriority(PriorityRoundRobin):
    """Has the priority port but serves every requester in turn, whatever its level."""

    def elaborate(self, platform):
        self.levels = 1                       # the plain round robin of one level
        return super().elaborate(platform)


def test_an_arbiter_that_starves_a_requester_fails_with_a_counterexample(tmp_path):
    r = prove(_with(_NoTurn), tmp_path)
    assert r.status == "failed"
    assert r.failed and all(name.startswith(("wait_bound", "no_starvation", "round_robin"))
                            for name in r.failed), r.failed
    assert r.vcd == tmp_path / "arbiter.priority_round_robin.vcd"
    text = r.vcd.read_text()
    assert "$var" in text and "assert_" in text and "above" in text


def test_an_arbiter_that_ignores_priority_fails(tmp_path):
    r = prove(_with(_NoPriority), tmp_path)
    assert r.status == "failed"
    assert "highest_level" in r.failed or "round_robin" in r.failed, r.failed
    assert r.step is not None and r.vcd.exists()
