"""Command processor, picking a channel, decoding its methods, dispatching work:
:class:`CommandProcessor`."""

from amaranth import Module, Signal, Mux, Cat, Const
from amaranth.lib import wiring, stream, data
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .arbiter import PriorityRoundRobin
from .bits import BitVector, lowest_set
from .config import FrontEndConfig
from .fetcher import fault_layout
from .layouts import (SecOp, MethodHeader, Method, Subchannel, SemOp, SemExecute, Reduction,
                      ChannelState, ErrorCause, CPState, HOST_METHOD_LIMIT, COMPUTE_METHODS,
                      COPY_METHODS, ADDR_BITS, launch_record_layout, copy_record_layout,
                      graph_launch_layout, GRAPH_HANDOVER_SHIFT, GRAPH_HANDOVER_BITS)
from .syncpoint import release_layout, acquire_layout, ReleaseKind

__all__ = ["CommandProcessor", "context_layout", "HOST_METHODS"]


def context_layout(cfg):
    """A channel's decode state, saved in the context memory while another channel runs."""
    return data.StructLayout({
        "method": 12, "count": 13, "mode": SecOp, "subchannel": 3,
        "sem_address": ADDR_BITS, "payload": 64,
        "descriptor": ADDR_BITS, "src": ADDR_BITS, "dst": ADDR_BITS, "length": 32,
        "seq": cfg.seq_bits, "replay_data": 32, "graph_table": ADDR_BITS,
        "graph_release": 1, "graph_index": cfg.sp_bits, "graph_value": 32,
    })


#: Host-class methods the command processor executes; any other address below
#: ``HOST_METHOD_LIMIT`` is an illegal method.
HOST_METHODS = (Method.NOP, Method.NON_STALL_INTERRUPT, Method.SEM_ADDR_LO, Method.SEM_ADDR_HI,
                Method.SEM_PAYLOAD_LO, Method.SEM_PAYLOAD_HI, Method.SEM_EXECUTE, Method.WFI,
                Method.GRAPH_TABLE_LO, Method.GRAPH_TABLE_HI, Method.GRAPH_LAUNCH,
                Method.GRAPH_RELEASE_INDEX, Method.GRAPH_RELEASE_VALUE)


