"""Host memory as the front end's DMA sees it: a dword store with mapped regions.

Allocation is a bump pointer, so regions are sorted and a lookup is a bisection. The allocated
range is one flat array of dwords (every DMA read and every push-buffer write is a slice of
it); a dword outside it (below the base, past the last allocation, or at an address that is
not a multiple of 4) lives in a dict. Either way an address holds what was last written to
it, and 0 before that.

Large regions that a driver writes a little at a time (a channel's push-buffer ring) are
allocated with ``lazy=True``: from a second bump pointer at ``lazy_base``, each with a store of
its own that grows only as far as its highest dword written, so that a megabyte of address
space costs memory only once the ring has been written that far.

Memory that the run would otherwise allocate per launch is recycled, as a driver does:
:class:`SegmentRing` carves push-buffer segments from a channel's ring and frees them once the
GPU has read them; :class:`BlockPool` hands out descriptor blocks (launch descriptors, copy
descriptors, graph launch records) and takes them back once the engines have read them. After
a warm-up, a run of any length uses a fixed amount of host memory.

A *mirror* (:meth:`HostMemory.attach`) is told of every allocation and every write: the
compiled backend keeps a copy in its C loop, which answers the front end's DMA reads without a
trip through Python.
"""

import bisect
from array import array
from collections import deque

from gpufe.rtl.layouts import HOST_MEMORY_BASE, HOST_LAZY_BASE

DWORD = "I" if array("I").itemsize == 4 else "L"


class HostMemory:
    def __init__(self, base=HOST_MEMORY_BASE, lazy_base=HOST_LAZY_BASE):
        self._base = base
        self._next = base
        self._flat = array(DWORD)    # dwords from base up to the last allocation's end
        self._other = {}             # address -> dword, for addresses outside every store
        self._starts = []            # mapped byte ranges [start, end) below lazy_base, sorted
        self._ends = []
        self._lazy_base = lazy_base
        self._lazy_next = lazy_base
        self._lazy_starts = []       # lazy regions [start, end), sorted, and their stores
        self._lazy_ends = []
        self._lazy_stores = []
        self._mirror = None

    def attach(self, mirror):
        """Tell ``mirror`` of every allocation (``mirror.map(start, end)``, bytes) and every
        write (``mirror.write(address, dwords)``, an array of 32-bit dwords) from now on,
        starting with the allocations made and what they hold. Dwords outside every
        allocation are not passed on until an allocation takes them in."""
        self._mirror = mirror
        for start, end in zip(self._starts, self._ends):
            mirror.map(start, end)
            i = (start - self._base) >> 2
            mirror.write(start, self._flat[i:(end - self._base + 3) >> 2])
        for start, end, store in zip(self._lazy_starts, self._lazy_ends, self._lazy_stores):
            mirror.map(start, end)
            if store:
                mirror.write(start, store)

    def alloc(self, size, align=256, lazy=False):
        if lazy:
            return self._alloc_lazy(size, align)
        base = (self._next + align - 1) // align * align
        if base + size > self._lazy_base:
            raise MemoryError(f"host memory: {size} bytes do not fit below {self._lazy_base:#x}")
        self._next = base + size
        self._starts.append(base)
        self._ends.append(base + size)
        if self._mirror is not None:
            self._mirror.map(base, base + size)
        grow = (self._next - self._base + 3) // 4 - len(self._flat)
        if grow > 0:
            lo = self._base + 4 * len(self._flat)
            self._flat.frombytes(bytes(4 * grow))
            if self._other:
                # dwords written before their range was allocated move into the flat store
                for a in [a for a in self._other if lo <= a < self._next and a % 4 == 0]:
                    self._flat[(a - self._base) >> 2] = v = self._other.pop(a)
                    if self._mirror is not None:
                        self._mirror.write(a, array(DWORD, [v]))
        return base

    def _alloc_lazy(self, size, align):
        base = (self._lazy_next + align - 1) // align * align
        self._lazy_next = base + size
        store = array(DWORD)
        self._lazy_starts.append(base)
        self._lazy_ends.append(base + size)
        self._lazy_stores.append(store)
        if self._mirror is not None:
            self._mirror.map(base, base + size)
        if self._other:
            for a in [a for a in self._other if base <= a < base + size and a % 4 == 0]:
                v = self._other.pop(a)
                self._write_lazy(store, base, a, [v])
                if self._mirror is not None:
                    self._mirror.write(a, array(DWORD, [v]))
        return base

    def mapped(self, address, size=4):
        if address >= self._lazy_base:
            starts, ends = self._lazy_starts, self._lazy_ends
        else:
            starts, ends = self._starts, self._ends
        i = bisect.bisect_right(starts, address) - 1
        return i >= 0 and address + size <= ends[i]

    def footprint(self):
        """Dwords held by the stores (flat, lazy regions and loose dwords): what the host
        memory costs, for tests that check it does not grow with a run."""
        return (len(self._flat) + sum(len(s) for s in self._lazy_stores) + len(self._other))

    def _index(self, address, count):
        """Index into the flat store of ``count`` dwords at ``address``, or None."""
        i = (address - self._base) >> 2
        if address & 3 == 0 and address >= self._base and i + count <= len(self._flat):
            return i
        return None

    def _lazy_region(self, address, count):
        """(store, start) of the lazy region holding ``count`` dwords at ``address``, or
        None."""
        if address < self._lazy_base or address & 3:
            return None
        k = bisect.bisect_right(self._lazy_starts, address) - 1
        if k < 0 or address + 4 * count > self._lazy_ends[k]:
            return None
        return self._lazy_stores[k], self._lazy_starts[k]

    @staticmethod
    def _write_lazy(store, start, address, words):
        """``words``: dwords already masked to 32 bits."""
        i = (address - start) >> 2
        end = i + len(words)
        if end > len(store):
            store.frombytes(bytes(4 * (end - len(store))))
        store[i:end] = words if isinstance(words, array) else array(DWORD, words)

    def _store_dword(self, address, value):
        i = self._index(address, 1)
        if i is not None:
            self._flat[i] = value
            return
        r = self._lazy_region(address, 1)
        if r is None:
            self._other[address] = value
        else:
            self._write_lazy(r[0], r[1], address, [value])

    def write_dword(self, address, value):
        value &= 0xFFFFFFFF
        self._store_dword(address, value)
        if self._mirror is not None:
            self._mirror.write(address, array(DWORD, [value]))

    def write_dwords(self, address, dwords):
        words = array(DWORD, [d & 0xFFFFFFFF for d in dwords])
        i = self._index(address, len(words))
        if i is not None:
            self._flat[i:i + len(words)] = words
        else:
            r = self._lazy_region(address, len(words))
            if r is not None:
                self._write_lazy(r[0], r[1], address, words)
            else:
                for k, d in enumerate(words):
                    self._store_dword(address + 4 * k, d)
        if self._mirror is not None:
            self._mirror.write(address, words)

    def read_dword(self, address):
        i = self._index(address, 1)
        if i is not None:
            return self._flat[i]
        r = self._lazy_region(address, 1)
        if r is None:
            return self._other.get(address, 0)
        store, start = r
        j = (address - start) >> 2
        return store[j] if j < len(store) else 0

    def read_dwords(self, address, count):
        i = self._index(address, count)
        if i is not None:
            return self._flat[i:i + count].tolist()
        r = self._lazy_region(address, count)
        if r is None:
            return [self.read_dword(address + 4 * k) for k in range(count)]
        store, start = r
        j = (address - start) >> 2
        out = store[j:j + count].tolist()
        return out + [0] * (count - len(out))       # past the highest dword written: 0

    def read64(self, address):
        return self.read_dword(address) | (self.read_dword(address + 4) << 32)

    def max64(self, address, value, wide=True):
        """What a reduction IMAX of ``value`` leaves at ``address``: the greater of the two as
        signed integers (64-bit if ``wide``, else 32-bit)."""
        bits = 64 if wide else 32
        old = self.read64(address) if wide else self.read_dword(address)
        signed = lambda v: v - (1 << bits) if v >> (bits - 1) & 1 else v
        value &= (1 << bits) - 1
        return value if signed(value) > signed(old) else old

    def write64(self, address, value, wide=True):
        self.write_dword(address, value)
        if wide:
            self.write_dword(address + 4, value >> 32)


