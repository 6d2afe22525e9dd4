"""Command words, opcodes and the records the front end exchanges, in one place.

Formats follow NVIDIA's public host class (clc86f.h, dev_pbdma.ref.txt) where they fit; every
field the model adds or drops is marked ``model:``. The host-side encoder (``sim/host/encode.py``)
and the RTL both read these definitions, so an address or a bit position exists once; so do the
co-simulation's engines, which decode the descriptors the driver writes (``sim/cosim/engines.py``).
The RTL only passes descriptor addresses on: the descriptors' layouts and the address map do not
change what it builds.
"""

import functools

from amaranth import Shape, signed
from amaranth.lib import data, enum

__all__ = [
    # method header and methods
    "SecOp", "MethodHeader", "Subchannel", "Method", "HOST_METHOD_LIMIT", "COMPUTE_METHODS",
    "COPY_METHODS",
    # semaphores
    "SemOp", "Reduction", "SemExecute",
    # GPFIFO
    "GPEntry", "GPControl",
    # descriptors in host memory
    "DESCRIPTOR_ALIGN", "LaunchDescriptor", "LAUNCH_DESCRIPTOR_DWORDS", "CopyKind", "COPY_KINDS",
    "CopyDescriptor", "COPY_DESCRIPTOR_DWORDS", "COPY_FLAG_DESCRIPTOR",
    # CUDA graphs
    "GraphNodeKind", "GraphNode", "GraphEdge", "GRAPH_NODE_DWORDS", "GraphLaunchQueue",
    "GRAPH_LAUNCH_QUEUE_DWORDS", "GraphLaunchRecord", "GRAPH_LAUNCH_RECORD_DWORDS",
    "DeviceGraph", "DEVICE_GRAPH_DWORDS", "DEVICE_LAUNCH_QUEUE", "GRAPH_LAUNCH_DEVICE_RUNTIME",
    "GRAPH_HANDOVER_SHIFT", "GRAPH_HANDOVER_BITS",
    # channel state and errors, CP state
    "ChannelState", "ErrorCause", "CPState",
    # records on the ports
    "ADDR_BITS", "dma_read_request_layout", "dma_read_response_layout", "DmaWrite",
    "launch_record_layout", "copy_record_layout", "completion_layout", "graph_launch_layout",
    "device_launch_layout",
    "context_switch_layout", "retire_layout",
    "MmioWrite",
    # MMIO register map
    "RunlistState", "ChannelReg", "CHANNEL_REGS", "GLOBAL_PAGE", "GlobalReg", "STATUS_BAD_CHANNEL",
    "STATUS_BAD_PUT", "STATUS_BAD_VALUE",
    # address map
    "HOST_MEMORY_BASE", "HOST_LAZY_BASE", "DEVICE_MEMORY_BASE", "DEVICE_ALLOC_ALIGN",
    "HOST_COPY_BUFFER",
    # Python-side packing
    "struct_fields",
]


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
    """SUBCHANNEL of a method header: which engine class an engine method goes to."""
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
    # model: the graph launch, in host-class addresses NVIDIA leaves unused (0x0E0-0x0F0):
    # the table address of an instantiated graph, the syncpoint its completion releases
    # (index, bit 31 set; then the value), then GRAPH_LAUNCH with its node count
    GRAPH_TABLE_LO = 0x0E0 >> 2
    GRAPH_TABLE_HI = 0x0E4 >> 2
    GRAPH_LAUNCH = 0x0E8 >> 2
    GRAPH_RELEASE_INDEX = 0x0EC >> 2
    GRAPH_RELEASE_VALUE = 0x0F0 >> 2
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
    REDUCTION = 6          # model: IADD and INC on syncpoint counters, IMAX on either
    _RESERVED = 7


class Reduction(enum.Enum, shape=4):
    """SEM_EXECUTE REDUCTION (bits 30:27), for OPERATION REDUCTION."""
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


# -- descriptors in host memory (model:) ---------------------------------------------------------

#: Launch and copy descriptors, graph node tables and launch queues are addressed in 256-byte
#: units (SEND_PCAS_A carries the address >> 8, as does a GraphNode's ``descriptor``); the
#: driver allocates them in blocks of this size, aligned to it.
DESCRIPTOR_ALIGN = 256


