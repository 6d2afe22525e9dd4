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
