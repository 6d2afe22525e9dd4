"""RunlistScheduler: which TSG is served, timeslices, switches and their deadlines."""

from gpufe.rtl.config import SMALL
from gpufe.rtl.runlist import RunlistScheduler, NEVER
from tests.helpers import simulate

CFG = SMALL                  # 8 channels, 4 TSGs


class Bench:
    """The scheduler with ``now`` = the cycle, channel c in TSG ``tsg_of[c]`` (given as the
    per-TSG channel masks a channel table keeps), and a log of the context records it offers
    (always taken). ``busy`` and ``in_flight``: cycle -> the channel mask / TSG mask from then
    on."""

    def __init__(self, tsg_of, timeslice=100, switch_time=20, preempt_time=0):
        assert len(tsg_of) == CFG.channels
        self.dut = RunlistScheduler(CFG)
        self.tsg_of, self.timeslice, self.switch_time = tsg_of, timeslice, switch_time
        self.preempt_time = preempt_time
        self.busy = {}                   # cycle -> busy channels from then on
        self.in_flight = {}              # cycle -> TSGs with work in flight from then on
        self.log = []                    # (cycle, tsg, run)
        self.served = []                 # served mask per cycle
        self.wake = []                   # wake_at per cycle

    def mask(self, *tsgs):
        """The channels of ``tsgs``."""
        return sum(1 << c for c, t in enumerate(self.tsg_of) if t in tsgs)

    def run(self, cycles):
        dut = self.dut

        async def tb(ctx):
            ctx.set(dut.tsg_mask, [self.mask(g) for g in range(CFG.tsgs)])
            ctx.set(dut.timeslice, self.timeslice)
            ctx.set(dut.switch_time, self.switch_time)
            ctx.set(dut.preempt_time, self.preempt_time)
            ctx.set(dut.context.ready, 1)
            busy = in_flight = 0
            for cycle in range(cycles):
                busy = self.busy.get(cycle, busy)
                in_flight = self.in_flight.get(cycle, in_flight)
                ctx.set(dut.busy, busy)
                ctx.set(dut.tsg_in_flight, in_flight)
                ctx.set(dut.now, cycle)
                if ctx.get(dut.context.valid):
                    p = ctx.get(dut.context.payload)
                    self.log.append((cycle, p.tsg, p.run))
                self.served.append(ctx.get(dut.served))
                self.wake.append(ctx.get(dut.wake_at))
                await ctx.tick()
        simulate(dut, tb)
        return self


def test_one_tsg_is_served_without_switches():
    b = Bench([0] * 8)
    b.busy = {0: 0xFF}
    b.run(300)
    assert b.log == []
    assert set(b.served) == {0xFF}
    assert set(b.wake) == {NEVER}


def test_an_idle_active_tsg_gives_way_at_once_and_the_switch_takes_its_time():
    b = Bench([0, 0, 1, 1, 0, 2, 1, 3], switch_time=20)
    b.busy = {10: 0b0000_0100}           # only TSG 1 (channels 2, 3, 6) has work
    b.run(60)
    # the switch starts the cycle after the work shows; the new TSG 20 ns later
    assert b.log == [(11, 0, 0), (31, 1, 1)]
    assert b.served[10] == 0b0001_0011 and b.served[12] == 0 and b.served[30] == 0
    assert b.served[32] == 0b0100_1100
    assert b.wake[12] == 30                # the switch's deadline, for a harness to jump to