class LaunchDescriptor(data.Struct):
    """model: the launch descriptor (QMD) SEND_PCAS_A points at (``DESCRIPTOR_ALIGN``-aligned).

    A real Hopper QMD is 384 bytes; the model keeps what timing needs (grid and block
    dimensions, occupancy inputs, the per-block run time, the priority, the release a kernel
    carries) and what the profiler's activity record needs (correlation id, stream, queued
    and submitted times). The front end only passes the address on; the compute engine reads
    the descriptor from host memory as it takes the launch. A graph's kernel node has one
    written at instantiation, whose per-launch fields (correlation id, stream, priority) are 0:
    they come from the graph's launch queue (:class:`GraphLaunchQueue`).
    """
    grid_x: 32
    grid_y: 16
    grid_z: 16
    block_x: 16
    block_y: 16
    block_z: 16
    regs_per_thread: 16
    shared_bytes: 32
    kernel_id: 32          # model: the kernel function's index in the driver's function table
    block_ps: 64           # model: run time of one thread block, in ps
    priority: signed(32)   # model: the stream's CUDA priority (lower is more urgent)
    # as a QMD's RELEASE0 fields: syncpoint ``release_index`` is set to ``release_value`` as the
    # kernel completes (model: a syncpoint index instead of a semaphore address)
    release_enable: 1
    release_index: 16
    _r0: 15
    release_value: 32
    # model: for the profiler's activity record (the front end and the engines' timing never
    # read them)
    correlation_id: 32     # CUPTI's correlation id of the launch call
    stream_id: 32          # CUDA's stream id
    queued_ns: 64          # CUPTI's "queued": when the driver encoded the launch
    submitted_ns: 64       # CUPTI's "submitted": its kickoff (the driver writes it then)
    graph_id: 32           # a graph's kernel node: the executable graph's id; 0 otherwise
    graph_launches: 32     # a graph's kernel node: its GraphLaunchQueue, byte address >> 8
    # model: programmatic dependent launch (CUDA's launch attribute
    # programmaticStreamSerialization, or a graph's programmatic edge). ``pdl``: the compute
    # work distributor holds the kernel until its primary triggers, and its blocks wait in
    # cudaGridDependencySynchronize for the primary's exit; the primary is the kernel of the
    # same stream whose release is (``release_index``, ``pdl_primary``), or in a graph launch
    # node ``pdl_primary``. ``trigger_enable``: each block calls
    # cudaTriggerProgrammaticLaunchCompletion ``trigger_ps`` after it starts (otherwise it
    # triggers as it exits); ``prologue_ps``: a block's work before its dependency wait
    pdl: 1
    trigger_enable: 1
    _r1: 30
    pdl_primary: 32
    trigger_ps: 64
    prologue_ps: 64
    # model: device graph launch. ``device_runtime``: the kernel holds device-side
    # cudaGraphLaunch code (linked against the device runtime, which its graph's host launches
    # pay for); it calls it in block 0, ``dgl_count`` times per run that did not come from a
    # tail launch (0: never), launching the graph whose :class:`DeviceGraph` is at
    # ``dgl_graph`` (the cudaGraphExec_t it was given), as a tail launch (``dgl_tail``: after
    # the launching graph completes) or fire-and-forget (at once, the launching graph waiting
    # for it to complete)
    device_runtime: 1
    dgl_tail: 1
    _r2: 30
    dgl_count: 32
    dgl_graph: 64


LAUNCH_DESCRIPTOR_DWORDS = LaunchDescriptor.as_shape().size // 32


class CopyKind(enum.Enum, shape=8):
    """model: a copy's direction, as CUPTI's memcpy kind codes (CUPTI_ACTIVITY_MEMCPY_KIND_*)."""
    H2D = 1
    D2H = 2
    D2D = 8


#: the runtime's copy kind names -> CUPTI's memcpy kind codes (the timeline's ``copy_kind``)
COPY_KINDS = {"h2d": CopyKind.H2D.value, "d2h": CopyKind.D2H.value, "d2d": CopyKind.D2D.value}


