"""FrontEnd: the device front end, doorbells to engine dispatch, as one component.

    MMIO --> DoorbellRegisterFile --pending--> DmaFetcher <--DMA read--> host memory
                                                   | reserve / write
                                                   v
                        SyncpointUnit <--> CommandProcessor <-- PartitionedFifo
                              |                    |
                       DMA write (sems)    compute / copy dispatch, completions

``idle`` is high when no block can change state without an external input and no output is
waiting to be taken: a harness may then jump time to its next external event. ``now`` is the
current time in ns, written by timestamp releases.
"""

from amaranth import Module
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out, connect, flipped

from .config import FrontEndConfig
from .layouts import (MmioWrite, DmaWrite, dma_read_request_layout, dma_read_response_layout,
                      launch_record_layout, copy_record_layout, completion_layout)
from .doorbell import DoorbellRegisterFile
from .fetcher import DmaFetcher
from .fifo_sram import PartitionedFifo
from .command_processor import CommandProcessor
from .syncpoint import SyncpointUnit


class FrontEnd(wiring.Component):
    def __init__(self, cfg=None):
        self.cfg = cfg = cfg or FrontEndConfig()
        super().__init__({
            "mmio": In(stream.Signature(MmioWrite)),
            "mmio_read_address": In(16),
            "mmio_read_data": Out(32),
            "dma_read_req": Out(stream.Signature(dma_read_request_layout(cfg))),
            "dma_read_resp": In(stream.Signature(dma_read_response_layout(cfg))),
            "dma_write": Out(stream.Signature(DmaWrite)),
            "compute": Out(stream.Signature(launch_record_layout(cfg))),
            "copy": Out(stream.Signature(copy_record_layout(cfg))),
            "compute_done": In(stream.Signature(completion_layout(cfg))),
            "copy_done": In(stream.Signature(completion_layout(cfg))),
            "irq": Out(1),
            "idle": Out(1),
            "now": In(64),
        })
        # built here so that tests and waveforms can reach their ports
        self.doorbell = DoorbellRegisterFile(cfg)
        self.fetcher = DmaFetcher(cfg)
        self.fifo = PartitionedFifo(cfg)
        self.cp = CommandProcessor(cfg)
        self.syncpoint = SyncpointUnit(cfg)

    def elaborate(self, platform):
        m = Module()
        db, fe, ff, cp, sp = self.doorbell, self.fetcher, self.fifo, self.cp, self.syncpoint
        m.submodules.doorbell = db
        m.submodules.fetcher = fe
        m.submodules.fifo = ff
        m.submodules.cp = cp
        m.submodules.syncpoint = sp

        # outside world
        connect(m, flipped(self.mmio), db.mmio)
        connect(m, flipped(self.dma_read_req), fe.dma_req)
        connect(m, flipped(self.dma_read_resp), fe.dma_resp)
        connect(m, flipped(self.dma_write), sp.dma_write)
        connect(m, flipped(self.compute), cp.compute)
        connect(m, flipped(self.copy), cp.copy)
        connect(m, flipped(self.compute_done), sp.compute_done)
        connect(m, flipped(self.copy_done), sp.copy_done)
        m.d.comb += [
            db.read_address.eq(self.mmio_read_address),
            self.mmio_read_data.eq(db.read_data),
            sp.now.eq(self.now),
            self.irq.eq(cp.interrupt),
        ]

        # doorbells -> fetcher -> FIFO
        connect(m, fe.advance, db.advance)
        connect(m, fe.reserve, ff.reserve)
        connect(m, fe.fifo_write, ff.write)
        m.d.comb += [
            fe.pending.eq(db.pending), fe.gp_get.eq(db.gp_get), fe.gp_base.eq(db.gp_base),
            fe.free.eq(ff.free), ff.want.eq(fe.want),
        ]

        # FIFO -> CP <-> syncpoints
        connect(m, cp.release, sp.release)
        connect(m, cp.acquire, sp.acquire)
        connect(m, cp.dispatched, sp.dispatched)
        connect(m, fe.fault, cp.fault)
        m.d.comb += [
            cp.read_data.eq(ff.read_data), ff.read_channel.eq(cp.read_channel),
            ff.read_pop.eq(cp.read_pop), cp.nonempty.eq(ff.nonempty),
            cp.priority.eq(db.priority),
            cp.acquire_met.eq(sp.acquire_met), cp.parked.eq(sp.parked),
            cp.release_busy.eq(sp.release_busy), cp.release_stall.eq(sp.release_stall),
            cp.all_complete.eq(sp.all_complete),
        ]

        # errors: a channel in error stops fetching, its FIFO data is discarded
        m.d.comb += [
            fe.halt.eq(cp.error_mask), ff.discard.eq(cp.error_mask), sp.halt.eq(cp.error_mask),
            db.error_mask.eq(cp.error_mask), db.interrupt_status.eq(cp.interrupt_status),
            cp.clear_interrupt.eq(db.clear_interrupt),
            cp.query_channel.eq(db.read_channel), db.read_state.eq(cp.query_state),
            # one MMIO clear goes to both the CP (state) and the fetcher (drop the segment)
            db.clear_error.ready.eq(1),
            cp.clear_error.valid.eq(db.clear_error.valid),
            cp.clear_error.payload.eq(db.clear_error.payload),
            fe.drop.valid.eq(db.clear_error.valid), fe.drop.payload.eq(db.clear_error.payload),
        ]

        m.d.comb += self.idle.eq(fe.quiescent & ff.quiescent & cp.quiescent & sp.quiescent
                                 & ~self.dma_write.valid & ~self.compute.valid
                                 & ~self.copy.valid)
        return m
