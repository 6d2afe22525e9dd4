"""Command words, opcodes and the records the front end exchanges, in one place.

Formats follow NVIDIA's public host class (clc86f.h, dev_pbdma.ref.txt) where they fit; every
field the model adds or drops is marked ``model:``. The host-side encoder (``sim/host/encode.py``)
and the RTL both read these definitions, so an address or a bit position exists once.
"""

from amaranth.lib import data, enum


# -- method header ------------------------------------------------------------------------------

class SecOp(enum.Enum, shape=3):
    """SEC_OP of a method header (bits 31:29)."""
    GRP0 = 0       # 0x00000000 is NOP; anything else with SEC_OP 0 is rejected (model:)
    INC = 1
    GRP2 = 2       # unused
    NON_INC = 3
    IMMD = 4
    ONE_INC = 5
    GRP6 = 6       # unused
    END_SEG = 7    # END_PB_SEGMENT: not implemented by the model, rejected


class MethodHeader(data.Struct):
    """32-bit method header: ADDRESS is in dwords (byte address >> 2)."""
    address: 12
    _reserved: 1
    subchannel: 3
    count: 13          # data dwords that follow, or the immediate for IMMD
    sec_op: SecOp


class Subchannel(enum.Enum, shape=3):
    HOST = 0           # host methods ignore the subchannel; 0 is what the encoder writes
    COMPUTE = 1
    COPY = 4


class Method(enum.Enum, shape=12):
    """Method addresses, in dwords. ``Method.X.byte_address`` is the documented byte address."""
    # host class (any subchannel), HOPPER_CHANNEL_GPFIFO_A
    NOP = 0x008 >> 2
    NON_STALL_INTERRUPT = 0x020 >> 2
    SEM_ADDR_LO = 0x05C >> 2
    SEM_ADDR_HI = 0x060 >> 2
    SEM_PAYLOAD_LO = 0x064 >> 2
    SEM_PAYLOAD_HI = 0x068 >> 2
    SEM_EXECUTE = 0x06C >> 2
    WFI = 0x078 >> 2
    # model: the graph launch, in host-class addresses NVIDIA leaves unused (0x0E0-0x0E8):
    # the table address of an instantiated graph, then GRAPH_LAUNCH with its node count
    GRAPH_TABLE_LO = 0x0E0 >> 2
    GRAPH_TABLE_HI = 0x0E4 >> 2
    GRAPH_LAUNCH = 0x0E8 >> 2
    # compute class, subchannel 1
    SEND_PCAS_A = 0x2B4 >> 2
    SEND_SIGNALING_PCAS2_B = 0x2C0 >> 2
    # copy class, subchannel 4
    LAUNCH_DMA = 0x300 >> 2
    OFFSET_IN_UPPER = 0x400 >> 2
    OFFSET_IN_LOWER = 0x404 >> 2
    OFFSET_OUT_UPPER = 0x408 >> 2
    OFFSET_OUT_LOWER = 0x40C >> 2
    LINE_LENGTH_IN = 0x418 >> 2

    @property
    def byte_address(self):
        return self.value << 2


#: Methods below this dword address belong to the host class; the rest go to an engine.
HOST_METHOD_LIMIT = 0x100 >> 2

COMPUTE_METHODS = (Method.SEND_PCAS_A, Method.SEND_SIGNALING_PCAS2_B)
COPY_METHODS = (Method.LAUNCH_DMA, Method.OFFSET_IN_UPPER, Method.OFFSET_IN_LOWER,
                Method.OFFSET_OUT_UPPER, Method.OFFSET_OUT_LOWER, Method.LINE_LENGTH_IN)


# -- semaphores ---------------------------------------------------------------------------------

class SemOp(enum.Enum, shape=3):
    """SEM_EXECUTE OPERATION (bits 2:0)."""
    ACQUIRE = 0            # wait until value == payload
    RELEASE = 1            # write payload
    ACQ_STRICT_GEQ = 2     # wait until value >= payload (unsigned)
    ACQ_CIRC_GEQ = 3       # wait until value >= payload (wrap-safe: (value - payload) as signed >= 0)
    ACQ_AND = 4            # not implemented by the model
    ACQ_NOR = 5            # not implemented by the model
    REDUCTION = 6          # only IADD and INC, and only on syncpoint counters (model:)
    _RESERVED = 7


