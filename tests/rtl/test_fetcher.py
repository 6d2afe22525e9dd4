from collections import deque

from gpufe.rtl.config import SMALL
from gpufe.rtl.fetcher import DmaFetcher
from gpufe.rtl.layouts import ErrorCause, GPControl
from gpufe.sim.host.encode import gp_entry, gp_control
from tests.helpers import simulate

CFG = SMALL
N = CFG.pbdmas


class Host:
    """Rings and segments in a dict, answered after a latency; the FIFO as free counters.

    Each PBDMA's ring holds its channel's GPFIFO entries; ``entries[p]`` lists, in ring order,
    the segment each entry describes: (byte address, length in dwords), (0, 0) for a NOP."""

    def __init__(self, latency=6, capacity=6):
        self.mem = {}
        self.latency = latency
        self.capacity = capacity
        self.rings = {}
        self.entries = {}

    def segment(self, address, words):
        for j, d in enumerate(words):
            self.mem[address + 4 * j] = d
        return address

    def ring(self, pbdma, base, segments, seg_base=None):
        self.rings[pbdma] = base
        address = 0x2000_0000 + 0x1_0000 * pbdma if seg_base is None else seg_base
        self.entries[pbdma] = []
        for i, seg in enumerate(segments):
            if isinstance(seg, int):                 # a control entry
                e = seg
                self.entries[pbdma].append(((e >> 32 & 0xFF) << 32, 0))
            else:
                e = gp_entry(address, len(seg))
                self.segment(address, seg)
                self.entries[pbdma].append((address, len(seg)))
                address += 4 * len(seg)
            self.mem[base + 8 * i] = e & 0xFFFFFFFF
            self.mem[base + 8 * i + 4] = e >> 32


def run_fetcher(host, puts, cycles=400, pop_every=3, error_at=None, events=None):
    """Run the fetcher against ``host`` with ``puts[p]`` entries in PBDMA p's ring.

    ``events``: {cycle: [action, ...]} applied before that cycle's edge, as PbdmaUnits would
    drive the fetcher: ("halt", mask), ("load", pbdma, address, length), ("drop", pbdma),
    ("ring", pbdma, base, entries) (a new channel's ring at ``base``: GP_GET back to 0,
    ``entries`` to read).
    """
    dut = DmaFetcher(CFG)
    events = events or {}
    got = {p: [] for p in range(N)}
    log = {"faults": [], "max_outstanding": 0, "advances": {p: [] for p in range(N)},
           "requests": [], "writes": [], "want": []}
    puts = dict(puts)

    async def tb(ctx):
        gp_get = {p: 0 for p in range(N)}
        level = {p: 0 for p in range(N)}
        reserved = {p: 0 for p in range(N)}
        inflight = deque()     # (ready_cycle, [(tag, data, last, error)])
        streaming = deque()
        halt = 0
        gp_base = {p: host.rings.get(p, 0) for p in range(N)}
        ctx.set(dut.dma_req.ready, 1)
        for cycle in range(cycles):
            # 0. what the PBDMA units drive this cycle (load and drop for one cycle only)
            ctx.set(dut.load.valid, 0)
            ctx.set(dut.drop.valid, 0)
            for ev in events.get(cycle, ()):
                if ev[0] == "halt":
                    halt = ev[1]
                elif ev[0] == "load":
                    ctx.set(dut.load.valid, 1)
                    ctx.set(dut.load.payload, {"pbdma": ev[1], "address": ev[2],
                                               "length": ev[3]})
                elif ev[0] == "drop":
                    ctx.set(dut.drop.valid, 1)
                    ctx.set(dut.drop.payload, ev[1])
                elif ev[0] == "ring":
                    gp_base[ev[1]] = ev[2]
                    gp_get[ev[1]] = 0
                    puts[ev[1]] = ev[3]
            ctx.set(dut.halt, halt)
            # 1. inputs for this cycle, from the model
            for p in range(N):
                ctx.set(dut.gp_base[p], gp_base[p])
                ctx.set(dut.gp_get[p], gp_get[p])
                ctx.set(dut.free[p], host.capacity - level[p] - reserved[p])
            ctx.set(dut.pending, sum(1 << p for p in puts if gp_get[p] != puts[p]))
            if not streaming and inflight and inflight[0][0] <= cycle:
                streaming.extend(inflight.popleft()[1])
            if streaming:
                tag, d, last, err = streaming.popleft()
                ctx.set(dut.dma_resp.valid, 1)
                ctx.set(dut.dma_resp.payload, {"tag": tag, "data": d, "last": last, "error": err})
            else:
                ctx.set(dut.dma_resp.valid, 0)
            # 2. settled outputs: what the coming edge transfers
            log["want"].append(ctx.get(dut.want))
            if ctx.get(dut.dma_req.valid):
                rq = ctx.get(dut.dma_req.payload)
                log["requests"].append((cycle, rq.tag, rq.address, rq.count))
                err = error_at is not None and rq.address == error_at
                words = [(rq.tag, host.mem.get(rq.address + 4 * i, 0), i == rq.count - 1, err)
                         for i in range(rq.count)]
                inflight.append((cycle + host.latency, words))
                log["max_outstanding"] = max(log["max_outstanding"], len(inflight))
            if ctx.get(dut.reserve.valid):
                r = ctx.get(dut.reserve.payload)
                assert r.count <= host.capacity - level[r.pbdma] - reserved[r.pbdma]
                reserved[r.pbdma] += r.count
            if ctx.get(dut.fifo_write.valid):
                w = ctx.get(dut.fifo_write.payload)
                reserved[w.pbdma] -= 1
                level[w.pbdma] += 1
                got[w.pbdma].append(w.data)
                log["writes"].append((cycle, w.pbdma, w.data))
                assert reserved[w.pbdma] >= 0
            if ctx.get(dut.advance.valid):
                a = ctx.get(dut.advance.payload)
                gp_get[a.pbdma] += 1
                log["advances"][a.pbdma].append((a.address, a.length))
            if ctx.get(dut.fault.valid):
                f = ctx.get(dut.fault.payload)
                log["faults"].append((f.pbdma, f.cause))
            # the consumer drains slowly
            if cycle % pop_every == 0:
                for p in level:
                    level[p] = max(0, level[p] - 1)
            await ctx.tick()

    simulate(dut, tb)
    return got, log


