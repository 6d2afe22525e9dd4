"""The synthesis top level: the traffic generator really exercises the FrontEnd, and the
default FPGA design elaborates and converts (the CI check for ``gpufe synth``)."""

import pytest

from gpufe.constraints.boards import board
from gpufe.constraints.exerciser import ExerciserTop, HOST_BASE, RING_LOG2, host_image
from gpufe.rtl.config import SMALL
from gpufe.rtl.layouts import GPEntry
from gpufe.constraints import flow as synth
from tests.helpers import simulate

CYCLES = 3000

def test_host_image_rings_point_at_their_segments():
    words, rings = host_image(SMALL, 1024)
    assert len(rings) == SMALL.channels
    for ring in rings:
        i = (ring - HOST_BASE) // 4
        for e in range(1 << RING_LOG2):
            entry = GPEntry.from_bits(words[i + 2 * e] | words[i + 2 * e + 1] << 32)
            assert int(entry.length) > 0
            seg = (int(entry.address_lo) << 2) - (HOST_BASE & 0xFFFFFFFF)
            assert 0 <= seg // 4 < 1024 and words[seg // 4] != 0   # a method header


def test_host_image_too_small_is_refused():
    with pytest.raises(ValueError, match="needs more than 64 dwords"):
        host_image(SMALL, 64)


def test_exerciser_drives_every_path_of_the_frontend():
    top = ExerciserTop(SMALL, host_words=1024)
    fe = top.frontend
    seen = {"compute": 0, "graph": 0, "copy": 0, "dma_write": 0, "irq": 0, "leds": set()}
    # GP_GET of each channel as the PBDMAs write it back (the MMIO read port is the
    # sequencer's): the values, and the entries decoded (steps forward around the ring)
    gp_get = {c: [0] for c in range(SMALL.channels)}

    async def tb(ctx):
        for _ in range(CYCLES):
            await ctx.tick()
            if ctx.get(fe.compute.valid) and ctx.get(fe.compute.ready):
                seen["compute"] += 1
                seen["graph"] += ctx.get(fe.compute.payload.graph)
            if ctx.get(fe.copy.valid) and ctx.get(fe.copy.ready):
                seen["copy"] += 1
            seen["dma_write"] += ctx.get(fe.dma_write.valid)
            seen["irq"] |= ctx.get(fe.irq)
            seen["leds"].add(ctx.get(top.leds))
            if ctx.get(fe.retired.valid):
                r = ctx.get(fe.retired.payload)
                gp_get[r.channel].append(r.get)
        seen["errors"] = ctx.get(fe.cp.error_mask)
        seen["status"] = ctx.get(fe.doorbell.status) & 7

    simulate(top, tb)
    # every channel ran through its ring more than once: kernels, graph nodes, copies and
    # timestamped releases (DMA writes) all came out, and nothing faulted
    assert seen["errors"] == 0 and seen["status"] == 0
    assert seen["compute"] - seen["graph"] >= 2 * SMALL.channels
    assert seen["graph"] >= 3 * SMALL.channels
    assert seen["copy"] >= SMALL.channels
    assert seen["dma_write"] >= SMALL.channels
    assert seen["irq"] == 1
    assert len(seen["leds"]) > 16
    # every channel's GP_GET stayed in its ring and moved on by several entries
    ring = 1 << RING_LOG2
    decoded = {c: sum((b - a) % ring for a, b in zip(v, v[1:])) for c, v in gp_get.items()}
    assert all(0 <= g < ring for v in gp_get.values() for g in v)
    assert all(n >= 2 for n in decoded.values()), decoded
    assert sum(decoded.values()) >= 4 * SMALL.channels, decoded


def test_default_fpga_design_elaborates_and_converts():
    line = synth.check(synth.fpga_config())
    assert "converted" in line
    cells = int(line.split(" cells")[0].split()[-1].replace(",", ""))
    assert cells > 1000


def test_unknown_board_is_named():
    with pytest.raises(ValueError, match="unknown board 'de10'.*ulx3s-85f"):
        board("de10")


def test_pll_dividers_stay_in_the_ecp5_ranges():
    from gpufe.constraints.ecp5_pll import pll_params, PFD_MHZ, VCO_MHZ
    for want in (5, 10, 12, 20, 33.3, 50, 100):
        clki, clkfb, clkop, got = pll_params(25, want)
        assert got == pytest.approx(25 * clkfb / clki)
        assert got <= want + 1e-9 and got >= 0.8 * want
        assert PFD_MHZ[0] <= 25 / clki <= PFD_MHZ[1]
        assert VCO_MHZ[0] <= got * clkop <= VCO_MHZ[1]
    assert pll_params(25, 10)[3] == 10
    with pytest.raises(ValueError, match="no ECP5 PLL setting"):
        pll_params(25, 1)


def test_board_build_files_carry_the_pll_and_the_leds(tmp_path):
    cfg = synth.fpga_config(channels=4, fifo_depth=256, graph_nodes=64, graph_edges=128)
    script = synth.prepare(board("ulx3s-85f"), cfg, tmp_path, seed=3, clock_mhz=10)
    text = script.read_text()
    assert "--seed 3" in text and "--report frontend.report.json" in text
    assert f"--router {synth.ROUTER}" in text
    il = (tmp_path / "frontend.il").read_text()
    assert "EHXPLLL" in il and "CLKOP_DIV" in il
    lpf = (tmp_path / "frontend.lpf").read_text()
    assert lpf.count('LOCATE COMP "led_') == 8
