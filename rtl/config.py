"""Sizes of the front end: the one object every RTL block is built from.

A :class:`FrontEndConfig` flows unchanged into each block's constructor, so a size is never
written in two places. A simulation's config comes from its parameter set alone
(``gpufe.sim.params.Params.frontend_config``): the sizes that are parameters (channels,
from ``max_connections``; ``fifo_depth``, ``slot_words``, ``gp_entries_log2_max``, from
``gpfifo_entries``; ``syncpoints``, ``dma_burst``) are all given there, never taken from the
defaults below. The defaults are the front end built on its own, without a parameter set:
FPGA synthesis (``gpufe synth``, docs/fpga.md) and ``gpufe demo``; the other fields are RTL
constants, the same in every build.
"""

from dataclasses import dataclass, asdict

__all__ = ["FrontEndConfig", "SMALL", "bits_for"]


def bits_for(n):
    """Number of bits needed to hold the values 0 .. n-1 (at least 1)."""
    return max(1, (n - 1).bit_length())


@dataclass(frozen=True)
class FrontEndConfig:
    """Every size of the front end; ``__post_init__`` rejects sizes it cannot be built
    with. Defaults: the front end on its own (see the module's docstring)."""

    #: Number of hardware channels: doorbells and channel contexts, in SRAM (a size of the
    #: chip, not a driver setting: the KMD allocates channels from them).
    channels: int = 128
    #: PBDMA units: channels resident at once, each with its fetch state, its FIFO partition
    #: and its decode context loaded.
    pbdmas: int = 1
    #: GPFIFO entries a PBDMA holds fetched and not yet decoded (its segment queue).
    pbdma_segments: int = 11
    #: Semaphore releases waiting to fire, at most (a pool shared by the channels).
    release_slots: int = 8
    #: Words (32-bit dwords) of the shared FIFO SRAM.
    fifo_depth: int = 1024
    #: Allocation granule of the FIFO SRAM in dwords: partitions are runs of slots.
    slot_words: int = 16
    #: Largest GPFIFO ring a channel may be programmed with (log2 of entries).
    gp_entries_log2_max: int = 10
    #: Number of on-chip syncpoint counters.
    syncpoints: int = 64
    #: Byte address of the syncpoint window: SEM addresses inside it select a counter.
    syncpoint_base: int = 0xFE_0000_0000
    #: Largest DMA read the fetcher issues, in dwords.
    dma_burst: int = 32
    #: Number of channel priority levels (register width is bits_for(levels)).
    priority_levels: int = 4
    #: Width of the per-channel dispatch sequence number carried to engines and back.
    seq_bits: int = 16
    #: Width of the per-channel in-flight work counter.
    inflight_bits: int = 10
    #: Largest CUDA graph the graph walker holds on chip (nodes, dependency edges).
    graph_nodes_max: int = 16384
    graph_edges_max: int = 32768
    #: Graph nodes dispatched and not yet completed, at most.
    graph_inflight_max: int = 128
    #: Graph launches queued in front of the walker.
    graph_queue: int = 4
    #: Contexts (TSGs: one per process) the runlist scheduler time-slices among.
    tsgs: int = 4

    def __post_init__(self):
        def need(cond, what):
            if not cond:
                raise ValueError(f"FrontEndConfig: {what}")
        need(1 <= self.channels <= 256, "channels must be 1..256")
        need(self.fifo_depth & (self.fifo_depth - 1) == 0, "fifo_depth must be a power of two")
        need(self.slot_words & (self.slot_words - 1) == 0, "slot_words must be a power of two")
        need(self.fifo_depth % self.slot_words == 0, "fifo_depth must be a multiple of slot_words")
        need(1 <= self.pbdmas <= 16, "pbdmas must be 1..16")
        need(self.pbdma_segments >= 1, "pbdma_segments must be at least 1")
        need(self.release_slots >= 1, "release_slots must be at least 1")
        need(self.n_slots >= self.pbdmas,
             "fifo_depth / slot_words must be at least pbdmas (one slot is guaranteed "
             "to every PBDMA)")
        need(self.dma_burst >= 2, "dma_burst must be at least 2 (one GPFIFO entry)")
        need(self.dma_burst <= self.slot_words * self.n_slots, "dma_burst larger than the FIFO")
        need(self.syncpoint_base % (4 * (1 << bits_for(self.syncpoints))) == 0,
             "syncpoint_base must be aligned to the window size")
        need(1 <= self.gp_entries_log2_max <= 16, "gp_entries_log2_max must be 1..16")
        need(2 <= self.graph_nodes_max <= 1 << 16, "graph_nodes_max must be 2..65536")
        need(1 <= self.tsgs <= 64, "tsgs must be 1..64")

    # Derived widths, named once here.
    @property
    def n_slots(self):
        return self.fifo_depth // self.slot_words

    @property
    def chan_bits(self):
        return bits_for(self.channels)

    @property
    def pbdma_bits(self):
        return bits_for(self.pbdmas)

    @property
    def fifo_addr_bits(self):
        return bits_for(self.fifo_depth)

    @property
    def level_bits(self):
        # levels go from 0 to fifo_depth inclusive
        return bits_for(self.fifo_depth + 1)

    @property
    def slot_bits(self):
        return bits_for(self.n_slots)

    @property
    def nslot_bits(self):
        return bits_for(self.n_slots + 1)

    @property
    def sp_bits(self):
        return bits_for(self.syncpoints)

    @property
    def prio_bits(self):
        return bits_for(self.priority_levels)

    @property
    def burst_bits(self):
        return bits_for(self.dma_burst + 1)

    @property
    def tag_bits(self):
        # DMA read tags: the PBDMA for the fetcher, the top bit for the graph walker
        return self.pbdma_bits + 1

    @property
    def node_bits(self):
        return bits_for(self.graph_nodes_max)

    @property
    def edge_bits(self):
        return bits_for(self.graph_edges_max)

    @property
    def tsg_bits(self):
        return bits_for(self.tsgs)

    @property
    def gp_bits(self):
        return self.gp_entries_log2_max

    def as_dict(self):
        return asdict(self)


#: Small sizes that keep Amaranth's Python simulator quick in unit tests.
SMALL = FrontEndConfig(channels=8, pbdmas=2, pbdma_segments=4, release_slots=4, fifo_depth=64, slot_words=8, gp_entries_log2_max=4,
                       syncpoints=8, dma_burst=8, seq_bits=8, inflight_bits=6,
                       graph_nodes_max=64, graph_edges_max=128, graph_inflight_max=16)
