"""FrontEnd, the device front end from doorbells to engine dispatch as one component:
:class:`FrontEnd`."""

from amaranth import Module, Mux
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out, connect, flipped

from .config import FrontEndConfig
from .layouts import (MmioWrite, DmaWrite, dma_read_request_layout, dma_read_response_layout,
                      launch_record_layout, copy_record_layout, completion_layout,
                      device_launch_layout,
                      context_switch_layout, retire_layout)
from .doorbell import DoorbellRegisterFile
from .fetcher import DmaFetcher
from .fifo_sram import PartitionedFifo
from .command_processor import CommandProcessor
from .syncpoint import SyncpointUnit
from .graph_walker import GraphWalker
from .stream_mux import StreamMux
from .runlist import RunlistScheduler
from .pbdma import PbdmaUnits

__all__ = ["FrontEnd"]


class FrontEnd(wiring.Component):
    """FrontEnd: the device front end, doorbells to engine dispatch, as one component.

    ::

        MMIO --> DoorbellRegisterFile (channel contexts) <--bind / write back--> PbdmaUnits
                                                                            | resident channels
                                                                            v
                                                       host memory <--> DmaFetcher
                                                                            | reserve / write
                                                                            v
                            SyncpointUnit <--> CommandProcessor <-- PartitionedFifo
                                  |                    |
                           DMA write (sems)    compute / copy dispatch, completions

    A graph launch goes from the CP to the GraphWalker, which loads the graph's table over the
    same DMA read port and dispatches its nodes through the same engine ports. Device graph
    launches come from the engines (``device_launch``): a tail launch goes to the walker that
    dispatched the kernel making it, a fire-and-forget launch to a second GraphWalker, the
    device-launch walker, whose runs complete into the first walker's running launch (its
    parent).

    The channels' contexts live in SRAM (the doorbell file's ring contexts, the CP's decode
    contexts, the syncpoint unit's counts and parked acquires); the PbdmaUnits load a few of
    them (``pbdmas``) at a time: only those resident channels are fetched and decoded, and
    switching a channel in or out costs its context load and save. The RunlistScheduler
    decides which context (TSG: the channels of one process) is served: the PBDMAs load only
    that TSG's channels, and ``context`` tells the engines which TSG's work runs. Their timers
    are deadlines on ``now``; ``wake_at`` says the next one, so a harness jumping over idle
    time stops there.

    ``idle`` is high when no block can change state without an external input and no output is
    waiting to be taken: a harness may then jump time to its next external event. ``now`` is
    the current time in ns, written by timestamp releases. The blocks are built in the
    constructor, so that tests and waveforms can reach their ports.

    Timing: a doorbell's first DMA read is offered two cycles after its MMIO write is (the write
    takes effect at one clock edge, the fetcher loads the request at the next); the CP decodes
    a push-buffer dword a cycle through a run of methods; each block's own timing is in its
    documentation.

    Parameters
    ----------
    cfg : FrontEndConfig or None
        Sizes of every block; ``None`` for ``FrontEndConfig()``.

    Attributes
    ----------
    mmio : In(stream.Signature(MmioWrite))
        Register writes (doorbells, ring setup, priorities, error and interrupt clears; the map
        is :class:`~gpufe.rtl.layouts.ChannelReg` and :class:`~gpufe.rtl.layouts.GlobalReg`).
        Always ready.
    mmio_read_address : In(16)
        Dword address of a register read.
    mmio_read_data : Out(32)
        The register at ``mmio_read_address``, combinationally.
    dma_read_req : Out(stream.Signature(dma_read_request_layout(cfg)))
        Reads of host memory: GPFIFO entries and push-buffer segments (``tag`` = the PBDMA)
        and graph tables (``tag`` = ``1 << cfg.pbdma_bits``, plus 1 for the device-launch
        walker's), taking turns. Held until taken.
    dma_read_resp : In(stream.Signature(dma_read_response_layout(cfg)))
        The dwords read, as :class:`~gpufe.rtl.fetcher.DmaFetcher`'s port contract says, routed
        by the tag. Always ready.
    dma_write : Out(stream.Signature(DmaWrite))
        Semaphore releases and timestamps to host memory. Held until taken.
    compute : Out(stream.Signature(launch_record_layout(cfg)))
        Kernel launches, from the CP and the graph walker (``graph`` set), taking turns. Held
        until taken.
    copy : Out(stream.Signature(copy_record_layout(cfg)))
        Copies, likewise.
    compute_done : In(stream.Signature(completion_layout(cfg)))
        Completions of kernels, echoing the launch record's channel, ``seq``, ``node`` and
        ``graph``. Ready, except for a graph node's completion while the walker's completion
        queue is full.
    copy_done : In(stream.Signature(completion_layout(cfg)))
        Completions of copies, likewise; a graph node's copy completion also waits while a graph
        node's kernel completion is offered on ``compute_done``.
    device_launch : In(stream.Signature(device_launch_layout(cfg)))
        Device-side cudaGraphLaunch calls of running kernels (tail or fire-and-forget). Ready
        while the walker it goes to has room.
    context : Out(stream.Signature(context_switch_layout(cfg)))
        Context switches, to the engines: a TSG stops (``run`` 0: preempt its work) or starts
        (``run`` 1). Held until taken.
    retired : Out(stream.Signature(retire_layout(cfg)))
        A channel's GP_GET moved on (entries decoded to their end, or its position at a
        switch): the driver may reuse ring and push-buffer space up to it. Valid for one cycle;
        ``ready`` is not looked at.
    wake_at : Out(64)
        The next time (ns) at which the design changes state by itself, with no input
        (:data:`~gpufe.rtl.runlist.NEVER` when none): ``idle`` holds only until then.
    irq : Out(1)
        Interrupt: a channel went to ERROR, or a NON_STALL_INTERRUPT method executed.
    idle : Out(1)
        Only an external input can change anything.
    now : In(64)
        The current time in ns.
    acquire_retry : In(16)
        Cycles from a syncpoint counter change to the re-check of parked channels.
    acquire_poll : In(16)
        ns to re-check one parked channel that is on no PBDMA (its acquire state read back
        from its context); also the graph walker's interval between two reads of a launch's
        hand-over count while one of its branches is held.
    timestamp_hold, stamp_hold, stamp_fetch : In(16)
        ns a timestamp release holds its channel after its last write is taken (its round
        trip): with RELEASE_WFI, without, and added to either while the channel's PBDMA still
        has GPFIFO entries to fetch (:class:`~gpufe.rtl.syncpoint.SyncpointUnit`).
    doorbell : DoorbellRegisterFile
        The MMIO registers.
    fetcher : DmaFetcher
        The DMA fetcher.
    fifo : PartitionedFifo
        The FIFO SRAM.
    cp : CommandProcessor
        The command processor.
    syncpoint : SyncpointUnit
        The syncpoint unit.
    walker : GraphWalker
        The graph walker.
    device_walker : GraphWalker
        The device-launch walker (fire-and-forget device graph launches).
    runlist : RunlistScheduler
        The runlist scheduler.
    pbdma : PbdmaUnits
        The PBDMA units.
    """

    def __init__(self, cfg=None):
        if cfg is None:
            cfg = FrontEndConfig()
        if not isinstance(cfg, FrontEndConfig):
            raise TypeError(f"FrontEnd: cfg must be a FrontEndConfig or None, "
                            f"not {type(cfg).__name__}")
        self.cfg = cfg
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
            "device_launch": In(stream.Signature(device_launch_layout(cfg))),
            "context": Out(stream.Signature(context_switch_layout(cfg))),
            "retired": Out(stream.Signature(retire_layout(cfg))),
            "wake_at": Out(64),
            "irq": Out(1),
            "idle": Out(1),
            "now": In(64),
            "acquire_retry": In(16),
            "acquire_poll": In(16),
            "timestamp_hold": In(16),
            "stamp_hold": In(16),
            "stamp_fetch": In(16),
        })
        # built here so that tests and waveforms can reach their ports
        self.doorbell = DoorbellRegisterFile(cfg)
        self.fetcher = DmaFetcher(cfg)
        self.fifo = PartitionedFifo(cfg)
        self.cp = CommandProcessor(cfg)
        self.syncpoint = SyncpointUnit(cfg)
        self.walker = GraphWalker(cfg)
        self.device_walker = GraphWalker(cfg, device=True)
        self.runlist = RunlistScheduler(cfg)
        self.pbdma = PbdmaUnits(cfg)

    def elaborate(self, platform):
        m = Module()
        db, fe, ff, cp, sp = self.doorbell, self.fetcher, self.fifo, self.cp, self.syncpoint
        m.submodules.doorbell = db
        m.submodules.fetcher = fe
        m.submodules.fifo = ff
        m.submodules.cp = cp
        m.submodules.syncpoint = sp
        m.submodules.walker = gw = self.walker
        m.submodules.device_walker = dw = self.device_walker
        m.submodules.runlist = rl = self.runlist
        m.submodules.pbdma = pb = self.pbdma
        cfg = self.cfg

        # outside world
        connect(m, flipped(self.mmio), db.mmio)
        connect(m, flipped(self.dma_write), sp.dma_write)

        # DMA reads: fetcher (tag = PBDMA) and graph walkers (tag = top bit, plus 1 for the
        # device-launch walker) share the port
        layout = self.dma_read_req.payload.shape()
        m.submodules.dma_mux = dma_mux = StreamMux(layout)
        m.submodules.walker_dma_mux = walker_mux = StreamMux(layout)
        top = 1 << cfg.pbdma_bits
        for src, port, tag in ((fe.dma_req, dma_mux.a, fe.dma_req.payload.tag),
                               (gw.dma_req, walker_mux.a, top),
                               (dw.dma_req, walker_mux.b, top | 1)):
            m.d.comb += [port.valid.eq(src.valid), src.ready.eq(port.ready),
                         port.payload.address.eq(src.payload.address),
                         port.payload.count.eq(src.payload.count), port.payload.tag.eq(tag)]
        connect(m, walker_mux.out, dma_mux.b)
        connect(m, flipped(self.dma_read_req), dma_mux.out)
        rsp = self.dma_read_resp
        to_walker = rsp.payload.tag[cfg.pbdma_bits]
        to_device = rsp.payload.tag[0]
        m.d.comb += rsp.ready.eq(1)
        for dst, sel in ((fe.dma_resp, ~to_walker), (gw.dma_resp, to_walker & ~to_device),
                         (dw.dma_resp, to_walker & to_device)):
            m.d.comb += [dst.valid.eq(rsp.valid & sel), dst.payload.data.eq(rsp.payload.data),
                         dst.payload.last.eq(rsp.payload.last),
                         dst.payload.error.eq(rsp.payload.error)]
        m.d.comb += fe.dma_resp.payload.tag.eq(rsp.payload.tag)

        # dispatch: the CP and the graph walkers share the engines' ports
        for name, cp_port, gw_port, dw_port in (("compute", cp.compute, gw.compute, dw.compute),
                                                ("copy", cp.copy, gw.copy, dw.copy)):
            mux = StreamMux(cp_port.payload.shape())
            walkers = StreamMux(cp_port.payload.shape())
            m.submodules[f"{name}_mux"] = mux
            m.submodules[f"{name}_walker_mux"] = walkers
            connect(m, gw_port, walkers.a)
            connect(m, dw_port, walkers.b)
            connect(m, cp_port, mux.a)
            connect(m, walkers.out, mux.b)
            connect(m, flipped(getattr(self, name)), mux.out)

        # completions: graph nodes go to the walker that dispatched them, everything else to
        # the syncpoint unit; a compute and a copy node completing together: the copy waits a
        # cycle
        cd, yd = self.compute_done, self.copy_done
        cd_graph = cd.valid & cd.payload.graph
        yd_graph = yd.valid & yd.payload.graph
        node = Mux(cd_graph, cd.payload, yd.payload)
        node_dwalk = Mux(cd_graph, cd.payload.dwalk, yd.payload.dwalk)
        walker_ready = Mux(node_dwalk, dw.node_done.ready, gw.node_done.ready)
        m.d.comb += [
            sp.compute_done.valid.eq(cd.valid & ~cd.payload.graph),
            sp.compute_done.payload.eq(cd.payload),
            sp.copy_done.valid.eq(yd.valid & ~yd.payload.graph),
            sp.copy_done.payload.eq(yd.payload),
            gw.node_done.valid.eq((cd_graph | yd_graph) & ~node_dwalk),
            gw.node_done.payload.eq(node),
            dw.node_done.valid.eq((cd_graph | yd_graph) & node_dwalk),
            dw.node_done.payload.eq(node),
            cd.ready.eq(~cd.payload.graph | walker_ready),
            yd.ready.eq(~yd.payload.graph | (walker_ready & ~cd_graph)),
        ]
        connect(m, cp.graph, gw.launch)
        connect(m, gw.graph_done, sp.graph_done)
        # device graph launches: tail launches to the walker that dispatched the kernel,
        # fire-and-forget ones to the device-launch walker, counted by the first walker's run
        dl = self.device_launch
        ff_launch = dl.valid & ~dl.payload.tail
        m.d.comb += [
            gw.tail.valid.eq(dl.valid & dl.payload.tail & ~dl.payload.dwalk),
            dw.tail.valid.eq(dl.valid & dl.payload.tail & dl.payload.dwalk),
            dw.launch.valid.eq(ff_launch),
            dw.launch.payload.channel.eq(dl.payload.channel),
            dw.launch.payload.seq.eq(dl.payload.seq),
            dw.launch.payload.table.eq(dl.payload.table),
            dw.launch.payload.nodes.eq(dl.payload.nodes),
            dl.ready.eq(Mux(dl.payload.tail,
                            Mux(dl.payload.dwalk, dw.tail.ready, gw.tail.ready),
                            dw.launch.ready)),
            gw.child_launched.eq(ff_launch & dw.launch.ready),
        ]
        for w in (gw, dw):
            m.d.comb += [w.tail.payload.table.eq(dl.payload.table),
                         w.tail.payload.nodes.eq(dl.payload.nodes)]
        connect(m, dw.graph_done, gw.child_done)
        # a fault of either walker (the first walker's first, should both fault at once)
        m.d.comb += [cp.graph_fault.valid.eq(gw.fault.valid | dw.fault.valid),
                     cp.graph_fault.payload.eq(Mux(gw.fault.valid, gw.fault.payload,
                                                   dw.fault.payload)),
                     gw.fault.ready.eq(1), dw.fault.ready.eq(1)]
        m.d.comb += [
            db.read_address.eq(self.mmio_read_address),
            self.mmio_read_data.eq(db.read_data),
            sp.now.eq(self.now),
            sp.acquire_retry.eq(self.acquire_retry), sp.acquire_poll.eq(self.acquire_poll),
            sp.timestamp_hold.eq(self.timestamp_hold),
            sp.stamp_hold.eq(self.stamp_hold), sp.stamp_fetch.eq(self.stamp_fetch),
            self.irq.eq(cp.interrupt),
        ]

        # channel contexts <-> PBDMAs -> fetcher -> FIFO
        connect(m, pb.writeback, db.writeback)
        m.d.comb += [self.retired.valid.eq(pb.writeback.valid),
                     self.retired.payload.channel.eq(pb.writeback.payload.channel),
                     self.retired.payload.get.eq(pb.writeback.payload.get)]
        connect(m, fe.advance, pb.advance)
        connect(m, pb.load, fe.load)
        connect(m, pb.drop, fe.drop)
        connect(m, fe.reserve, ff.reserve)
        connect(m, fe.fifo_write, ff.write)
        m.d.comb += [
            db.bind_channel.eq(pb.bind_channel), pb.bind_context.eq(db.bind_context),
            db.pbdma_channel.eq(pb.channel), pb.put.eq(db.pbdma_put),
            pb.priority.eq(db.pbdma_priority), pb.prio_mask.eq(db.prio_mask),
            fe.pending.eq(pb.fetch_pending), fe.gp_get.eq(pb.fetch_get),
            fe.gp_base.eq(pb.gp_base), fe.halt.eq(pb.fetch_halt), pb.in_flight.eq(fe.in_flight),
            fe.free.eq(ff.free), ff.want.eq(fe.want), ff.discard.eq(pb.discard),
            # a timestamp's round trip is longer while its channel has more entries to fetch
            # than its segment queue has room for (its confirmation queues behind the prefetch)
            sp.pbdma_channel.eq(pb.channel), sp.fetch_behind.eq(pb.fetch_behind),
            # parked channels on no PBDMA are polled, not re-checked at once
            sp.resident.eq(pb.resident),
        ]

        # FIFO -> CP <-> syncpoints
        connect(m, cp.release, sp.release)
        connect(m, cp.acquire, sp.acquire)
        connect(m, cp.dispatched, sp.dispatched)
        m.d.comb += [
            cp.read_data.eq(ff.read_data), ff.read_pbdma.eq(cp.read_pbdma),
            ff.read_pop.eq(cp.read_pop), cp.nonempty.eq(ff.nonempty),
            pb.pop.valid.eq(cp.read_pop), pb.pop.payload.eq(cp.read_pbdma),
            cp.running.eq(pb.running), cp.pbdma_channel.eq(pb.channel),
            cp.expecting.eq(pb.fetch_pending | fe.in_flight), cp.fetch_behind.eq(pb.fetch_behind),
            cp.priority.eq(db.pbdma_priority), pb.cp_holding.eq(cp.holding),
            cp.acquire_met.eq(sp.acquire_met), cp.parked.eq(sp.parked),
            cp.release_busy.eq(sp.release_busy), cp.release_full.eq(sp.release_full),
            cp.release_stall.eq(sp.release_stall), cp.confirming.eq(sp.confirming),
            cp.all_complete.eq(sp.all_complete),
            db.lookup_channel.eq(sp.lookup_channel), sp.lookup_tsg.eq(db.lookup_tsg),
        ]
        # a fetch fault names the PBDMA: the CP puts its channel in error
        m.d.comb += [cp.fault.valid.eq(fe.fault.valid),
                     cp.fault.payload.channel.eq(pb.channel[fe.fault.payload.pbdma]),
                     cp.fault.payload.cause.eq(fe.fault.payload.cause),
                     fe.fault.ready.eq(1)]

        # the host scheduler: which TSG is served, which channels are resident, their costs
        connect(m, flipped(self.context), rl.context)
        m.d.comb += [
            rl.tsg_mask.eq(db.tsg_mask), rl.tsg_in_flight.eq(sp.tsg_in_flight),
            # (a dispatch made and not yet taken, waiting for the engine's state, is work too)
            rl.busy.eq(db.pending | cp.replay | cp.offering | sp.parked | sp.release_busy),
            rl.now.eq(self.now), rl.timeslice.eq(db.timeslice), rl.switch_time.eq(db.switch_time),
            rl.preempt_time.eq(db.preempt_time),
            db.scheduler_status.eq(rl.active | (rl.state.as_value() << 31)),
            pb.served.eq(rl.served), pb.pending.eq(db.pending), pb.replay.eq(cp.replay),
            pb.parked.eq(sp.parked), pb.error.eq(cp.error_mask),
            # (a channel held by a timestamp's round trip keeps its PBDMA: the round trips of
            # many channels follow one another while the context port loads the next)
            pb.stuck.eq(sp.parked | cp.blocked),
            pb.ctx_save.eq(db.ctx_save), pb.ctx_load.eq(db.ctx_load),
            pb.ch_timeslice.eq(db.ch_timeslice), pb.now.eq(self.now),
            cp.launch_hold.eq(db.launch_hold), cp.ch_timeslice.eq(db.ch_timeslice),
            cp.cp_switch.eq(db.cp_switch),
            gw.now.eq(self.now), dw.now.eq(self.now),
            cp.now.eq(self.now),
        ]
        for w in (gw, dw):
            m.d.comb += [w.graph_start.eq(db.graph_start), w.cond_start.eq(db.cond_start),
                         w.device_start.eq(db.device_start), w.tail_start.eq(db.tail_start),
                         w.runtime_start.eq(db.runtime_start),
                         w.graph_prepare.eq(db.graph_prepare), w.cond_record.eq(db.cond_record),
                         # (the front end reads host memory for a graph's hand-over count as
                         # often as for a parked acquire)
                         w.branch_poll.eq(self.acquire_poll)]
        wake = Mux(rl.wake_at < cp.wake_at, rl.wake_at, cp.wake_at)
        wake = Mux(sp.wake_at < wake, sp.wake_at, wake)
        wake = Mux(gw.wake_at < wake, gw.wake_at, wake)
        wake = Mux(dw.wake_at < wake, dw.wake_at, wake)
        m.d.comb += self.wake_at.eq(Mux(pb.wake_at < wake, pb.wake_at, wake))

        # errors: a channel in error leaves its PBDMA (its FIFO data is discarded)
        m.d.comb += [
            sp.halt.eq(cp.error_mask),
            db.error_mask.eq(cp.error_mask), db.interrupt_status.eq(cp.interrupt_status),
            cp.clear_interrupt.eq(db.clear_interrupt),
            cp.query_channel.eq(db.read_channel), db.read_state.eq(cp.query_state),
            db.clear_error.ready.eq(1),
            cp.clear_error.valid.eq(db.clear_error.valid),
            cp.clear_error.payload.eq(db.clear_error.payload),
        ]

        m.d.comb += self.idle.eq(fe.quiescent & ff.quiescent & cp.quiescent & sp.quiescent
                                 & gw.quiescent & dw.quiescent & rl.quiescent & pb.quiescent
                                 & ~self.context.valid & ~self.retired.valid
                                 & ~self.dma_read_req.valid
                                 & ~self.dma_write.valid & ~self.compute.valid
                                 & ~self.copy.valid)
        return m
