"""Syncpoint unit, on-chip counters, deferred releases, parked acquires, in-flight work:
:class:`SyncpointUnit`."""

from functools import reduce
import operator

from amaranth import Module, Signal, Array, Mux, Cat, Const
from amaranth.lib import wiring, stream, data, enum
from amaranth.lib.memory import Memory, MemoryData
from amaranth.lib.wiring import In, Out

from .arbiter import PriorityRoundRobin
from .bits import lowest_set, BitVector
from .config import FrontEndConfig
from .doorbell import TSG_LOOKUPS
from .layouts import SemOp, DmaWrite, completion_layout, ADDR_BITS
from .runlist import NEVER

__all__ = ["SyncpointUnit", "ReleaseKind", "FireState", "release_layout", "acquire_layout",
           "acquire_condition"]


class ReleaseKind(enum.Enum, shape=2):
    """What a release does to its counter or its host memory (``SET`` or ``MAX`` there)."""
    SET = 0        # counter or host memory = payload
    ADD = 1        # counter += payload (REDUCTION IADD)
    INC = 2        # counter += 1 (REDUCTION INC; the model ignores INC's wrap limit)
    MAX = 3        # counter or host memory = max(it, payload) (REDUCTION IMAX, signed)


class FireState(enum.Enum, shape=2):
    """State of the release being written to host memory."""
    IDLE = 0
    PAYLOAD = 1
    TIMESTAMP = 2
    HOLD = 3           # a timestamp release's channel held: its write's round trip


def release_layout(cfg):
    """A semaphore release posted by the command processor: its channel and dispatch sequence
    number, the semaphore ``address`` (or the counter ``index`` when ``to_counter``), the
    ``payload`` and what to do with it."""
    return data.StructLayout({
        "channel": cfg.chan_bits, "seq": cfg.seq_bits, "address": ADDR_BITS, "payload": 64,
        "kind": ReleaseKind, "wfi": 1, "timestamp": 1, "wide": 1, "to_counter": 1,
        "index": cfg.sp_bits})


def acquire_layout(cfg):
    """A semaphore acquire: the channel that waits, the counter, the value and the condition."""
    return data.StructLayout({"channel": cfg.chan_bits, "index": cfg.sp_bits, "value": 32,
                              "op": SemOp})


def acquire_condition(op, counter, value):
    """Whether a counter value satisfies an acquire (ACQUIRE ==, STRICT_GEQ, CIRC_GEQ)."""
    return Mux(op == SemOp.ACQUIRE, counter == value,
               Mux(op == SemOp.ACQ_STRICT_GEQ, counter >= value, ~(counter - value)[31]))


