"""Properties of :class:`~gpufe.rtl.fifo_sram.PartitionedFifo`: no word lost, duplicated,
reordered or delivered to another PBDMA's partition, across repartitioning; partitions that
never overlap. Bounded model checking, 14 cycles from power-up, for 3 PBDMAs sharing 4 slots
of one dword (shares change as PBDMAs come and go: the first takes 2 slots and gives one back
when a second arrives)."""

from amaranth import Elaboratable, Module, Signal, Array, ResetSignal
from amaranth.asserts import AnyConst

from ..fifo_sram import PartitionedFifo, AllocState
from . import Properties, Proof, small_config

__all__ = ["FifoHarness", "PROOFS", "SMALL_FIFO"]

#: the sizes the properties are checked at: three partitions competing for four slots, so
#: that shares change as PBDMAs come and go
SMALL_FIFO = small_config(pbdmas=3, fifo_depth=4, slot_words=1, dma_burst=2)


class FifoHarness(Elaboratable):
    """Writes, reservations, pops and which PBDMAs want a partition are free every cycle,
    within the contract the fetcher and the command processor keep (assumed): a write goes
    into space its PBDMA reserved before, a reservation takes at most ``free``, a pop only a
    PBDMA with data. Discards (a channel in error) are left to the simulation tests.

    One word written to PBDMA ``p`` (any, fixed) at a moment the solver picks (``track``) is
    followed: how many words of ``p`` are ahead of it, counted down by ``p``'s pops.

    Asserted, every cycle:

    - ``level_is_words_held``: each PBDMA's level is the words written to it less those
      popped (nothing lost, nothing duplicated);
    - ``tracked_word_in_order``: the pop that takes the followed word, after exactly the words
      written before it, returns it (nothing reordered, nothing from another partition);
    - ``partitions_apart``, ``inside_memory``: no two partitions' slot runs overlap, and each
      lies inside the memory.

    Covered: the followed word comes back after the allocator committed a (re)partition
    while it was held; two PBDMAs hold partitions at once; a partition shrinks (its share
    fell when another PBDMA came)."""

    def __init__(self, cfg=SMALL_FIFO, dut=PartitionedFifo):
        self.cfg = cfg
        self.dut = dut(cfg)
        cb = cfg.pbdma_bits
        self.w_valid, self.w_pbdma, self.w_data = Signal(), Signal(cb), Signal(32)
        self.r_valid, self.r_pbdma, self.r_count = Signal(), Signal(cb), Signal(cfg.burst_bits)
        self.want, self.pop, self.pop_pbdma = Signal(cfg.pbdmas), Signal(), Signal(cb)
        self.track = Signal()
        self.ports = [self.w_valid, self.w_pbdma, self.w_data, self.r_valid, self.r_pbdma,
                      self.r_count, self.want, self.pop, self.pop_pbdma, self.track]
        self.properties = None

    def elaborate(self, platform):
        cfg = self.cfg
        n, lb = cfg.pbdmas, cfg.level_bits
        m = Module()
        m.submodules.dut = dut = self.dut
        p = self.properties = Properties(m, "fifo_sram")
        m.d.comb += [dut.write.valid.eq(self.w_valid), dut.write.payload.pbdma.eq(self.w_pbdma),
                     dut.write.payload.data.eq(self.w_data),
                     dut.reserve.valid.eq(self.r_valid),
                     dut.reserve.payload.pbdma.eq(self.r_pbdma),
                     dut.reserve.payload.count.eq(self.r_count), dut.want.eq(self.want),
                     dut.discard.eq(0), dut.read_pbdma.eq(self.pop_pbdma),
                     dut.read_pop.eq(self.pop)]
        p.assume("no_reset", ~ResetSignal())

        # the contract: reserved space first, at most what is free; pops of held data only
        outstanding = Array(Signal(lb + 1, name=f"outstanding{i}") for i in range(n))
        words = Array(Signal(lb + 1, name=f"words{i}") for i in range(n))
        p.assume("write_into_reserved", ~self.w_valid | (outstanding[self.w_pbdma] != 0))
        p.assume("reserve_what_is_free", ~self.r_valid | (self.r_count <= dut.free[self.r_pbdma]))
        p.assume("pop_held_data", ~self.pop | dut.nonempty.bit_select(self.pop_pbdma, 1))
        for i in range(n):
            wrote = self.w_valid & (self.w_pbdma == i)
            popped = self.pop & (self.pop_pbdma == i)
            reserving = self.r_valid & (self.r_pbdma == i)
            m.d.sync += [
                outstanding[i].eq(outstanding[i] + (reserving * self.r_count) - wrote),
                words[i].eq(words[i] + wrote - popped)]
            p.assert_(f"level_is_words_held{i}", dut.level[i] == words[i])

        # one word of PBDMA k followed through the FIFO
        k = Signal(cfg.pbdma_bits)
        m.d.comb += k.eq(AnyConst(cfg.pbdma_bits))
        p.assume("k_exists", k < n)
        following, ahead, word = Signal(), Signal(lb + 1), Signal(32)
        taken, done, moved = Signal(), Signal(), Signal()
        popping_k = self.pop & (self.pop_pbdma == k)
        with m.If(~following & ~done & self.track & self.w_valid & (self.w_pbdma == k)):
            # the words of k not popped yet are ahead of it (one of them popped now)
            m.d.sync += [following.eq(1), ahead.eq(words[k] - popping_k), word.eq(self.w_data),
                         moved.eq(0)]
        with m.Elif(following & popping_k):
            with m.If(ahead == 0):
                m.d.sync += [following.eq(0), done.eq(1)]
            with m.Else():
                m.d.sync += ahead.eq(ahead - 1)
        # the cycle after the pop that takes it: its dword is on read_data
        m.d.sync += taken.eq(following & popping_k & (ahead == 0))
        with m.If(following & (dut.alloc_state == AllocState.COMMIT)):
            m.d.sync += moved.eq(1)
        p.assert_("tracked_word_in_order", ~taken | (dut.read_data == word))

        base, slots = dut.partition_base, dut.partition_slots
        for i in range(n):
            p.assert_(f"inside_memory{i}", base[i] + slots[i] <= cfg.n_slots)
        for i in range(n):
            for j in range(i + 1, n):
                p.assert_(f"partitions_apart{i}{j}",
                          (slots[i] == 0) | (slots[j] == 0) | (base[i] + slots[i] <= base[j])
                          | (base[j] + slots[j] <= base[i]))

        p.cover("word_back_after_repartition", taken & moved)
        p.cover("both_hold_partitions", (slots[0] != 0) & (slots[1] != 0))
        prev_slots = Signal(cfg.nslot_bits)
        m.d.sync += prev_slots.eq(slots[0])
        p.cover("partition_shrinks", (slots[0] != 0) & (slots[0] < prev_slots))
        return m


PROOFS = [Proof("fifo_sram", "partitioned_fifo", FifoHarness, "bmc", depth=14,
                cover_depth=14, sizes="3 PBDMAs, 4 slots of 1 dword")]
