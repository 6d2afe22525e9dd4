"""The command processor alone: the PBDMA units, their FIFO partitions, the syncpoint unit and
the engines are Python models driving its ports."""

from collections import defaultdict, deque
from dataclasses import replace

import pytest

from gpufe.rtl.command_processor import CommandProcessor
from gpufe.rtl.config import SMALL
from gpufe.rtl.syncpoint import ReleaseKind
from gpufe.rtl.layouts import Method, SemOp, ChannelState, ErrorCause, Subchannel, CPState
from gpufe.sim.host.encode import PushBuffer, sem_execute, syncpoint_address
from tests.helpers import simulate

CFG = SMALL                              # 8 hardware channels, 2 PBDMAs
CFG4 = replace(SMALL, pbdmas=4)          # 4 PBDMAs, for arbitration among more than two


class Harness:
    """The CP alone, its surroundings as Python models.

    Each PBDMA holds one channel (``bound``); the dwords its FIFO partition would hold are the
    channel's own queue (``words``): what the CP does not pop before the channel leaves is what
    the real PBDMA throws away and fetches again when the channel returns. ``move(p, c)``
    switches PBDMA ``p`` to channel ``c`` (None: none) as PbdmaUnits does: it stops running,
    waits until the CP no longer holds the context (``holding``), then binds the new channel
    and runs it.
    """

    def __init__(self, cfg=CFG, priorities=None, costs=None):
        self.cfg = cfg
        self.dut = CommandProcessor(cfg)
        self.costs = costs or {}
        self.priorities = priorities or {}       # channel -> PRIORITY
        self.words = defaultdict(deque)          # channel -> dwords fetched, not popped
        self.bound = [None] * cfg.pbdmas         # channel on each PBDMA
        self.running = set()                     # PBDMAs in RUN
        self.expecting = set()                   # PBDMAs whose channel's methods are coming
        self.moves = {}                          # PBDMA -> channel to bind once drained
        self.releases, self.acquires, self.launches, self.copies = [], [], [], []
        self.launch_cycles = []                  # cycle each launch is taken
        self.pops = []                           # (cycle, PBDMA, channel) of each dword popped
        self.trace = []                          # per cycle: (state, holding, CP channel)
        self.wake = {}                           # cycle -> wake_at
        self.parked = set()                      # channels parked by an unmet acquire
        self.busy = set()                        # channels whose release slot is taken
        self.full = False                        # the release pool is full
        self.stall = set()                       # channels held by a timestamp release
        self.counters = {}
        self.states = {}                         # channel -> (ChannelState, ErrorCause), last
        self.replay = 0
        self.interrupt = self.interrupt_status = self.error_mask = 0
        self.actions = {}                        # cycle -> callable(harness)
        self.watchers = []                       # callable(harness, cycle), every cycle

    def bind(self, pbdma, channel, pb=None):
        """Channel ``channel`` resident and running on ``pbdma`` from the start."""
        self.bound[pbdma] = channel
        self.running.add(pbdma)
        if pb is not None:
            self.push(channel, pb)
        return self

    def push(self, channel, pb):
        self.words[channel].extend(pb.words)
        return self

    def move(self, pbdma, channel):
        self.moves[pbdma] = channel

    def run(self, cycles):
        dut, cfg = self.dut, self.cfg

        async def tb(ctx):
            ctx.set(dut.compute.ready, 1)
            ctx.set(dut.copy.ready, 1)
            ctx.set(dut.graph.ready, 1)
            ctx.set(dut.all_complete, 1)
            for name, value in self.costs.items():
                ctx.set(getattr(dut, name), value)
            popped = None
            for cycle in range(cycles):
                ctx.set(dut.now, cycle)          # a cycle is a ns: holds are deadlines on now
                if cycle in self.actions:
                    self.actions[cycle](self)
                for w in self.watchers:
                    w(self, cycle)
                # the PBDMA units: switch a channel out, then the next one in
                holding = ctx.get(dut.holding)
                for p, c in list(self.moves.items()):
                    if p in self.running:
                        self.running.discard(p)
                    elif not holding >> p & 1:
                        self.bound[p] = c
                        if c is not None:
                            self.running.add(p)
                        del self.moves[p]
                # inputs
                for p in range(cfg.pbdmas):
                    c = self.bound[p]
                    ctx.set(dut.pbdma_channel[p], c or 0)
                    ctx.set(dut.priority[p], self.priorities.get(c, 0) if c is not None else 0)
                ctx.set(dut.running, sum(1 << p for p in self.running))
                ctx.set(dut.expecting, sum(1 << p for p in self.expecting))
                ctx.set(dut.nonempty, sum(1 << p for p in range(cfg.pbdmas)
                                          if self.bound[p] is not None
                                          and self.words[self.bound[p]]))
                ctx.set(dut.read_data, popped if popped is not None else 0xDEAD)
                ctx.set(dut.parked, sum(1 << c for c in self.parked))
                ctx.set(dut.release_busy, sum(1 << c for c in self.busy))
                ctx.set(dut.release_full, self.full)
                ctx.set(dut.release_stall, sum(1 << c for c in self.stall))
                acq = ctx.get(dut.acquire.payload)
                met = self.counters.get(acq.index, 0) >= acq.value
                ctx.set(dut.acquire_met, met)
                # outputs taken at the coming edge
                holding = ctx.get(dut.holding)
                for p in range(cfg.pbdmas):
                    # the PBDMA protocol: a channel never leaves while the CP holds it
                    assert not (holding >> p & 1) or self.bound[p] is not None
                self.trace.append((ctx.get(dut.state), holding, ctx.get(dut.channel)))
                self.wake[cycle] = ctx.get(dut.wake_at)
                popped = None
                if ctx.get(dut.read_pop):
                    p = ctx.get(dut.read_pbdma)
                    c = self.bound[p]
                    assert p in self.running and c is not None and self.words[c]
                    popped = self.words[c].popleft()
                    self.pops.append((cycle, p, c))
                if ctx.get(dut.release.valid):
                    r = ctx.get(dut.release.payload)
                    self.releases.append({"channel": r.channel, "address": r.address,
                                          "payload": r.payload, "kind": r.kind, "wfi": r.wfi,
                                          "timestamp": r.timestamp, "seq": r.seq,
                                          "cycle": cycle})
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
                for c in range(cfg.channels):
                    ctx.set(dut.query_channel, c)
                    w = ctx.get(dut.query_state)
                    self.states[c] = (ChannelState(w & 0xF), ErrorCause(w >> 4))
                self.replay = ctx.get(dut.replay)
                self.interrupt = ctx.get(dut.interrupt)
                self.interrupt_status = ctx.get(dut.interrupt_status)
                self.error_mask = ctx.get(dut.error_mask)
                await ctx.tick()

        simulate(dut, tb)
        return self

    def launch_order(self):
        return [ch for ch, _, _ in self.launches]


