"""ECP5 PLL (EHXPLLL) for the front-end clock: the board oscillator in, ``sync`` out.

The FrontEnd at full size does not close timing at a board's 25 MHz (see docs/fpga.md), so
``gpufe synth`` clocks it from a PLL at ``--clock-mhz``. ``pll_params`` picks the dividers:
the phase detector runs at ``f_in / CLKI_DIV`` (3.125 to 400 MHz), the output at
``f_in * CLKFB_DIV / CLKI_DIV`` (feedback from CLKOP), the VCO at ``f_out * CLKOP_DIV``
(400 to 800 MHz), as the ECP5 sysCLOCK guide (TN1263) gives them.
"""

from amaranth import Module, Signal, Instance, Elaboratable
from amaranth.lib.cdc import ResetSynchronizer

PFD_MHZ = (3.125, 400.0)
VCO_MHZ = (400.0, 800.0)


def pll_params(f_in, f_out):
    """(CLKI_DIV, CLKFB_DIV, CLKOP_DIV, achieved MHz): the closest output at or below
    ``f_out`` MHz; ties go to the VCO nearest the middle of its range."""
    best = None
    for clki in range(1, 129):
        pfd = f_in / clki
        if not PFD_MHZ[0] <= pfd <= PFD_MHZ[1]:
            continue
        for clkfb in range(1, 81):
            out = pfd * clkfb
            if out > f_out + 1e-9:
                break
            for clkop in range(1, 129):
                vco = out * clkop
                if not VCO_MHZ[0] <= vco <= VCO_MHZ[1]:
                    continue
                key = (f_out - out, abs(vco - sum(VCO_MHZ) / 2))
                if best is None or key < best[0]:
                    best = (key, (clki, clkfb, clkop, out))
    if best is None:
        raise ValueError(f"no ECP5 PLL setting gives {f_out} MHz from {f_in} MHz")
    return best[1]


class Ecp5Pll(Elaboratable):
    """Clocks ``domain`` (a ClockDomain its parent defines) at about ``f_out`` MHz from
    ``clk_in`` (``f_in`` MHz), held in reset until the PLL locks. ``frequency`` is what the
    dividers give, in Hz."""

    def __init__(self, clk_in, f_in, f_out, domain):
        self.clk_in = clk_in
        self.domain = domain
        self.f_in = f_in
        self.clki, self.clkfb, self.clkop, mhz = pll_params(f_in, f_out)
        self.frequency = mhz * 1e6

    def elaborate(self, platform):
        m = Module()
        cd = self.domain
        locked = Signal()
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=f"{self.f_in:g}",
            a_FREQUENCY_PIN_CLKOP=f"{self.frequency / 1e6:g}",
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
            a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_CLKOP_ENABLE="ENABLED",
            p_CLKI_DIV=self.clki, p_CLKFB_DIV=self.clkfb, p_CLKOP_DIV=self.clkop,
            p_CLKOP_CPHASE=self.clkop // 2, p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
            i_CLKI=self.clk_in, i_CLKFB=cd.clk, i_RST=0, i_STDBY=0, i_PHASESEL0=0,
            i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1, i_PLLWAKESYNC=0,
            i_ENCLKOP=0, o_CLKOP=cd.clk, o_LOCK=locked)
        m.submodules.reset_sync = ResetSynchronizer(~locked, domain=cd.name)
        if platform is not None:
            platform.add_clock_constraint(cd.clk, self.frequency)
        return m