class Reduction(enum.Enum, shape=4):
    IMIN = 0
    IMAX = 1
    IXOR = 2
    IAND = 3
    IOR = 4
    IADD = 5
    INC = 6
    DEC = 7


class SemExecute(data.Struct):
    """SEM_EXECUTE data word."""
    operation: SemOp
    _r0: 9
    acquire_switch_tsg: 1
    _r1: 7
    release_wfi: 1         # release once the channel's earlier work has completed
    _r2: 3
    payload_size: 1        # 0: 32-bit payload, 1: 64-bit
    release_timestamp: 1   # write payload and an 8-byte ns timestamp (16 bytes)
    _r3: 1
    reduction: Reduction
    _r4: 1


# -- GPFIFO -------------------------------------------------------------------------------------

class GPEntry(data.Struct):
    """64-bit GPFIFO entry, as two little-endian dwords (lo first)."""
    fetch: 1               # model: ignored (always unconditional)
    _r0: 1
    address_lo: 30         # push-buffer byte address bits 31:2
    address_hi: 8          # bits 39:32
    _r1: 1
    level: 1               # model: subroutine level not implemented, treated as main
    length: 21             # dwords; 0 = control entry
    sync: 1                # model: ignored (the fetcher fetches in order anyway)


class GPControl(enum.Enum, shape=8):
    """Opcode of a control entry (LENGTH 0), held in address bits 39:32."""
    NOP = 0
    ILLEGAL = 1


# -- launch descriptor (QMD) --------------------------------------------------------------------

class LaunchDescriptor(data.Struct):
    """model: the launch descriptor SEND_PCAS_A points at (256-byte aligned, 8 dwords used).

    A real Hopper QMD is 384 bytes; the model keeps only what timing needs: grid and block
    dimensions, occupancy inputs and the per-block run time. Engines read it from host memory.
    """
    grid_x: 32
    grid_y: 16
    grid_z: 16
    block_x: 16
    block_y: 16
    block_z: 16
    regs_per_thread: 16
    shared_bytes: 32
    block_ns: 32
    kernel_id: 32
    _pad: 32


LAUNCH_DESCRIPTOR_ALIGN = 256
LAUNCH_DESCRIPTOR_DWORDS = LaunchDescriptor.as_shape().size // 32


# -- channel state and errors -------------------------------------------------------------------

class ChannelState(enum.Enum, shape=3):
    IDLE = 0       # nothing to decode
    READY = 1      # decodable work in its FIFO
    PARKED = 2     # waiting on a syncpoint acquire
    BLOCKED = 3    # a release waits for its slot, or a timestamp release is being written
    ERROR = 4      # stopped; cause in ErrorCause


class ErrorCause(enum.Enum, shape=4):
    NONE = 0
    ILLEGAL_HEADER = 1
    ILLEGAL_METHOD = 2
    ILLEGAL_SUBCHANNEL = 3
    ILLEGAL_SEM_OP = 4
    SEM_ADDRESS = 5        # acquire or reduction outside the syncpoint window
    FETCH_FAULT = 6        # DMA read answered with an error (unmapped address)
    GP_ENTRY = 7           # illegal GPFIFO control entry
    GRAPH = 8              # graph larger than the walker holds, or a malformed node table


# -- CUDA graphs (model:) -------------------------------------------------------------------------

class GraphNodeKind(enum.Enum, shape=2):
    KERNEL = 0             # descriptor: a launch descriptor
    COPY = 1               # descriptor: a copy descriptor (src, dst, length: 5 dwords)


class GraphNode(data.Struct):
    """model: one node of an instantiated graph's table in device-visible memory (16 bytes).
    The table holds ``nodes`` of these, then the edges: one dword per edge, the successor's
    index; node i's successors are edges[succ_first : succ_first + succ_count]."""
    kind: GraphNodeKind
    pred_count: 14
    succ_count: 16
    succ_first: 32
    descriptor: 32         # byte address >> 8
    _r: 32