class SyncpointUnit(wiring.Component):
    """Syncpoint unit: on-chip counters, deferred releases, parked acquires, in-flight work.

    *In-flight work*: every dispatch to an engine adds one to its channel's count, every
    completion takes one off. The counts are memories indexed by channel (one per source, so
    that a dispatch and three completions of different channels can land in one cycle);
    a total and a count per TSG (the channel's TSG looked up in the channel table,
    ``lookup_channel``) are kept beside them. WFI waits for the total to be zero.

    *Release*: releases wait in a pool of ``release_slots`` entries shared by the channels, at
    most one per channel. A release posted with RELEASE_WFI waits until the work its channel
    had dispatched before it has completed (completions carry the dispatch sequence number, so
    later work does not hold it back); without WFI it fires at once. Firing takes one cycle for
    a counter (set, add, or increment) and one DMA write per 8 bytes for host memory (the
    payload, then ``now`` as an 8-byte timestamp when RELEASE_TIMESTAMP is set). A channel
    with a release waiting (``release_busy``), or any channel while the pool is full
    (``release_full``), must wait before posting another. A timestamp release holds its whole
    channel (``release_stall``) until its writes are done and their round trip is over: the
    timestamp must be taken after the work before it and before the work after it. The round
    trip is a configuration input, ``timestamp_hold`` ns for a RELEASE_WFI timestamp (an
    event's time: the work before it completed) and ``stamp_hold`` ns for one without (a
    front-end time stamp, as CUPTI's per-launch ``submitted``), plus ``stamp_fetch`` ns while
    the channel's PBDMA still has GPFIFO entries to fetch (``fetch_behind``): the write is
    confirmed behind the reads the PBDMA prefetches.

    *Completion releases*: a compute completion may carry a release of its own (``release``,
    ``index``, ``value``: the kernel's launch named a syncpoint, as a QMD's release fields do);
    the counter is set as it arrives, ahead of a channel release wanting the write port that
    cycle.

    *Counters* live in a small SRAM (one write port, three asynchronous read ports: the acquire
    check, the release being fired and the wake scanner), so their number costs memory bits,
    not multiplexers.

    *Acquire*: the CP presents an acquire and sees ``acquire_met`` in the same cycle; if not
    met, the channel is parked (its condition kept in a memory indexed by channel). After any
    counter change and ``acquire_retry`` more cycles (a configuration input, like a
    retry-interval register), a scanner re-checks the channels parked then on a PBDMA
    (``resident``), one per cycle, lowest first, and wakes those whose condition holds. A
    channel parked on no PBDMA has its acquire state in its context in memory: after a change,
    the poller re-checks each one parked then, one at a time, ``acquire_poll`` ns each (the
    read back), round robin from the one after the last polled. So the more channels wait
    off the PBDMAs, the later, on average, the one whose semaphore was released wakes. A
    channel due for a poll stays due when the runlist puts it on a PBDMA before its turn (the
    scan of that change is past): it is still polled, not lost between the two.

    Timing: a release whose wait is over writes its counter at the next clock edge (one release
    fires at a time, the lowest pool entry first); a host-memory release offers its first write
    the cycle after, each write held until taken. A timestamp release's round trip is a
    deadline on ``now`` (``wake_at``): it ends in the first cycle at or after the round trip
    + 1 ns from the cycle its last write is taken, and the next release fires after it. After
    a counter change, the scan starts ``acquire_retry`` cycles later and takes a cycle per
    channel parked (a further change restarts the wait). A poll is a deadline on ``now``
    (``wake_at``): the channel is checked in the first cycle at or after it, and the next poll
    starts in the cycle after that.

    Parameters
    ----------
    cfg : FrontEndConfig
        Sizes: ``channels``, ``tsgs``, ``release_slots``, ``syncpoints`` (at least 1),
        ``seq_bits`` and ``inflight_bits`` (each at least 1).

    Attributes
    ----------
    release : In(stream.Signature(release_layout(cfg)))
        A release into the pool. Ready while its channel has none waiting and the pool has room.
    acquire : In(stream.Signature(acquire_layout(cfg)))
        An acquire to check: parks its channel when not met. Always ready.
    acquire_met : Out(1)
        Whether the condition of ``acquire``'s payload holds now (combinational, whatever
        ``valid``).
    dispatched : In(stream.Signature(cfg.chan_bits))
        One more record dispatched on this channel. Always ready.
    compute_done : In(stream.Signature(completion_layout(cfg)))
        A compute completion (channel, sequence number), and a counter to set when its
        ``release`` is set. Always ready.
    copy_done : In(stream.Signature(completion_layout(cfg)))
        A copy completion (its release fields are not looked at). Always ready.
    graph_done : In(stream.Signature(completion_layout(cfg)))
        A graph launch's completion, from the graph walker. Always ready.
    lookup_channel : Out(data.ArrayLayout(cfg.chan_bits, TSG_LOOKUPS))
        The channels of ``dispatched``, ``compute_done``, ``copy_done`` and ``graph_done``,
        whose TSGs are looked up...
    lookup_tsg : In(data.ArrayLayout(cfg.tsg_bits, TSG_LOOKUPS))
        ...here.
    halt : In(cfg.channels)
        Channels in error: no longer parked.
    now : In(64)
        The current time in ns, written by timestamp releases.
    acquire_retry : In(16)
        Cycles from a counter change to the scan of the parked channels.
    timestamp_hold, stamp_hold, stamp_fetch : In(16)
        ns a timestamp release holds its channel after its last write is taken: with
        RELEASE_WFI, without, and added to either while the channel's PBDMA has entries to
        fetch.
    fetch_behind : In(cfg.pbdmas)
        PBDMAs with GPFIFO entries still to fetch (beyond their segment queue)...
    pbdma_channel : In(data.ArrayLayout(cfg.chan_bits, cfg.pbdmas))
        ...and their channels.
    resident : In(cfg.channels)
        Channels on a PBDMA: their parked acquires are re-checked by the scanner, the others'
        by the poller.
    acquire_poll : In(16)
        ns the poller takes to re-check one channel.
    wake_at : Out(64)
        The earliest deadline waited for, a round trip's or a poll's (all ones when none).
    dma_write : Out(stream.Signature(DmaWrite))
        Host-memory writes of releases: the payload (4 or 8 bytes, ``wide``), then the
        timestamp. Held until taken.
    parked : Out(cfg.channels)
        Channels parked on an unmet acquire.
    release_busy : Out(cfg.channels)
        Channels with a release in the pool, not fired yet.
    release_full : Out(1)
        The pool has no room.
    release_stall : Out(cfg.channels)
        Channels held by a timestamp release to host memory.
    confirming : Out(cfg.channels)
        Channels with a timestamp release on its way: one without WFI not fired yet, or the
        one being written or in its round trip.
    tsg_in_flight : Out(cfg.tsgs)
        TSGs with work dispatched and not completed (a dispatch counts from the cycle it is
        offered).
    all_complete : Out(1)
        No work in flight on any channel.
    quiescent : Out(1)
        No release to fire or being written (a round trip may be waited for), no wake scan
        pending and no poll to start (one may be waited for): only an input, or ``now``
        reaching ``wake_at``, can change anything.
    counter_data : MemoryData
        The counters' storage (32-bit words, ``syncpoints`` deep); ``counter_data[i]`` can be
        read in simulation.
    """

    def __init__(self, cfg):
        if not isinstance(cfg, FrontEndConfig):
            raise TypeError(f"SyncpointUnit: cfg must be a FrontEndConfig, "
                            f"not {type(cfg).__name__}")
        for field in ("syncpoints", "seq_bits", "inflight_bits"):
            if getattr(cfg, field) < 1:
                raise ValueError(f"SyncpointUnit: cfg.{field} must be at least 1, "
                                 f"not {getattr(cfg, field)}")
        self.cfg = cfg
        n, s = cfg.channels, cfg.syncpoints
        cl = completion_layout(cfg)
        super().__init__({
            "release": In(stream.Signature(release_layout(cfg))),
            "acquire": In(stream.Signature(acquire_layout(cfg))),
            "acquire_met": Out(1),
            "dispatched": In(stream.Signature(cfg.chan_bits)),
            "compute_done": In(stream.Signature(cl)),
            "copy_done": In(stream.Signature(cl)),
            "graph_done": In(stream.Signature(cl)),
            "lookup_channel": Out(data.ArrayLayout(cfg.chan_bits, TSG_LOOKUPS)),
            "lookup_tsg": In(data.ArrayLayout(cfg.tsg_bits, TSG_LOOKUPS)),
            "halt": In(n),
            "now": In(64),
            "acquire_retry": In(16),
            "timestamp_hold": In(16),
            "stamp_hold": In(16),
            "stamp_fetch": In(16),
            "fetch_behind": In(cfg.pbdmas),
            "pbdma_channel": In(data.ArrayLayout(cfg.chan_bits, cfg.pbdmas)),
            "resident": In(n),
            "acquire_poll": In(16),
            "wake_at": Out(64),
            "dma_write": Out(stream.Signature(DmaWrite)),
            "parked": Out(n),
            "release_busy": Out(n),
            "release_full": Out(1),
            "release_stall": Out(n),
            "confirming": Out(n),
            "tsg_in_flight": Out(cfg.tsgs),
            "all_complete": Out(1),
            "quiescent": Out(1),
        })
        #: the counters; ``counter_data[i]`` can be read in simulation
        self.counter_data = MemoryData(shape=32, depth=s, init=[])

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        n, ib, sb, k = cfg.channels, cfg.inflight_bits, cfg.seq_bits, cfg.release_slots

        m.submodules.counters = mem = Memory(data=self.counter_data)
        rd_acquire, rd_fire, rd_scan, rd_poll = (mem.read_port(domain="comb") for _ in range(4))
        wr_counter = mem.write_port()

        # (a graph's completion that carries a release waits a cycle for the counter write
        # port while a kernel's completion carrying one has it)
        cd = self.compute_done
        done_release = cd.valid & cd.payload.release
        gd = self.graph_done
        m.d.comb += [self.acquire.ready.eq(1), self.dispatched.ready.eq(1),
                     self.compute_done.ready.eq(1), self.copy_done.ready.eq(1),
                     gd.ready.eq(~(done_release & gd.payload.release))]
        graph_release = gd.valid & gd.ready & gd.payload.release

        # -- in-flight accounting: a count per source and channel, a total, a count per TSG --
        sources = (self.dispatched, self.compute_done, self.copy_done, self.graph_done)
        chans = [self.dispatched.payload] + [p.payload.channel for p in sources[1:]]
        for i, c in enumerate(chans):
            m.d.comb += self.lookup_channel[i].eq(c)
        counts = []
        for name, port, c in zip(("dispatched", "compute_done", "copy_done", "graph_done"),
                                 sources, chans):
            cmem = Memory(shape=ib, depth=n, init=[])
            m.submodules[f"count_{name}"] = cmem
            wp = cmem.write_port()
            own = cmem.read_port(domain="comb")
            m.d.comb += [own.addr.eq(c), wp.addr.eq(c), wp.data.eq(own.data + 1),
                         wp.en.eq(port.valid & port.ready)]
            counts.append(cmem)

        def in_flight_of(c):
            """Work in flight on channel ``c`` (before this cycle's updates)."""
            vals = []
            for cmem in counts:
                p = cmem.read_port(domain="comb")
                m.d.comb += p.addr.eq(c)
                vals.append(p.data)
            return (vals[0] - vals[1] - vals[2] - vals[3])[:ib]

        total = Signal(ib + 8)
        m.d.sync += total.eq(total + self.dispatched.valid - self.compute_done.valid
                             - self.copy_done.valid - (gd.valid & gd.ready))
        m.d.comb += self.all_complete.eq(total == 0)
        tsg_count = [Signal(ib + 8, name=f"tsg{g}_in_flight") for g in range(cfg.tsgs)]
        for g in range(cfg.tsgs):
            inc = self.dispatched.valid & (self.lookup_tsg[0] == g)
            dec = sum(port.valid & port.ready & (self.lookup_tsg[i] == g)
                      for i, port in enumerate(sources) if i)
            m.d.sync += tsg_count[g].eq(tsg_count[g] + inc - dec)
            # a dispatch counts from its own cycle: the channel's methods are gone from `busy`
            # then, and the runlist must not see the TSG idle for that cycle
            m.d.comb += self.tsg_in_flight[g].eq((tsg_count[g] != 0) | inc)

        # -- the release pool --
        rel = [Signal(release_layout(cfg), name=f"rel{j}") for j in range(k)]
        rel_valid = Signal(k)
        rel_wait = [Signal(ib, name=f"rel_wait{j}") for j in range(k)]
        busy = Signal(n)
        stall = Signal(n)
        one_hots = {}
        busy_bits = BitVector(m, busy, one_hots=one_hots)
        stall_bits = BitVector(m, stall, one_hots=one_hots)
        m.d.comb += [self.release_busy.eq(busy), self.release_stall.eq(stall),
                     self.release_full.eq(rel_valid.all())]
        post = self.release
        pc = post.payload.channel
        m.d.comb += post.ready.eq(~busy.bit_select(pc, 1) & ~rel_valid.all())
        slot_free = Signal(range(k))
        m.d.comb += slot_free.eq(lowest_set(~rel_valid, len(slot_free)))
        dec_post = sum(port.valid & port.ready & (port.payload.channel == pc)
                       for port in sources[1:])
        post_in_flight = in_flight_of(pc)
        with m.If(post.valid & post.ready):
            busy_bits.set(pc)
            with m.If(post.payload.timestamp & ~post.payload.to_counter):
                stall_bits.set(pc)
        for j in range(k):
            # only a WFI release counts older work down: one without WFI waits for nothing,
            # and older work completing while it waits its turn to fire must not wrap it
            older = sum(port.valid & port.ready & (port.payload.channel == rel[j].channel)
                        & (port.payload.seq - rel[j].seq)[sb - 1] for port in sources[1:])
            with m.If(rel_valid[j] & rel[j].wfi):
                m.d.sync += rel_wait[j].eq(rel_wait[j] - older)
            with m.If(post.valid & post.ready & (slot_free == j)):
                m.d.sync += [rel[j].eq(post.payload), rel_valid[j].eq(1),
                             rel_wait[j].eq(Mux(post.payload.wfi, post_in_flight - dec_post,
                                                0))]

        # -- acquire: check now, park if not met --
        park_mem = Memory(shape=acquire_layout(cfg), depth=n, init=[])
        m.submodules.parked_acquires = park_mem
        park_wp = park_mem.write_port()
        park_rp = park_mem.read_port(domain="comb")
        poll_rp = park_mem.read_port(domain="comb")
        parked = Signal(n)
        parked_bits = BitVector(m, parked, one_hots=one_hots)
        m.d.comb += self.parked.eq(parked)
        acq = self.acquire.payload
        acq_counter = Signal(32)
        m.d.comb += [rd_acquire.addr.eq(acq.index), acq_counter.eq(rd_acquire.data),
                     self.acquire_met.eq(acquire_condition(acq.op, acq_counter, acq.value)),
                     park_wp.addr.eq(acq.channel), park_wp.data.eq(acq)]
        parks = self.acquire.valid & ~self.acquire_met
        with m.If(parks):
            m.d.comb += park_wp.en.eq(1)
            parked_bits.set(acq.channel)

        # -- fire releases whose work has completed --
        fireable = Signal(k)
        m.d.comb += fireable.eq(Cat(rel_valid[j] & (rel_wait[j] == 0) for j in range(k)))
        pick = Signal(range(k))
        m.d.comb += pick.eq(lowest_set(fireable, len(pick)))
        fstate = Signal(FireState)
        cur = Signal(range(k))
        r = Signal(release_layout(cfg))         # the release being written to host memory
        p = Signal(release_layout(cfg))         # the release picked to fire
        p_counter = Signal(32)
        p_new = Signal(32)
        rels = Array(rel)
        m.d.comb += [r.eq(rels[cur]), p.eq(rels[pick]),
                     rd_fire.addr.eq(p.index), p_counter.eq(rd_fire.data)]
        with m.If(~(self.compute_done.valid & self.compute_done.payload.release)
                  & ~graph_release):
            m.d.comb += [wr_counter.addr.eq(p.index), wr_counter.data.eq(p_new)]
        with m.Switch(p.kind):
            with m.Case(ReleaseKind.SET):
                m.d.comb += p_new.eq(p.payload[:32])
            with m.Case(ReleaseKind.ADD):
                m.d.comb += p_new.eq(p_counter + p.payload[:32])
            with m.Case(ReleaseKind.INC):
                m.d.comb += p_new.eq(p_counter + 1)
            with m.Case(ReleaseKind.MAX):
                m.d.comb += p_new.eq(Mux(p_counter.as_signed() < p.payload[:32].as_signed(),
                                         p.payload[:32], p_counter))
        wr = self.dma_write
        counter_changed = Signal()
        hold_until = Signal(64)
        # the round trip of the release being written: its own, and the prefetch it waits behind
        behind = Signal()
        m.d.comb += behind.eq(Cat(self.fetch_behind[i] & (self.pbdma_channel[i] == r.channel)
                                  for i in range(cfg.pbdmas)).any())
        # a time stamp whose work is done (or that waits for none) is on its way: the one
        # being written and confirmed, and those without WFI in the pool
        stamps = [Mux((fstate != FireState.IDLE) & r.timestamp, (Const(1, n) << r.channel)[:n], 0)]
        stamps += [Mux(rel_valid[j] & rel[j].timestamp & ~rel[j].wfi & ~rel[j].to_counter,
                       (Const(1, n) << rel[j].channel)[:n], 0) for j in range(k)]
        m.d.comb += self.confirming.eq(reduce(operator.or_, stamps))
        round_trip = Signal(17)
        m.d.comb += round_trip.eq(Mux(r.wfi, self.timestamp_hold, self.stamp_hold)
                                  + Mux(behind, self.stamp_fetch, 0))

        def retire(j, c):
            m.d.sync += rel_valid.bit_select(j, 1).eq(0)
            busy_bits.clear(c)
            stall_bits.clear(c)

        # a completion that carries its own release has the counter write port this cycle
        with m.If(done_release):
            m.d.comb += [wr_counter.addr.eq(cd.payload.index), wr_counter.data.eq(cd.payload.value),
                         wr_counter.en.eq(1), counter_changed.eq(1)]
        with m.Elif(graph_release):
            m.d.comb += [wr_counter.addr.eq(gd.payload.index),
                         wr_counter.data.eq(gd.payload.value),
                         wr_counter.en.eq(1), counter_changed.eq(1)]
        with m.Switch(fstate):
            with m.Case(FireState.IDLE):
                with m.If(fireable.any()):
                    with m.If(p.to_counter):
                        with m.If(~done_release & ~graph_release):
                            m.d.comb += [wr_counter.en.eq(1), counter_changed.eq(1)]
                            retire(pick, p.channel)
                    with m.Else():
                        m.d.sync += [cur.eq(pick), fstate.eq(FireState.PAYLOAD), wr.valid.eq(1),
                                     wr.payload.address.eq(p.address),
                                     wr.payload.data.eq(p.payload), wr.payload.wide.eq(p.wide),
                                     wr.payload.imax.eq(p.kind == ReleaseKind.MAX)]
            with m.Case(FireState.PAYLOAD):
                with m.If(wr.ready):
                    with m.If(r.timestamp):
                        m.d.sync += [fstate.eq(FireState.TIMESTAMP),
                                     wr.payload.address.eq(r.address + 8),
                                     wr.payload.data.eq(self.now), wr.payload.wide.eq(1),
                                     wr.payload.imax.eq(0)]
                    with m.Else():
                        m.d.sync += [fstate.eq(FireState.IDLE), wr.valid.eq(0)]
                        retire(cur, r.channel)
            with m.Case(FireState.TIMESTAMP):
                with m.If(wr.ready):
                    m.d.sync += [fstate.eq(FireState.HOLD), wr.valid.eq(0),
                                 hold_until.eq(self.now + round_trip + 1)]
            with m.Case(FireState.HOLD):
                with m.If(self.now >= hold_until):
                    m.d.sync += fstate.eq(FireState.IDLE)
                    retire(cur, r.channel)

        # -- wake scanner: after a change (and the retry interval), the channels parked then on
        # a PBDMA, one a cycle, lowest first
        holdoff = Signal(16)
        to_check = Signal(n)
        scanning = Signal()
        # (only when someone is parked, or parks now: otherwise there is nothing to re-check)
        on_pbdma = Signal(n)
        m.d.comb += on_pbdma.eq(parked & self.resident)
        with m.If(counter_changed & (on_pbdma.any() | parks)):
            m.d.sync += [scanning.eq(1), holdoff.eq(self.acquire_retry),
                         to_check.eq(on_pbdma | Mux(parks, parked_bits.one_hot(acq.channel), 0))]
        with m.Elif(scanning & (holdoff != 0)):
            m.d.sync += holdoff.eq(holdoff - 1)
        with m.Elif(scanning):
            w = Signal(acquire_layout(cfg))
            w_counter = Signal(32)
            wc = Signal(cfg.chan_bits)
            m.d.comb += [wc.eq(lowest_set(to_check, cfg.chan_bits, m)),
                         park_rp.addr.eq(wc), w.eq(park_rp.data),
                         rd_scan.addr.eq(w.index), w_counter.eq(rd_scan.data)]
            rest = to_check & (to_check - 1)[:n]           # the lowest one checked
            m.d.sync += [to_check.eq(rest), scanning.eq(rest.any())]
            with m.If(parked.bit_select(wc, 1) & acquire_condition(w.op, w_counter, w.value)):
                parked_bits.clear(wc)

        # -- acquire poller: a channel parked on no PBDMA has its acquire state in its context
        # in memory; after a change, those parked then are re-checked one at a time, each read
        # back in ``acquire_poll`` ns, round robin from where the last poll stopped
        to_poll = Signal(n)
        to_poll_bits = BitVector(m, to_poll, one_hots=one_hots)
        off_pbdma = Signal(n)
        m.d.comb += off_pbdma.eq(parked & ~self.resident)
        with m.If(counter_changed):
            to_poll_bits.set_mask(off_pbdma)
        m.submodules.poll_order = poll_rr = PriorityRoundRobin(n)
        # (every channel due and still parked, on a PBDMA by now or not: one bound since the
        # change was not among the channels that change's scan re-checks)
        m.d.comb += poll_rr.requests.eq(to_poll & parked)
        polling = Signal()
        poll_chan = Signal(cfg.chan_bits)
        poll_until = Signal(64)
        with m.If(~polling):
            with m.If(poll_rr.valid):
                m.d.comb += poll_rr.advance.eq(1)
                m.d.sync += [polling.eq(1), poll_chan.eq(poll_rr.grant),
                             poll_until.eq(self.now + self.acquire_poll)]
                to_poll_bits.clear(poll_rr.grant)
        with m.Elif(self.now >= poll_until):
            pw = Signal(acquire_layout(cfg))
            pw_counter = Signal(32)
            m.d.comb += [poll_rp.addr.eq(poll_chan), pw.eq(poll_rp.data),
                         rd_poll.addr.eq(pw.index), pw_counter.eq(rd_poll.data)]
            m.d.sync += polling.eq(0)
            with m.If(parked.bit_select(poll_chan, 1)
                      & acquire_condition(pw.op, pw_counter, pw.value)):
                parked_bits.clear(poll_chan)

        # a channel in error is no longer waiting for anything
        parked_bits.clear_mask(self.halt)
        for bits in (busy_bits, stall_bits, parked_bits, to_poll_bits):
            bits.commit()

        # (a round trip and a poll are deadlines: ``wake_at`` says when the first ends)
        hold_wake = Mux(fstate == FireState.HOLD, hold_until, NEVER)
        poll_wake = Mux(polling, poll_until, NEVER)
        m.d.comb += self.wake_at.eq(Mux(poll_wake < hold_wake, poll_wake, hold_wake))
        m.d.comb += self.quiescent.eq(~scanning
                                      & (((fstate == FireState.IDLE) & ~fireable.any())
                                         | ((fstate == FireState.HOLD) & (self.now < hold_until)))
                                      & Mux(polling, self.now < poll_until, ~poll_rr.valid))
        return m
