"""The kernel-mode driver (KMD): the front end's registers, written by MMIO.

It programs the host scheduler (timeslices, the PBDMA's switch costs) and the channel table
(each channel's TSG) once, a channel's context when the channel is created (where its GPFIFO ring is and how
many entries it has, before the program starts), and rings the doorbell (GP_PUT) at every
kickoff. It leaves every channel at the runlist's least priority level: CUDA's stream
priority is the work distributor's (see ``umd.py``). A posted MMIO write
reaches its register ``mmio_write_ns`` after it is issued (see ``CoSim.mmio_write``).
"""

from gpufe.rtl.layouts import ChannelReg, GLOBAL_PAGE


class Kmd:
    def __init__(self, cosim):
        self.sim = cosim

    def _write(self, channel, reg, value, delay_ns=None):
        self.sim.mmio_write(self.sim.channel_register(channel, reg), value, delay_ns=delay_ns)

    def create_channel(self, channel, ring_base, ring_entries):
        """The channel's context: its ring's base and size (at once: the context exists
        before the program runs)."""
        for reg, value in ((ChannelReg.GPFIFO_BASE_LO, ring_base & 0xFFFFFFFF),
                           (ChannelReg.GPFIFO_BASE_HI, ring_base >> 32),
                           (ChannelReg.GPFIFO_ENTRIES_LOG2, (ring_entries - 1).bit_length())):
            self._write(channel, reg, value, delay_ns=0)

    def configure_scheduler(self, registers):
        """The host scheduler's registers (``GlobalReg`` -> value), before the program
        runs."""
        for reg, value in registers.items():
            self.sim.mmio_write(GLOBAL_PAGE + reg.value, value, delay_ns=0)

    def assign_tsg(self, channel, tsg):
        """The channel table: the channel belongs to TSG ``tsg`` (its process's context)."""
        self._write(channel, ChannelReg.TSG, tsg, delay_ns=0)
        self.sim.channel_tsg[channel] = tsg

    def ring_doorbell(self, channel, put):
        """GP_PUT: the ring's entries up to ``put`` are there to fetch."""
        self._write(channel, ChannelReg.GP_PUT, put)
