"""FrontEnd as a whole, fed real encoded push buffers from a host-memory model."""

import dataclasses

import pytest

from gpufe.rtl.config import SMALL
from gpufe.rtl.pbdma import PbdmaState
from gpufe.rtl.layouts import ChannelReg, GlobalReg, ChannelState, ErrorCause, STATUS_BAD_CHANNEL, \
    STATUS_BAD_PUT
from gpufe.sim.host.encode import PushBuffer, launch_descriptor, syncpoint_address
from gpufe.sim.testbench.frontend import FrontEndBench
from tests.helpers import mmio_channel, mmio_global


#: SMALL with a PBDMA for each of four channels
SMALL4 = dataclasses.replace(SMALL, pbdmas=4)


def make_bench(channels=2, priorities=None, cfg=SMALL, **kw):
    b = FrontEndBench(cfg, **kw)
    for c in range(channels):
        b.setup_channel(c, priority=(priorities or {}).get(c, 0))
    return b


def kernel(b, kernel_id, block_ns=100):
    return b.put_descriptor(launch_descriptor(block_ns=block_ns, kernel_id=kernel_id))


def dispatched(b, channel=None):
    """(cycle, kernel_id) of compute dispatches, optionally of one channel."""
    return [(t, r["kernel_id"]) for t, kind, r in b.log.dispatches
            if kind == "compute" and (channel is None or r["channel"] == channel)]


def completion_cycle(b, channel, seq):
    return next(t for t, kind, c, s in b.log.completions if (c, s) == (channel, seq))


def channel_state(b, channel):
    word = b.mmio_read(mmio_channel(channel, ChannelReg.STATE))
    return ChannelState(word & 0xF), ErrorCause(word >> 4)


def test_two_channels_launch_concurrently_in_order():
    b = make_bench()
    for c in (0, 1):
        pb = PushBuffer()
        for k in range(3):
            pb.launch(kernel(b, 10 * c + k, block_ns=200))
        b.submit(c, pb)
    b.run_until_idle()
    assert [k for _, k in dispatched(b, 0)] == [0, 1, 2]
    assert [k for _, k in dispatched(b, 1)] == [10, 11, 12]
    # no syncpoints between them: all six are dispatched before the first one completes
    first_done = min(t for t, *_ in b.log.completions)
    assert max(t for t, _ in dispatched(b)) < first_done
    assert len(b.log.completions) == 6


def test_signal_in_one_channel_releases_wait_in_another():
    b = make_bench()
    sp = syncpoint_address(SMALL, 3)
    b.submit(0, PushBuffer().launch(kernel(b, 1, block_ns=300)).sem_release(sp, 1))
    b.submit(1, PushBuffer().sem_acquire(sp, 1).launch(kernel(b, 2)))
    b.run(150)
    assert channel_state(b, 1)[0] == ChannelState.PARKED
    assert dispatched(b, 1) == []
    b.run_until_idle()
    a_done = completion_cycle(b, 0, 0)
    (b_start, kid), = dispatched(b, 1)
    assert kid == 2
    assert a_done < b_start < a_done + 40        # release, wake scan, decode, dispatch
    assert b.peek(b.dut.syncpoint.counter_data[3]) == 1
    assert channel_state(b, 1)[0] == ChannelState.IDLE


def order_after_busy_engine(priorities, launches, ch_timeslice=0):
    """Kernel ids in dispatch order when two channels' launches pile up behind a busy
    compute engine (channel c launches kernels 10c, 10c+1, ...)."""
    b = make_bench(priorities=priorities)
    b.mmio_write(mmio_global(GlobalReg.CH_TIMESLICE), ch_timeslice)
    b.hold_compute = True
    for c in (0, 1):
        pb = PushBuffer()
        for k in range(launches):
            pb.launch(kernel(b, 10 * c + k))
        b.submit(c, pb)
    b.run(200)
    b.hold_compute = False
    b.run_until_idle()
    return [k for _, k in dispatched(b)]