class CopyDescriptor(data.Struct):
    """model: a copy's parameters in host memory (``DESCRIPTOR_ALIGN``-aligned), for the copy
    engines: a graph's copy node names one, and a stream copy is launched with
    ``COPY_FLAG_DESCRIPTOR`` and its address as the source offset (the copy methods then repeat
    its destination and length). Per-launch fields of a graph's copy node are 0, as in
    :class:`LaunchDescriptor`."""
    src: 64
    dst: 64
    length: 32
    kind: CopyKind
    _r0: 24
    correlation_id: 32     # for the profiler's activity record, as in LaunchDescriptor
    stream_id: 32
    graph_id: 32
    graph_launches: 32


COPY_DESCRIPTOR_DWORDS = CopyDescriptor.as_shape().size // 32
#: Copy records whose parameters are in a copy descriptor at ``src`` (stream copies of the
#: driver, graph copy nodes).
COPY_FLAG_DESCRIPTOR = 1 << 31


# -- channel state and errors -------------------------------------------------------------------

class ChannelState(enum.Enum, shape=3):
    """A channel's state, as the STATE register reads it (bits 3:0)."""
    IDLE = 0       # nothing to decode
    READY = 1      # decodable work in its FIFO
    PARKED = 2     # waiting on a syncpoint acquire
    BLOCKED = 3    # a release waits for its slot, or a timestamp release is being written
    ERROR = 4      # stopped; cause in ErrorCause


class ErrorCause(enum.Enum, shape=4):
    """Why a channel stopped in ERROR (STATE bits 7:4)."""
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
    """model: what a graph node runs, and so what its descriptor is."""
    KERNEL = 0             # descriptor: a LaunchDescriptor
    COPY = 1               # descriptor: a CopyDescriptor
    CONDITIONAL = 2        # a conditional node: no descriptor, its body's nodes in the table


class GraphNode(data.Struct):
    """model: one node of an instantiated graph's table in device-visible memory (16 bytes).
    The table holds ``nodes`` of these, then the edges (:class:`GraphEdge`, one dword each);
    node i's successors are edges[succ_first : succ_first + succ_count]. ``programmatic``: some
    of them are programmatic edges (the walker resolves those as it dispatches the node).

    Conditional nodes (CUDA 12.4's WHILE and IF): the body's nodes follow the graph's own in
    the table, each with ``body`` set and its edges among the body's nodes; the conditional
    node's ``descriptor`` holds the body's first node (bits 15:0) and node count (31:16), and
    ``iterations`` how many times the body runs each launch (the device-side condition's
    outcome, which the model does not compute).

    Branches: a root node's ``branch`` is the branch of the graph it heads (the capture
    stream it was issued to, numbered in the order their first roots were captured); the
    driver hands a launch's branches to the device one after another, and the walker queues
    the roots of branch b once the launch's hand-over count (a dword after the edges, see
    :func:`graph_launch_layout`) has reached b. A graph of one branch has 0 everywhere."""
    kind: GraphNodeKind
    pred_count: 14
    succ_count: 16
    succ_first: 32
    descriptor: 32         # byte address >> 8 (a conditional node: its body, see above)
    programmatic: 1
    body: 1                # a node of a conditional node's body
    iterations: 24         # a conditional node: its body's runs per launch
    branch: 6              # a root node: the branch it heads (0: handed over with the launch)


class GraphEdge(data.Struct):
    """model: one edge of a graph's table: the successor's index; ``programmatic``: a
    programmatic edge (CUDA's cudaGraphKernelNodePortProgrammatic, what a captured PDL launch
    becomes), resolved when the predecessor is dispatched rather than when it completes: the
    compute work distributor then holds the successor until the predecessor triggers."""
    node: 31
    programmatic: 1


GRAPH_NODE_DWORDS = 4


class GraphLaunchQueue(data.Struct):
    """model: an executable graph's queue of launches in host memory, written by the driver at
    instantiation: what its nodes' descriptors name as ``graph_launches``.

    A graph's launches run one after another (each acquires its predecessor's release), so
    the engines take them in the order the driver queued them: ``head`` is the record of the
    launch whose nodes are being dispatched (at first an empty one, which the first launch is
    linked from); after ``left`` reaches 0, the next node dispatched begins the next launch,
    ``head.next``. The engines update ``head`` and ``left``; the driver only appends."""
    head: 64               # GraphLaunchRecord byte address
    nodes: 32              # nodes per launch
    left: 32               # nodes of the head launch not yet dispatched


