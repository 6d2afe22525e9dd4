from collections import deque

from gpufe.rtl.command_processor import CommandProcessor
from gpufe.rtl.config import SMALL
from gpufe.rtl.layouts import (Method, SemOp, ChannelState, ErrorCause, Subchannel)
from gpufe.sim.host.encode import PushBuffer, sem_execute, syncpoint_address
from tests.helpers import simulate

CFG = SMALL


class Harness:
    """The CP alone: FIFOs, syncpoint unit and engines as Python models."""

    def __init__(self, priorities=None, eligible=None, costs=None):
        self.dut = CommandProcessor(CFG)
        # channels the runlist serves (all by default), and ctx_save/ctx_load/... cycles
        self.eligible = (1 << CFG.channels) - 1 if eligible is None else eligible
        self.costs = costs or {}
        self.fifo = [deque() for _ in range(CFG.channels)]
        self.priorities = priorities or {}
        self.releases, self.acquires, self.launches, self.copies = [], [], [], []
        self.launch_cycles = []         # cycle of each launch offered
        self.parked = set()             # channels parked by an unmet acquire
        self.busy = set()               # channels whose release slot is taken
        self.counters = {}
        self.states = {}
        self.actions = {}               # cycle -> callable(harness)

    def push(self, channel, pb):
        self.fifo[channel].extend(pb.words)

    def run(self, cycles):
        dut = self.dut

        async def tb(ctx):
            for c, p in self.priorities.items():
                ctx.set(dut.priority[c], p)
            ctx.set(dut.compute.ready, 1)
            ctx.set(dut.copy.ready, 1)
            ctx.set(dut.all_complete, 1)
            ctx.set(dut.eligible, self.eligible)
            for name, value in self.costs.items():
                ctx.set(getattr(dut, name), value)
            popped = None
            for cycle in range(cycles):
                ctx.set(dut.now, cycle)          # a cycle is a ns: costs are deadlines on now
                if cycle in self.actions:
                    self.actions[cycle](self)
                # inputs
                ctx.set(dut.read_data, popped if popped is not None else 0xDEAD)
                ctx.set(dut.nonempty, sum(1 << c for c in range(CFG.channels) if self.fifo[c]))
                ctx.set(dut.parked, sum(1 << c for c in self.parked))
                ctx.set(dut.release_busy, sum(1 << c for c in self.busy))
                acq = ctx.get(dut.acquire.payload)
                met = self.counters.get(acq.index, 0) >= acq.value
                ctx.set(dut.acquire_met, met)
                # outputs taken at the coming edge
                popped = None
                if ctx.get(dut.read_pop):
                    popped = self.fifo[ctx.get(dut.read_channel)].popleft()
                if ctx.get(dut.release.valid):
                    r = ctx.get(dut.release.payload)
                    self.releases.append({"channel": r.channel, "address": r.address,
                                          "payload": r.payload, "kind": r.kind, "wfi": r.wfi,
                                          "timestamp": r.timestamp, "seq": r.seq})
                if ctx.get(dut.acquire.valid):
                    self.acquires.append((acq.channel, acq.index, acq.value, met))
                    if not met:
                        self.parked.add(acq.channel)
                if ctx.get(dut.compute.valid):
                    l = ctx.get(dut.compute.payload)
                    self.launches.append((l.channel, l.seq, l.descriptor))
                    self.launch_cycles.append(cycle)
                if ctx.get(dut.copy.valid):
                    c = ctx.get(dut.copy.payload)
                    self.copies.append((c.channel, c.seq, c.src, c.dst, c.length, c.flags))
                for c in range(CFG.channels):
                    ctx.set(dut.query_channel, c)
                    w = ctx.get(dut.query_state)
                    self.states[c] = (ChannelState(w & 0xF), ErrorCause(w >> 4))
                await ctx.tick()

        simulate(dut, tb)
        return self


def test_inc_non_inc_one_inc_and_immediate_headers():
    h = Harness()
    sp = syncpoint_address(CFG, 2)
    pb = PushBuffer()
    pb.sem_release(sp, 0x1_0000_0005, wide=True)                 # INC over 5 methods
    pb.non_incr(Method.SEM_PAYLOAD_LO, 1, 2, 3)                  # NON_INC: the last one stays
    pb.immd(Method.SEM_EXECUTE, sem_execute(SemOp.RELEASE))      # IMMD execute
    pb.one_incr(Method.SEM_ADDR_LO, 0x100, 0x7, 0x3F)            # ONE_INC: LO, then HI twice
    pb.incr(Method.SEM_EXECUTE, sem_execute(SemOp.RELEASE, release_wfi=True))
    h.push(0, pb)
    h.run(150)
    assert [(r["address"], r["payload"], r["wfi"]) for r in h.releases] == [
        (sp, 0x1_0000_0005, 1), (sp, 3, 0), (0x3F_0000_0100, 3, 1)]
    assert h.states[0][0] == ChannelState.IDLE


def test_launch_and_copy_records_carry_channel_and_sequence():
    h = Harness()
    h.push(1, PushBuffer().launch(0x1234_5600).copy(0xAB_0000_1000, 0xCD_0000_2000, 777, 5)
           .launch(0x1234_5700))
    h.run(120)
    assert h.launches == [(1, 0, 0x1234_5600), (1, 2, 0x1234_5700)]
    assert h.copies == [(1, 1, 0xAB_0000_1000, 0xCD_0000_2000, 777, 5)]


def _two_launches_per_channel(h):
    for c in range(4):
        pb = PushBuffer()
        for k in range(2):
            pb.launch(0x1000_0000 + 0x100 * (10 * c + k))
        h.push(c, pb)


