"""Host memory as the front end's DMA sees it: a sparse dword store with mapped regions.

Allocation is a bump pointer, so regions are sorted and a lookup is a bisection.
"""

import bisect
from itertools import repeat


class HostMemory:
    def __init__(self, base=0x1_0000_0000):
        self.words = {}
        self._starts = []          # mapped byte ranges [start, end), sorted
        self._ends = []
        self._next = base

    def alloc(self, size, align=256):
        base = (self._next + align - 1) // align * align
        self._next = base + size
        self._starts.append(base)
        self._ends.append(base + size)
        return base

    def mapped(self, address, size=4):
        i = bisect.bisect_right(self._starts, address) - 1
        return i >= 0 and address + size <= self._ends[i]

    def write_dwords(self, address, dwords):
        self.words.update(zip(range(address, address + 4 * len(dwords), 4),
                              (d & 0xFFFFFFFF for d in dwords)))

    def read_dword(self, address):
        return self.words.get(address, 0)

    def read_dwords(self, address, count):
        return list(map(self.words.get, range(address, address + 4 * count, 4), repeat(0)))

    def read64(self, address):
        return self.read_dword(address) | (self.read_dword(address + 4) << 32)

    def write64(self, address, value, wide=True):
        self.words[address] = value & 0xFFFFFFFF
        if wide:
            self.words[address + 4] = (value >> 32) & 0xFFFFFFFF