GRAPH_LAUNCH_QUEUE_DWORDS = GraphLaunchQueue.as_shape().size // 32


class GraphLaunchRecord(data.Struct):
    """model: one launch of an executable graph (a ``DESCRIPTOR_ALIGN`` block the driver takes
    per launch; given back once the launch after it has begun): the per-launch fields of its
    nodes' activity and timing."""
    next: 64               # the next launch's record; 0 until the driver queues one
    correlation_id: 32
    stream_id: 32
    priority: signed(32)   # the launching stream's CUDA priority
    _r: 32


GRAPH_LAUNCH_RECORD_DWORDS = GraphLaunchRecord.as_shape().size // 32


class DeviceGraph(data.Struct):
    """model: an executable graph instantiated for device launch (cudaGraphInstantiateFlag-
    DeviceLaunch), as the device runtime finds it through the cudaGraphExec_t a kernel passes
    to device-side cudaGraphLaunch: its node table in device memory (the driver rewrites it
    when an update gives the graph a new table), and its queue of device launches: a second
    :class:`GraphLaunchQueue`, ``DEVICE_LAUNCH_QUEUE`` bytes after the one its nodes'
    descriptors name, whose records the device runtime appends (``last``: the latest)."""
    table: 64              # node table byte address
    nodes: 32              # its nodes (the graph's own and its conditional node's body)
    _r: 32
    queue: 64              # its device launch queue
    last: 64               # the launch record last appended to it


DEVICE_GRAPH_DWORDS = DeviceGraph.as_shape().size // 32
#: byte offset of a graph's device launch queue from its (host) launch queue
DEVICE_LAUNCH_QUEUE = 64

#: GRAPH_LAUNCH data bit: the graph holds device-runtime code (its set-up takes longer)
GRAPH_LAUNCH_DEVICE_RUNTIME = 1 << 31


class CPState(enum.Enum, shape=3):
    """The command processor's state machine (which PBDMA it decodes)."""
    ARBITRATE = 0
    LOAD = 1               # reading the next PBDMA's channel context (CP_SWITCH ns)
    FETCH = 2
    EXECUTE = 3
    DISPATCH = 4
    WFI = 5
    HOLD = 7               # after a launch (LAUNCH_HOLD ns)


class RunlistState(enum.Enum, shape=1):
    """The runlist scheduler's state."""
    RUN = 0                # the active TSG is served
    SWITCH = 1             # a context switch: nobody is served


# -- records on the ports (sizes depend on the configuration) -----------------------------------

ADDR_BITS = 40


def dma_read_request_layout(cfg, tag_bits=None):
    """DMA read request: ``count`` dwords from byte ``address``, answered with ``tag``."""
    return data.StructLayout({"address": ADDR_BITS, "count": cfg.burst_bits,
                              "tag": tag_bits or cfg.tag_bits})


def dma_read_response_layout(cfg, tag_bits=None):
    """DMA read response: one dword of a request; ``last`` on its final dword, ``error``
    for an address outside host memory."""
    return data.StructLayout({"data": 32, "tag": tag_bits or cfg.tag_bits, "last": 1,
                              "error": 1})


#: a write to host memory; ``imax``: a reduction, memory = max(memory, data) as signed
#: integers (SEM_EXECUTE REDUCTION IMAX, done where the memory is, as an atomic)
DmaWrite = data.StructLayout({"address": ADDR_BITS, "data": 64, "wide": 1, "imax": 1})


#: a graph node's dispatch from a device-launched run: ``dwalk`` from the device-launch
#: walker (a fire-and-forget launch, or a tail launch made there), ``tail`` a tail launch's
#: run; the completion echoes ``dwalk``
_device_fields = {"dwalk": 1, "tail": 1}


def launch_record_layout(cfg):
    """Compute dispatch: which channel, its dispatch sequence number, the descriptor address;
    for a graph node, ``graph`` is set and ``node`` is its index. Engines echo channel, seq,
    node and graph in the completion."""
    return data.StructLayout({"channel": cfg.chan_bits, "seq": cfg.seq_bits,
                              "descriptor": ADDR_BITS, "node": cfg.node_bits, "graph": 1,
                              **_device_fields})



