"""DMA fetcher, GPFIFO entries and push-buffer segments from host memory into the FIFO:
:class:`DmaFetcher`."""

from amaranth import Module, Signal, Array, Mux
from amaranth.lib import wiring, stream, data
from amaranth.lib.wiring import In, Out

from .arbiter import PriorityRoundRobin
from .config import FrontEndConfig
from .layouts import (dma_read_request_layout, dma_read_response_layout, GPEntry, GPControl,
                      ErrorCause, ADDR_BITS)

__all__ = ["DmaFetcher", "fault_layout", "segment_layout"]


def fault_layout(cfg):
    """A channel's fault: the ``channel`` and its :class:`~gpufe.rtl.layouts.ErrorCause`."""
    return data.StructLayout({"channel": cfg.chan_bits, "cause": ErrorCause})


def segment_layout(cfg):
    """A push-buffer segment of a PBDMA: its byte ``address`` and ``length`` in dwords (a
    GPFIFO entry read, or the rest of a segment loaded with a channel's context)."""
    return data.StructLayout({"pbdma": cfg.pbdma_bits, "address": ADDR_BITS, "length": 21})


class DmaFetcher(wiring.Component):
    """DMA fetcher: pulls GPFIFO entries and push-buffer segments from host memory into the
    FIFO, for the channels resident on the PBDMAs.

    Each PBDMA holds one channel's fetch state (its ring's base, the next entry to read, the
    segment being read; :class:`~gpufe.rtl.pbdma.PbdmaUnits` keeps the ring pointers). PBDMAs
    with work (an entry to read, or the rest of a segment and room in their partition) are
    served round robin, one DMA read per grant, at most one read in flight per PBDMA (several
    in flight in all; the tag is the PBDMA). A GPFIFO entry is read as 2 dwords at
    ``gp_base + 8 * gp_get``; a segment is read in bursts of at most ``dma_burst`` dwords and
    never more than the partition's free space, which is reserved in the FIFO on the cycle the
    request is issued, so data is never dropped, overflowed or reordered.

    Port contract (``dma_req`` / ``dma_resp``): a request is taken on valid & ready; the
    response for it returns exactly ``count`` dwords tagged with the request's tag, in address
    order, the last one flagged ``last``. ``error`` on any dword (an unmapped address) faults
    the channel; the dwords still arrive so that the space reserved for them is released.

    Timing: a request is registered: it is offered the cycle after its PBDMA becomes eligible
    (an entry shows in ``pending``, or room opens in its partition), and a new one can be
    loaded on the cycle the previous one is taken, so one request a cycle. Response dwords go
    to the FIFO combinationally, one a cycle; a PBDMA is eligible again the cycle after the
    last dword of its read.

    Parameters
    ----------
    cfg : FrontEndConfig
        Sizes: ``pbdmas``, ``dma_burst``, the widths of GP_GET and of FIFO levels.

    Attributes
    ----------
    pending : In(cfg.pbdmas)
        PBDMAs with a GPFIFO entry to read (and room in their segment queue).
    gp_get : In(data.ArrayLayout(cfg.gp_bits, cfg.pbdmas))
        Each PBDMA's next GPFIFO entry to read.
    gp_base : In(data.ArrayLayout(ADDR_BITS, cfg.pbdmas))
        Byte address of each PBDMA's GPFIFO ring.
    advance : Out(stream.Signature(segment_layout(cfg)))
        Valid for one cycle, with the last dword of a GPFIFO entry: the entry read (its
        segment; ``length`` 0 for a control entry). ``ready`` is not looked at.
    load : In(stream.Signature(segment_layout(cfg)))
        Start the PBDMA's fetch with the rest of a segment (a channel's context being loaded);
        ``length`` 0 for none. Always ready.
    free : In(data.ArrayLayout(cfg.level_bits, cfg.pbdmas))
        Dwords each PBDMA's FIFO partition can still take, net of what is reserved.
    reserve : Out(stream.Signature(data.StructLayout))
        ``{"pbdma": cfg.pbdma_bits, "count": cfg.burst_bits}``, valid for the cycle a segment
        read is loaded: ``count`` dwords of the PBDMA's partition are reserved for its data.
        ``ready`` is not looked at.
    fifo_write : Out(stream.Signature(data.StructLayout))
        ``{"pbdma": cfg.pbdma_bits, "data": 32}``: one push-buffer dword into its PBDMA's
        partition, in the cycle it arrives on ``dma_resp``. ``ready`` is not looked at (the
        space was reserved).
    want : Out(cfg.pbdmas)
        PBDMAs that have or expect FIFO data (an entry to read, a segment not fully read, or a
        read in flight) and are not halted: the FIFO keeps a partition for them.
    halt : In(cfg.pbdmas)
        PBDMAs not fetching (no channel resident, or its channel switching out or in error):
        no new read starts, and they want no partition.
    drop : In(stream.Signature(cfg.pbdma_bits))
        Forget the rest of this PBDMA's segment (its channel leaves). Always ready.
    dma_req : Out(stream.Signature(dma_read_request_layout(cfg, cfg.pbdma_bits)))
        DMA reads of host memory: byte ``address``, ``count`` dwords, ``tag`` = the PBDMA.
        Held until taken.
    dma_resp : In(stream.Signature(dma_read_response_layout(cfg, cfg.pbdma_bits)))
        The dwords read, as the port contract above says. Always ready.
    fault : Out(stream.Signature(data.StructLayout))
        ``{"pbdma": cfg.pbdma_bits, "cause": ErrorCause}``, valid for one cycle: a DMA error on
        the PBDMA's read (``FETCH_FAULT``) or an illegal GPFIFO control entry (``GP_ENTRY``).
        ``ready`` is not looked at.
    in_flight : Out(cfg.pbdmas)
        PBDMAs with a DMA read outstanding.
    quiescent : Out(1)
        No request waiting to be taken and no PBDMA eligible: only a DMA response or a new
        input can change anything.
    """

    def __init__(self, cfg):
        if not isinstance(cfg, FrontEndConfig):
            raise TypeError(f"DmaFetcher: cfg must be a FrontEndConfig, not {type(cfg).__name__}")
        self.cfg = cfg
        n, pb = cfg.pbdmas, cfg.pbdma_bits
        super().__init__({
            "pending": In(n),
            "gp_get": In(data.ArrayLayout(cfg.gp_bits, n)),
            "gp_base": In(data.ArrayLayout(ADDR_BITS, n)),
            "advance": Out(stream.Signature(segment_layout(cfg))),
            "load": In(stream.Signature(segment_layout(cfg))),
            "free": In(data.ArrayLayout(cfg.level_bits, n)),
            "reserve": Out(stream.Signature(data.StructLayout({"pbdma": pb,
                                                                "count": cfg.burst_bits}))),
            "fifo_write": Out(stream.Signature(data.StructLayout({"pbdma": pb, "data": 32}))),
            "want": Out(n),
            "halt": In(n),
            "drop": In(stream.Signature(pb)),
            "dma_req": Out(stream.Signature(dma_read_request_layout(cfg, pb))),
            "dma_resp": In(stream.Signature(dma_read_response_layout(cfg, pb))),
            "fault": Out(stream.Signature(data.StructLayout({"pbdma": pb,
                                                              "cause": ErrorCause}))),
            "in_flight": Out(n),
            "quiescent": Out(1),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        n = cfg.pbdmas

        seg_addr = Array(Signal(ADDR_BITS, name=f"seg_addr{i}") for i in range(n))
        seg_len = Array(Signal(21, name=f"seg_len{i}") for i in range(n))
        is_pb = Array(Signal(name=f"is_pb{i}") for i in range(n))   # kind of the read in flight
        gp_lo = Array(Signal(32, name=f"gp_lo{i}") for i in range(n))
        inflight = Signal(n)
        m.d.comb += self.in_flight.eq(inflight)

        m.submodules.arb = arb = PriorityRoundRobin(n)
        eligible = Signal(n)
        for i in range(n):
            has_seg = seg_len[i] != 0
            m.d.comb += [
                eligible[i].eq(~inflight[i] & ~self.halt[i]
                               & Mux(has_seg, self.free[i] != 0, self.pending[i])),
                self.want[i].eq((self.pending[i] | has_seg | inflight[i]) & ~self.halt[i]),
            ]
        m.d.comb += arb.requests.eq(eligible)

        # -- issue --
        req = self.dma_req
        c = arb.grant
        burst = Signal(cfg.burst_bits)
        # the granted PBDMA's state, each looked up once
        remaining, free, addr = Signal(21), Signal(cfg.level_bits), Signal(ADDR_BITS)
        gp_addr = Signal(ADDR_BITS)
        m.d.comb += [remaining.eq(seg_len[c]), free.eq(self.free[c]), addr.eq(seg_addr[c]),
                     gp_addr.eq(self.gp_base[c] + (self.gp_get[c] << 3))]
        capped = Mux(remaining < cfg.dma_burst, remaining, cfg.dma_burst)
        m.d.comb += burst.eq(Mux(free < capped, free, capped))
        load = (~req.valid | req.ready) & arb.valid
        with m.If(req.valid & req.ready):
            m.d.sync += req.valid.eq(0)
        with m.If(load):
            m.d.comb += arb.advance.eq(1)
            m.d.sync += [req.valid.eq(1), req.payload.tag.eq(c), inflight.bit_select(c, 1).eq(1)]
            with m.If(remaining != 0):
                m.d.comb += [self.reserve.valid.eq(1), self.reserve.payload.pbdma.eq(c),
                             self.reserve.payload.count.eq(burst)]
                m.d.sync += [req.payload.address.eq(addr), req.payload.count.eq(burst),
                             seg_addr[c].eq(addr + (burst << 2)),
                             seg_len[c].eq(remaining - burst), is_pb[c].eq(1)]
            with m.Else():
                m.d.sync += [req.payload.address.eq(gp_addr),
                             req.payload.count.eq(2), is_pb[c].eq(0)]

        # -- responses --
        rsp = self.dma_resp
        t = rsp.payload.tag
        t_is_pb, t_lo = Signal(), Signal(32)
        m.d.comb += [t_is_pb.eq(is_pb[t]), t_lo.eq(gp_lo[t])]
        m.d.comb += [rsp.ready.eq(1), self.drop.ready.eq(1), self.load.ready.eq(1)]
        with m.If(rsp.valid):
            with m.If(rsp.payload.last):
                m.d.sync += inflight.bit_select(t, 1).eq(0)
            with m.If(rsp.payload.error):
                m.d.comb += [self.fault.valid.eq(1), self.fault.payload.pbdma.eq(t),
                             self.fault.payload.cause.eq(ErrorCause.FETCH_FAULT)]
            with m.If(t_is_pb):
                m.d.comb += [self.fifo_write.valid.eq(1), self.fifo_write.payload.pbdma.eq(t),
                             self.fifo_write.payload.data.eq(rsp.payload.data)]
            with m.Elif(~rsp.payload.last):
                m.d.sync += gp_lo[t].eq(rsp.payload.data)
            with m.Else():
                entry = GPEntry(Signal(64))
                m.d.comb += entry.as_value().eq(Mux(rsp.payload.error, 0,
                                                    (rsp.payload.data << 32) | t_lo))
                entry_addr = Signal(ADDR_BITS)
                m.d.comb += entry_addr.eq((entry.address_hi << 32) | (entry.address_lo << 2))
                m.d.comb += [self.advance.valid.eq(1), self.advance.payload.pbdma.eq(t),
                             self.advance.payload.address.eq(entry_addr),
                             self.advance.payload.length.eq(entry.length)]
                with m.If(entry.length != 0):
                    m.d.sync += [seg_addr[t].eq(entry_addr), seg_len[t].eq(entry.length)]
                with m.Elif(entry.address_hi != GPControl.NOP.value):
                    m.d.comb += [self.fault.valid.eq(1), self.fault.payload.pbdma.eq(t),
                                 self.fault.payload.cause.eq(ErrorCause.GP_ENTRY)]

        with m.If(self.load.valid):
            m.d.sync += [seg_addr[self.load.payload.pbdma].eq(self.load.payload.address),
                         seg_len[self.load.payload.pbdma].eq(self.load.payload.length)]
        with m.If(self.drop.valid):
            m.d.sync += seg_len[self.drop.payload].eq(0)

        m.d.comb += self.quiescent.eq(~req.valid & ~eligible.any())
        return m
