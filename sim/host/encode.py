"""Push-buffer encoding, as the user-mode driver writes it (DESIGN.md section 3), and the
records it writes into host memory beside it: launch and copy descriptors, graph node tables,
graph launch queues.

Every bit position comes from the layouts in ``rtl/layouts.py``; this module only composes
them. A :class:`PushBuffer` collects dwords; ``gp_entry`` makes the GPFIFO entry that points
at a segment of it. The engines' side, decoding what is written here, is in
``sim/cosim/engines.py``.
"""

import enum
import functools
import struct

from gpufe.rtl.layouts import (MethodHeader, SecOp, Method, Subchannel, SemOp, SemExecute,
                               Reduction, GPEntry, GPControl, LaunchDescriptor,
                               LAUNCH_DESCRIPTOR_DWORDS, DESCRIPTOR_ALIGN, CopyKind, COPY_KINDS,
                               CopyDescriptor, COPY_DESCRIPTOR_DWORDS, COPY_FLAG_DESCRIPTOR,
                               GraphNode, GraphNodeKind, GraphEdge, GRAPH_NODE_DWORDS,
                               GraphLaunchQueue,
                               GRAPH_LAUNCH_QUEUE_DWORDS, GraphLaunchRecord, DeviceGraph,
                               DEVICE_GRAPH_DWORDS,
                               GRAPH_LAUNCH_RECORD_DWORDS, struct_fields)
from gpufe.sim.cosim.events import ps


def _pack(layout, **fields):
    """Pack a flat struct from field values (ints or enum members) with the layout's own
    offsets (``struct_fields``); a signed field takes a negative value in two's complement."""
    table = _pack_table(layout)
    bits = 0
    for name, value in fields.items():
        offset, mask, low, high = table[name]
        v = value if type(value) is int else \
            value.value if isinstance(value, enum.Enum) else int(value)
        if not low <= v < high:
            raise ValueError(f"{layout.__name__}.{name} = {v} does not fit its field")
        bits |= (v & mask) << offset
    return bits


@functools.cache
def _pack_table(layout):
    """name -> (offset, mask, least, most + 1) of each field."""
    out = {}
    for name, (offset, width, signed) in struct_fields(layout).items():
        low = -(1 << (width - 1)) if signed else 0
        out[name] = (offset, (1 << width) - 1, low, low + (1 << width))
    return out


def _dwords(value, count):
    return list(struct.unpack(f"<{count}I", value.to_bytes(4 * count, "little")))


@functools.lru_cache(maxsize=4096)      # a few dozen distinct headers, encoded per launch
def method_header(sec_op, method, count, subchannel=Subchannel.HOST):
    address = method.value if isinstance(method, Method) else int(method)
    sub = subchannel.value if isinstance(subchannel, Subchannel) else int(subchannel)
    if not 0 <= count < (1 << 13):
        raise ValueError(f"method count {count} does not fit 13 bits")
    return _pack(MethodHeader, address=address, subchannel=sub, count=count, sec_op=sec_op)


@functools.lru_cache(maxsize=256)
def sem_execute(operation, *, release_wfi=False, wide=False, timestamp=False,
                reduction=Reduction.IMIN):
    return _pack(SemExecute, operation=operation, release_wfi=int(release_wfi),
                 payload_size=int(wide), release_timestamp=int(timestamp), reduction=reduction)


def gp_entry(address, length):
    """64-bit GPFIFO entry for a segment of ``length`` dwords at byte ``address``."""
    if address & 3:
        raise ValueError(f"push-buffer address {address:#x} is not dword aligned")
    if not 0 < length < (1 << 21):
        raise ValueError(f"segment length {length} out of range")
    return _pack(GPEntry, address_lo=(address >> 2) & ((1 << 30) - 1),
                 address_hi=(address >> 32) & 0xFF, length=length)


def gp_control(opcode=GPControl.NOP):
    return _pack(GPEntry, address_hi=opcode.value, length=0)


def syncpoint_address(cfg, index):
    """Semaphore address that selects on-chip syncpoint counter ``index``."""
    if not 0 <= index < cfg.syncpoints:
        raise ValueError(f"syncpoint {index} out of range 0..{cfg.syncpoints - 1}")
    return cfg.syncpoint_base + 4 * index