def copy_record_layout(cfg):
    """Copy dispatch: which channel, its dispatch sequence number, the copy methods' source,
    destination, length and LAUNCH_DMA flags (``COPY_FLAG_DESCRIPTOR``: the parameters are
    in a copy descriptor at ``src``); for a graph node, ``graph`` and ``node`` as in
    :func:`launch_record_layout`."""
    return data.StructLayout({"channel": cfg.chan_bits, "seq": cfg.seq_bits,
                              "src": ADDR_BITS, "dst": ADDR_BITS, "length": 32, "flags": 32,
                              "node": cfg.node_bits, "graph": 1, **_device_fields})


def completion_layout(cfg):
    """Engine -> front end: work done. ``release``: the work carried its own semaphore
    release (a kernel's launch descriptor names a syncpoint, as a QMD's release fields do):
    syncpoint ``index`` is set to ``value`` as it completes, without a channel release."""
    return data.StructLayout({"channel": cfg.chan_bits, "seq": cfg.seq_bits,
                              "node": cfg.node_bits, "graph": 1, "release": 1,
                              "index": cfg.sp_bits, "value": 32, "dwalk": 1})


#: GRAPH_LAUNCH's data: the node count in the low bits, the hand-over base from this bit
#: (:data:`GRAPH_HANDOVER_BITS` of it), device-runtime code at bit 31
GRAPH_HANDOVER_SHIFT = 17
GRAPH_HANDOVER_BITS = 14


def graph_launch_layout(cfg):
    """CP -> graph walker: run the graph whose table is at ``table`` for a channel
    (``device_runtime``: its kernels hold device-runtime code); ``release``: its completion
    sets syncpoint ``index`` to ``value``, as a kernel's release does. ``handover``: for a
    graph of several branches, the value its hand-over count (the dword after the table's
    edges, counting modulo 2**GRAPH_HANDOVER_BITS) had before this launch: branch b is handed
    over once the count reads ``handover`` + b."""
    return data.StructLayout({"channel": cfg.chan_bits, "seq": cfg.seq_bits,
                              "table": ADDR_BITS, "nodes": cfg.node_bits + 1,
                              "device_runtime": 1, "release": 1, "index": cfg.sp_bits,
                              "value": 32, "handover": GRAPH_HANDOVER_BITS})


def device_launch_layout(cfg):
    """Engines -> front end: a kernel's device-side cudaGraphLaunch, once the call has put it
    in the device runtime's queue: the graph's table and node count; ``tail`` a tail launch
    (for the walker that dispatched the kernel, ``dwalk``), else fire-and-forget (run on the
    device-launch walker, as a child of the run whose kernel launched it: ``channel``,
    ``seq``)."""
    return data.StructLayout({"channel": cfg.chan_bits, "seq": cfg.seq_bits,
                              "table": ADDR_BITS, "nodes": cfg.node_bits + 1, "tail": 1,
                              "dwalk": 1})


def context_switch_layout(cfg):
    """Runlist scheduler -> engines: TSG ``tsg`` stops running (``run`` 0: its work on the
    engines is preempted and saved) or starts (``run`` 1: its saved work resumes)."""
    return data.StructLayout({"tsg": cfg.tsg_bits, "run": 1})


def retire_layout(cfg):
    """Front end -> driver: the channel's GP_GET moved to ``get`` (every entry before it is
    decoded to its end: its ring slot and push-buffer segment may be reused), as a USERD
    GP_GET update."""
    return data.StructLayout({"channel": cfg.chan_bits, "get": cfg.gp_bits})


MmioWrite = data.StructLayout({"address": 16, "data": 32})


# -- MMIO register map (dword indices) ----------------------------------------------------------