# -- decoding ---------------------------------------------------------------------------------

def test_inc_non_inc_one_inc_and_immediate_headers():
    h = Harness()
    sp = syncpoint_address(CFG, 2)
    pb = PushBuffer()
    pb.sem_release(sp, 0x1_0000_0005, wide=True)                 # INC over 5 methods
    pb.non_incr(Method.SEM_PAYLOAD_LO, 1, 2, 3)                  # NON_INC: the last one stays
    pb.immd(Method.SEM_EXECUTE, sem_execute(SemOp.RELEASE))      # IMMD execute
    pb.one_incr(Method.SEM_ADDR_LO, 0x100, 0x7, 0x3F)            # ONE_INC: LO, then HI twice
    pb.incr(Method.SEM_EXECUTE, sem_execute(SemOp.RELEASE, release_wfi=True))
    h.bind(1, 6, pb)
    h.run(150)
    assert [(r["channel"], r["address"], r["payload"], r["wfi"]) for r in h.releases] == [
        (6, sp, 0x1_0000_0005, 1), (6, sp, 3, 0), (6, 0x3F_0000_0100, 3, 1)]
    assert len(h.pops) == len(pb.words)                          # every dword popped once
    assert {(p, c) for _, p, c in h.pops} == {(1, 6)}
    assert h.states[6][0] == ChannelState.IDLE