def test_higher_priority_channel_first_and_the_pbdma_stays_on_a_channel_with_work():
    # no channel timeslice: a channel keeps the PBDMA until it runs out of work
    h = Harness(priorities={0: 0, 1: 2, 2: 2, 3: 0})
    _two_launches_per_channel(h)
    h.run(200)
    order = [ch for ch, _, _ in h.launches]
    assert order[:4] == [1, 1, 2, 2]
    assert order[4:] in ([0, 0, 3, 3], [3, 3, 0, 0])


def test_channel_timeslice_round_robin_within_a_level():
    # a timeslice of one cycle: after each dispatch the channel yields to a waiting one
    h = Harness(priorities={0: 0, 1: 2, 2: 2, 3: 0}, costs={"ch_timeslice": 1})
    _two_launches_per_channel(h)
    h.run(200)
    order = [ch for ch, _, _ in h.launches]
    assert order[:4] == [1, 2, 1, 2]
    assert order[4:] in ([0, 3, 0, 3], [3, 0, 3, 0])


def _dispatch_cycles(costs, channels):
    """Cycles at which the launches of one launch per channel are dispatched."""
    h = Harness(costs=costs)
    for c in channels:
        h.push(c, PushBuffer().launch(0x1000 * (c + 1)))
    h.run(400)
    return h.launch_cycles


def test_context_save_and_load_cost_their_cycles_at_each_switch():
    base = _dispatch_cycles({}, [0, 1, 2])
    slow = _dispatch_cycles({"ctx_save": 20, "ctx_load": 30}, [0, 1, 2])
    assert len(base) == len(slow) == 3
    # the first channel is loaded (nothing to save), the others saved and loaded; a wait
    # is a deadline on now (a cycle a ns here), and even a wait of 0 takes its one cycle
    assert slow[0] - base[0] == 30 - 1
    assert [b - a for a, b in zip(slow, slow[1:])] == [
        b - a + (20 - 1) + (30 - 1) for a, b in zip(base, base[1:])]


def test_launch_hold_holds_the_pbdma_after_each_launch():
    base = _dispatch_cycles({}, [0, 1])
    held = _dispatch_cycles({"launch_hold": 40}, [0, 1])
    assert held[0] == base[0]
    assert held[1] - held[0] == base[1] - base[0] + 40


def test_only_eligible_channels_are_served():
    h = Harness(eligible=0b0101)
    _two_launches_per_channel(h)
    h.run(200)
    assert sorted({ch for ch, _, _ in h.launches}) == [0, 2]
    assert len(h.launches) == 4


def test_unmet_acquire_parks_one_channel_and_the_other_runs():
    h = Harness()
    sp = syncpoint_address(CFG, 1)
    h.push(0, PushBuffer().sem_acquire(sp, 1).launch(0x1000))
    h.push(1, PushBuffer().launch(0x2000).launch(0x2100))

    def release(harness):
        harness.counters[1] = 1
        harness.parked.discard(0)
    h.actions[100] = release
    h.run(160)
    assert h.acquires[0] == (0, 1, 1, False)
    launches = [(c, d) for c, _, d in h.launches]
    assert launches[:2] == [(1, 0x2000), (1, 0x2100)]
    assert launches[2:] == [(0, 0x1000)]


def _wake_to_dispatch(costs, woken):
    """Channels 0 and 1 both park on an acquire; at cycle 300 channel ``woken``'s syncpoint
    is released: cycles from then to its launch."""
    h = Harness(costs=costs)
    for c in (0, 1):
        h.push(c, PushBuffer().sem_acquire(syncpoint_address(CFG, c + 1), 1).launch(0x1000 + 0x100 * c))

    def release(harness):
        harness.counters[woken + 1] = 1
        harness.parked.discard(woken)
    h.actions[300] = release
    h.run(450)
    (cycle,) = h.launch_cycles
    return cycle - 300


def test_a_parked_channel_is_switched_out_at_once_when_another_has_work():
    costs = {"ctx_save": 20, "ctx_load": 30}
    # channel 1 parked last: the PBDMA switched it out as it parked, so waking either
    # channel costs a load, not a save and a load
    assert _wake_to_dispatch(costs, 0) == _wake_to_dispatch(costs, 1)
    assert _wake_to_dispatch(costs, 0) - _wake_to_dispatch({}, 0) == 30 - 1


def test_release_on_a_busy_slot_blocks_the_channel_until_free():
    h = Harness()
    sp = syncpoint_address(CFG, 0)
    h.busy.add(0)
    h.push(0, PushBuffer().sem_release(sp, 9).launch(0x3000))
    h.push(1, PushBuffer().launch(0x4000))
    states = []
    h.actions[60] = lambda hh: states.append(dict(hh.states))
    h.actions[80] = lambda hh: hh.busy.discard(0)
    h.run(140)
    assert states[0][0][0] == ChannelState.BLOCKED
    assert [r["payload"] for r in h.releases] == [9]
    assert [(c, d) for c, _, d in h.launches] == [(1, 0x4000), (0, 0x3000)]


def test_illegal_method_errors_one_channel_with_cause_and_interrupt():
    h = Harness()
    h.push(0, PushBuffer().incr(0x31, 0).launch(0x1000))
    h.push(2, PushBuffer().launch(0x2000).immd(Method.SEND_PCAS_A, 1, subchannel=Subchannel.COPY))
    h.push(3, PushBuffer().launch(0x3000))
    h.run(120)
    assert h.states[0] == (ChannelState.ERROR, ErrorCause.ILLEGAL_METHOD)
    assert h.states[2] == (ChannelState.ERROR, ErrorCause.ILLEGAL_METHOD)
    assert h.states[3][0] == ChannelState.IDLE
    assert sorted(d for _, _, d in h.launches) == [0x2000, 0x3000]