class ChannelReg(enum.Enum, shape=3):
    """Per-channel registers at MMIO dword index ``channel * 8 + reg`` (bit 15 clear)."""
    GP_PUT = 0             # W: doorbell carrying the new GP_PUT; R: last accepted GP_PUT
    GP_GET = 1             # R: entries decoded to their end
    GPFIFO_BASE_LO = 2     # byte address bits 31:0 of the ring (8-byte aligned)
    GPFIFO_BASE_HI = 3     # bits 39:32
    GPFIFO_ENTRIES_LOG2 = 4
    PRIORITY = 5           # greater value = served first
    STATE = 6              # R: ChannelState | ErrorCause << 4; W 1: clear error, drop work
    TSG = 7                # the channel table: the TSG (context) the channel belongs to


CHANNEL_REGS = 8
GLOBAL_PAGE = 0x8000


class GlobalReg(enum.Enum, shape=5):
    """Global registers at MMIO dword index ``GLOBAL_PAGE + reg``."""
    STATUS = 0             # bit0 write to a missing channel, bit1 GP_PUT outside the ring,
                           # bit2 bad ring size, TSG or priority level; bits 31:16 the
                           # offending register address; write 1s to clear bits 2:0
    ERROR_MASK = 1         # R: one bit per channel in ERROR (the first 32 channels)
    INTERRUPT = 2          # bit0 channel error, bit1 non-stall interrupt; write 1s to clear
    CHANNELS = 3           # R: number of hardware channels
    # the host scheduler's configuration, written by the KMD (reset 0: no cost, no slicing)
    TSG_TIMESLICE = 4      # ns a TSG may run while another has work
    TSG_SWITCH = 5         # ns a context switch between TSGs takes (nothing is served)
    CTX_SAVE = 6           # ns a PBDMA takes to save a channel's context
    CTX_LOAD = 7           # ns a PBDMA takes to load a channel's context
    CH_TIMESLICE = 8       # ns a channel may hold its PBDMA while another waits (0: no limit)
    LAUNCH_HOLD = 9        # ns the CP spends after each launch (CUPTI's stamps)
    ACTIVE_TSG = 10        # R: the TSG being served, bit 31 set during a switch
    TSG_PREEMPT = 11       # ns a switch takes more when the TSG switched out still has work
                           # (its work on the engines is preempted and its state saved)
    CP_SWITCH = 12         # ns the CP takes to move to another channel's methods
    GRAPH_START = 13       # ns from a graph launch to its first node's dispatch (its set-up)
    COND_START = 14        # ns from a conditional node's iteration's start to its body's roots
                           # queued (the condition read, the body's launch on the device)
    DEVICE_START = 15      # ns from a fire-and-forget device launch to its first node's
                           # dispatch
    TAIL_START = 16        # ns from a run's completion to its tail launch's first dispatch
    RUNTIME_START = 17     # ns a host launch of a graph holding device-runtime code adds to
                           # its set-up
    GRAPH_PREPARE = 18     # ns of a graph launch's set-up done while it waits at the head of
                           # the walker's queue (GRAPH_START follows once the walker takes it)
    COND_RECORD = 19       # ns a conditional node's iteration takes more per body node before
                           # its roots are queued (a profiler's record of each body kernel)


STATUS_BAD_CHANNEL = 1 << 0
STATUS_BAD_PUT = 1 << 1
STATUS_BAD_VALUE = 1 << 2


# -- address map (model:) -------------------------------------------------------------------------

#: Host memory the driver allocates from (GPFIFO rings, descriptors, semaphores, graph tables).
HOST_MEMORY_BASE = 0x1_0000_0000
#: Host memory allocated lazily, region by region (push-buffer rings; see ``HostMemory``).
HOST_LAZY_BASE = 0x40_0000_0000
#: Device memory: where copies write (never read by the front end).
DEVICE_MEMORY_BASE = 0x80_0000_0000
#: Granularity of device memory allocations (copy destinations).
DEVICE_ALLOC_ALIGN = 256
#: The pinned host buffer copies read from (never read by the front end).
HOST_COPY_BUFFER = 0x90_0000_0000


# -- Python-side packing ---------------------------------------------------------------------------

@functools.cache
def struct_fields(layout):
    """``{name: (offset, width, signed)}`` of a flat struct layout's fields: for the driver's
    encoder and the engines' decoder, which pack and unpack them as integers (Amaranth
    constants are too slow per launch)."""
    return {name: (f.offset, f.width, Shape.cast(f.shape).signed)
            for name, f in layout.as_shape()}