def in_range(address, start, length):
    return start <= address < start + 4 * length


def test_entries_then_segments_in_order_within_fifo_room():
    host = Host()
    seg_a = [0xA000 + i for i in range(20)]
    seg_b = [0xB000 + i for i in range(5)]
    seg_c = [0xC000 + i for i in range(9)]
    host.ring(0, 0x1000_0000, [seg_a, gp_control(), seg_b])
    host.ring(1, 0x1100_0000, [seg_c])
    got, log = run_fetcher(host, {0: 3, 1: 1})
    assert got[0] == seg_a + seg_b
    assert got[1] == seg_c
    assert len(log["advances"][0]) == 3 and len(log["advances"][1]) == 1
    assert log["max_outstanding"] >= 2           # both PBDMAs had reads in flight
    assert log["faults"] == []
    # every read of a segment is within the FIFO room (checked at each reserve) and a burst
    assert all(count <= min(CFG.dma_burst, host.capacity) for *_, count in log["requests"])


def test_advance_carries_each_entrys_segment():
    host = Host()
    seg_a = [0xA000 + i for i in range(3)]
    seg_b = [0xB000 + i for i in range(12)]
    seg_c = [0xC000 + i for i in range(4)]
    host.ring(0, 0x1000_0000, [seg_a, gp_control(), seg_b, gp_control(), gp_control()])
    host.ring(1, 0x1100_0000, [seg_c, gp_control()])
    got, log = run_fetcher(host, {0: 5, 1: 2}, cycles=300)
    # each entry's segment in ring order, a NOP control entry with length 0
    assert log["advances"][0] == host.entries[0]
    assert log["advances"][1] == host.entries[1]
    assert log["advances"][0][1] == (0, 0)
    assert log["advances"][0][2] == (0x2000_0000 + 4 * len(seg_a), len(seg_b))
    assert got[0] == seg_a + seg_b and got[1] == seg_c
    assert log["faults"] == []


def test_error_response_faults_the_pbdma():
    host = Host()
    host.ring(0, 0x1000_0000, [[1, 2, 3]])
    host.ring(1, 0x1100_0000, [[7, 8]])
    got, log = run_fetcher(host, {0: 1, 1: 1}, cycles=120, error_at=0x2000_0000)
    assert (0, ErrorCause.FETCH_FAULT) in log["faults"]
    assert {f for f in log["faults"]} == {(0, ErrorCause.FETCH_FAULT)}
    assert got[1] == [7, 8]
    # the faulting read's dwords still arrive, so the space reserved for them is released
    assert len(got[0]) == 3


