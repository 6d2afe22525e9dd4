"""Host memory as the front end's DMA sees it: a dword store with mapped regions.

Allocation is a bump pointer, so regions are sorted and a lookup is a bisection. The allocated
range is one flat array of dwords (every DMA read and every push-buffer write is a slice of
it); a dword outside it (below the base, past the last allocation, or at an address that is
not a multiple of 4) lives in a dict. Either way an address holds what was last written to
it, and 0 before that.
"""

import bisect
from array import array

DWORD = "I" if array("I").itemsize == 4 else "L"


class HostMemory:
    def __init__(self, base=0x1_0000_0000):
        self._base = base
        self._next = base
        self._flat = array(DWORD)    # dwords from base up to the last allocation's end
        self._other = {}             # address -> dword, for addresses outside _flat
        self._starts = []            # mapped byte ranges [start, end), sorted
        self._ends = []

    def alloc(self, size, align=256):
        base = (self._next + align - 1) // align * align
        self._next = base + size
        self._starts.append(base)
        self._ends.append(base + size)
        grow = (self._next - self._base + 3) // 4 - len(self._flat)
        if grow > 0:
            lo = self._base + 4 * len(self._flat)
            self._flat.frombytes(bytes(4 * grow))
            if self._other:
                # dwords written before their range was allocated move into the flat store
                for a in [a for a in self._other if lo <= a < self._next and a % 4 == 0]:
                    self._flat[(a - self._base) >> 2] = self._other.pop(a)
        return base

    def mapped(self, address, size=4):
        i = bisect.bisect_right(self._starts, address) - 1
        return i >= 0 and address + size <= self._ends[i]

    def _index(self, address, count):
        """Index into the flat store of ``count`` dwords at ``address``, or None."""
        i = (address - self._base) >> 2
        if address & 3 == 0 and address >= self._base and i + count <= len(self._flat):
            return i
        return None

    def write_dword(self, address, value):
        i = self._index(address, 1)
        if i is None:
            self._other[address] = value & 0xFFFFFFFF
        else:
            self._flat[i] = value & 0xFFFFFFFF

    def write_dwords(self, address, dwords):
        i = self._index(address, len(dwords))
        if i is None:
            for k, d in enumerate(dwords):
                self.write_dword(address + 4 * k, d)
        else:
            self._flat[i:i + len(dwords)] = array(DWORD, [d & 0xFFFFFFFF for d in dwords])

    def read_dword(self, address):
        i = self._index(address, 1)
        return self._other.get(address, 0) if i is None else self._flat[i]

    def read_dwords(self, address, count):
        i = self._index(address, count)
        if i is None:
            return [self.read_dword(address + 4 * k) for k in range(count)]
        return self._flat[i:i + count].tolist()

    def read64(self, address):
        return self.read_dword(address) | (self.read_dword(address + 4) << 32)

    def write64(self, address, value, wide=True):
        self.write_dword(address, value)
        if wide:
            self.write_dword(address + 4, value >> 32)