def test_a_run_of_methods_decodes_a_dword_a_cycle_and_a_semaphore_operation_ends_it():
    h = Harness()
    sp = syncpoint_address(CFG, 2)
    pb = PushBuffer()
    pb.incr(Method.SEM_ADDR_LO, sp & 0xFFFF_FFFF, sp >> 32, 7, 0)    # header + 4 data words
    pb.incr(Method.SEM_EXECUTE, sem_execute(SemOp.RELEASE))         # header + execute
    pb.incr(Method.SEM_PAYLOAD_LO, 9)                               # header + 1
    h.bind(0, 3, pb)
    h.run(60)
    cycles = [c for c, _, _ in h.pops]
    assert len(cycles) == len(pb.words) == 9
    # the first seven dwords one a cycle; the release's execute ends the run, and the word
    # after it is popped a cycle later (through FETCH)
    assert [b - a for a, b in zip(cycles, cycles[1:])] == [1] * 6 + [2, 1]
    assert [r["payload"] for r in h.releases] == [7]
    assert h.releases[0]["cycle"] == cycles[6] + 1


def test_launch_and_copy_records_carry_the_hardware_channel_and_sequence():
    h = Harness()
    # channel 5 on PBDMA 0: the records name the channel, not the PBDMA
    h.bind(0, 5, PushBuffer().launch(0x1234_5600).copy(0xAB_0000_1000, 0xCD_0000_2000, 777, 5)
           .launch(0x1234_5700))
    h.run(120)
    assert h.launches == [(5, 0, 0x1234_5600), (5, 2, 0x1234_5700)]
    assert h.copies == [(5, 1, 0xAB_0000_1000, 0xCD_0000_2000, 777, 5)]


# -- arbitration among the PBDMAs --------------------------------------------------------------

def _two_launches_on_each_pbdma(h, channels):
    """PBDMA p holds channels[p], with two launches."""
    for p, c in enumerate(channels):
        pb = PushBuffer()
        for k in range(2):
            pb.launch(0x1000_0000 + 0x100 * (10 * c + k))
        h.bind(p, c, pb)


def test_higher_priority_pbdma_first_and_the_cp_stays_on_a_pbdma_whose_channel_has_work():
    # no channel timeslice: a channel keeps the CP until it runs out of work; the priority is
    # the channel's (channels 7 and 4 of level 2 on PBDMAs 1 and 2)
    h = Harness(CFG4, priorities={6: 0, 7: 2, 4: 2, 1: 0})
    _two_launches_on_each_pbdma(h, [6, 7, 4, 1])
    h.run(250)
    order = h.launch_order()
    assert order[:4] == [7, 7, 4, 4]
    assert order[4:] in ([6, 6, 1, 1], [1, 1, 6, 6])


def test_a_pbdma_of_greater_priority_takes_the_cp_after_the_current_dispatch():
    # channel 2 (level 0) decodes; channel 3 (level 3) gets work while it does: the CP goes to
    # it after channel 2's dispatch, then comes back to channel 2
    h = Harness(priorities={2: 0, 3: 3})
    h.bind(0, 2, PushBuffer().launch(0x2000).launch(0x2100).launch(0x2200))
    h.bind(1, 3)
    h.actions[3] = lambda hh: hh.push(3, PushBuffer().launch(0x3000))
    h.run(150)
    assert [(c, d) for c, _, d in h.launches] == [(2, 0x2000), (3, 0x3000), (2, 0x2100),
                                                  (2, 0x2200)]


def test_channel_timeslice_round_robin_among_pbdmas_within_a_level():
    # a timeslice of one ns: after each dispatch the channel yields to a waiting PBDMA
    h = Harness(CFG4, priorities={6: 0, 7: 2, 4: 2, 1: 0}, costs={"ch_timeslice": 1})
    _two_launches_on_each_pbdma(h, [6, 7, 4, 1])
    h.run(250)
    order = h.launch_order()
    assert order[:4] == [7, 4, 7, 4]
    assert order[4:] in ([6, 1, 6, 1], [1, 6, 1, 6])


def _dispatch_cycles(costs, channels):
    """Cycles at which the launches of one launch per channel (PBDMA p: channels[p]) are
    dispatched."""
    h = Harness(costs=costs)
    for p, c in enumerate(channels):
        h.bind(p, c, PushBuffer().launch(0x1000 * (c + 1)))
    h.run(300)
    return h


