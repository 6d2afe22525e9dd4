"""PBDMA units, the channels resident in the front end and their switches: :class:`PbdmaUnits`."""

from amaranth import Module, Signal, Array, Mux, Cat, Const
from amaranth.lib import wiring, stream, data, enum
from amaranth.lib.wiring import In, Out

from .arbiter import PriorityRoundRobin
from .bits import lowest_set, BitVector
from .config import FrontEndConfig, bits_for
from .doorbell import ring_context_layout, writeback_layout
from .fetcher import segment_layout
from .layouts import ADDR_BITS
from .runlist import NEVER

__all__ = ["PbdmaUnits", "PbdmaState"]


class PbdmaState(enum.Enum, shape=3):
    """What a PBDMA unit is doing."""
    FREE = 0               # no channel
    LOAD = 1               # loading a channel's context (CTX_LOAD ns)
    RUN = 2                # its channel is fetched and decoded
    DRAIN = 3              # switching its channel out: waiting for its reads and the CP
    SAVE = 4               # saving the channel's context (CTX_SAVE ns)


class PbdmaUnits(wiring.Component):
    """PBDMA units: which channels are resident in the front end, loaded and switched out.

    A PBDMA holds one channel at a time: its ring (base, size, GP_PUT), the next GPFIFO entry
    to fetch, and a queue of the entries fetched and not yet decoded to their end (the
    segment queue, ``pbdma_segments`` deep). The fetcher reads entries and push-buffer
    segments only for resident channels, into the PBDMA's FIFO partition; the command
    processor decodes what the PBDMAs hold. Every dword the CP pops advances the head of the
    queue, so the PBDMA always knows the exact position decoded: when the last dword of an
    entry is popped, the entry is retired and the channel's GP_GET written back.

    *Binding.* A free PBDMA loads a channel that has work (entries not decoded, or a method word
    to replay), belongs to the TSG the runlist scheduler serves, and is not parked, resident or
    in error: the highest priority first, round robin among channels of a level. With no such
    channel, it loads a parked one (round robin): its acquire waits there, and once released it
    runs on without a load, as a context's blocked channel does when its TSG comes back. Loading
    reads the channel's ring context and waits ``ctx_load`` ns (the context load); the fetch
    then resumes where decoding stopped: the rest of a segment first, then the next entries.

    *Switching out* (the switch policies): a channel leaves its PBDMA when it is in error, when
    its TSG is no longer served, and, one PBDMA at a time while none is free, when it is stuck
    (parked on an acquire or blocked on a release) or has no work left while another channel
    waits for a PBDMA (ready to run: a parked one takes only a PBDMA no ready channel wants; one
    that wakes on no PBDMA pays a load), when a channel of greater priority waits, or when its
    channel timeslice (``ch_timeslice`` ns, 0: none) is over while another waits. Switching out
    first drains (no new reads; the reads in flight land; the CP writes its decode context
    back), then throws the FIFO data away, writes the position decoded back (GP_GET and the rest
    of the segment: what was fetched beyond is fetched again when the channel returns) and waits
    ``ctx_save`` ns, or nothing for a channel that ran dry (no entries left, nothing to replay:
    its GP_GET is all there is to save). A channel in error is dropped without a save.

    *The context port*: saves and loads go through one port, whichever PBDMA they are for, one
    at a time (a save before a load): however many PBDMAs there are, channels change at most
    one per ``ctx_save + ctx_load`` ns. Both waits are deadlines on ``now`` (``wake_at``),
    during which the unit is quiescent.

    Timing: a bind takes effect at the clock edge after its decision (one a cycle); the
    channel is fetched from the first cycle at or after its load deadline. A write-back port
    write a cycle: a save first, else a retired entry's GP_GET.

    Parameters
    ----------
    cfg : FrontEndConfig
        Sizes: ``channels``, ``pbdmas``, ``pbdma_segments``, ``priority_levels``.

    Attributes
    ----------
    served, pending, replay, parked, stuck, error : In(cfg.channels)
        Channels of the TSG served; with entries not decoded (GP_PUT != GP_GET); with a method
        word to replay; parked on an acquire; stuck (parked, or blocked on a release); in
        error.
    prio_mask : In(data.ArrayLayout(cfg.channels, cfg.priority_levels))
        The channels of each priority level.
    bind_channel : Out(cfg.chan_bits)
        The channel to load, whose ring context is read...
    bind_context : In(ring_context_layout(cfg))
        ...here, combinationally.
    channel : Out(data.ArrayLayout(cfg.chan_bits, cfg.pbdmas))
        The channel on each PBDMA.
    put : In(data.ArrayLayout(cfg.gp_bits, cfg.pbdmas))
        GP_PUT of each of those.
    priority : In(data.ArrayLayout(cfg.prio_bits, cfg.pbdmas))
        PRIORITY of each of those.
    writeback : Out(stream.Signature(writeback_layout(cfg)))
        GP_GET of a channel (retired entries), or its position at a save. ``ready`` is not
        looked at.
    resident : Out(cfg.channels)
        Channels on a PBDMA (loading, running, draining or saving).
    state : Out(data.ArrayLayout(PbdmaState, cfg.pbdmas))
        Each PBDMA's state.
    running : Out(cfg.pbdmas)
        PBDMAs in RUN: the CP may decode them.
    fetch_pending : Out(cfg.pbdmas)
        PBDMAs with a GPFIFO entry to fetch and room in their segment queue.
    fetch_behind : Out(cfg.pbdmas)
        PBDMAs with more GPFIFO entries to fetch than their segment queue has room for:
        entries wait beyond it.
    fetch_get : Out(data.ArrayLayout(cfg.gp_bits, cfg.pbdmas))
        The entry each fetches next.
    gp_base : Out(data.ArrayLayout(ADDR_BITS, cfg.pbdmas))
        Byte address of each one's ring.
    fetch_halt : Out(cfg.pbdmas)
        PBDMAs not fetching (not in RUN).
    advance : In(stream.Signature(segment_layout(cfg)))
        The fetcher read a GPFIFO entry: into the segment queue. Always ready.
    in_flight : In(cfg.pbdmas)
        PBDMAs with a DMA read outstanding.
    load : Out(stream.Signature(segment_layout(cfg)))
        The rest of the segment a bound channel resumes with, to the fetcher. ``ready`` is not
        looked at.
    drop : Out(stream.Signature(cfg.pbdma_bits))
        Forget the PBDMA's segment (its channel leaves), to the fetcher.
    discard : Out(cfg.pbdmas)
        Throw the PBDMA's FIFO data away (one cycle, as its channel leaves).
    pop : In(stream.Signature(cfg.pbdma_bits))
        The CP popped a dword of this PBDMA. Always ready.
    cp_holding : In(cfg.pbdmas)
        PBDMAs whose channel's decode context is live in the CP (not yet written back).
    ctx_save, ctx_load, ch_timeslice : In(16)
        ns to save and to load a context; ns a channel may hold its PBDMA while another waits.
    now : In(64)
        The current time in ns.
    wake_at : Out(64)
        The earliest LOAD or SAVE deadline waited for (``NEVER`` when none).
    quiescent : Out(1)
        Nothing to do until an input changes or ``now`` reaches ``wake_at``.
    """

    def __init__(self, cfg):
        if not isinstance(cfg, FrontEndConfig):
            raise TypeError(f"PbdmaUnits: cfg must be a FrontEndConfig, not {type(cfg).__name__}")
        self.cfg = cfg
        n, r, cb, pb = cfg.channels, cfg.pbdmas, cfg.chan_bits, cfg.pbdma_bits
        super().__init__({
            "served": In(n), "pending": In(n), "replay": In(n), "parked": In(n),
            "stuck": In(n), "error": In(n),
            "prio_mask": In(data.ArrayLayout(n, cfg.priority_levels)),
            "bind_channel": Out(cb),
            "bind_context": In(ring_context_layout(cfg)),
            "channel": Out(data.ArrayLayout(cb, r)),
            "put": In(data.ArrayLayout(cfg.gp_bits, r)),
            "priority": In(data.ArrayLayout(cfg.prio_bits, r)),
            "writeback": Out(stream.Signature(writeback_layout(cfg))),
            "resident": Out(n),
            "state": Out(data.ArrayLayout(PbdmaState, r)),
            "running": Out(r),
            "fetch_pending": Out(r), "fetch_behind": Out(r),
            "fetch_get": Out(data.ArrayLayout(cfg.gp_bits, r)),
            "gp_base": Out(data.ArrayLayout(ADDR_BITS, r)),
            "fetch_halt": Out(r),
            "advance": In(stream.Signature(segment_layout(cfg))),
            "in_flight": In(r),
            "load": Out(stream.Signature(segment_layout(cfg))),
            "drop": Out(stream.Signature(pb)),
            "discard": Out(r),
            "pop": In(stream.Signature(pb)),
            "cp_holding": In(r),
            "ctx_save": In(16), "ctx_load": In(16), "ch_timeslice": In(16),
            "now": In(64),
            "wake_at": Out(64),
            "quiescent": Out(1),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        n, r, d, gpb = cfg.channels, cfg.pbdmas, cfg.pbdma_segments, cfg.gp_bits
        qb = bits_for(d)
        m.d.comb += [self.advance.ready.eq(1), self.pop.ready.eq(1)]

        # -- the channels waiting for a PBDMA, and the one to bind next --
        resident = Signal(n)
        resident_bits = BitVector(m, resident)
        m.d.comb += self.resident.eq(resident)
        waiting = Signal(n)         # could run now and is on no PBDMA
        m.d.comb += waiting.eq(self.served & (self.pending | self.replay) & ~self.parked
                               & ~self.error & ~resident)
        levels = cfg.priority_levels
        top = Signal(n)             # the waiting channels of the highest level that has some
        top_level = Signal(cfg.prio_bits)
        m.d.comb += top.eq(waiting & self.prio_mask[0])
        for lvl in range(1, levels):
            lvl_waiting = waiting & self.prio_mask[lvl]
            with m.If(lvl_waiting.any()):
                m.d.comb += [top.eq(lvl_waiting), top_level.eq(lvl)]
        # with no channel ready to run, a free PBDMA takes a parked one: its acquire is retried
        # there, and once released it runs on without a load (as after a TSG switch, where a
        # context's blocked channel is loaded again)
        parked_waiting = Signal(n)
        m.d.comb += parked_waiting.eq(self.served & (self.pending | self.replay) & self.parked
                                      & ~self.error & ~resident)
        m.submodules.arb = arb = PriorityRoundRobin(n)
        m.d.comb += [arb.requests.eq(Mux(waiting.any(), top, parked_waiting)),
                     self.bind_channel.eq(arb.grant)]
        ctx = self.bind_context

        # -- per-PBDMA state --
        state = [Signal(PbdmaState, name=f"pbdma{i}_state") for i in range(r)]
        chan = [Signal(cfg.chan_bits, name=f"pbdma{i}_channel") for i in range(r)]
        until = [Signal(64, name=f"pbdma{i}_until") for i in range(r)]
        slice_end = [Signal(64, name=f"pbdma{i}_slice_end") for i in range(r)]
        failed = [Signal(name=f"pbdma{i}_failed") for i in range(r)]   # leaving in error
        base = [Signal(ADDR_BITS, name=f"pbdma{i}_base") for i in range(r)]
        log2 = [Signal(5, name=f"pbdma{i}_log2") for i in range(r)]
        fget = [Signal(gpb, name=f"pbdma{i}_fetch_get") for i in range(r)]
        ret_get = [Signal(gpb, name=f"pbdma{i}_get") for i in range(r)]   # GP_GET decoded
        dirty = [Signal(name=f"pbdma{i}_dirty") for i in range(r)]      # ret_get not written
        # segment queues: entry index, address and dwords left of the entries fetched and not
        # decoded to their end, and the control (zero-length) entries fetched after each
        q_idx = [Array(Signal(gpb, name=f"pbdma{i}_q{j}_idx") for j in range(d)) for i in range(r)]
        q_addr = [Array(Signal(ADDR_BITS, name=f"pbdma{i}_q{j}_addr") for j in range(d))
                  for i in range(r)]
        q_left = [Array(Signal(21, name=f"pbdma{i}_q{j}_left") for j in range(d))
                  for i in range(r)]
        q_nops = [Array(Signal(gpb, name=f"pbdma{i}_q{j}_nops") for j in range(d))
                  for i in range(r)]
        head = [Signal(qb, name=f"pbdma{i}_q_head") for i in range(r)]
        tail = [Signal(qb, name=f"pbdma{i}_q_tail") for i in range(r)]
        count = [Signal(range(d + 1), name=f"pbdma{i}_q_count") for i in range(r)]

        # GPFIFO entries not fetched yet (GP_PUT - the next to fetch, modulo the ring)
        unfetched = [Signal(gpb, name=f"pbdma{i}_unfetched") for i in range(r)]
        for i in range(r):
            m.d.comb += unfetched[i].eq((self.put[i] - fget[i])
                                        & ((Const(1, gpb + 1) << log2[i]) - 1))

        def wrap(x):
            return Mux(x == d - 1, 0, x + 1) if d & (d - 1) else (x + 1)[:qb]

        for i in range(r):
            m.d.comb += [self.channel[i].eq(chan[i]), self.state[i].eq(state[i]),
                         self.running[i].eq(state[i] == PbdmaState.RUN),
                         self.fetch_get[i].eq(fget[i]), self.gp_base[i].eq(base[i]),
                         self.fetch_halt[i].eq(state[i] != PbdmaState.RUN),
                         self.fetch_pending[i].eq((state[i] == PbdmaState.RUN)
                                                  & (fget[i] != self.put[i]) & (count[i] < d)),
                         self.fetch_behind[i].eq((state[i] == PbdmaState.RUN)
                                                 & (unfetched[i] > d - count[i]))]

        free = Signal(r)
        m.d.comb += free.eq(Cat(s == PbdmaState.FREE for s in state))
        leaving = Cat((s == PbdmaState.DRAIN) | (s == PbdmaState.SAVE) for s in state).any()
        # one voluntary switch at a time, and none while a PBDMA is free
        may_switch = ~free.any() & ~leaving
        # the context port: one save or load at a time, whichever PBDMA it is for
        ctx_busy = Signal()
        m.d.comb += ctx_busy.eq(Cat((s == PbdmaState.LOAD) | (s == PbdmaState.SAVE)
                                    for s in state).any())

        # -- write-back port: a save first, else a retired GP_GET --
        wb = self.writeback
        saving = Signal(r)           # PBDMAs ready to save this cycle
        m.d.comb += saving.eq(Cat((state[i] == PbdmaState.DRAIN) & ~failed[i]
                                  & ~self.in_flight[i] & ~self.cp_holding[i] & ~ctx_busy
                                  for i in range(r)))

        # -- binding: the lowest free PBDMA takes the channel granted (a save goes first) --
        bind_to = Signal(cfg.pbdma_bits)
        m.d.comb += bind_to.eq(lowest_set(free, cfg.pbdma_bits))
        binding = Signal()
        m.d.comb += binding.eq(free.any() & arb.valid & ~ctx_busy & ~saving.any())
        with m.If(binding):
            m.d.comb += [arb.advance.eq(1), self.load.valid.eq(1),
                         self.load.payload.pbdma.eq(bind_to),
                         self.load.payload.address.eq(ctx.seg_address),
                         self.load.payload.length.eq(ctx.seg_left)]
            resident_bits.set(arb.grant)

        save_pick = Signal(cfg.pbdma_bits)
        m.d.comb += save_pick.eq(lowest_set(saving, cfg.pbdma_bits))
        dirties = Signal(r)
        m.d.comb += dirties.eq(Cat(dirty))
        dirty_pick = Signal(cfg.pbdma_bits)
        m.d.comb += dirty_pick.eq(lowest_set(dirties, cfg.pbdma_bits))

        leaves = []                 # per PBDMA: it switches its channel out now

        wake = NEVER
        for i in range(r):
            st = state[i]
            c = chan[i]
            mask = (Const(1, gpb + 1) << log2[i]) - 1

            def step(x, k=1):
                return (x + k) & mask

            adv_me = self.advance.valid & (self.advance.payload.pbdma == i)
            pop_me = self.pop.valid & (self.pop.payload == i)
            h = head[i]
            h_left = q_left[i][h]
            deq = pop_me & (h_left == 1)
            # popping: the head's position moves on; its last dword retires the entry
            with m.If(pop_me):
                m.d.sync += [q_addr[i][h].eq(q_addr[i][h] + 4), q_left[i][h].eq(h_left - 1)]
                with m.If(deq):
                    m.d.sync += [head[i].eq(wrap(h)), ret_get[i].eq(step(q_idx[i][h], 1
                                                                          + q_nops[i][h])),
                                 dirty[i].eq(1)]
            count_after = Signal(range(d + 1), name=f"pbdma{i}_q_after")
            m.d.comb += count_after.eq(count[i] - deq)
            enq = adv_me & (self.advance.payload.length != 0)
            m.d.sync += count[i].eq(count_after + enq)
            with m.If(adv_me):
                m.d.sync += fget[i].eq(step(fget[i]))
                with m.If(enq):
                    t = tail[i]
                    m.d.sync += [q_idx[i][t].eq(fget[i]), q_addr[i][t].eq(self.advance.payload.address),
                                 q_left[i][t].eq(self.advance.payload.length),
                                 q_nops[i][t].eq(0), tail[i].eq(wrap(t))]
                with m.Elif(count_after == 0):
                    # a control entry with nothing before it: decoded as it is read
                    m.d.sync += [ret_get[i].eq(step(fget[i])), dirty[i].eq(1)]
                with m.Else():
                    last = Mux(tail[i] == 0, d - 1, tail[i] - 1)
                    m.d.sync += q_nops[i][last].eq(q_nops[i][last] + 1)

            # the channel's view
            c_err = self.error.bit_select(c, 1)
            c_stuck = self.stuck.bit_select(c, 1)
            c_replay = self.replay.bit_select(c, 1)
            idle = ((count[i] == 0) & (fget[i] == self.put[i]) & ~c_replay & ~self.in_flight[i])
            lower = Signal(name=f"pbdma{i}_lower")
            m.d.comb += lower.eq(waiting.any() & (top_level > self.priority[i]))
            must_leave = Signal(name=f"pbdma{i}_must_leave")
            may_leave = Signal(name=f"pbdma{i}_may_leave")
            m.d.comb += [
                must_leave.eq((st == PbdmaState.RUN) & (c_err | ~self.served.bit_select(c, 1))),
                may_leave.eq((st == PbdmaState.RUN) & may_switch
                             & (((c_stuck | idle)
                                 & waiting.any()) | lower
                                | ((self.ch_timeslice != 0) & (self.now >= slice_end[i])
                                   & waiting.any()))),
            ]
            leaves.append(must_leave | may_leave)
            with m.Switch(st):
                with m.Case(PbdmaState.FREE):
                    with m.If(binding & (bind_to == i)):
                        has_seg = ctx.seg_left != 0
                        m.d.sync += [
                            st.eq(PbdmaState.LOAD), c.eq(arb.grant), failed[i].eq(0),
                            until[i].eq(self.now + self.ctx_load),
                            base[i].eq(ctx.base), log2[i].eq(ctx.entries_log2),
                            fget[i].eq((ctx.get + has_seg)
                                       & ((Const(1, gpb + 1) << ctx.entries_log2) - 1)),
                            ret_get[i].eq(ctx.get),
                            dirty[i].eq(0), head[i].eq(0), tail[i].eq(has_seg),
                            count[i].eq(has_seg), q_idx[i][0].eq(ctx.get),
                            q_addr[i][0].eq(ctx.seg_address), q_left[i][0].eq(ctx.seg_left),
                            q_nops[i][0].eq(0),
                        ]
                with m.Case(PbdmaState.LOAD):
                    with m.If(self.now >= until[i]):
                        m.d.sync += [st.eq(PbdmaState.RUN),
                                     slice_end[i].eq(self.now + self.ch_timeslice)]
                with m.Case(PbdmaState.RUN):
                    with m.If(must_leave | may_leave):
                        m.d.sync += [st.eq(PbdmaState.DRAIN), failed[i].eq(c_err)]
                with m.Case(PbdmaState.DRAIN):
                    with m.If(failed[i] & ~self.in_flight[i] & ~self.cp_holding[i]):
                        # dropped in error: nothing to save (clearing the error resets it)
                        m.d.comb += [self.discard[i].eq(1), self.drop.valid.eq(1),
                                     self.drop.payload.eq(i)]
                        m.d.sync += [st.eq(PbdmaState.FREE), dirty[i].eq(0)]
                        resident_bits.clear(c)
                    with m.Elif(saving[i] & (save_pick == i)):
                        m.d.comb += [self.discard[i].eq(1), self.drop.valid.eq(1),
                                     self.drop.payload.eq(i), wb.valid.eq(1),
                                     wb.payload.channel.eq(c), wb.payload.save.eq(1),
                                     wb.payload.get.eq(Mux(count[i] != 0, q_idx[i][h],
                                                           ret_get[i])),
                                     wb.payload.seg_address.eq(Mux(count[i] != 0,
                                                                   q_addr[i][h], 0)),
                                     wb.payload.seg_left.eq(Mux(count[i] != 0, h_left, 0))]
                        # a channel that ran dry has nothing to save beyond its GP_GET
                        m.d.sync += [st.eq(PbdmaState.SAVE), dirty[i].eq(0),
                                     until[i].eq(self.now + Mux(idle, 0, self.ctx_save))]
                with m.Case(PbdmaState.SAVE):
                    with m.If(self.now >= until[i]):
                        m.d.sync += st.eq(PbdmaState.FREE)
                        resident_bits.clear(c)
            waits = ((st == PbdmaState.LOAD) | (st == PbdmaState.SAVE)) & (self.now < until[i])
            wake = Mux(waits & (until[i] < wake), until[i], wake)

        # a retired GP_GET when no save has the port
        with m.If(~saving.any() & dirties.any()):
            dp = dirty_pick
            m.d.comb += [wb.valid.eq(1), wb.payload.channel.eq(Array(chan)[dp]),
                         wb.payload.get.eq(Array(ret_get)[dp]), wb.payload.save.eq(0)]
            for i in range(r):
                with m.If(dp == i):
                    m.d.sync += dirty[i].eq(0)

        resident_bits.commit()
        m.d.comb += self.wake_at.eq(wake)
        busy = Signal()
        m.d.comb += busy.eq(binding | dirties.any() | saving.any())
        transitions = []
        for i in range(r):
            st = state[i]
            transitions.append(((st == PbdmaState.LOAD) | (st == PbdmaState.SAVE))
                               & (self.now >= until[i]))
            transitions.append((st == PbdmaState.DRAIN) & ~self.in_flight[i]
                               & ~self.cp_holding[i] & (failed[i] | ~ctx_busy))
        m.d.comb += self.quiescent.eq(~busy & ~Cat(transitions).any() & ~Cat(leaves).any())
        return m
