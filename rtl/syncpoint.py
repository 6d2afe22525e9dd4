"""Syncpoint unit, on-chip counters, deferred releases, parked acquires, in-flight work:
:class:`SyncpointUnit`."""

from amaranth import Module, Signal, Array, Mux, Cat
from amaranth.lib import wiring, stream, data, enum
from amaranth.lib.memory import Memory, MemoryData
from amaranth.lib.wiring import In, Out

from .bits import lowest_set
from .config import FrontEndConfig
from .layouts import SemOp, DmaWrite, completion_layout, ADDR_BITS

__all__ = ["SyncpointUnit", "ReleaseKind", "FireState", "release_layout", "acquire_layout",
           "acquire_condition"]


class ReleaseKind(enum.Enum, shape=2):
    """What a release does to its counter (host memory releases are always ``SET``)."""
    SET = 0        # counter or host memory = payload
    ADD = 1        # counter += payload (REDUCTION IADD)
    INC = 2        # counter += 1 (REDUCTION INC; the model ignores INC's wrap limit)


class FireState(enum.Enum, shape=2):
    """State of the release being written to host memory."""
    IDLE = 0
    PAYLOAD = 1
    TIMESTAMP = 2
    HOLD = 3           # a timestamp release's channel held ``timestamp_hold`` cycles more


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
    completion takes one off. WFI waits for all counts to be zero.

    *Release* (one slot per channel): a release posted with RELEASE_WFI waits until the work the
    channel had dispatched before it has completed (completions carry the dispatch sequence
    number, so later work does not hold it back); without WFI it fires at once. Firing takes one
    cycle for a counter (set, add, or increment) and one DMA write per 8 bytes for host memory
    (the payload, then ``now`` as an 8-byte timestamp when RELEASE_TIMESTAMP is set). A channel
    whose slot is busy must wait before posting another release (``release_busy``). A timestamp
    release holds its whole channel until its writes are done and ``timestamp_hold`` cycles
    more (a configuration input: the timestamp write's round trip) (``release_stall``): the
    timestamp must be taken after the work before it and before the work after it.

    *Completion releases*: a compute completion may carry a release of its own (``release``,
    ``index``, ``value``: the kernel's launch named a syncpoint, as a QMD's release fields do);
    the counter is set as it arrives, ahead of a channel release wanting the write port that
    cycle.

    *Counters* live in a small SRAM (one write port, three asynchronous read ports: the acquire
    check, the release being fired and the wake scanner), so their number costs memory bits,
    not multiplexers.

    *Acquire*: the CP presents an acquire and sees ``acquire_met`` in the same cycle; if not
    met, the channel is parked. After any counter change and ``acquire_retry`` more cycles (a
    configuration input, like a retry-interval register), a scanner re-checks every parked
    channel, one per cycle, and wakes those whose condition holds.

    Timing: a release whose wait is over writes its counter at the next clock edge (one release
    fires at a time, the lowest channel first); a host-memory release offers its first write
    the cycle after, each write held until taken. After a counter change, the scan of the
    parked channels starts ``acquire_retry`` cycles later and takes ``channels`` cycles, a
    channel woken at its turn (a further change restarts the wait).

    Parameters
    ----------
    cfg : FrontEndConfig
        Sizes: ``channels``, ``syncpoints`` (at least 1), ``seq_bits`` and ``inflight_bits``
        (each at least 1).

    Attributes
    ----------
    release : In(stream.Signature(release_layout(cfg)))
        A release into its channel's slot. Ready while that channel's slot is free.
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
    halt : In(cfg.channels)
        Channels in error: no longer parked.
    now : In(64)
        The current time in ns, written by timestamp releases.
    acquire_retry : In(16)
        Cycles from a counter change to the scan of the parked channels.
    timestamp_hold : In(16)
        Cycles a timestamp release holds its channel after its last write is taken.
    dma_write : Out(stream.Signature(DmaWrite))
        Host-memory writes of releases: the payload (4 or 8 bytes, ``wide``), then the
        timestamp. Held until taken.
    parked : Out(cfg.channels)
        Channels parked on an unmet acquire.
    release_busy : Out(cfg.channels)
        Channels whose release slot holds a release not fired yet.
    release_stall : Out(cfg.channels)
        Channels held by a timestamp release to host memory.
    in_flight : Out(data.ArrayLayout(cfg.inflight_bits, cfg.channels))
        Work dispatched and not completed, per channel.
    all_complete : Out(1)
        No work in flight on any channel.
    quiescent : Out(1)
        No release to fire or being written and no wake scan pending: only an input can change
        anything.
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
            "halt": In(n),
            "now": In(64),
            "acquire_retry": In(16),
            "timestamp_hold": In(16),
            "dma_write": Out(stream.Signature(DmaWrite)),
            "parked": Out(n),
            "release_busy": Out(n),
            "release_stall": Out(n),
            "in_flight": Out(data.ArrayLayout(cfg.inflight_bits, n)),
            "all_complete": Out(1),
            "quiescent": Out(1),
        })
        #: the counters; ``counter_data[i]`` can be read in simulation
        self.counter_data = MemoryData(shape=32, depth=s, init=[])

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        n, s, ib, sb = cfg.channels, cfg.syncpoints, cfg.inflight_bits, cfg.seq_bits

        m.submodules.counters = mem = Memory(data=self.counter_data)
        rd_acquire, rd_fire, rd_scan = (mem.read_port(domain="comb") for _ in range(3))
        wr_counter = mem.write_port()
        inflight = Array(Signal(ib, name=f"inflight{i}") for i in range(n))
        rel = Array(Signal(release_layout(cfg), name=f"rel{i}") for i in range(n))
        rel_valid = Signal(n)
        rel_wait = Array(Signal(ib, name=f"rel_wait{i}") for i in range(n))
        park = Array(Signal(acquire_layout(cfg), name=f"park{i}") for i in range(n))
        parked = Signal(n)
        countdown = Signal(range(n + 1))     # scanner cycles left after a change
        scan = Signal(range(n))

        m.d.comb += self.release_stall.eq(Cat(rel_valid[i] & rel[i].timestamp & ~rel[i].to_counter
                                              for i in range(n)))
        m.d.comb += [self.parked.eq(parked), self.release_busy.eq(rel_valid),
                     self.release.ready.eq(~rel_valid.bit_select(self.release.payload.channel, 1)),
                     self.acquire.ready.eq(1), self.dispatched.ready.eq(1),
                     self.compute_done.ready.eq(1), self.copy_done.ready.eq(1),
                     self.graph_done.ready.eq(1)]

        # -- in-flight accounting --
        def done_by(port, i):
            return port.valid & (port.payload.channel == i)

        def older(port, i):
            # completion's sequence number precedes the release's (modulo 2**seq_bits)
            return done_by(port, i) & (port.payload.seq - rel[i].seq)[sb - 1]

        all_zero = []
        for i in range(n):
            dec = (done_by(self.compute_done, i) + done_by(self.copy_done, i)
                   + done_by(self.graph_done, i))
            inc = self.dispatched.valid & (self.dispatched.payload == i)
            m.d.sync += inflight[i].eq(inflight[i] + inc - dec)
            m.d.comb += self.in_flight[i].eq(inflight[i])
            all_zero.append(inflight[i] == 0)
            # only a WFI release counts older work down: one without WFI waits for nothing,
            # and older work completing while it waits its turn to fire must not wrap it
            with m.If(rel_valid[i] & rel[i].wfi):
                m.d.sync += rel_wait[i].eq(rel_wait[i] - older(self.compute_done, i)
                                           - older(self.copy_done, i)
                                           - older(self.graph_done, i))
            # posting a release: it waits for everything now in flight on its channel
            with m.If(self.release.valid & self.release.ready & (self.release.payload.channel == i)):
                m.d.sync += [rel[i].eq(self.release.payload), rel_valid[i].eq(1),
                             rel_wait[i].eq(Mux(self.release.payload.wfi, inflight[i] - dec, 0))]
        m.d.comb += self.all_complete.eq(Cat(all_zero).all())

        # -- acquire: check now, park if not met --
        acq = self.acquire.payload
        acq_counter = Signal(32)
        m.d.comb += [rd_acquire.addr.eq(acq.index), acq_counter.eq(rd_acquire.data),
                     self.acquire_met.eq(acquire_condition(acq.op, acq_counter, acq.value))]
        with m.If(self.acquire.valid & ~self.acquire_met):
            m.d.sync += [park[acq.channel].eq(acq), parked.bit_select(acq.channel, 1).eq(1)]

        # -- fire releases whose work has completed --
        fireable = Signal(n)
        m.d.comb += fireable.eq(Cat(rel_valid[i] & (rel_wait[i] == 0) for i in range(n)))
        pick = Signal(range(n))
        m.d.comb += pick.eq(lowest_set(fireable, len(pick)))
        fstate = Signal(FireState)
        cur = Signal(range(n))
        r = Signal(release_layout(cfg))         # the release being written to host memory
        p = Signal(release_layout(cfg))         # the release picked to fire
        p_counter = Signal(32)
        p_new = Signal(32)
        m.d.comb += [r.eq(rel[cur]), p.eq(rel[pick]),
                     rd_fire.addr.eq(p.index), p_counter.eq(rd_fire.data)]
        with m.If(~(self.compute_done.valid & self.compute_done.payload.release)):
            m.d.comb += [wr_counter.addr.eq(p.index), wr_counter.data.eq(p_new)]
        with m.Switch(p.kind):
            with m.Case(ReleaseKind.SET):
                m.d.comb += p_new.eq(p.payload[:32])
            with m.Case(ReleaseKind.ADD):
                m.d.comb += p_new.eq(p_counter + p.payload[:32])
            with m.Case(ReleaseKind.INC):
                m.d.comb += p_new.eq(p_counter + 1)
        wr = self.dma_write
        counter_changed = Signal()
        hold = Signal(16)
        # a completion that carries its own release has the counter write port this cycle
        cd = self.compute_done
        done_release = cd.valid & cd.payload.release
        with m.If(done_release):
            m.d.comb += [wr_counter.addr.eq(cd.payload.index), wr_counter.data.eq(cd.payload.value),
                         wr_counter.en.eq(1), counter_changed.eq(1)]
        with m.Switch(fstate):
            with m.Case(FireState.IDLE):
                with m.If(fireable.any()):
                    with m.If(p.to_counter):
                        with m.If(~done_release):
                            m.d.comb += [wr_counter.en.eq(1), counter_changed.eq(1)]
                            m.d.sync += rel_valid.bit_select(pick, 1).eq(0)
                    with m.Else():
                        m.d.sync += [cur.eq(pick), fstate.eq(FireState.PAYLOAD), wr.valid.eq(1),
                                     wr.payload.address.eq(p.address),
                                     wr.payload.data.eq(p.payload), wr.payload.wide.eq(p.wide)]
            with m.Case(FireState.PAYLOAD):
                with m.If(wr.ready):
                    with m.If(r.timestamp):
                        m.d.sync += [fstate.eq(FireState.TIMESTAMP),
                                     wr.payload.address.eq(r.address + 8),
                                     wr.payload.data.eq(self.now), wr.payload.wide.eq(1)]
                    with m.Else():
                        m.d.sync += [fstate.eq(FireState.IDLE), wr.valid.eq(0),
                                     rel_valid.bit_select(cur, 1).eq(0)]
            with m.Case(FireState.TIMESTAMP):
                with m.If(wr.ready):
                    m.d.sync += [fstate.eq(FireState.HOLD), wr.valid.eq(0),
                                 hold.eq(self.timestamp_hold)]
            with m.Case(FireState.HOLD):
                with m.If(hold == 0):
                    m.d.sync += [fstate.eq(FireState.IDLE), rel_valid.bit_select(cur, 1).eq(0)]
                with m.Else():
                    m.d.sync += hold.eq(hold - 1)

        # -- wake scanner: after a change (and the retry interval), one parked channel a cycle
        holdoff = Signal(16)
        # (only when someone is parked, or parks now: otherwise there is nothing to re-check)
        with m.If(counter_changed & (parked.any() | (self.acquire.valid & ~self.acquire_met))):
            m.d.sync += [countdown.eq(n), holdoff.eq(self.acquire_retry)]
        with m.Elif(holdoff != 0):
            m.d.sync += holdoff.eq(holdoff - 1)
        with m.Elif(countdown != 0):
            m.d.sync += countdown.eq(countdown - 1)
        with m.If((countdown != 0) & (holdoff == 0)):
            w = Signal(acquire_layout(cfg))
            w_counter = Signal(32)
            m.d.comb += [w.eq(park[scan]), rd_scan.addr.eq(w.index), w_counter.eq(rd_scan.data)]
            m.d.sync += scan.eq(Mux(scan == n - 1, 0, scan + 1))
            with m.If(parked.bit_select(scan, 1)
                      & acquire_condition(w.op, w_counter, w.value)):
                m.d.sync += parked.bit_select(scan, 1).eq(0)

        # a channel in error is no longer waiting for anything
        for i in range(n):
            with m.If(self.halt[i]):
                m.d.sync += parked[i].eq(0)

        m.d.comb += self.quiescent.eq(~fireable.any() & (fstate == FireState.IDLE)
                                      & (countdown == 0))
        return m