def test_busy_tsgs_take_turns_by_timeslice():
    b = Bench([0, 1, 2, 2, 3, 3, 0, 1], timeslice=100, switch_time=10)
    b.busy = {0: 0b0000_0111}            # TSGs 0, 1, 2 all have work for good
    b.run(400)
    starts = [(c, t) for c, t, run in b.log if run][:3]
    # round robin: 0 -> 1 -> 2 -> 0; each holds its timeslice, then a 10 ns switch
    assert [t for _, t in starts] == [1, 2, 0]
    assert starts[0][0] == 111               # TSG 0 had its timeslice first
    assert [b2 - a for (a, _), (b2, _) in zip(starts, starts[1:])] == [110, 110]
    # each stop record names the TSG that was running
    assert [t for _, t, run in b.log if not run][:3] == [0, 1, 2]
    # while a TSG runs with others waiting, wake_at is its timeslice's end (from the cycle
    # it was switched to, whose next edge shows it)
    c = starts[0][0] + 5
    assert b.wake[c] == starts[0][0] - 1 + 100
    assert b.served[c] == 0b1000_0010        # TSG 1: channels 1 and 7


def test_a_tsg_without_rivals_keeps_the_front_end_and_then_has_a_full_timeslice():
    b = Bench([0, 1, 1, 1, 2, 2, 3, 3], timeslice=50, switch_time=10)
    b.busy = {0: 0b0001, 200: 0b0011}
    b.run(300)
    # TSG 1's work appears at 200: TSG 0's timeslice counts from then
    assert b.log[0] == (250, 0, 0)
    assert b.wake[150] == NEVER              # no rival: no deadline
    assert b.wake[220] == 249


def test_work_in_flight_alone_keeps_a_tsg_busy():
    tsg_of = [0, 0, 1, 1, 2, 2, 3, 3]
    # TSG 0's channels go idle at 5 but its work is still in flight on the engines; TSG 1
    # gets work at 10: TSG 0 does not give way at once, it keeps its timeslice
    held = Bench(tsg_of, timeslice=50, switch_time=10)
    held.busy = {0: 0b0001, 5: 0b0000, 10: 0b0100}
    held.in_flight = {5: 0b0001}
    held.run(100)
    assert held.log[:2] == [(60, 0, 0), (70, 1, 1)]
    assert held.wake[20] == 59
    # its work completes at 30: then it gives way at once
    done = Bench(tsg_of, timeslice=50, switch_time=10)
    done.busy = {0: 0b0001, 5: 0b0000, 10: 0b0100}
    done.in_flight = {5: 0b0001, 30: 0}
    done.run(100)
    assert done.log[:2] == [(31, 0, 0), (41, 1, 1)]
    # a TSG with only work in flight is a rival: the active one's timeslice counts
    rival = Bench(tsg_of, timeslice=50, switch_time=10)
    rival.busy = {0: 0b0001}
    rival.in_flight = {100: 0b1000}
    rival.run(200)
    assert rival.log[:2] == [(150, 0, 0), (160, 3, 1)]
    assert rival.served[165] == 0b1100_0000


def test_a_switch_away_from_a_tsg_with_work_takes_the_preemption_too():
    tsg_of = [0, 0, 1, 1, 2, 2, 3, 3]
    # TSG 0 ran dry (no work, nothing in flight) when TSG 1's work came: a plain switch
    dry = Bench(tsg_of, timeslice=50, switch_time=10, preempt_time=25)
    dry.busy = {0: 0b0001, 5: 0b0000, 10: 0b0100}
    dry.run(100)
    assert dry.log[:2] == [(11, 0, 0), (21, 1, 1)]
    # TSG 0 still has work when its timeslice runs out: preempting it costs 25 ns more
    held = Bench(tsg_of, timeslice=50, switch_time=10, preempt_time=25)
    held.busy = {0: 0b0101}
    held.run(150)
    assert held.log[:2] == [(51, 0, 0), (86, 1, 1)]
    assert held.wake[60] == 85               # the switch's deadline holds both parts
    # so is a TSG whose only work is in flight on the engines
    flight = Bench(tsg_of, timeslice=50, switch_time=10, preempt_time=25)
    flight.busy = {0: 0b0001, 5: 0b0000, 10: 0b0100}
    flight.in_flight = {5: 0b0001}
    flight.run(150)
    assert flight.log[:2] == [(60, 0, 0), (95, 1, 1)]