def test_launch_hold_holds_the_cp_after_each_launch():
    base = _dispatch_cycles({}, [3, 5]).launch_cycles
    h = _dispatch_cycles({"launch_hold": 40}, [3, 5])
    held = h.launch_cycles
    assert len(base) == len(held) == 2
    assert held[0] == base[0]
    assert held[1] - held[0] == base[1] - base[0] + 40
    # the hold is a deadline on now: wake_at tells it while the CP waits, all ones otherwise
    first = held[0]
    assert h.wake[first] == (1 << 64) - 1
    assert h.wake[first + 1] == first + 40
    assert h.wake[first + 39] == first + 40
    assert h.wake[first + 40] == (1 << 64) - 1
    assert all(h.trace[t][0] == CPState.HOLD for t in range(first + 1, first + 41))


def test_moving_to_another_channel_loads_its_engine_state_under_its_host_methods():
    base = _dispatch_cycles({}, [3, 5])
    h = _dispatch_cycles({"cp_switch": 30}, [3, 5])
    loads = [t for t, e in enumerate(h.trace) if e[0] == CPState.LOAD]
    assert len(loads) == 2 and base.launch_cycles == [6, 14]
    # each move is decided the cycle before its LOAD cycle; the channel's methods are decoded
    # from the next cycle on, and only its dispatch waits for the engine's state: cp_switch ns
    # after the move was decided
    for load, launch in zip(loads, h.launch_cycles):
        assert h.trace[load + 1][0] == CPState.FETCH
        assert launch == load - 1 + 30
        # the dispatch waiting is a deadline on now: wake_at tells it
        waiting = [t for t in range(load, launch) if h.trace[t][0] == CPState.DISPATCH]
        assert waiting and all(h.wake[t] == launch for t in waiting)
        assert h.wake[launch + 1] == (1 << 64) - 1
    assert [(c, d) for c, _, d in h.launches] == [(3, 0x4000), (5, 0x6000)]


def test_a_move_to_a_pbdma_still_prefetching_waits_cp_switch_ns_first():
    # the engine state's reads queue behind the prefetch: the CP waits in LOAD, and the
    # channel's methods are decoded after it
    base = _dispatch_cycles({}, [3, 5])
    h = _dispatch_cycles({"cp_switch": 30, "fetch_behind": 0b11}, [3, 5])
    assert h.launch_cycles[0] == base.launch_cycles[0] + 29
    assert h.launch_cycles[1] == base.launch_cycles[1] + 2 * 29
    first = next(t for t, e in enumerate(h.trace) if e[0] == CPState.LOAD)
    assert h.wake[first] == h.wake[first + 28] == first + 29
    assert all(h.trace[t][0] == CPState.LOAD for t in range(first, first + 30))
    assert h.trace[first + 30][0] != CPState.LOAD
    assert [(c, d) for c, _, d in h.launches] == [(3, 0x4000), (5, 0x6000)]


def _arriving_at(cycle, expecting, costs):
    """Channels 3 (PBDMA 0) and 5 (PBDMA 1) resident; a launch on channel 5 arrives at
    ``cycle``; before that the PBDMAs in ``expecting`` say that their methods are coming."""
    h = Harness(costs=costs)
    h.bind(0, 3).bind(1, 5)
    h.expecting = set(expecting)

    def arrive(hh):
        hh.push(5, PushBuffer().launch(0x6000))
        hh.expecting.clear()
    h.actions[cycle] = arrive
    return h.run(cycle + 200)


def test_an_idle_cp_moves_ahead_to_a_channel_whose_methods_are_on_their_way():
    costs = {"cp_switch": 30}
    cold = _arriving_at(60, (), costs)
    ahead = _arriving_at(60, (1,), costs)
    # the move to PBDMA 1 runs before the data: channel 5 held from then on
    assert cold.trace[59][1] == 0
    assert ahead.trace[59][1] == 0b10 and ahead.trace[59][2] == 5
    # its launch goes out without waiting for the engine's state (as soon as with no switch
    # cost); cold, the move is decided as the data arrives and the launch waits 30 ns from it
    assert [(c, d) for c, _, d in ahead.launches] == [(5, 0x6000)] == \
        [(c, d) for c, _, d in cold.launches]
    free = _arriving_at(60, (), {})
    assert ahead.launch_cycles[0] <= free.launch_cycles[0]
    assert cold.launch_cycles[0] == 60 + 30
    # both PBDMAs expecting: the CP goes ahead to one and stays there (no ping-pong)
    both = _arriving_at(60, (0, 1), costs)
    starts = [t for t in range(1, 60)
              if both.trace[t][0] == CPState.LOAD and both.trace[t - 1][0] != CPState.LOAD]
    assert len(starts) == 1 and both.trace[59][1] == 0b01


