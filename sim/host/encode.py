"""Push-buffer encoding, as the user-mode driver writes it (DESIGN.md section 3).

Every bit position comes from the layouts in ``rtl/layouts.py``; this module only composes
them. A :class:`PushBuffer` collects dwords; ``gp_entry`` makes the GPFIFO entry that points
at a segment of it.
"""

import enum
import functools

from gpufe.rtl.layouts import (MethodHeader, SecOp, Method, Subchannel, SemOp, SemExecute,
                               Reduction, GPEntry, GPControl, LaunchDescriptor,
                               LAUNCH_DESCRIPTOR_ALIGN, LAUNCH_DESCRIPTOR_DWORDS, GraphNode,
                               GraphNodeKind, GRAPH_NODE_DWORDS)


_FIELD_TABLES = {}


def _pack(layout, **fields):
    """Pack a flat struct from field values (ints or enum members) with the layout's own
    offsets; a cached table of them, since Amaranth constants are slow per launch."""
    table = _FIELD_TABLES.get(layout)
    if table is None:
        table = _FIELD_TABLES[layout] = {
            name: (f.offset, (1 << f.width) - 1) for name, f in layout.as_shape()}
    bits = 0
    for name, value in fields.items():
        offset, mask = table[name]
        v = value.value if isinstance(value, enum.Enum) else int(value)
        if v & ~mask:
            raise ValueError(f"{layout.__name__}.{name} = {v} does not fit its field")
        bits |= v << offset
    return bits


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
                      regs_per_thread=32, shared_bytes=0):
    """The model's launch descriptor as a list of dwords (see LaunchDescriptor)."""
    value = _launch_descriptor_bits(tuple(grid), tuple(block), block_ns, regs_per_thread,
                                    shared_bytes)
    value |= _pack(LaunchDescriptor, kernel_id=kernel_id)
    return [(value >> (32 * i)) & 0xFFFFFFFF for i in range(LAUNCH_DESCRIPTOR_DWORDS)]


@functools.lru_cache(maxsize=1024)      # a program launches few distinct shapes, many times
def _launch_descriptor_bits(grid, block, block_ns, regs_per_thread, shared_bytes):
    return _pack(LaunchDescriptor, grid_x=grid[0], grid_y=grid[1], grid_z=grid[2],
                 block_x=block[0], block_y=block[1], block_z=block[2],
                 regs_per_thread=regs_per_thread, shared_bytes=shared_bytes,
                 block_ns=block_ns)


def decode_launch_descriptor(dwords):
    value = sum(d << (32 * i) for i, d in enumerate(dwords))
    view = LaunchDescriptor.from_bits(value)
    return {name: int(getattr(view, name)) for name, _ in LaunchDescriptor.as_shape()
            if not name.startswith("_")}


def encode_graph_node(kind, pred_count, succ_count, succ_first, descriptor):
    """One GraphNode record (4 dwords) of an instantiated graph's table."""
    if descriptor % LAUNCH_DESCRIPTOR_ALIGN:
        raise ValueError(f"node descriptor {descriptor:#x} is not 256-byte aligned")
    value = _pack(GraphNode, kind=GraphNodeKind.KERNEL if kind == "kernel" else GraphNodeKind.COPY,
                  pred_count=pred_count, succ_count=succ_count, succ_first=succ_first,
                  descriptor=descriptor >> 8)
    return [(value >> (32 * i)) & 0xFFFFFFFF for i in range(GRAPH_NODE_DWORDS)]


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
        if descriptor_address % LAUNCH_DESCRIPTOR_ALIGN:
            raise ValueError(f"launch descriptor {descriptor_address:#x} is not "
                             f"{LAUNCH_DESCRIPTOR_ALIGN}-byte aligned")
        self.incr(Method.SEND_PCAS_A, descriptor_address >> 8, subchannel=Subchannel.COMPUTE)
        return self.immd(Method.SEND_SIGNALING_PCAS2_B, 9, subchannel=Subchannel.COMPUTE)

    def copy(self, src, dst, length, flags=0):
        """1-D copy: offsets, LINE_LENGTH_IN, LAUNCH_DMA (9 dwords)."""
        self.incr(Method.OFFSET_IN_UPPER, (src >> 32) & 0xFF, src & 0xFFFFFFFF,
                  (dst >> 32) & 0xFF, dst & 0xFFFFFFFF, subchannel=Subchannel.COPY)
        self.incr(Method.LINE_LENGTH_IN, length, subchannel=Subchannel.COPY)
        return self.incr(Method.LAUNCH_DMA, flags, subchannel=Subchannel.COPY)