def test_priority_orders_dispatch():
    order = order_after_busy_engine({0: 0, 1: 3}, 4)
    # whichever launch the CP was holding goes first; then channel 1 (priority 3) drains
    # completely before channel 0 (priority 0) continues
    assert sorted(order) == [0, 1, 2, 3, 10, 11, 12, 13]
    rest = order[1:]
    high = [k for k in rest if k >= 10]
    assert rest[:len(high)] == high


def test_a_channel_keeps_the_pbdma_within_a_level_until_its_work_runs_out():
    channels = [k // 10 for k in order_after_busy_engine({0: 1, 1: 1}, 3)]
    assert channels in ([0, 0, 0, 1, 1, 1], [1, 1, 1, 0, 0, 0])


def test_channel_timeslice_gives_round_robin_within_a_level():
    channels = [k // 10 for k in order_after_busy_engine({0: 1, 1: 1}, 3, ch_timeslice=1)]
    assert channels in ([0, 1, 0, 1, 0, 1], [1, 0, 1, 0, 1, 0])


def test_wfi_stalls_every_channel_until_work_completes():
    b = make_bench()
    b.submit(0, PushBuffer().launch(kernel(b, 1, block_ns=400)).wfi().launch(kernel(b, 2)))
    k3 = kernel(b, 3)
    b.at(120, lambda bench: bench.submit(1, PushBuffer().launch(k3)))
    b.run_until_idle()
    k1_done = completion_cycle(b, 0, 0)
    starts = dict((k, t) for t, k in dispatched(b))
    assert starts[1] < 120
    assert starts[2] > k1_done and starts[3] > k1_done


def test_timestamp_release_lands_in_host_memory():
    b = make_bench(channels=1)
    sem = b.mem.alloc(16)
    b.submit(0, PushBuffer().launch(kernel(b, 1, block_ns=250))
             .sem_release(sem, 0xABCD, timestamp=True))
    b.run_until_idle()
    done = completion_cycle(b, 0, 0)
    assert b.mem.read_dword(sem) == 0xABCD
    stamp = b.mem.read64(sem + 8)
    assert done <= stamp <= done + 10
    (t_payload, a0, d0, _), (t_stamp, a1, d1, _) = b.log.dma_writes
    assert (a0, a1, d1) == (sem, sem + 8, stamp) and t_payload < t_stamp


def test_non_timing_release_writes_payload_only():
    b = make_bench(channels=1)
    sem = b.mem.alloc(16)
    b.submit(0, PushBuffer().launch(kernel(b, 1)).sem_release(sem, 7))
    b.run_until_idle()
    assert [(a, d) for _, a, d, _ in b.log.dma_writes] == [(sem, 7)]


def _partitions_ok(b):
    cfg = b.cfg
    base = b.peek(b.dut.fifo.partition_base)
    slots = b.peek(b.dut.fifo.partition_slots)
    taken = set()
    for p in range(cfg.pbdmas):
        run = set(range(base[p], base[p] + slots[p]))
        assert not (run & taken), f"partition of PBDMA {p} overlaps another"
        assert max(run, default=0) < cfg.n_slots
        taken |= run
    return [int(s) for s in slots]


@pytest.mark.parametrize("cfg", [SMALL4, SMALL], ids=["pbdma_per_channel", "2pbdmas"])
def test_repartitioning_under_traffic_loses_and_reorders_nothing(cfg):
    b = make_bench(channels=4, cfg=cfg)
    expected = {}
    sems = {}

    def traffic(channel, rounds):
        def go(bench):
            pb = PushBuffer()
            for r in range(rounds):
                kid = 100 * channel + r
                pb.launch(kernel(bench, kid, block_ns=30))
                # payload-carrying host writes: their order checks the data path too
                pb.sem_release(sems[channel], kid, wfi=False)
                pb.nop().nop()
                expected.setdefault(channel, []).append(kid)
            bench.submit(channel, pb)
        return go

    for c in range(4):
        sems[c] = b.mem.alloc(8)
    b.at(1, traffic(0, 12))
    b.at(60, traffic(1, 8))
    b.at(140, traffic(2, 8))
    b.at(200, traffic(3, 8))
    b.at(400, traffic(0, 6))
    seen_sizes = []
    resident = []                  # the channel on each PBDMA in RUN, at each sample
    for _ in range(40):
        seen_sizes.append(_partitions_ok(b))
        states, chans = b.peek(b.dut.pbdma.running, b.dut.pbdma.channel)
        resident.append({int(chans[p]) for p in range(cfg.pbdmas) if states >> p & 1})
        b.run(30)
    b.run_until_idle(20_000)
    for c in range(4):
        assert [k for _, k in dispatched(b, c)] == expected[c]
        writes = [d for _, a, d, _ in b.log.dma_writes if a == sems[c]]
        assert writes == expected[c]
        assert (b.mmio_read(mmio_channel(c, ChannelReg.GP_GET))
                == b.mmio_read(mmio_channel(c, ChannelReg.GP_PUT)) == b.rings[c].put)
    assert set().union(*resident) == {0, 1, 2, 3}     # every channel ran on some PBDMA
    if cfg.pbdmas >= 4:
        # the table really was reprogrammed: PBDMA 0 (channel 0's) held more slots alone than
        # when the partitions were shared
        alone = max(s[0] for s in seen_sizes[:2])
        shared = min(s[0] for s in seen_sizes if all(x > 0 for x in s))
        assert alone > shared >= 1
    else:
        # more channels than PBDMAs: the partitions were handed from channel to channel
        assert len({frozenset(r) for r in resident if len(r) == cfg.pbdmas}) >= 3


def _gp_get_and_put(b, channels):
    return {c: (b.mmio_read(mmio_channel(c, ChannelReg.GP_GET)),
                b.mmio_read(mmio_channel(c, ChannelReg.GP_PUT)))
            for c in channels}


@pytest.mark.parametrize("ch_timeslice", [0, 60])
def test_more_channels_busy_than_pbdmas_dispatch_every_launch_once_in_order(ch_timeslice):
    channels = 4
    assert SMALL.pbdmas < channels
    b = make_bench(channels=channels)
    b.mmio_write(mmio_global(GlobalReg.CH_TIMESLICE), ch_timeslice)
    b.mmio_write(mmio_global(GlobalReg.CTX_SAVE), 20)
    b.mmio_write(mmio_global(GlobalReg.CTX_LOAD), 30)
    expected = {c: [] for c in range(channels)}
    for c in range(channels):
        for s in range(3):                       # three GPFIFO entries a channel...
            pb = PushBuffer()
            for k in range(3):                   # ...of three launches each
                kid = 100 * c + 10 * s + k
                pb.launch(kernel(b, kid, block_ns=40))
                pb.nop()
                expected[c].append(kid)
            b.submit(c, pb)
    switches = []            # (cycle, pbdma, channel): a PBDMA runs another channel (sampled)
    last = [None] * SMALL.pbdmas
    while True:
        states, chans = b.peek(b.dut.pbdma.running, b.dut.pbdma.channel)
        for p in range(SMALL.pbdmas):
            if states >> p & 1 and last[p] != int(chans[p]):
                last[p] = int(chans[p])
                switches.append((b.cycle, p, last[p]))
        if sum(len(v) for v in expected.values()) == len(dispatched(b)) or b.cycle > 20_000:
            break
        b.run(10)
    b.run_until_idle()
    for c in range(channels):
        assert [k for _, k in dispatched(b, c)] == expected[c], c
    assert len(b.log.completions) == sum(len(v) for v in expected.values())
    # every channel's ring was decoded to the end: GP_GET (MMIO) caught up with GP_PUT
    assert _gp_get_and_put(b, range(channels)) == {c: (3, 3) for c in range(channels)}
    assert all(channel_state(b, c) == (ChannelState.IDLE, ErrorCause.NONE)
               for c in range(channels))
    # the channels really took turns on the two PBDMAs
    assert {c for _, _, c in switches} == set(range(channels))
    if ch_timeslice:
        # time slices switch channels out before their work is done: some channel comes back
        loads = [c for _, _, c in switches]
        assert len(loads) > channels


@pytest.mark.parametrize("earlier", [
    0,
    3,
], ids=["mid_ring", "last_ring_entry"])
def test_channel_parked_on_an_acquire_is_switched_out_and_resumes(earlier):
    """Channel 0 parks on an acquire in the middle of a segment, is switched out for the
    channels with work, and comes back when another channel releases the syncpoint. With
    ``earlier`` = 3 its ring has 4 entries and the acquire's segment is the ring's last."""
    b = FrontEndBench(SMALL)
    b.setup_channel(0, log2=2 if earlier else None)
    for c in (1, 2, 3):
        b.setup_channel(c)
    sp = syncpoint_address(SMALL, 2)
    for k in range(earlier):
        b.submit(0, PushBuffer().launch(kernel(b, 90 + k)))
    b.run(100 * earlier)
    assert [k for _, k in dispatched(b, 0)] == [90 + k for k in range(earlier)]
    # channel 0 parks mid-segment
    b.submit(0, PushBuffer().launch(kernel(b, 1)).sem_acquire(sp, 1)
             .launch(kernel(b, 2)).launch(kernel(b, 3)))
    b.run(100)
    assert channel_state(b, 0)[0] == ChannelState.PARKED
    # then channels 1 and 2 keep both PBDMAs wanted (a channel whose methods are still
    # coming keeps the CP, so work of theirs submitted with channel 0's would hold it until
    # done, and channel 0 would park only once nothing else wanted a PBDMA)
    for c in (1, 2):
        pb = PushBuffer()
        for k in range(6):
            pb.launch(kernel(b, 10 * c + k, block_ns=60))
        b.submit(c, pb)
    b.run(300)
    assert channel_state(b, 0)[0] == ChannelState.PARKED
    assert [k for _, k in dispatched(b, 0)] == [90 + k for k in range(earlier)] + [1]
    # switched out while parked: no PBDMA holds it
    assert b.peek(b.dut.pbdma.resident) & 1 == 0
    # a later entry for channel 0 (its ring has room now), then the release from channel 3
    b.submit(0, PushBuffer().launch(kernel(b, 4)))
    b.submit(3, PushBuffer().launch(kernel(b, 30)).sem_release(sp, 1))
    release_at = b.cycle
    b.run_until_idle()
    assert channel_state(b, 0) == (ChannelState.IDLE, ErrorCause.NONE)
    assert [k for _, k in dispatched(b, 0)] == [90 + k for k in range(earlier)] + [1, 2, 3, 4]
    assert all(t > release_at for t, k in dispatched(b, 0) if k in (2, 3, 4))
    assert [k for _, k in dispatched(b, 1)] == [10 + k for k in range(6)]
    assert [k for _, k in dispatched(b, 2)] == [20 + k for k in range(6)]
    put = b.rings[0].put
    assert put == (earlier + 2) % b.rings[0].entries
    assert _gp_get_and_put(b, [0])[0] == (put, put)


def test_illegal_method_stops_one_channel_only():
    b = make_bench()
    bad = PushBuffer().launch(kernel(b, 1)).incr(0x30, 5).launch(kernel(b, 2))
    b.submit(0, bad)
    good = PushBuffer()
    for k in range(5):
        good.launch(kernel(b, 10 + k, block_ns=50))
    b.submit(1, good)
    b.run_until_idle()
    assert [k for _, k in dispatched(b, 0)] == [1]
    assert [k for _, k in dispatched(b, 1)] == [10, 11, 12, 13, 14]
    assert len([c for c in b.log.completions if c[2] == 1]) == 5
    assert channel_state(b, 0) == (ChannelState.ERROR, ErrorCause.ILLEGAL_METHOD)
    assert channel_state(b, 1)[0] == ChannelState.IDLE
    assert b.peek(b.dut.irq) == 1
    assert b.mmio_read(mmio_global(GlobalReg.ERROR_MASK)) == 0b01
    # clearing the error lets the channel run again
    b.mmio_write(mmio_channel(0, ChannelReg.STATE), 1)
    b.mmio_write(mmio_global(GlobalReg.INTERRUPT), 0b11)
    b.run(5)
    b.submit(0, PushBuffer().launch(kernel(b, 3)))
    b.run_until_idle()
    assert [k for _, k in dispatched(b, 0)] == [1, 3]
    assert channel_state(b, 0) == (ChannelState.IDLE, ErrorCause.NONE)
    assert b.peek(b.dut.irq) == 0


@pytest.mark.parametrize("word", [
    0x0000_1234,            # SEC_OP 0 with bits set (only 0 is a NOP)
    0x4000_0010,            # SEC_OP 2
    0xE000_0000,            # SEC_OP 7, END_PB_SEGMENT: not modelled
])
def test_illegal_header(word):
    b = make_bench(channels=1)
    b.submit(0, PushBuffer().launch(kernel(b, 1)).raw(word).launch(kernel(b, 2)))
    b.run_until_idle()
    assert channel_state(b, 0) == (ChannelState.ERROR, ErrorCause.ILLEGAL_HEADER)
    assert [k for _, k in dispatched(b)] == [1]


def test_illegal_subchannel_and_fetch_fault():
    b = make_bench()
    b.submit(0, PushBuffer().incr(0xAD, 1, subchannel=2))         # compute method on subch 2
    r = b.rings[1]
    b.mem.write_dwords(r.base, [0, 0x10 | (1 << 10)])    # 1 dword at unmapped 0x10_0000_0000
    r.put = 1
    b.ring_doorbell(1)
    b.run_until_idle()
    assert channel_state(b, 0) == (ChannelState.ERROR, ErrorCause.ILLEGAL_SUBCHANNEL)
    assert channel_state(b, 1) == (ChannelState.ERROR, ErrorCause.FETCH_FAULT)


def test_doorbell_for_missing_channel_is_flagged_and_harmless():
    b = make_bench()
    b.submit(0, PushBuffer().launch(kernel(b, 1)), ring=False)
    bad_address = mmio_channel(SMALL.channels + 1, ChannelReg.GP_PUT)
    b.mmio_write(bad_address, 1)
    b.run(10)
    status = b.mmio_read(mmio_global(GlobalReg.STATUS))
    assert status & 0xFF == STATUS_BAD_CHANNEL
    assert status >> 16 == bad_address
    assert dispatched(b) == []
    assert b.mmio_read(mmio_channel(0, ChannelReg.GP_PUT)) == 0
    # a GP_PUT outside the ring is refused too
    b.mmio_write(mmio_channel(0, ChannelReg.GP_PUT), 1 << SMALL.gp_entries_log2_max)
    b.run(3)
    assert b.mmio_read(mmio_global(GlobalReg.STATUS)) & STATUS_BAD_PUT
    assert b.mmio_read(mmio_channel(0, ChannelReg.GP_PUT)) == 0
    # the channel itself still works, and the status clears by writing ones
    b.ring_doorbell(0)
    b.mmio_write(mmio_global(GlobalReg.STATUS), 0b111)
    b.run_until_idle()
    assert [k for _, k in dispatched(b)] == [1]
    assert b.mmio_read(mmio_global(GlobalReg.STATUS)) & 0b111 == 0


def test_copy_dispatch_carries_offsets():
    b = make_bench(channels=1)
    b.submit(0, PushBuffer().copy(0x12_3456_7000, 0x23_4567_8000, 4096, flags=0x182))
    b.run_until_idle()
    (_, kind, rec), = b.log.dispatches
    assert kind == "copy"
    assert (rec["src"], rec["dst"], rec["length"]) == (0x12_3456_7000, 0x23_4567_8000, 4096)


def vcd_values(text, name):
    """Every value the VCD ``text`` records for the signals called ``name`` (enum-shaped
    signals are written as strings: their member names)."""
    ids = {parts[3] for parts in (line.split() for line in text.splitlines())
           if len(parts) >= 5 and parts[0] == "$var" and parts[4] == name}
    assert ids, f"no signal {name} in the VCD"
    values = set()
    for line in text.splitlines():
        if line[:1] in "bs" and " " in line:
            value, ident = line[1:].split(" ", 1)
            if ident in ids:
                values.add(value if line[0] == "s" else int(value, 2))
        elif line[:1] in "01" and line[1:] in ids:
            values.add(int(line[0]))
    return values


def test_vcd_names_signals_and_pbdma_states(tmp_path):
    path = tmp_path / "fe.vcd"
    sp = syncpoint_address(SMALL, 0)
    with FrontEndBench(SMALL, vcd=str(path)) as b:
        for c in range(3):
            b.setup_channel(c)
        b.mmio_write(mmio_global(GlobalReg.CTX_SAVE), 10)
        b.mmio_write(mmio_global(GlobalReg.CTX_LOAD), 10)
        b.submit(0, PushBuffer().launch(kernel(b, 1, block_ns=300)).sem_release(sp, 1))
        b.submit(1, PushBuffer().sem_acquire(sp, 1).launch(kernel(b, 2)))
        # a third channel with work: the parked one is switched out for it
        k3 = kernel(b, 3)
        b.at(100, lambda bench: bench.submit(2, PushBuffer().launch(k3).launch(k3)))
        b.run_until_idle()
    assert sorted(k for _, k in dispatched(b)) == [1, 2, 3, 3]
    text = path.read_text()
    for name in ("pbdma0_state", "pbdma1_state", "pbdma0_channel", "pbdma1_channel",
                 "cp_state", "cp_pbdma", "cp_channel", "doorbell", "fetcher", "fifo", "cp",
                 "syncpoint", "pbdma", "dma_read_req__valid", "compute__valid",
                 "partition_base", "alloc_state"):
        assert name in text, name
    # enum-shaped signals are written with their member names: the PBDMAs went through a
    # whole load, run, drain and save, and the CP through its decode states
    pbdma_states = vcd_values(text, "pbdma0_state") | vcd_values(text, "pbdma1_state")
    assert {s.name for s in PbdmaState} <= pbdma_states
    assert {"ARBITRATE", "FETCH", "EXECUTE", "DISPATCH"} <= vcd_values(text, "cp_state")
    # the three channels each sat on a PBDMA, and the CP decoded both PBDMAs
    assert vcd_values(text, "pbdma0_channel") | vcd_values(text, "pbdma1_channel") == {0, 1, 2}
    assert vcd_values(text, "cp_pbdma") == {0, 1}


def test_idle_means_only_external_events_remain():
    b = make_bench()
    sp = syncpoint_address(SMALL, 1)
    assert b.peek(b.dut.idle) == 1                        # nothing to do at reset
    b.submit(0, PushBuffer().launch(kernel(b, 1, block_ns=500)).sem_release(sp, 1))
    b.submit(1, PushBuffer().sem_acquire(sp, 1).launch(kernel(b, 2)))
    b.run(8)
    assert b.peek(b.dut.idle) == 0                        # doorbells are being fetched
    b.run(200)
    # the kernel runs in the engine, channel 1 is parked: only a completion can change things
    assert channel_state(b, 1)[0] == ChannelState.PARKED
    assert b.peek(b.dut.idle) == 1
    b.run_until_idle()
    assert [k for _, k in dispatched(b)] == [1, 2]
    assert b.peek(b.dut.idle) == 1