def launch_descriptor(grid=(1, 1, 1), block=(32, 1, 1), block_ns=0, kernel_id=0,
                      regs_per_thread=32, shared_bytes=0, *, priority=0, release=None,
                      correlation_id=0, stream_id=0, queued_ns=0, graph_id=0,
                      graph_launches=0, pdl_primary=None, trigger_ns=None, prologue_ns=0,
                      device_graph_launch=None):
    """The model's launch descriptor as a list of dwords (see LaunchDescriptor).

    ``block_ns``: one thread block's run time (kept to the ps); ``release``: (syncpoint,
    value) set as the kernel completes, or None; ``graph_launches``: a graph node's
    GraphLaunchQueue address. PDL: ``pdl_primary`` (the primary's release value, or in a
    graph its node index; None: no programmatic dependency), ``trigger_ns`` (None: implicit,
    as blocks exit), ``prologue_ns``. ``device_graph_launch``: the kernel holds device-side
    cudaGraphLaunch code, ``(tail?, count, DeviceGraph address)`` (the address 0 when
    ``count`` is 0). The submitted time is written at the kickoff
    (:func:`submitted_update`)."""
    value = _launch_descriptor_bits(tuple(grid), tuple(block), ps(block_ns), regs_per_thread,
                                    shared_bytes, kernel_id, priority, stream_id, graph_id,
                                    graph_launches)
    value |= _pack(LaunchDescriptor, correlation_id=correlation_id, queued_ns=queued_ns)
    if release is not None:
        value |= _release_bits(release[0], release[1] & 0xFFFFFFFF)
    if pdl_primary is not None:
        value |= _pack(LaunchDescriptor, pdl=1, pdl_primary=pdl_primary & 0xFFFFFFFF)
    if trigger_ns is not None:
        value |= _pack(LaunchDescriptor, trigger_enable=1, trigger_ps=ps(trigger_ns))
    if prologue_ns:
        value |= _pack(LaunchDescriptor, prologue_ps=ps(prologue_ns))
    if device_graph_launch is not None:
        tail, count, handle = device_graph_launch
        value |= _pack(LaunchDescriptor, device_runtime=1, dgl_tail=int(tail), dgl_count=count,
                       dgl_graph=handle)
    return _dwords(value, LAUNCH_DESCRIPTOR_DWORDS)


@functools.lru_cache(maxsize=4096)      # a program launches few distinct kernels, many times
def _launch_descriptor_bits(grid, block, block_ps, regs_per_thread, shared_bytes, kernel_id,
                            priority, stream_id, graph_id, graph_launches):
    if graph_launches % DESCRIPTOR_ALIGN:
        raise ValueError(f"graph launch queue {graph_launches:#x} is not "
                         f"{DESCRIPTOR_ALIGN}-byte aligned")
    return _pack(LaunchDescriptor, grid_x=grid[0], grid_y=grid[1], grid_z=grid[2],
                 block_x=block[0], block_y=block[1], block_z=block[2],
                 regs_per_thread=regs_per_thread, shared_bytes=shared_bytes,
                 block_ps=block_ps, kernel_id=kernel_id, priority=priority,
                 stream_id=stream_id, graph_id=graph_id, graph_launches=graph_launches >> 8)


def _release_bits(index, value):
    return _pack(LaunchDescriptor, release_enable=1, release_index=index, release_value=value)


def field_update(layout, name, value):
    """(byte offset, dwords) that set one dword-aligned field of a record already in memory
    to ``value``: what a driver writes to update it in place."""
    offset, width, _ = struct_fields(layout)[name]
    if offset % 32 or width % 32:
        raise ValueError(f"{layout.__name__}.{name} is not a whole number of dwords")
    return offset // 8, _dwords(_pack(layout, **{name: value}) >> offset, width // 32)


def submitted_update(ns):
    """(byte offset, dwords) of a launch descriptor's submitted time: the UMD writes it at the
    kickoff, before the doorbell."""
    if not 0 <= ns < 1 << 64:
        raise ValueError(f"LaunchDescriptor.submitted_ns = {ns} does not fit its field")
    return _SUBMITTED_OFFSET, [ns & 0xFFFFFFFF, ns >> 32]


