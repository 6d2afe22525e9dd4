"""Partitioned FIFO SRAM, one memory shared by the PBDMAs: :class:`PartitionedFifo`."""

from amaranth import Module, Signal, Array, Mux, Cat, Const
from amaranth.lib import wiring, stream, data, enum
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .bits import lowest_set
from .config import FrontEndConfig

__all__ = ["PartitionedFifo", "AllocState"]


class AllocState(enum.Enum, shape=2):
    """State of the partition allocator."""
    IDLE = 0
    SCAN = 1
    COMMIT = 2


class PartitionedFifo(wiring.Component):
    """Partitioned FIFO SRAM: one memory of ``fifo_depth`` dwords shared by the PBDMAs.

    Each PBDMA (a resident channel: see :class:`~gpufe.rtl.pbdma.PbdmaUnits`) that fetches
    gets a partition; below, "channel" means the PBDMA and the channel resident on it.

    The memory is cut into slots of ``slot_words`` dwords; each active channel owns a ring on a
    run of contiguous slots, described by its partition-table entry (base slot, slots, read and
    write offsets, level, reserved). Writes come from the fetcher into space it reserved
    beforehand, so a partition never overflows; the command processor pops one dword a cycle
    and gets it on the next cycle (synchronous read port, block RAM friendly).

    Repartitioning (the allocator FSM) keeps one invariant: the slots held by active channels
    never exceed ``n_slots - (channels - active)``, so a channel that becomes active always
    finds a free slot at once, whatever the others hold (a channel parked with data cannot
    starve it). Shares are the largest power of two that fits ``budget / active``. A partition
    is only moved or resized when it is drained (empty, nothing reserved), so no data is lost or
    reordered: newcomers take a run at once (at least one slot), channels above their share stop
    taking data until they drain and then shrink, channels below it grow when they drain, and a
    channel that no longer wants space keeps its run (a PBDMA between two channels fetches
    again at once) until another channel needs them: growing, or a newcomer whose share the
    free slots do not cover. A search scans one slot per cycle.

    For timing, nothing on the allocator's decision path is wider than it must be: the active
    count is a counter kept in step with the table (not a population count), the shares are
    tables indexed by it, candidates are picked by balanced priority encoders, and the
    used-slot mask takes each decision's run masks one cycle later (nothing reads the mask in
    that cycle: a search starts at the earliest in the cycle after).

    Timing: one write and one pop a cycle; a written dword can be popped from the cycle after
    its write, and a popped dword is on ``read_data`` the cycle after the pop. An allocation
    or a resize takes at most ``n_slots + 2`` cycles (decision, one slot scanned a cycle,
    commit).

    Parameters
    ----------
    cfg : FrontEndConfig
        Sizes: ``pbdmas``, ``fifo_depth``, ``slot_words``, ``dma_burst``.

    Attributes
    ----------
    write : In(stream.Signature(data.StructLayout))
        ``{"pbdma": cfg.pbdma_bits, "data": 32}``: one dword into the PBDMA's partition,
        into space reserved beforehand; dropped while the channel is discarded. Always ready.
    reserve : In(stream.Signature(data.StructLayout))
        ``{"pbdma": cfg.pbdma_bits, "count": cfg.burst_bits}``: reserve ``count`` dwords of the
        channel's free space for writes to come (at most its ``free``). Always ready.
    want : In(cfg.pbdmas)
        Channels that want a partition (to keep, or to get one).
    discard : In(cfg.pbdmas)
        Channels whose data is thrown away (in error): while high, the channel's writes are
        dropped, its level and read offset are reset at each clock edge, and ``nonempty`` is
        low.
    read_pbdma : In(cfg.pbdma_bits)
        The channel read from.
    read_pop : In(1)
        Pop the dword at the head of ``read_pbdma``'s partition.
    read_data : Out(32)
        The dword at the head of the partition ``read_pbdma`` selected in the previous cycle
        (synchronous read port): after a pop, the dword popped.
    free : Out(data.ArrayLayout(cfg.level_bits, cfg.pbdmas))
        Dwords each channel can still reserve: its capacity less its level and reservations;
        0 while its partition is being resized, or while it holds more than its share.
    nonempty : Out(cfg.pbdmas)
        Channels with data to pop.
    partition_base : Out(data.ArrayLayout(cfg.slot_bits, cfg.pbdmas))
        First slot of each channel's partition.
    partition_slots : Out(data.ArrayLayout(cfg.nslot_bits, cfg.pbdmas))
        Slots in each channel's partition; 0 for a channel without one.
    level : Out(data.ArrayLayout(cfg.level_bits, cfg.pbdmas))
        Dwords each channel holds.
    active_count : Out(cfg.pbdma_bits + 1)
        Channels holding a partition.
    alloc_state : Out(AllocState)
        State of the allocator.
    quiescent : Out(1)
        The allocator is idle with nothing to allocate or resize.
    """

    def __init__(self, cfg):
        if not isinstance(cfg, FrontEndConfig):
            raise TypeError(f"PartitionedFifo: cfg must be a FrontEndConfig, "
                            f"not {type(cfg).__name__}")
        self.cfg = cfg
        n, cb = cfg.pbdmas, cfg.pbdma_bits
        super().__init__({
            "write": In(stream.Signature(data.StructLayout({"pbdma": cb, "data": 32}))),
            "reserve": In(stream.Signature(data.StructLayout({"pbdma": cb,
                                                               "count": cfg.burst_bits}))),
            "want": In(n),
            "discard": In(n),
            "read_pbdma": In(cb),
            "read_pop": In(1),
            "read_data": Out(32),
            "free": Out(data.ArrayLayout(cfg.level_bits, n)),
            "nonempty": Out(n),
            "partition_base": Out(data.ArrayLayout(cfg.slot_bits, n)),
            "partition_slots": Out(data.ArrayLayout(cfg.nslot_bits, n)),
            "level": Out(data.ArrayLayout(cfg.level_bits, n)),
            "active_count": Out(cfg.pbdma_bits + 1),
            "alloc_state": Out(AllocState),
            "quiescent": Out(1),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        n, ns, g = cfg.pbdmas, cfg.n_slots, cfg.slot_words
        gshift = g.bit_length() - 1
        lb, ab = cfg.level_bits, cfg.fifo_addr_bits

        m.submodules.mem = mem = Memory(shape=32, depth=cfg.fifo_depth, init=[])
        wp = mem.write_port()
        rp = mem.read_port()

        base = Array(Signal(cfg.slot_bits, name=f"base{i}") for i in range(n))
        slots = Array(Signal(cfg.nslot_bits, name=f"slots{i}") for i in range(n))
        rd = Array(Signal(ab, name=f"rd{i}") for i in range(n))
        wr = Array(Signal(ab, name=f"wr{i}") for i in range(n))
        level = Array(Signal(lb, name=f"level{i}") for i in range(n))
        reserved = Array(Signal(lb, name=f"reserved{i}") for i in range(n))
        nogrow = Signal(n)
        lock = Signal(n)
        used = Signal(ns)

        has = Signal(n)
        m.d.comb += has.eq(Cat(slots[i] != 0 for i in range(n)))
        n_active = Signal(cfg.pbdma_bits + 1)    # set bits of `has`, kept as a counter
        used_count = Signal(cfg.nslot_bits)     # set bits of `used`, kept as a counter
        m.d.comb += self.active_count.eq(n_active)

        w, r = self.write, self.reserve
        m.d.comb += [w.ready.eq(1), r.ready.eq(1)]
        wc, rc = w.payload.pbdma, self.read_pbdma
        write_keeps = w.valid & ~self.discard.bit_select(wc, 1)

        # Table entries of the writing and the reading channel, each looked up once.
        def lookup(c, name):
            e_base = Signal(cfg.slot_bits, name=f"{name}_base")
            e_cap = Signal(ab + 1, name=f"{name}_cap")
            m.d.comb += [e_base.eq(base[c]), e_cap.eq(slots[c] << gshift)]
            return e_base, e_cap

        w_base, w_cap = lookup(wc, "w")
        r_base, r_cap = lookup(rc, "r")
        w_off, r_off = Signal(ab), Signal(ab)
        m.d.comb += [w_off.eq(wr[wc]), r_off.eq(rd[rc])]

        def advance(off, cap):
            return Mux(off + 1 == cap, 0, off + 1)

        # -- memory ports --
        m.d.comb += [
            wp.addr.eq((w_base << gshift) + w_off),
            wp.data.eq(w.payload.data),
            wp.en.eq(write_keeps),
            rp.addr.eq((r_base << gshift) + r_off),
            self.read_data.eq(rp.data),
        ]
        with m.If(write_keeps):
            m.d.sync += wr[wc].eq(advance(w_off, w_cap))
        with m.If(self.read_pop):
            m.d.sync += rd[rc].eq(advance(r_off, r_cap))

        # -- shares: largest 2^k with active * 2^k <= n_slots - (channels - active), a table
        def share(active):
            k = max(k for k in range(ns.bit_length()) if (active << k) <= ns - n + active
                    or k == 0)
            return 1 << k

        share_now, share_new = Signal(cfg.nslot_bits), Signal(cfg.nslot_bits)
        m.d.comb += [
            share_now.eq(Array(Const(share(a), cfg.nslot_bits) for a in range(n + 1))[n_active]),
            share_new.eq(Array(Const(share(a + 1), cfg.nslot_bits)
                               for a in range(n + 1))[n_active]),
        ]
        sizes_cmp = [(slots[i] > share_now, slots[i] < share_now) for i in range(n)]

        # -- per-channel accounting --
        drained = Signal(n)
        for i in range(n):
            wrote = w.valid & (wc == i)
            kept = write_keeps & (wc == i)
            popped = self.read_pop & (self.read_pbdma == i)
            reserving = r.valid & (r.payload.pbdma == i)
            m.d.sync += reserved[i].eq(reserved[i] + Mux(reserving, r.payload.count, 0) - wrote)
            with m.If(self.discard[i]):
                m.d.sync += [level[i].eq(0), rd[i].eq(wr[i])]
            with m.Else():
                m.d.sync += level[i].eq(level[i] + kept - popped)
            m.d.comb += [
                # above its share: take no more data, so that it drains and can shrink
                self.free[i].eq(Mux(lock[i] | sizes_cmp[i][0], 0,
                                    (slots[i] << gshift) - level[i] - reserved[i])),
                self.nonempty[i].eq((level[i] != 0) & ~self.discard[i]),
                self.partition_base[i].eq(base[i]),
                self.partition_slots[i].eq(slots[i]),
                self.level[i].eq(level[i]),
                drained[i].eq(((level[i] == 0) | self.discard[i]) & (reserved[i] == 0)
                              & ~reserving),
            ]

        # Candidates for the allocator, kept as signals: slicing a Cat expression N times
        # would copy it N times.
        need_alloc, idle_hold, shrink, grow, resize = (
            Signal(n, name=nm) for nm in ("need_alloc", "idle_hold", "shrink", "grow", "resize"))
        m.d.comb += [
            need_alloc.eq(self.want & ~has & ~self.discard),
            idle_hold.eq(has & ~self.want & drained),
            shrink.eq(has & self.want & drained & Cat(c[0] for c in sizes_cmp)),
            grow.eq(has & self.want & drained & Cat(c[1] for c in sizes_cmp) & ~nogrow),
            resize.eq(shrink | grow),
        ]

        def lowest(bits, name):
            idx = Signal(cfg.pbdma_bits, name=name)
            m.d.comb += idx.eq(lowest_set(bits, cfg.pbdma_bits))
            return idx

        # one candidate of each kind, and its table entry
        c_idle, c_new, c_resize = (lowest(idle_hold, "c_idle"), lowest(need_alloc, "c_new"),
                                   lowest(resize, "c_resize"))
        idle_base, idle_slots = Signal(cfg.slot_bits), Signal(cfg.nslot_bits)
        rs_base, rs_slots = Signal(cfg.slot_bits), Signal(cfg.nslot_bits)
        m.d.comb += [idle_base.eq(base[c_idle]), idle_slots.eq(slots[c_idle]),
                     rs_base.eq(base[c_resize]), rs_slots.eq(slots[c_resize])]

        state = Signal(AllocState)
        m.d.comb += self.alloc_state.eq(state)
        chan = Signal(cfg.pbdma_bits)            # channel being (re)allocated
        own_base = Signal(cfg.slot_bits)        # its old run, free for the search
        own_len = Signal(cfg.nslot_bits)
        want_len = Signal(cfg.nslot_bits)
        slot = Signal(cfg.slot_bits + 1)
        run_start = Signal(cfg.slot_bits)
        run_len = Signal(cfg.nslot_bits)
        best_start = Signal(cfg.slot_bits)
        best_len = Signal(cfg.nslot_bits)

        m.d.comb += self.quiescent.eq((state == AllocState.IDLE)
                                      & ~need_alloc.any() & ~resize.any())

        def run_mask(start, length):
            # slots start .. start+length-1 as a bit mask: shifters of constants, no comparator
            # pair per slot and no carry chain
            return ~(Const(-1, 2 * ns + 1) << length) << start

        # The used-slot mask takes a decision's runs the cycle after it: clear one, set one.
        pend = Signal()
        clear_base, set_base = Signal(cfg.slot_bits), Signal(cfg.slot_bits)
        clear_len, set_len = Signal(cfg.nslot_bits), Signal(cfg.nslot_bits)
        m.d.sync += pend.eq(0)
        with m.If(pend):
            m.d.sync += used.eq((used & ~run_mask(clear_base, clear_len)[:ns])
                                | run_mask(set_base, set_len)[:ns])

        def update_used(c_base, c_len, s_base=0, s_len=0):
            m.d.sync += [pend.eq(1), clear_base.eq(c_base), clear_len.eq(c_len),
                         set_base.eq(s_base), set_len.eq(s_len)]

        def begin_scan(c, length, own_b, own_l):
            m.d.sync += [chan.eq(c), want_len.eq(length), own_base.eq(own_b), own_len.eq(own_l),
                         slot.eq(0), run_len.eq(0), best_len.eq(0), best_start.eq(0),
                         state.eq(AllocState.SCAN)]

        with m.Switch(state):
            with m.Case(AllocState.IDLE):
                new_allowed = (ns - n + n_active + 1) - used_count
                with m.If(((need_alloc.any() & (new_allowed < share_new)) | grow.any())
                          & idle_hold.any()):
                    # give back the slots of a channel that no longer wants them, when the
                    # free slots are short of what a newcomer's share needs: a PBDMA that
                    # switches channels keeps its run and its next channel fetches at once
                    update_used(idle_base, idle_slots)
                    m.d.sync += [used_count.eq(used_count - idle_slots), n_active.eq(n_active - 1),
                                 slots[c_idle].eq(0), nogrow.eq(0)]
                with m.Elif(need_alloc.any()):
                    begin_scan(c_new, Mux(share_new < new_allowed, share_new, new_allowed), 0, 0)
                with m.Elif(resize.any()):
                    allowed = (ns - n + n_active) - (used_count - rs_slots)
                    begin_scan(c_resize, Mux(share_now < allowed, share_now, allowed),
                               rs_base, rs_slots)
                    m.d.sync += lock.eq(1 << c_resize)

            with m.Case(AllocState.SCAN):
                i = slot[:cfg.slot_bits]
                free_here = ~used.bit_select(i, 1) | ((own_base <= i) & (i < own_base + own_len))
                nlen = Mux(free_here, run_len + 1, 0)
                nstart = Mux(free_here & (run_len == 0), i, run_start)
                better = nlen > best_len
                m.d.sync += [run_len.eq(nlen), run_start.eq(nstart), slot.eq(slot + 1)]
                with m.If(better):
                    m.d.sync += [best_len.eq(nlen), best_start.eq(nstart)]
                with m.If((better & (nlen >= want_len)) | (slot == ns - 1)):
                    m.d.sync += state.eq(AllocState.COMMIT)

            with m.Case(AllocState.COMMIT):
                grant = Mux(best_len < want_len, best_len, want_len)
                # own run is in `used`, the granted run outside the rest of it
                update_used(own_base, own_len, best_start, grant)
                m.d.sync += [
                    used_count.eq(used_count - own_len + grant),
                    n_active.eq(n_active + (grant != 0) - (own_len != 0)),
                    base[chan].eq(best_start), slots[chan].eq(grant),
                    rd[chan].eq(0), wr[chan].eq(0),
                    lock.eq(0), state.eq(AllocState.IDLE),
                ]
                with m.If(own_len == 0):
                    m.d.sync += nogrow.eq(0)        # the active set changed: retry growth
                with m.Else():
                    m.d.sync += nogrow.bit_select(chan, 1).eq(grant < want_len)
                    # the same run again is no growth either
                    with m.If((grant == own_len) & (best_start == own_base)):
                        m.d.sync += nogrow.bit_select(chan, 1).eq(1)
        return m