GRAPH_NODE_DWORDS = 4
#: Copy records whose parameters are in a copy descriptor at ``src`` (graph copy nodes).
COPY_FLAG_DESCRIPTOR = 1 << 31


class CPState(enum.Enum, shape=3):
    ARBITRATE = 0
    LOAD = 1
    FETCH = 2
    EXECUTE = 3
    DISPATCH = 4
    WFI = 5
    SAVE = 6


# -- records on the ports (sizes depend on the configuration) -----------------------------------

ADDR_BITS = 40


def dma_read_request_layout(cfg, tag_bits=None):
    return data.StructLayout({"address": ADDR_BITS, "count": cfg.burst_bits,
                              "tag": tag_bits or cfg.tag_bits})


def dma_read_response_layout(cfg, tag_bits=None):
    return data.StructLayout({"data": 32, "tag": tag_bits or cfg.tag_bits, "last": 1,
                              "error": 1})


DmaWrite = data.StructLayout({"address": ADDR_BITS, "data": 64, "wide": 1})


def launch_record_layout(cfg):
    """Compute dispatch: which channel, its dispatch sequence number, the descriptor address;
    for a graph node, ``graph`` is set and ``node`` is its index. Engines echo channel, seq,
    node and graph in the completion."""
    return data.StructLayout({"channel": cfg.chan_bits, "seq": cfg.seq_bits,
                              "descriptor": ADDR_BITS, "node": cfg.node_bits, "graph": 1})


def copy_record_layout(cfg):
    return data.StructLayout({"channel": cfg.chan_bits, "seq": cfg.seq_bits,
                              "src": ADDR_BITS, "dst": ADDR_BITS, "length": 32, "flags": 32,
                              "node": cfg.node_bits, "graph": 1})


def completion_layout(cfg):
    """Engine -> front end: work done. ``release``: the work carried its own semaphore
    release (a kernel's launch descriptor names a syncpoint, as a QMD's release fields do):
    syncpoint ``index`` is set to ``value`` as it completes, without a channel release."""
    return data.StructLayout({"channel": cfg.chan_bits, "seq": cfg.seq_bits,
                              "node": cfg.node_bits, "graph": 1, "release": 1,
                              "index": cfg.sp_bits, "value": 32})


def graph_launch_layout(cfg):
    """CP -> graph walker: run the graph whose table is at ``table`` for a channel."""
    return data.StructLayout({"channel": cfg.chan_bits, "seq": cfg.seq_bits,
                              "table": ADDR_BITS, "nodes": cfg.node_bits + 1})


MmioWrite = data.StructLayout({"address": 16, "data": 32})


# -- MMIO register map (dword indices) ----------------------------------------------------------

class ChannelReg(enum.Enum, shape=3):
    """Per-channel registers at MMIO dword index ``channel * 8 + reg`` (bit 15 clear)."""
    GP_PUT = 0             # W: doorbell carrying the new GP_PUT; R: last accepted GP_PUT
    GP_GET = 1             # R: entries consumed by the fetcher
    GPFIFO_BASE_LO = 2     # byte address bits 31:0 of the ring (8-byte aligned)
    GPFIFO_BASE_HI = 3     # bits 39:32
    GPFIFO_ENTRIES_LOG2 = 4
    PRIORITY = 5           # greater value = served first
    STATE = 6              # R: ChannelState | ErrorCause << 4; W 1: clear error, drop work
    _RESERVED = 7


CHANNEL_REGS = 8
GLOBAL_PAGE = 0x8000


class GlobalReg(enum.Enum, shape=4):
    """Global registers at MMIO dword index ``GLOBAL_PAGE + reg``."""
    STATUS = 0             # bit0 write to a missing channel, bit1 GP_PUT outside the ring,
                           # bit2 bad ring size; bits 31:16 offending register address;
                           # write 1s to clear bits 2:0
    ERROR_MASK = 1         # R: one bit per channel in ERROR (first 32 channels)
    INTERRUPT = 2          # bit0 channel error, bit1 non-stall interrupt; write 1s to clear
    CHANNELS = 3           # R: number of channels


STATUS_BAD_CHANNEL = 1 << 0
STATUS_BAD_PUT = 1 << 1
STATUS_BAD_VALUE = 1 << 2