def _held_channel_expecting(priorities=None):
    """Channel 3 (PBDMA 0) has a launch and its next one on its way (arriving at cycle 80);
    channel 5 (PBDMA 1) gets a launch at cycle 20, while the CP holds channel 3."""
    h = Harness(costs={"cp_switch": 30}, priorities=priorities)
    h.bind(0, 3, PushBuffer().launch(0x4000)).bind(1, 5)
    h.expecting = {0}

    def other(hh):
        hh.push(5, PushBuffer().launch(0x6000))

    def arrive(hh):
        hh.push(3, PushBuffer().launch(0x5000))
        hh.expecting.clear()
    h.actions[20] = other
    h.actions[80] = arrive
    return h.run(300)


def _moves(h):
    return [t for t in range(1, len(h.trace))
            if h.trace[t][0] == CPState.LOAD and h.trace[t - 1][0] != CPState.LOAD]


def test_the_cp_waits_for_its_channels_methods_on_their_way_rather_than_move_and_back():
    h = _held_channel_expecting()
    # channel 3's second launch goes before channel 5's, which waited though its PBDMA was
    # ready: one move to channel 3 and one to channel 5, not 3 -> 5 -> 3
    assert [(c, d) for c, _, d in h.launches] == [(3, 0x4000), (3, 0x5000), (5, 0x6000)]
    assert len(_moves(h)) == 2
    assert h.launch_cycles[1] < 80 + 30 <= h.launch_cycles[2]
    # the CP held channel 3 all the while (the trace's CP channel), quiet meanwhile
    first, second = h.launch_cycles[:2]
    assert all(h.trace[t][2] == 3 for t in range(first, second))


def test_a_channel_of_greater_priority_takes_the_cp_from_one_whose_methods_are_coming():
    h = _held_channel_expecting(priorities={5: 1})
    assert [(c, d) for c, _, d in h.launches] == [(3, 0x4000), (5, 0x6000), (3, 0x5000)]
    assert len(_moves(h)) == 3


def test_only_running_pbdmas_are_decoded():
    # PBDMA 1's channel is loading (not running) until cycle 60: nothing of it is popped
    h = Harness()
    h.bind(0, 2, PushBuffer().launch(0x2000).launch(0x2100))
    h.bind(1, 4, PushBuffer().launch(0x4000))
    h.running.discard(1)
    h.actions[60] = lambda hh: hh.running.add(1)
    h.run(120)
    assert all(p == 0 for t, p, _ in h.pops if t < 60)
    assert [(c, d) for c, _, d in h.launches] == [(2, 0x2000), (2, 0x2100), (4, 0x4000)]
    assert min(t for t, p, _ in h.pops if p == 1) >= 60


def test_unmet_acquire_parks_one_channel_and_the_other_pbdmas_channel_runs():
    h = Harness()
    sp = syncpoint_address(CFG, 1)
    h.bind(0, 3, PushBuffer().sem_acquire(sp, 1).launch(0x1000))
    h.bind(1, 6, PushBuffer().launch(0x2000).launch(0x2100))
    seen = {}

    def release(harness):
        seen["parked"] = harness.states[3][0]
        harness.counters[1] = 1
        harness.parked.discard(3)
    h.actions[100] = release
    h.run(160)
    assert h.acquires[0] == (3, 1, 1, False)
    assert seen["parked"] == ChannelState.PARKED
    launches = [(c, d) for c, _, d in h.launches]
    assert launches[:2] == [(6, 0x2000), (6, 0x2100)]
    assert launches[2:] == [(3, 0x1000)]
    assert h.launch_cycles[2] > 100