_SUBMITTED_OFFSET = field_update(LaunchDescriptor, "submitted_ns", 0)[0]


def copy_descriptor(src, dst, length, kind, *, correlation_id=0, stream_id=0, graph_id=0,
                    graph_launches=0):
    """A copy descriptor as a list of dwords (see CopyDescriptor); ``kind``: "h2d", "d2h" or
    "d2d"."""
    if kind not in COPY_KINDS:
        raise ValueError(f"copy kind {kind!r}: one of {', '.join(COPY_KINDS)}")
    if graph_launches % DESCRIPTOR_ALIGN:
        raise ValueError(f"graph launch queue {graph_launches:#x} is not "
                         f"{DESCRIPTOR_ALIGN}-byte aligned")
    return _dwords(_pack(CopyDescriptor, src=src, dst=dst, length=length,
                         kind=CopyKind(COPY_KINDS[kind]), correlation_id=correlation_id,
                         stream_id=stream_id, graph_id=graph_id,
                         graph_launches=graph_launches >> 8), COPY_DESCRIPTOR_DWORDS)


_NODE_KINDS = {"kernel": GraphNodeKind.KERNEL, "copy": GraphNodeKind.COPY,
               "conditional": GraphNodeKind.CONDITIONAL}


def encode_graph_node(kind, pred_count, succ_count, succ_first, descriptor,
                      programmatic=False, *, body=False, iterations=0, branch=0):
    """One GraphNode record (4 dwords) of an instantiated graph's table (``programmatic``:
    some of its successors are programmatic edges; ``body``: a node of a conditional node's
    body; ``branch``: the branch a root heads). A conditional node's ``descriptor`` is its
    body, (first node, node count), and ``iterations`` its runs per launch."""
    if kind == "conditional":
        first, count = descriptor
        word = first | count << 16
    else:
        if descriptor % DESCRIPTOR_ALIGN:
            raise ValueError(f"node descriptor {descriptor:#x} is not {DESCRIPTOR_ALIGN}-byte "
                             f"aligned")
        word = descriptor >> 8
    value = _pack(GraphNode, kind=_NODE_KINDS[kind], pred_count=pred_count,
                  succ_count=succ_count, succ_first=succ_first, descriptor=word,
                  programmatic=int(programmatic), body=int(body), iterations=iterations,
                  branch=branch)
    return _dwords(value, GRAPH_NODE_DWORDS)


def encode_graph_edge(successor, programmatic=False):
    """One GraphEdge dword: the successor's index, and whether the edge is programmatic."""
    return _pack(GraphEdge, node=successor, programmatic=int(programmatic))


def graph_launch_queue(head, nodes):
    """A graph's launch queue at instantiation (see GraphLaunchQueue): ``head`` is an empty
    launch record the first launch is linked from."""
    return _dwords(_pack(GraphLaunchQueue, head=head, nodes=nodes, left=0),
                   GRAPH_LAUNCH_QUEUE_DWORDS)


def graph_launch_record(correlation_id, stream_id, priority, next_record=0):
    """One launch of a graph, as its launch queue holds it (see GraphLaunchRecord)."""
    return _dwords(_pack(GraphLaunchRecord, next=next_record, correlation_id=correlation_id,
                         stream_id=stream_id, priority=priority), GRAPH_LAUNCH_RECORD_DWORDS)


def device_graph(table, nodes, queue, last):
    """An executable graph as the device runtime finds it (see DeviceGraph)."""
    return _dwords(_pack(DeviceGraph, table=table, nodes=nodes, queue=queue, last=last),
                   DEVICE_GRAPH_DWORDS)


def graph_launch_link(next_record):
    """(byte offset, dwords) that link a launch record to the one queued after it."""
    return field_update(GraphLaunchRecord, "next", next_record)


