"""HostMemory against a plain dict of dwords: the same contents after any mix of accesses."""

import random

from gpufe.rtl.layouts import HOST_MEMORY_BASE as BASE
from gpufe.sim.cosim.hostmem import HostMemory


def test_flat_store_matches_a_dict_of_dwords():
    rng = random.Random(5)
    mem, ref = HostMemory(base=BASE), {}
    regions = []

    def some_address():
        kind = rng.randrange(5)
        if kind == 0 or not regions:
            # below the base, or past the last allocation (allocated later, maybe)
            return rng.choice([BASE - 64, BASE + 4 * rng.randrange(20000)])
        start, size = rng.choice(regions)
        a = start + 4 * rng.randrange(max(size // 4, 1))
        return a + 2 if kind == 1 else a          # some unaligned addresses

    for step in range(4000):
        op = rng.randrange(6)
        if op == 0:
            size, align = 4 * rng.randrange(1, 40), rng.choice([4, 16, 256])
            regions.append((mem.alloc(size, align=align), size))
        elif op == 1:
            a, ds = some_address(), [rng.getrandbits(36) for _ in range(rng.randrange(1, 9))]
            mem.write_dwords(a, ds)
            ref.update({a + 4 * k: d & 0xFFFFFFFF for k, d in enumerate(ds)})
        elif op == 2:
            a, v, wide = some_address(), rng.getrandbits(64), rng.random() < 0.5
            mem.write64(a, v, wide)
            ref[a] = v & 0xFFFFFFFF
            if wide:
                ref[a + 4] = v >> 32
        elif op == 3:
            a, n = some_address(), rng.randrange(1, 9)
            assert mem.read_dwords(a, n) == [ref.get(a + 4 * k, 0) for k in range(n)], step
        elif op == 4:
            a = some_address()
            assert mem.read64(a) == ref.get(a, 0) | ref.get(a + 4, 0) << 32, step
        else:
            a = some_address()
            assert mem.read_dword(a) == ref.get(a, 0), step
    for a, v in ref.items():
        assert mem.read_dword(a) == v
    assert len(regions) > 100 and len(mem._other) > 0      # both stores were exercised


def test_mapped_regions():
    mem = HostMemory(base=BASE)
    a = mem.alloc(64, align=256)
    b = mem.alloc(16, align=256)
    assert mem.mapped(a) and mem.mapped(a + 60) and mem.mapped(a, 64)
    assert not mem.mapped(a + 60, 8) and not mem.mapped(a + 64)
    assert mem.mapped(b, 16) and not mem.mapped(BASE - 4) and not mem.mapped(b + 16)


class RegionMirror:
    """What a mirror (the compiled loop's copy) holds: its allocations and the dwords written
    into them, 0 elsewhere in them."""

    def __init__(self):
        self.regions, self.words = [], {}

    def map(self, start, end):
        assert all(end <= s or start >= e for s, e in self.regions), "regions overlap"
        self.regions.append((start, end))

    def write(self, address, dwords):
        assert all(0 <= d < 1 << 32 for d in dwords)
        for k, d in enumerate(dwords):
            a = address + 4 * k
            if a % 4 == 0 and any(s <= a < e for s, e in self.regions):
                self.words[a] = d

    def read(self, start, end):
        return [self.words.get(a, 0) for a in range(start, end, 4)]


def test_a_mirror_sees_every_allocation_and_what_it_holds():
    """Attached part-way through, a mirror holds what a DMA read of any allocation returns,
    whatever mix of writes, lazy regions and dwords written before their allocation."""
    rng = random.Random(9)
    mem, mirror = HostMemory(base=BASE), RegionMirror()
    allocs = []
    for step in range(3000):
        if step == 300:
            mem.attach(mirror)
        op = rng.randrange(4)
        if op == 0 or not allocs:
            size = 4 * rng.randrange(1, 64)
            lazy = rng.random() < 0.3
            allocs.append((mem.alloc(size, align=rng.choice([4, 256]), lazy=lazy), size))
        elif op == 1:
            start, size = rng.choice(allocs)
            a = start + 4 * rng.randrange(size // 4 + 8) + (2 if rng.random() < 0.1 else 0)
            mem.write_dwords(a, [rng.getrandbits(40) for _ in range(rng.randrange(1, 12))])
        elif op == 2:
            # past every allocation: kept apart until one takes it in
            a = max(mem._next, mem._lazy_next) + 4 * rng.randrange(64)
            mem.write_dword(a if rng.random() < 0.5 else mem._next + 4 * rng.randrange(64),
                            rng.getrandbits(32))
        else:
            start, size = rng.choice(allocs)
            mem.write64(start + 4 * rng.randrange(size // 4), rng.getrandbits(64),
                        rng.random() < 0.5)
    assert sorted(mirror.regions) == sorted((s, s + n) for s, n in allocs)
    for start, size in allocs:
        assert mirror.read(start, start + size) == mem.read_dwords(start, size // 4), hex(start)
    assert any(mirror.words.values())