@pytest.mark.parametrize("why", ["release_busy", "release_full"])
def test_release_on_a_busy_slot_blocks_the_channel_until_free(why):
    h = Harness()
    sp = syncpoint_address(CFG, 0)
    if why == "release_busy":
        h.busy.add(2)                    # channel 2's slot is taken
    else:
        h.full = True                    # the pool is full: no channel may post a release

    def free(hh):
        hh.busy.discard(2)
        hh.full = False
    h.bind(0, 2, PushBuffer().sem_release(sp, 9).launch(0x3000))
    h.bind(1, 5, PushBuffer().launch(0x4000))
    seen = []
    h.actions[60] = lambda hh: seen.append((dict(hh.states), hh.replay))
    h.actions[80] = free
    h.run(140)
    states, replay = seen[0]
    assert states[2][0] == ChannelState.BLOCKED
    assert replay == 1 << 2                      # the SEM_EXECUTE word waits to be replayed
    assert [(r["channel"], r["payload"]) for r in h.releases] == [(2, 9)]
    assert h.releases[0]["cycle"] >= 80
    assert [(c, d) for c, _, d in h.launches] == [(5, 0x4000), (2, 0x3000)]
    assert h.replay == 0
    assert h.states[2][0] == ChannelState.IDLE


def test_illegal_method_errors_one_channel_with_cause_and_interrupt():
    h = Harness()
    h.bind(0, 1, PushBuffer().incr(0x31, 0).launch(0x1000))
    h.bind(1, 2, PushBuffer().launch(0x2000)
           .immd(Method.SEND_PCAS_A, 1, subchannel=Subchannel.COPY))
    h.run(60)
    assert h.states[1] == (ChannelState.ERROR, ErrorCause.ILLEGAL_METHOD)
    assert h.states[2] == (ChannelState.ERROR, ErrorCause.ILLEGAL_METHOD)
    assert h.error_mask == 0b110
    assert h.interrupt == 1 and h.interrupt_status & 1
    assert [(c, d) for c, _, d in h.launches] == [(2, 0x2000)]

    # the PBDMAs drop the channels in error; others bound there still run
    h = Harness()
    h.bind(0, 1, PushBuffer().incr(0x31, 0).launch(0x1000))
    h.bind(1, 2, PushBuffer().launch(0x2000)
           .immd(Method.SEND_PCAS_A, 1, subchannel=Subchannel.COPY))
    h.push(3, PushBuffer().launch(0x3000))

    def drop_errors(hh, cycle):
        for p, c in enumerate(hh.bound):
            if c is not None and hh.error_mask >> c & 1 and p not in hh.moves:
                hh.move(p, 3 if c == 1 else None)
    h.watchers.append(drop_errors)
    h.run(120)
    assert h.states[1] == (ChannelState.ERROR, ErrorCause.ILLEGAL_METHOD)
    assert h.states[2] == (ChannelState.ERROR, ErrorCause.ILLEGAL_METHOD)
    assert h.states[3][0] == ChannelState.IDLE
    assert sorted(d for _, _, d in h.launches) == [0x2000, 0x3000]
    assert h.interrupt == 1


# -- the decode context, written back --------------------------------------------------------