def test_illegal_control_entry_faults():
    host = Host()
    host.ring(1, 0x1000_0000, [gp_control(GPControl.ILLEGAL)])
    _, log = run_fetcher(host, {1: 1}, cycles=60)
    assert log["faults"] == [(1, ErrorCause.GP_ENTRY)]
    assert log["advances"][1] == [(GPControl.ILLEGAL.value << 32, 0)]


def test_load_starts_a_pbdma_with_the_rest_of_a_segment_fetched_first():
    host = Host()
    rest = host.segment(0x3000_0000, [0xD000 + i for i in range(11)])
    seg_b = [0xB000 + i for i in range(4)]
    seg_c = [0xC000 + i for i in range(3)]
    host.ring(1, 0x1000_0000, [seg_b, seg_c])
    # PBDMA 1 is loaded (halted, as during its context load) with entries already pending
    events = {0: [("halt", 0b10), ("load", 1, rest, 11)], 8: [("halt", 0)]}
    got, log = run_fetcher(host, {1: 2}, cycles=300, events=events)
    rest_words = [0xD000 + i for i in range(11)]
    assert got[1] == rest_words + seg_b + seg_c
    reads = [(c, a, n) for c, t, a, n in log["requests"] if t == 1]
    assert reads[0][0] >= 8                       # nothing while halted
    # the loaded segment is read first, in bursts, and only then the ring's entries
    ring_reads = [i for i, (_, a, n) in enumerate(reads) if in_range(a, 0x1000_0000, 4)]
    rest_reads = [i for i, (_, a, n) in enumerate(reads) if in_range(a, rest, 11)]
    assert len(rest_reads) >= 2 and max(rest_reads) < min(ring_reads)
    assert sum(reads[i][2] for i in rest_reads) == 11
    # the load is no GPFIFO entry: only the ring's two entries advance
    assert log["advances"][1] == host.entries[1]


def test_load_of_no_segment_fetches_the_ring_at_once():
    host = Host()
    seg_b = [0xB000 + i for i in range(4)]
    host.ring(0, 0x1000_0000, [seg_b])
    events = {0: [("halt", 0b01), ("load", 0, 0, 0)], 4: [("halt", 0)]}
    got, log = run_fetcher(host, {0: 1}, cycles=100, events=events)
    assert got[0] == seg_b
    assert log["requests"][0][1:] == (0, 0x1000_0000, 2)     # the entry first


def test_drop_forgets_the_rest_of_a_segment():
    host = Host(capacity=4)
    first = [0xA000 + i for i in range(20)]
    host.ring(0, 0x1000_0000, [first])
    seg_x = [0xF000 + i for i in range(3)]
    host.segment(0x3100_0000, seg_x)
    new_ring = 0x1200_0000
    e = gp_entry(0x3100_0000, len(seg_x))
    host.mem[new_ring], host.mem[new_ring + 4] = e & 0xFFFFFFFF, e >> 32
    # the channel switches out mid-segment (halted, its reads land) and its segment is
    # dropped; the PBDMA runs again with nothing to read, then with another channel's ring
    events = {40: [("halt", 0b01)], 70: [("drop", 0)], 80: [("halt", 0)],
              150: [("ring", 0, new_ring, 1)]}
    got, log = run_fetcher(host, {0: 1}, cycles=300, pop_every=4, events=events)
    before = [d for c, _, d in log["writes"] if c < 70]
    after = [d for c, _, d in log["writes"] if c >= 70]
    assert 0 < len(before) < len(first) and before == first[:len(before)]
    assert after == seg_x
    # what the first segment had left was never read, and nothing was wanted after the drop
    first_reads = [(c, a, n) for c, _, a, n in log["requests"] if in_range(a, 0x2000_0000, 20)]
    assert all(c < 40 for c, _, _ in first_reads)
    assert sum(n for *_, n in first_reads) == len(before)
    assert log["want"][60] & 1 == 0                          # halted
    assert not any(w & 1 for w in log["want"][80:150])       # running, nothing to fetch
    assert not [r for r in log["requests"] if 70 <= r[0] < 150]