class SegmentRing:
    """A channel's push buffer: one region of host memory written circularly.

    A segment must be contiguous (a GPFIFO entry is an address and a length), so one that
    would start at or past ``capacity`` bytes from the ring's start goes to its start
    instead; segments are freed in the order they were placed (the GPU reads a channel's
    entries in order). The UMD lets at most ``capacity`` bytes be in flight (``pb_used``);
    under that rule a segment always fits in ``2 * capacity`` bytes:

    - nothing wrapped (live bytes ``[tail, head)``): if ``head < capacity`` the segment
      ends before ``capacity + n <= 2 * capacity``; otherwise it goes to 0 and needs
      ``n <= tail``, which holds as ``head - tail = live <= capacity - n``;
    - wrapped (live ``[tail, end)`` and ``[0, head)``, where ``end >= capacity`` is where
      the last segment before the wrap ended): it needs ``head + n <= tail``, which holds as
      ``live >= capacity - (tail - head)`` and ``live <= capacity - n``.

    The region is allocated lazily (see :class:`HostMemory`): its store grows to the
    highest byte written, at most ``capacity`` plus the largest segment.
    """

    def __init__(self, mem, capacity):
        self.capacity = capacity
        self.size = 2 * capacity
        self.base = mem.alloc(self.size, align=4096, lazy=True)
        self._live = deque()        # byte offsets of the segments not yet read, oldest first
        self._head = 0

    def place(self, nbytes):
        """Byte address of a new segment of ``nbytes``."""
        off = self._head if self._head < self.capacity else 0
        if (off + nbytes > self.size
                or (self._live and off <= self._live[0] < off + nbytes)):
            raise RuntimeError(f"push-buffer ring: no room for {nbytes} bytes at {off} "
                               f"(more than {self.capacity} bytes in flight?)")
        self._live.append(off)
        self._head = off + nbytes
        return self.base + off

    def release(self):
        """The oldest segment has been read by the GPU."""
        self._live.popleft()


class BlockPool:
    """Fixed-size blocks of host memory (descriptors) recycled through a free list: a block
    given back is handed out again before a new one is allocated."""

    def __init__(self, mem, size, align):
        self.mem, self.size, self.align = mem, size, align
        self._free = []
        self.allocated = 0

    def take(self):
        if self._free:
            return self._free.pop()
        self.allocated += 1
        return self.mem.alloc(self.size, align=self.align)

    def give(self, address):
        self._free.append(address)

    @property
    def in_use(self):
        """Blocks taken and not given back."""
        return self.allocated - len(self._free)
