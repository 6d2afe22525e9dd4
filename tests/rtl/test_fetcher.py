from collections import deque

from gpufe.rtl.config import SMALL
from gpufe.rtl.fetcher import DmaFetcher
from gpufe.rtl.layouts import ErrorCause
from gpufe.sim.host.encode import gp_entry, gp_control
from tests.helpers import simulate

CFG = SMALL


class Host:
    """Rings and segments in a dict, answered after a latency; the FIFO as free counters."""

    def __init__(self, latency=6, capacity=6):
        self.mem = {}
        self.latency = latency
        self.capacity = capacity
        self.rings = {}

    def ring(self, channel, base, segments):
        self.rings[channel] = base
        address = 0x2000_0000 + 0x1_0000 * channel
        for i, seg in enumerate(segments):
            if isinstance(seg, int):                 # a control entry
                e = seg
            else:
                e = gp_entry(address, len(seg))
                for j, d in enumerate(seg):
                    self.mem[address + 4 * j] = d
                address += 4 * len(seg)
            self.mem[base + 8 * i] = e & 0xFFFFFFFF
            self.mem[base + 8 * i + 4] = e >> 32


def run_fetcher(host, puts, cycles=400, pop_every=3, error_at=None):
    dut = DmaFetcher(CFG)
    got = {c: [] for c in range(CFG.channels)}
    log = {"faults": [], "max_outstanding": 0, "advances": {c: 0 for c in range(CFG.channels)}}

    async def tb(ctx):
        gp_get = {c: 0 for c in range(CFG.channels)}
        level = {c: 0 for c in range(CFG.channels)}
        reserved = {c: 0 for c in range(CFG.channels)}
        inflight = deque()     # (ready_cycle, [(tag, data, last, error)])
        streaming = deque()
        for c, base in host.rings.items():
            ctx.set(dut.gp_base[c], base)
        ctx.set(dut.pending, sum(1 << c for c in puts if puts[c]))
        ctx.set(dut.dma_req.ready, 1)
        for cycle in range(cycles):
            # 1. inputs for this cycle, from the model
            for c in range(CFG.channels):
                ctx.set(dut.gp_get[c], gp_get[c])
                ctx.set(dut.free[c], host.capacity - level[c] - reserved[c])
            ctx.set(dut.pending, sum(1 << c for c in puts if gp_get[c] != puts[c]))
            if not streaming and inflight and inflight[0][0] <= cycle:
                streaming.extend(inflight.popleft()[1])
            if streaming:
                tag, d, last, err = streaming.popleft()
                ctx.set(dut.dma_resp.valid, 1)
                ctx.set(dut.dma_resp.payload, {"tag": tag, "data": d, "last": last, "error": err})
            else:
                ctx.set(dut.dma_resp.valid, 0)
            # 2. settled outputs: what the coming edge transfers
            if ctx.get(dut.dma_req.valid):
                rq = ctx.get(dut.dma_req.payload)
                err = error_at is not None and rq.address == error_at
                words = [(rq.tag, host.mem.get(rq.address + 4 * i, 0), i == rq.count - 1, err)
                         for i in range(rq.count)]
                inflight.append((cycle + host.latency, words))
                log["max_outstanding"] = max(log["max_outstanding"], len(inflight))
            if ctx.get(dut.reserve.valid):
                r = ctx.get(dut.reserve.payload)
                assert r.count <= host.capacity - level[r.channel] - reserved[r.channel]
                reserved[r.channel] += r.count
            if ctx.get(dut.fifo_write.valid):
                w = ctx.get(dut.fifo_write.payload)
                reserved[w.channel] -= 1
                level[w.channel] += 1
                got[w.channel].append(w.data)
                assert reserved[w.channel] >= 0
            if ctx.get(dut.advance.valid):
                c = ctx.get(dut.advance.payload)
                gp_get[c] += 1
                log["advances"][c] += 1
            if ctx.get(dut.fault.valid):
                f = ctx.get(dut.fault.payload)
                log["faults"].append((f.channel, f.cause))
            # the consumer drains slowly
            if cycle % pop_every == 0:
                for c in level:
                    level[c] = max(0, level[c] - 1)
            await ctx.tick()

    simulate(dut, tb)
    return got, log


def test_entries_then_segments_in_order_within_fifo_room():
    host = Host()
    seg_a = [0xA000 + i for i in range(20)]
    seg_b = [0xB000 + i for i in range(5)]
    seg_c = [0xC000 + i for i in range(9)]
    host.ring(0, 0x1000_0000, [seg_a, gp_control(), seg_b])
    host.ring(2, 0x1100_0000, [seg_c])
    got, log = run_fetcher(host, {0: 3, 2: 1})
    assert got[0] == seg_a + seg_b
    assert got[2] == seg_c
    assert log["advances"][0] == 3 and log["advances"][2] == 1
    assert log["max_outstanding"] >= 2           # both channels had reads in flight
    assert log["faults"] == []


def test_error_response_faults_the_channel():
    host = Host()
    host.ring(1, 0x1000_0000, [[1, 2, 3]])
    host.ring(3, 0x1100_0000, [[7, 8]])
    got, log = run_fetcher(host, {1: 1, 3: 1}, cycles=120, error_at=0x2000_0000 + 0x1_0000)
    assert (1, ErrorCause.FETCH_FAULT) in log["faults"]
    assert got[3] == [7, 8]


def test_illegal_control_entry_faults():
    from gpufe.rtl.layouts import GPControl
    host = Host()
    host.ring(0, 0x1000_0000, [gp_control(GPControl.ILLEGAL)])
    _, log = run_fetcher(host, {0: 1}, cycles=60)
    assert log["faults"] == [(0, ErrorCause.GP_ENTRY)]