class PushBuffer:
    """Builds a method stream. Method helpers return ``self`` so calls chain."""

    def __init__(self):
        self.words = []

    def __len__(self):
        return len(self.words)

    def raw(self, *words):
        self.words.extend(w & 0xFFFFFFFF for w in words)
        return self

    def incr(self, method, *data, subchannel=Subchannel.HOST):
        return self.raw(method_header(SecOp.INC, method, len(data), subchannel), *data)

    def non_incr(self, method, *data, subchannel=Subchannel.HOST):
        return self.raw(method_header(SecOp.NON_INC, method, len(data), subchannel), *data)

    def one_incr(self, method, *data, subchannel=Subchannel.HOST):
        return self.raw(method_header(SecOp.ONE_INC, method, len(data), subchannel), *data)

    def immd(self, method, value, subchannel=Subchannel.HOST):
        return self.raw(method_header(SecOp.IMMD, method, value, subchannel))

    def nop(self):
        return self.raw(0)

    def _semaphore(self, address, payload, execute):
        # SEM_ADDR_LO .. SEM_EXECUTE are consecutive: one INC of 5, as drivers write it
        return self.incr(Method.SEM_ADDR_LO, address & 0xFFFFFFFC, (address >> 32) & 0xFF,
                         payload & 0xFFFFFFFF, (payload >> 32) & 0xFFFFFFFF, execute)

    def sem_release(self, address, payload, *, wfi=True, timestamp=False, wide=False):
        """Write ``payload`` (and a timestamp) once earlier work has completed (``wfi``)."""
        return self._semaphore(address, payload, sem_execute(
            SemOp.RELEASE, release_wfi=wfi, wide=wide, timestamp=timestamp))

    def sem_release_max(self, address, payload, *, wfi=True):
        """Raise the semaphore to ``payload`` (REDUCTION IMAX: never lower it) once earlier
        work has completed (``wfi``)."""
        return self._semaphore(address, payload, sem_execute(
            SemOp.REDUCTION, release_wfi=wfi, reduction=Reduction.IMAX))

    def sem_increment(self, address, *, wfi=True):
        return self._semaphore(address, 0, sem_execute(SemOp.REDUCTION, release_wfi=wfi,
                                                       reduction=Reduction.INC))

    def sem_acquire(self, address, value, op=SemOp.ACQ_CIRC_GEQ):
        return self._semaphore(address, value, sem_execute(op))

    def wfi(self):
        return self.immd(Method.WFI, 0)

    def non_stall_interrupt(self):
        return self.immd(Method.NON_STALL_INTERRUPT, 0)

    def launch(self, descriptor_address):
        """Compute launch: SEND_PCAS_A (descriptor >> 8), then SEND_SIGNALING_PCAS2_B."""
        if descriptor_address % DESCRIPTOR_ALIGN:
            raise ValueError(f"launch descriptor {descriptor_address:#x} is not "
                             f"{DESCRIPTOR_ALIGN}-byte aligned")
        self.incr(Method.SEND_PCAS_A, descriptor_address >> 8, subchannel=Subchannel.COMPUTE)
        return self.immd(Method.SEND_SIGNALING_PCAS2_B, 9, subchannel=Subchannel.COMPUTE)

    def copy(self, src, dst, length, flags=0):
        """1-D copy: offsets, LINE_LENGTH_IN, LAUNCH_DMA (9 dwords)."""
        self.incr(Method.OFFSET_IN_UPPER, (src >> 32) & 0xFF, src & 0xFFFFFFFF,
                  (dst >> 32) & 0xFF, dst & 0xFFFFFFFF, subchannel=Subchannel.COPY)
        self.incr(Method.LINE_LENGTH_IN, length, subchannel=Subchannel.COPY)
        return self.incr(Method.LAUNCH_DMA, flags, subchannel=Subchannel.COPY)

    def copy_by_descriptor(self, descriptor_address, dst, length):
        """A copy whose parameters are in a copy descriptor: its address as the source
        offset, ``COPY_FLAG_DESCRIPTOR`` in LAUNCH_DMA (the same 9 dwords as :meth:`copy`)."""
        if descriptor_address % DESCRIPTOR_ALIGN:
            raise ValueError(f"copy descriptor {descriptor_address:#x} is not "
                             f"{DESCRIPTOR_ALIGN}-byte aligned")
        return self.copy(descriptor_address, dst, length, flags=COPY_FLAG_DESCRIPTOR)