def test_the_cp_writes_its_context_back_when_its_pbdma_stops_running():
    # channel 3 on PBDMA 0 is switched out in the middle of a semaphore release (its address
    # decoded, payload and execute not), channel 5 on PBDMA 1 then decodes a release of its
    # own, and channel 3 comes back on PBDMA 1: it must resume with its own method, count,
    # address and sequence number, read back from the context memory
    h = Harness()
    sp3, sp5 = syncpoint_address(CFG, 3), 0x12_3456_7800
    pb3 = PushBuffer().launch(0x3000).sem_release(sp3, 0xAAAA_0003_0000_0033, wide=True) \
        .launch(0x3100)
    pb5 = PushBuffer().launch(0x5000).launch(0x5100).sem_release(sp5, 0x55)
    h.bind(0, 3, pb3)
    h.bind(1, 5)
    split = len(PushBuffer().launch(0).words) + 3     # launch, SEM header, ADDR_LO, ADDR_HI
    switch = {}

    def switch_out(hh, cycle):
        if "at" not in switch and sum(1 for _, _, c in hh.pops if c == 3) == split:
            switch["at"] = cycle
            switch["holding"] = hh.trace[-1][1]
            hh.push(5, pb5)
            hh.move(0, None)                 # PBDMA 0 switches channel 3 out
        if "back" not in switch and "at" in switch and 0 not in hh.running \
                and not hh.words[5] and hh.trace[-1][0] == CPState.ARBITRATE:
            switch["back"] = cycle
            hh.move(1, 3)                    # channel 3 comes back, on PBDMA 1
    h.watchers.append(switch_out)
    h.run(250)
    at = switch["at"]
    assert switch["holding"] == 0b01                         # the CP held channel 3's context
    # PBDMA 0 stops running: the CP lets go of the context within a few cycles, and decodes
    # channel 5 only after that
    drops = [t for t in range(at, len(h.trace)) if not h.trace[t][1] & 0b01]
    assert drops and drops[0] - at <= 3
    assert all(t > drops[0] for t, _, c in h.pops if c == 5)
    assert not any(c == 3 for t, _, c in h.pops if at <= t < switch["back"])
    assert [{k: v for k, v in r.items() if k != "cycle"} for r in h.releases] == [
        {"channel": 5, "address": sp5, "payload": 0x55, "kind": ReleaseKind.SET, "wfi": 1,
         "timestamp": 0, "seq": 2},
        {"channel": 3, "address": sp3, "payload": 0xAAAA_0003_0000_0033,
         "kind": ReleaseKind.SET, "wfi": 1, "timestamp": 0, "seq": 1}]
    assert h.states[3] == (ChannelState.IDLE, ErrorCause.NONE)
    assert h.launches == [(3, 0, 0x3000), (5, 0, 0x5000), (5, 1, 0x5100), (3, 1, 0x3100)]
    assert {p for t, p, c in h.pops if c == 3 and t > switch["back"]} == {1}
    assert not h.words[3]


def test_moving_the_cp_to_another_pbdma_takes_two_cycles():
    # a timeslice of one ns: after its first launch channel 2 yields to channel 6 if it waits
    def run(channels):
        h = Harness(costs={"ch_timeslice": 1})
        h.bind(0, 2, PushBuffer().launch(0x2000).launch(0x2100))
        if channels == 2:
            h.bind(1, 6, PushBuffer().launch(0x6000))
        h.run(80)
        return h
    stay, move = run(1), run(2)
    assert move.launch_order() == [2, 6, 2]
    first = move.launch_cycles[0]
    assert stay.launch_cycles[0] == first
    # staying: the next method's pop follows the dispatch; moving: write back and read the
    # contexts, then load, then that pop
    assert stay.launch_cycles[1] - first + 2 == move.launch_cycles[1] - first
    t = first + 1
    assert [s for s, _, _ in stay.trace[t:t + 1]] == [CPState.FETCH]
    assert [s for s, _, _ in move.trace[t:t + 3]] == [CPState.ARBITRATE, CPState.LOAD,
                                                      CPState.FETCH]
    # the context held moves with the CP: PBDMA 0's until the load, then PBDMA 1's
    assert [hold for _, hold, _ in move.trace[t:t + 3]] == [0b01, 0b01, 0b10]
    assert [c for _, _, c in move.trace[t:t + 3]] == [2, 2, 6]


def test_an_imax_reduction_may_reach_host_memory_other_reductions_only_counters():
    # REDUCTION IMAX (a stream's tracking semaphore: never lowered) is a release of kind MAX
    # to host memory; INC to host memory is refused, as before
    h = Harness()
    h.bind(0, 3, PushBuffer().sem_release_max(0x1000, 7))
    h.bind(1, 5, PushBuffer().sem_increment(0x2000))
    h.run(60)
    assert [(r["channel"], r["address"], r["payload"], r["kind"], r["wfi"])
            for r in h.releases] == [(3, 0x1000, 7, ReleaseKind.MAX, 1)]
    assert h.states[3] == (ChannelState.IDLE, ErrorCause.NONE)
    assert h.states[5] == (ChannelState.ERROR, ErrorCause.SEM_ADDRESS)