class CommandProcessor(wiring.Component):
    """Command processor: decodes the methods the PBDMAs hold and dispatches work.

    Arbitration: among the PBDMAs in RUN (``running``: a channel resident, see
    :class:`~gpufe.rtl.pbdma.PbdmaUnits`) whose channel has decodable work (data in the FIFO
    partition, or a method word to replay) and is not parked, blocked or in error, the highest
    priority level wins, round robin within a level.

    The CP stays on a PBDMA while its channel has work: after a dispatch it goes on with the
    channel's next method, and while the channel's next methods are still being fetched
    (``expecting``: entries the PBDMA has yet to read) it waits for them rather than move to
    another PBDMA's channel and back, which would load the engine's state twice (on the H200,
    24 streams on 16 connections: a channel's three kernels run one after another, 0.48 us
    apart, and the next channel's after them, never interleaved). It moves to another when
    the channel runs out of work, when an acquire fails (the channel is parked), when the
    PBDMA stops running (its channel is being switched out), or when a PBDMA of greater
    priority waits, or, with a channel timeslice set (``ch_timeslice`` ns, 0: none), once the
    channel has held the CP that long while another PBDMA waits.

    Per-channel decode state (method address, remaining count, mode, subchannel, semaphore
    address and payload, launch descriptor and copy registers, dispatch sequence number) lives
    in a context memory indexed by channel (:func:`context_layout`), RAMFC-like; the CP holds
    the context of the channel it decodes and writes it back when it moves to another PBDMA or
    when that PBDMA's channel is switched out (``holding``), so a method may span any number of
    switches. The time a context switch costs is the PBDMAs' (their load and save); moving the
    CP to another resident channel loads the engine's state for that channel, ``cp_switch`` ns
    (a configuration register), returning to the channel it last decoded nothing. The
    channel's host methods (semaphores, time stamps) are decoded meanwhile and only its first
    dispatch waits for the engine's state, unless that PBDMA still has entries to prefetch
    beyond its queue (``fetch_behind``): the state's reads then queue behind the prefetch, and
    the CP waits before decoding. (On the H200, profiled: a dependent kernel's gap is ~1.7 us
    on one channel and on two alike, the time stamp's round trip covering the move.) An idle CP
    (no PBDMA decodable) makes the move towards a PBDMA whose channel's methods are still
    being fetched (``expecting``), so that it runs under the DMA reads instead of after them.

    A graph launch (the model's GRAPH_TABLE_LO/HI and GRAPH_LAUNCH methods) is dispatched to the
    graph walker like work to an engine; the graph's completion counts as its completion. A
    GRAPH_RELEASE_INDEX (bit 31 set) and GRAPH_RELEASE_VALUE before it give the launch a
    release of its own, which its completion sets (one launch's: GRAPH_LAUNCH clears it).

    Errors: an illegal header, method, subchannel or semaphore operation, or a fetch fault
    reported by the fetcher (or a graph fault by the walker), puts that channel in ERROR with a
    readable cause and raises the interrupt; the CP goes on with the other channels. MMIO STATE
    write 1 clears it.

    Timing: a dword is executed the cycle after its pop (the synchronous FIFO read), and the
    next one is popped meanwhile while the channel stays decodable: one dword a cycle through a
    run of methods; a semaphore operation, a dispatch or WFI ends the run (the next word is
    popped a cycle later, once the operation's effect on the channel is known); moving to
    another channel takes two cycles (write back and read the contexts, then load); the
    engine's state is there ``cp_switch`` ns after the first, a deadline on ``now``
    (``wake_at``) that the CP waits for in LOAD when the PBDMA is behind, else its next
    dispatch. A dispatch holds the CP until the engine takes the record, which is offered the
    cycle after its method executes (or once the engine's state is there); a kernel launch
    then holds it ``launch_hold`` ns more (CUPTI's per-launch work), a deadline on ``now``
    (``wake_at``). WFI holds the whole CP (every channel) until all dispatched work has
    completed.

    Parameters
    ----------
    cfg : FrontEndConfig
        Sizes: ``channels``, ``pbdmas``, ``priority_levels`` (at least 1), ``seq_bits``, and the syncpoint
        window (``syncpoints``, ``syncpoint_base``) that acquires and reductions must address.

    Attributes
    ----------
    read_pbdma : Out(cfg.pbdma_bits)
        The PBDMA being decoded, whose FIFO partition is read.
    read_pop : Out(1)
        Pop a dword of ``read_pbdma``.
    read_data : In(32)
        The dword popped, a cycle after the pop.
    nonempty : In(cfg.pbdmas)
        PBDMAs with data in the FIFO.
    running : In(cfg.pbdmas)
        PBDMAs whose channel may be decoded (resident, not being switched out).
    expecting : In(cfg.pbdmas)
        PBDMAs whose channel's methods are on their way (a GPFIFO entry to read or a DMA read
        outstanding): where an idle CP goes ahead of the data.
    fetch_behind : In(cfg.pbdmas)
        PBDMAs with more GPFIFO entries to prefetch than their queue has room for: a move to
        one waits for the engine's state before decoding.
    pbdma_channel : In(data.ArrayLayout(cfg.chan_bits, cfg.pbdmas))
        The channel on each PBDMA.
    priority : In(data.ArrayLayout(cfg.prio_bits, cfg.pbdmas))
        Priority of each PBDMA's channel, greater first.
    holding : Out(cfg.pbdmas)
        The PBDMA whose channel's context the CP holds (not yet written back).
    ch_timeslice : In(16)
        ns a channel may keep the CP while another PBDMA's waits (0: no limit).
    launch_hold : In(16)
        ns the CP spends after each kernel launch it dispatches.
    cp_switch : In(16)
        ns the CP takes to move to another channel (loading its decode context and the
        channel's engine state).
    now : In(64)
        The current time in ns: the launch hold and the switch are deadlines on it.
    wake_at : Out(64)
        The deadline the CP waits for (all ones when it waits for none).
    replay : Out(cfg.channels)
        Channels with a method word to execute again (a release that found its slot busy).
    offering : Out(cfg.channels)
        The channel whose dispatch is made and not yet taken (it may wait for the engine's
        state): work of its TSG.
    blocked : Out(cfg.channels)
        Channels whose word to replay is a release that still finds no slot free.
    release : Out(stream.Signature(release_layout(cfg)))
        Valid for the cycle a semaphore release executes: to a syncpoint counter or to host
        memory, with the channel's dispatch sequence number. Posted only while the channel's
        ``release_busy`` is low; ``ready`` is not looked at.
    acquire : Out(stream.Signature(acquire_layout(cfg)))
        Valid for the cycle a semaphore acquire executes; the CP reads ``acquire_met`` in that
        cycle. ``ready`` is not looked at.
    acquire_met : In(1)
        Whether the acquire on ``acquire``'s payload is met now (combinational).
    parked : In(cfg.channels)
        Channels parked on an unmet acquire: not decoded until woken.
    release_busy : In(cfg.channels)
        Channels whose release slot is taken: a further release waits (the channel is blocked).
    release_full : In(1)
        The release pool is full: every channel's next release waits.
    confirming : In(cfg.channels)
        Channels whose time stamp is on its way (not waiting for work): while the CP decodes
        one of them, it waits.
    release_stall : In(cfg.channels)
        Channels held by a timestamp release being written: not decoded.
    all_complete : In(1)
        No dispatched work is in flight (ends a WFI).
    dispatched : Out(stream.Signature(cfg.chan_bits))
        Valid for the cycle a record is taken on ``compute``, ``copy`` or ``graph``: the
        channel, whose work in flight goes up by one. ``ready`` is not looked at.
    compute : Out(stream.Signature(launch_record_layout(cfg)))
        Kernel launches: channel, sequence number, descriptor address. Held until taken.
    copy : Out(stream.Signature(copy_record_layout(cfg)))
        Copies: channel, sequence number, source, destination, length, flags. Held until taken.
    graph : Out(stream.Signature(graph_launch_layout(cfg)))
        Graph launches, to the graph walker. Held until taken.
    fault : In(stream.Signature(fault_layout(cfg)))
        Faults found by the fetcher (on a PBDMA's channel): the channel goes to ERROR with the
        cause. Always ready.
    graph_fault : In(stream.Signature(fault_layout(cfg)))
        Faults found by the graph walker, likewise. Always ready.
    clear_error : In(stream.Signature(cfg.chan_bits))
        Clear this channel's error and forget its decode state (MMIO STATE write). Always
        ready.
    clear_interrupt : In(2)
        Interrupt status bits to clear (write 1 to clear).
    error_mask : Out(cfg.channels)
        Channels in ERROR.
    interrupt : Out(1)
        Some interrupt status bit is set.
    interrupt_status : Out(2)
        Bit 0: a channel went to ERROR; bit 1: a NON_STALL_INTERRUPT method executed.
    query_channel : In(cfg.chan_bits)
        Channel whose state ``query_state`` reports.
    query_state : Out(8)
        ``ChannelState | ErrorCause << 4`` of ``query_channel``, combinationally.
    state : Out(CPState)
        State of the CP's FSM.
    channel : Out(cfg.chan_bits)
        The channel being decoded (whose context the CP holds).
    quiescent : Out(1)
        Nothing to arbitrate for, or waiting in WFI for completions: only an input can change
        anything.
    """

    def __init__(self, cfg):
        if not isinstance(cfg, FrontEndConfig):
            raise TypeError(f"CommandProcessor: cfg must be a FrontEndConfig, "
                            f"not {type(cfg).__name__}")
        if cfg.priority_levels < 1:
            raise ValueError(f"CommandProcessor: cfg.priority_levels must be at least 1, "
                             f"not {cfg.priority_levels}")
        self.cfg = cfg
        n, cb = cfg.channels, cfg.chan_bits
        super().__init__({
            "read_pbdma": Out(cfg.pbdma_bits),
            "read_pop": Out(1),
            "read_data": In(32),
            "nonempty": In(cfg.pbdmas),
            "running": In(cfg.pbdmas),
            "expecting": In(cfg.pbdmas), "fetch_behind": In(cfg.pbdmas),
            "pbdma_channel": In(data.ArrayLayout(cb, cfg.pbdmas)),
            "priority": In(data.ArrayLayout(cfg.prio_bits, cfg.pbdmas)),
            "holding": Out(cfg.pbdmas),
            "ch_timeslice": In(16),
            "launch_hold": In(16),
            "cp_switch": In(16),
            "now": In(64),
            "wake_at": Out(64),
            "replay": Out(n), "offering": Out(n),
            "blocked": Out(n),
            "release": Out(stream.Signature(release_layout(cfg))),
            "acquire": Out(stream.Signature(acquire_layout(cfg))),
            "acquire_met": In(1),
            "parked": In(n),
            "release_busy": In(n),
            "release_full": In(1),
            "release_stall": In(n),
            "confirming": In(n),
            "all_complete": In(1),
            "dispatched": Out(stream.Signature(cb)),
            "compute": Out(stream.Signature(launch_record_layout(cfg))),
            "copy": Out(stream.Signature(copy_record_layout(cfg))),
            "graph": Out(stream.Signature(graph_launch_layout(cfg))),
            "fault": In(stream.Signature(fault_layout(cfg))),
            "graph_fault": In(stream.Signature(fault_layout(cfg))),
            "clear_error": In(stream.Signature(cb)),
            "clear_interrupt": In(2),
            "error_mask": Out(n),
            "interrupt": Out(1),
            "interrupt_status": Out(2),
            "query_channel": In(cb),
            "query_state": Out(8),
            "state": Out(CPState),
            "channel": Out(cb),
            "quiescent": Out(1),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        n, r = cfg.channels, cfg.pbdmas
        ctx_layout = context_layout(cfg)

        m.submodules.contexts = ctx_mem = Memory(shape=ctx_layout, depth=n, init=[])
        ctx_wp = ctx_mem.write_port()
        ctx_rp = ctx_mem.read_port(transparent_for=(ctx_wp,))

        m.submodules.arb = arb = PriorityRoundRobin(r, cfg.priority_levels)

        # which PBDMA the CP decodes and whose context it holds (named for waveforms)
        state = Signal(CPState, name="cp_state")
        slot = Signal(cfg.pbdma_bits, name="cp_pbdma")
        chan = Signal(cfg.chan_bits, name="cp_channel")
        ctx = Signal(ctx_layout)
        loaded = Signal()           # ctx holds chan's live context (to be written back)
        replay = Signal(n)          # channel has a method word to execute again
        fresh = Signal(n)           # channel's stored context is stale (after an error clear)
        err = Signal(n)
        intr = Signal(2)            # bit0 channel error, bit1 non-stall interrupt
        from_replay = Signal()
        one_hots = {}
        err_bits = BitVector(m, err, one_hots=one_hots)
        replay_bits = BitVector(m, replay, one_hots=one_hots)
        fresh_bits = BitVector(m, fresh, set_wins=True, one_hots=one_hots)

        # the error causes, a memory: written by a fault of each source and by a clear
        m.submodules.causes = cause_mem = Memory(shape=ErrorCause, depth=n, init=[])
        cause_fault, cause_graph, cause_fail, cause_clear = (cause_mem.write_port()
                                                             for _ in range(4))
        cause_rp = cause_mem.read_port(domain="comb")

        m.d.comb += [self.state.eq(state), self.channel.eq(chan), self.error_mask.eq(err),
                     self.interrupt_status.eq(intr), self.interrupt.eq(intr.any()),
                     self.read_pbdma.eq(slot), self.replay.eq(replay),
                     self.holding.eq(Mux(loaded, (Const(1, r) << slot)[:r], 0))]

        # a dispatch made, offered to its engine once the engine's state for the channel is
        # loaded (``engine_at``)
        offer_compute, offer_copy, offer_graph = Signal(), Signal(), Signal()
        engine_at = Signal(64, name="cp_engine_at")
        engine_ready = Signal()
        offered = offer_compute | offer_copy | offer_graph
        m.d.comb += [engine_ready.eq(self.now >= engine_at),
                     self.offering.eq(Mux(offered, (Const(1, n) << chan)[:n], 0)),
                     self.compute.valid.eq(offer_compute & engine_ready),
                     self.copy.valid.eq(offer_copy & engine_ready),
                     self.graph.valid.eq(offer_graph & engine_ready)]

        # -- the PBDMAs' channels, as the arbiter sees them --
        def of(bits, c):
            return bits.bit_select(c, 1)

        rel_busy = self.release_busy | Mux(self.release_full, (1 << n) - 1, 0)
        blocked = replay & rel_busy
        m.d.comb += self.blocked.eq(blocked)
        # per PBDMA: its channel decodable now (runnable), or once the methods being fetched
        # for it arrive (coming); either only while nothing stops the channel
        runnable, coming = Signal(r), Signal(r)
        for i in range(r):
            c = self.pbdma_channel[i]
            free = (self.running[i] & ~of(self.parked, c) & ~of(blocked, c)
                    & ~of(self.release_stall, c) & ~of(err, c))
            m.d.comb += [runnable[i].eq(free & (self.nonempty[i] | of(replay, c))),
                         coming[i].eq(free & self.expecting[i])]
        m.d.comb += [arb.requests.eq(runnable), arb.priority.eq(self.priority)]
        # where an idle CP goes ahead: a PBDMA whose channel's methods are on their way, other
        # than the one whose context it holds
        ahead = Signal(r)
        m.d.comb += ahead.eq(coming & ~Mux(loaded, (Const(1, r) << slot)[:r], 0))
        ahead_slot = Signal(cfg.pbdma_bits)
        m.d.comb += ahead_slot.eq(lowest_set(ahead, cfg.pbdma_bits))
        # ... unless the channel it holds is itself waiting for its methods (no ping-pong)
        go_ahead = Signal()
        m.d.comb += go_ahead.eq(ahead.any() & ~(loaded & self.running.bit_select(slot, 1)
                                                & self.expecting.bit_select(slot, 1)))

        # -- the state word of the channel MMIO reads --
        q = self.query_channel
        q_ready = of(replay, q) | Cat(self.running[i] & self.nonempty[i]
                                      & (self.pbdma_channel[i] == q) for i in range(r)).any()
        q_state = Signal(ChannelState)
        with m.If(of(err, q)):
            m.d.comb += q_state.eq(ChannelState.ERROR)
        with m.Elif(of(self.parked, q)):
            m.d.comb += q_state.eq(ChannelState.PARKED)
        with m.Elif(of(blocked, q) | of(self.release_stall, q)):
            m.d.comb += q_state.eq(ChannelState.BLOCKED)
        with m.Elif(q_ready):
            m.d.comb += q_state.eq(ChannelState.READY)
        with m.Else():
            m.d.comb += q_state.eq(ChannelState.IDLE)
        m.d.comb += [cause_rp.addr.eq(q),
                     self.query_state.eq(q_state.as_value() | (cause_rp.data.as_value() << 4))]

        # -- errors --
        def raise_error(c, why, port):
            m.d.comb += [port.addr.eq(c), port.data.eq(why), port.en.eq(1)]
            err_bits.set(c)
            m.d.sync += intr[0].eq(1)

        m.d.comb += [self.fault.ready.eq(1), self.graph_fault.ready.eq(1),
                     self.clear_error.ready.eq(1)]
        with m.If(self.clear_interrupt.any()):
            m.d.sync += intr.eq(intr & ~self.clear_interrupt)
        for f, port in ((self.fault, cause_fault), (self.graph_fault, cause_graph)):
            with m.If(f.valid & ~err.bit_select(f.payload.channel, 1)):
                raise_error(f.payload.channel, f.payload.cause, port)

        # -- the word being executed --
        word = Signal(32)
        m.d.comb += word.eq(Mux(from_replay, ctx.replay_data, self.read_data))
        hdr = MethodHeader(word)
        is_header = ctx.count == 0
        maddr = Signal(Method, init=Method.NOP)
        mdata = Signal(32)
        msub = Signal(3)
        m.d.comb += [maddr.eq(Mux(is_header, hdr.address, ctx.method)),
                     mdata.eq(Mux(is_header, hdr.count, word)),
                     msub.eq(Mux(is_header, hdr.subchannel, ctx.subchannel))]
        sem = SemExecute(mdata)

        sp_shift = 2 + cfg.sp_bits
        sp_index = ctx.sem_address[2:sp_shift]
        in_window = (((ctx.sem_address >> sp_shift) == (cfg.syncpoint_base >> sp_shift))
                     & (sp_index < cfg.syncpoints))

        rel, acq = self.release, self.acquire
        m.d.comb += [
            rel.payload.channel.eq(chan), rel.payload.seq.eq(ctx.seq),
            rel.payload.address.eq(ctx.sem_address),
            rel.payload.payload.eq(Mux(sem.payload_size, ctx.payload, ctx.payload[:32])),
            rel.payload.wfi.eq(sem.release_wfi), rel.payload.timestamp.eq(sem.release_timestamp),
            rel.payload.wide.eq(sem.payload_size), rel.payload.to_counter.eq(in_window),
            rel.payload.index.eq(sp_index),
            rel.payload.kind.eq(Mux(sem.operation == SemOp.RELEASE, ReleaseKind.SET,
                                    Mux(sem.reduction == Reduction.IADD, ReleaseKind.ADD,
                                        Mux(sem.reduction == Reduction.IMAX, ReleaseKind.MAX,
                                            ReleaseKind.INC)))),
            acq.payload.channel.eq(chan), acq.payload.index.eq(sp_index),
            acq.payload.value.eq(ctx.payload[:32]), acq.payload.op.eq(sem.operation),
        ]

        def leave():
            m.d.sync += state.eq(CPState.ARBITRATE)

        # The next word may be popped while this one executes (one dword a cycle) when FETCH
        # would pop it at once: the channel still decodable, nothing to replay or wait for.
        # A semaphore operation ends the run (its release or acquire may stall the channel
        # from the next cycle), as do a dispatch and WFI.
        fetch_ahead = Signal()
        m.d.comb += fetch_ahead.eq(~of(err, chan) & ~of(self.parked, chan)
                                   & self.running.bit_select(slot, 1) & ~of(blocked, chan)
                                   & ~of(self.release_stall, chan) & ~of(self.confirming, chan)
                                   & ~of(replay, chan) & ~from_replay
                                   & self.nonempty.bit_select(slot, 1))

        def fetch_next():
            with m.If(fetch_ahead):
                m.d.comb += self.read_pop.eq(1)
                m.d.sync += from_replay.eq(0)       # (EXECUTE again, on the word popped)
            with m.Else():
                m.d.sync += state.eq(CPState.FETCH)

        def advance_method():
            """The data word has been executed: step the method address and count."""
            with m.If(~is_header):
                m.d.sync += ctx.count.eq(ctx.count - 1)
                with m.Switch(ctx.mode):
                    with m.Case(SecOp.INC):
                        m.d.sync += ctx.method.eq(ctx.method + 1)
                    with m.Case(SecOp.ONE_INC):
                        m.d.sync += [ctx.method.eq(ctx.method + 1), ctx.mode.eq(SecOp.NON_INC)]

        def fail(why):
            raise_error(chan, why, cause_fail)
            m.d.sync += loaded.eq(0)
            replay_bits.clear(chan)
            leave()

        def execute_method():
            host = maddr.as_value() < HOST_METHOD_LIMIT
            is_compute = msub == Subchannel.COMPUTE.value
            is_copy = msub == Subchannel.COPY.value
            known = Cat(*(maddr == meth for meth in HOST_METHODS)).any()
            known_compute = Cat(*(maddr == meth for meth in COMPUTE_METHODS)).any()
            known_copy = Cat(*(maddr == meth for meth in COPY_METHODS)).any()
            with m.If(host & ~known):
                fail(ErrorCause.ILLEGAL_METHOD)
            with m.Elif(~host & ~is_compute & ~is_copy):
                fail(ErrorCause.ILLEGAL_SUBCHANNEL)
            with m.Elif(~host & ((is_compute & ~known_compute) | (is_copy & ~known_copy))):
                fail(ErrorCause.ILLEGAL_METHOD)
            with m.Else():
                done = Signal()
                go_on = Signal()            # keep decoding this channel
                m.d.comb += go_on.eq(1)
                with m.Switch(maddr):
                    with m.Case(Method.NOP):
                        m.d.comb += done.eq(1)
                    with m.Case(Method.NON_STALL_INTERRUPT):
                        m.d.comb += done.eq(1)
                        m.d.sync += intr[1].eq(1)
                    with m.Case(Method.SEM_ADDR_LO):
                        m.d.comb += done.eq(1)
                        m.d.sync += ctx.sem_address[2:32].eq(mdata[2:32])
                    with m.Case(Method.SEM_ADDR_HI):
                        m.d.comb += done.eq(1)
                        m.d.sync += ctx.sem_address[32:].eq(mdata[:8])
                    with m.Case(Method.SEM_PAYLOAD_LO):
                        m.d.comb += done.eq(1)
                        m.d.sync += ctx.payload[:32].eq(mdata)
                    with m.Case(Method.SEM_PAYLOAD_HI):
                        m.d.comb += done.eq(1)
                        m.d.sync += ctx.payload[32:].eq(mdata)
                    with m.Case(Method.SEM_EXECUTE):
                        op = sem.operation
                        is_release = op == SemOp.RELEASE
                        is_reduction = op == SemOp.REDUCTION
                        is_acquire = ((op == SemOp.ACQUIRE) | (op == SemOp.ACQ_STRICT_GEQ)
                                      | (op == SemOp.ACQ_CIRC_GEQ))
                        is_max = sem.reduction == Reduction.IMAX
                        red_ok = ((sem.reduction == Reduction.IADD)
                                  | (sem.reduction == Reduction.INC) | is_max)
                        with m.If(~is_release & ~is_acquire & ~(is_reduction & red_ok)):
                            fail(ErrorCause.ILLEGAL_SEM_OP)
                        with m.Elif(~is_release & ~(is_reduction & is_max) & ~in_window):
                            fail(ErrorCause.SEM_ADDRESS)
                        with m.Elif(is_acquire):
                            m.d.comb += [acq.valid.eq(1), done.eq(1)]
                            with m.If(~self.acquire_met):
                                m.d.comb += go_on.eq(0)      # parked from the next cycle
                        with m.Elif(rel_busy.bit_select(chan, 1)):
                            # the channel's release slot is taken: try this word again later
                            m.d.sync += ctx.replay_data.eq(word)
                            replay_bits.set(chan)
                            m.d.comb += go_on.eq(0)
                        with m.Else():
                            m.d.comb += [rel.valid.eq(1), done.eq(1)]
                    with m.Case(Method.WFI):
                        m.d.comb += done.eq(1)
                    with m.Case(Method.SEND_PCAS_A):
                        m.d.comb += done.eq(1)
                        m.d.sync += ctx.descriptor.eq(mdata << 8)
                    with m.Case(Method.SEND_SIGNALING_PCAS2_B):
                        m.d.comb += done.eq(1)
                        m.d.sync += [offer_compute.eq(1),
                                     self.compute.payload.channel.eq(chan),
                                     self.compute.payload.seq.eq(ctx.seq),
                                     self.compute.payload.descriptor.eq(ctx.descriptor)]
                    with m.Case(Method.GRAPH_TABLE_LO):
                        m.d.comb += done.eq(1)
                        m.d.sync += ctx.graph_table[:32].eq(mdata)
                    with m.Case(Method.GRAPH_TABLE_HI):
                        m.d.comb += done.eq(1)
                        m.d.sync += ctx.graph_table[32:].eq(mdata[:8])
                    with m.Case(Method.GRAPH_RELEASE_INDEX):
                        m.d.comb += done.eq(1)
                        m.d.sync += [ctx.graph_release.eq(mdata[31]),
                                     ctx.graph_index.eq(mdata)]
                    with m.Case(Method.GRAPH_RELEASE_VALUE):
                        m.d.comb += done.eq(1)
                        m.d.sync += ctx.graph_value.eq(mdata)
                    with m.Case(Method.GRAPH_LAUNCH):
                        m.d.comb += done.eq(1)
                        m.d.sync += [offer_graph.eq(1), self.graph.payload.channel.eq(chan),
                                     self.graph.payload.seq.eq(ctx.seq),
                                     self.graph.payload.table.eq(ctx.graph_table),
                                     self.graph.payload.nodes.eq(mdata),
                                     self.graph.payload.device_runtime.eq(mdata[31]),
                                     self.graph.payload.handover.eq(
                                         mdata[GRAPH_HANDOVER_SHIFT:][:GRAPH_HANDOVER_BITS]),
                                     self.graph.payload.release.eq(ctx.graph_release),
                                     self.graph.payload.index.eq(ctx.graph_index),
                                     self.graph.payload.value.eq(ctx.graph_value),
                                     ctx.graph_release.eq(0)]
                    with m.Case(Method.OFFSET_IN_UPPER):
                        m.d.comb += done.eq(1)
                        m.d.sync += ctx.src[32:].eq(mdata[:8])
                    with m.Case(Method.OFFSET_IN_LOWER):
                        m.d.comb += done.eq(1)
                        m.d.sync += ctx.src[:32].eq(mdata)
                    with m.Case(Method.OFFSET_OUT_UPPER):
                        m.d.comb += done.eq(1)
                        m.d.sync += ctx.dst[32:].eq(mdata[:8])
                    with m.Case(Method.OFFSET_OUT_LOWER):
                        m.d.comb += done.eq(1)
                        m.d.sync += ctx.dst[:32].eq(mdata)
                    with m.Case(Method.LINE_LENGTH_IN):
                        m.d.comb += done.eq(1)
                        m.d.sync += ctx.length.eq(mdata)
                    with m.Case(Method.LAUNCH_DMA):
                        m.d.comb += done.eq(1)
                        m.d.sync += [offer_copy.eq(1), self.copy.payload.channel.eq(chan),
                                     self.copy.payload.seq.eq(ctx.seq),
                                     self.copy.payload.src.eq(ctx.src),
                                     self.copy.payload.dst.eq(ctx.dst),
                                     self.copy.payload.length.eq(ctx.length),
                                     self.copy.payload.flags.eq(mdata)]
                with m.If(done):
                    advance_method()
                with m.If(from_replay & done):
                    replay_bits.clear(chan)
                dispatching = ((maddr == Method.SEND_SIGNALING_PCAS2_B)
                               | (maddr == Method.LAUNCH_DMA) | (maddr == Method.GRAPH_LAUNCH))
                with m.If(dispatching):
                    m.d.sync += state.eq(CPState.DISPATCH)
                with m.Elif(maddr == Method.WFI):
                    m.d.sync += state.eq(CPState.WFI)
                with m.Elif(go_on & (maddr == Method.SEM_EXECUTE)):
                    m.d.sync += state.eq(CPState.FETCH)
                with m.Elif(go_on):
                    fetch_next()
                with m.Else():
                    leave()

        # -- the FSM --
        next_slot = Signal(cfg.pbdma_bits)
        next_chan = Signal(cfg.chan_bits)
        # the launch hold is a deadline on `now`, not a counter: nothing changes while the CP
        # waits, so the simulators may jump to it (``wake_at``)
        wait_until = Signal(64, name="cp_wait_until")
        waiting = Signal()
        m.d.comb += waiting.eq(((state == CPState.HOLD) | (state == CPState.LOAD))
                               & (self.now < wait_until))
        waited = ~waiting
        # a dispatch waiting for the engine's state is a deadline too
        gated = Signal()
        m.d.comb += gated.eq((state == CPState.DISPATCH) & offered & ~engine_ready)
        m.d.comb += self.wake_at.eq(Mux(waiting, wait_until,
                                        Mux(gated, engine_at, (1 << 64) - 1)))

        def move(to_slot):
            """Start moving to PBDMA ``to_slot``: the engine's state for its channel takes
            ``cp_switch`` ns. Its host methods (semaphores, time stamps) run meanwhile and only
            its first dispatch waits, unless that PBDMA's prefetch is under way (entries wait
            behind its queue): the state's reads queue behind it, and the CP waits first."""
            behind = self.fetch_behind.bit_select(to_slot, 1)
            return [state.eq(CPState.LOAD),
                    wait_until.eq(Mux(behind, self.now + self.cp_switch, self.now)),
                    engine_at.eq(Mux(behind, self.now, self.now + self.cp_switch))]

        cur_prio = Signal(cfg.prio_bits)
        m.d.comb += cur_prio.eq(self.priority[slot])
        higher_waiting = arb.valid & (self.priority[arb.grant] > cur_prio)
        others_waiting = (runnable & ~(Const(1, r) << slot)[:r]).any()
        slice_end = Signal(64, name="cp_slice_end")
        # the channel it holds keeps the CP while its methods are in the FIFO or on their way
        # (fetched, not arrived) and nothing stops it: moving to another PBDMA's channel and
        # back would load the engine's state twice; a channel of greater priority, or the
        # end of its timeslice while another waits, still takes the CP
        held = Signal()
        held_runnable = Signal()
        m.d.comb += [
            held_runnable.eq(runnable.bit_select(slot, 1)),
            held.eq(loaded & (held_runnable | coming.bit_select(slot, 1)) & ~higher_waiting
                    & ~((self.ch_timeslice != 0) & (self.now >= slice_end) & others_waiting)),
        ]

        def go_on_or_yield():
            """After a dispatch: the next method of the channel, unless a PBDMA of greater
            priority waits, or its timeslice is over while another waits."""
            with m.If(higher_waiting
                      | ((self.ch_timeslice != 0) & (self.now >= slice_end) & others_waiting)):
                leave()
            with m.Else():
                m.d.sync += state.eq(CPState.FETCH)

        release_slot = loaded & ~self.running.bit_select(slot, 1)
        # the channel decoded waits for its time stamp's write to be confirmed, and the CP
        # with it (the stamp must come before whatever the front end does next); a stamp that
        # waits for its work lets the CP go elsewhere meanwhile
        stamp_wait = Signal()
        m.d.comb += stamp_wait.eq((state == CPState.FETCH) & self.confirming.bit_select(chan, 1)
                                  & ~err.bit_select(chan, 1) & ~self.parked.bit_select(chan, 1)
                                  & self.running.bit_select(slot, 1)
                                  & ~blocked.bit_select(chan, 1))
        m.d.comb += [ctx_wp.addr.eq(chan), ctx_wp.data.eq(ctx),
                     ctx_rp.addr.eq(self.pbdma_channel[arb.grant])]
        with m.Switch(state):
            with m.Case(CPState.ARBITRATE):
                with m.If(release_slot):
                    # the PBDMA is switching its channel out: write the context back first
                    m.d.comb += ctx_wp.en.eq(1)
                    m.d.sync += loaded.eq(0)
                with m.Elif(held):
                    with m.If(held_runnable):
                        m.d.sync += state.eq(CPState.FETCH)
                with m.Elif(arb.valid):
                    m.d.comb += arb.advance.eq(1)
                    with m.If(loaded & (arb.grant == slot)):
                        m.d.sync += state.eq(CPState.FETCH)
                    with m.Else():
                        # write the context held back, read the next one
                        m.d.comb += ctx_wp.en.eq(loaded)
                        m.d.sync += [next_slot.eq(arb.grant),
                                     next_chan.eq(self.pbdma_channel[arb.grant]),
                                     *move(arb.grant)]
                with m.Elif(go_ahead):
                    # nothing to decode: move to a channel whose methods are on their way
                    m.d.comb += [ctx_wp.en.eq(loaded),
                                 ctx_rp.addr.eq(self.pbdma_channel[ahead_slot])]
                    m.d.sync += [next_slot.eq(ahead_slot),
                                 next_chan.eq(self.pbdma_channel[ahead_slot]),
                                 *move(ahead_slot)]
            with m.Case(CPState.LOAD):
                # (the read port keeps the next channel's context while the switch lasts)
                m.d.comb += ctx_rp.addr.eq(next_chan)
                with m.If(waited):
                    m.d.sync += [slot.eq(next_slot), chan.eq(next_chan), loaded.eq(1),
                                 state.eq(CPState.FETCH),
                                 slice_end.eq(self.now + self.ch_timeslice)]
                    fresh_bits.clear(next_chan)
                    with m.If(fresh.bit_select(next_chan, 1)):
                        m.d.sync += ctx.eq(0)
                    with m.Else():
                        m.d.sync += ctx.eq(ctx_rp.data)
            with m.Case(CPState.FETCH):
                with m.If(err.bit_select(chan, 1) | self.parked.bit_select(chan, 1)
                          | ~self.running.bit_select(slot, 1)
                          | blocked.bit_select(chan, 1)
                          | (self.release_stall.bit_select(chan, 1) & ~stamp_wait)):
                    leave()
                with m.Elif(stamp_wait):
                    pass            # the time stamp's round trip: the CP waits with it
                with m.Elif(replay.bit_select(chan, 1)):
                    m.d.sync += [from_replay.eq(1), state.eq(CPState.EXECUTE)]
                with m.Elif(self.nonempty.bit_select(slot, 1)):
                    m.d.comb += self.read_pop.eq(1)
                    m.d.sync += [from_replay.eq(0), state.eq(CPState.EXECUTE)]
                with m.Else():
                    leave()
            with m.Case(CPState.EXECUTE):
                with m.If(err.bit_select(chan, 1)):
                    leave()          # a fetch fault arrived meanwhile: drop the word
                with m.Elif(is_header & (hdr.sec_op != SecOp.IMMD)):
                    with m.If(word == 0):
                        fetch_next()                                  # NOP
                    with m.Elif((hdr.sec_op == SecOp.INC) | (hdr.sec_op == SecOp.NON_INC)
                                | (hdr.sec_op == SecOp.ONE_INC)):
                        with m.If((hdr.address >= HOST_METHOD_LIMIT)
                                  & (hdr.subchannel != Subchannel.COMPUTE.value)
                                  & (hdr.subchannel != Subchannel.COPY.value)):
                            fail(ErrorCause.ILLEGAL_SUBCHANNEL)
                        with m.Else():
                            m.d.sync += [ctx.method.eq(hdr.address), ctx.count.eq(hdr.count),
                                         ctx.mode.eq(hdr.sec_op),
                                         ctx.subchannel.eq(hdr.subchannel)]
                            fetch_next()
                            with m.If(from_replay):
                                replay_bits.clear(chan)
                    with m.Else():
                        fail(ErrorCause.ILLEGAL_HEADER)
                with m.Else():
                    execute_method()
            with m.Case(CPState.DISPATCH):
                taken = ((self.compute.valid & self.compute.ready)
                         | (self.copy.valid & self.copy.ready)
                         | (self.graph.valid & self.graph.ready))
                with m.If(taken):
                    m.d.comb += [self.dispatched.valid.eq(1), self.dispatched.payload.eq(chan)]
                    m.d.sync += [offer_compute.eq(0), offer_copy.eq(0),
                                 offer_graph.eq(0), ctx.seq.eq(ctx.seq + 1)]
                    with m.If(offer_compute & (self.launch_hold != 0)):
                        m.d.sync += [state.eq(CPState.HOLD),
                                     wait_until.eq(self.now + self.launch_hold)]
                    with m.Else():
                        go_on_or_yield()
                with m.Elif(~offered):
                    leave()
            with m.Case(CPState.HOLD):
                with m.If(waited):
                    go_on_or_yield()
            with m.Case(CPState.WFI):
                with m.If(self.all_complete):
                    m.d.sync += state.eq(CPState.FETCH)

        # clearing an error: forget the channel's stale context and pending replay
        with m.If(self.clear_error.valid):
            c = self.clear_error.payload
            m.d.comb += [cause_clear.addr.eq(c), cause_clear.data.eq(ErrorCause.NONE),
                         cause_clear.en.eq(1)]
            err_bits.clear(c)
            fresh_bits.set(c)
            replay_bits.clear(c)
            with m.If(c == chan):
                m.d.sync += loaded.eq(0)
        for bits in (err_bits, replay_bits, fresh_bits):
            bits.commit()

        m.d.comb += self.quiescent.eq(((state == CPState.ARBITRATE)
                                       & Mux(held, ~held_runnable, ~arb.valid & ~go_ahead)
                                       & ~release_slot)
                                      | waiting | stamp_wait | gated
                                      | ((state == CPState.WFI) & ~self.all_complete))
        return m
