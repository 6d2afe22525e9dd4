"""RunlistScheduler: which TSG is served, timeslices, switches and their deadlines."""

from gpufe.rtl.config import SMALL
from gpufe.rtl.layouts import RunlistState
from gpufe.rtl.runlist import RunlistScheduler, NEVER
from tests.helpers import simulate

CFG = SMALL                  # 4 channels, 4 TSGs


class Bench:
    """The scheduler with ``now`` = the cycle, channel c in TSG ``tsg_of[c]``, and a log of
    the context records it offers (always taken)."""

    def __init__(self, tsg_of, timeslice=100, switch_time=20):
        self.dut = RunlistScheduler(CFG)
        self.tsg_of, self.timeslice, self.switch_time = tsg_of, timeslice, switch_time
        self.busy = {}                   # cycle -> busy mask from then on
        self.log = []                    # (cycle, tsg, run)
        self.served = []                 # served mask per cycle
        self.wake = []                   # wake_at per cycle

    def run(self, cycles):
        dut = self.dut

        async def tb(ctx):
            for c, t in enumerate(self.tsg_of):
                ctx.set(dut.channel_tsg[c], t)
            ctx.set(dut.timeslice, self.timeslice)
            ctx.set(dut.switch_time, self.switch_time)
            ctx.set(dut.context.ready, 1)
            busy = 0
            for cycle in range(cycles):
                busy = self.busy.get(cycle, busy)
                ctx.set(dut.busy, busy)
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
    b = Bench([0, 0, 0, 0])
    b.busy = {0: 0b1111}
    b.run(300)
    assert b.log == []
    assert set(b.served) == {0b1111}
    assert set(b.wake) == {NEVER}


def test_an_idle_active_tsg_gives_way_at_once_and_the_switch_takes_its_time():
    b = Bench([0, 0, 1, 1], switch_time=20)
    b.busy = {10: 0b0100}                # only TSG 1 has work
    b.run(60)
    # the switch starts the cycle after the work shows; the new TSG 20 ns later
    assert b.log == [(11, 0, 0), (31, 1, 1)]
    assert b.served[10] == 0b0011 and b.served[12] == 0 and b.served[30] == 0
    assert b.served[32] == 0b1100
    assert b.wake[12] == 30                # the switch's deadline, for a harness to jump to


def test_busy_tsgs_take_turns_by_timeslice():
    b = Bench([0, 1, 2, 2], timeslice=100, switch_time=10)
    b.busy = {0: 0b0111}                 # TSGs 0, 1, 2 all have work for good
    b.run(400)
    starts = [(c, t) for c, t, run in b.log if run][:3]
    # round robin: 0 -> 1 -> 2 -> 0; each holds its timeslice, then a 10 ns switch
    assert [t for _, t in starts] == [1, 2, 0]
    assert starts[0][0] == 111               # TSG 0 had its timeslice first
    assert [b2 - a for (a, _), (b2, _) in zip(starts, starts[1:])] == [110, 110]
    # while a TSG runs with others waiting, wake_at is its timeslice's end (from the cycle
    # it was switched to, whose next edge shows it)
    c = starts[0][0] + 5
    assert b.wake[c] == starts[0][0] - 1 + 100


def test_a_tsg_without_rivals_keeps_the_front_end_and_then_has_a_full_timeslice():
    b = Bench([0, 1, 1, 1], timeslice=50, switch_time=10)
    b.busy = {0: 0b0001, 200: 0b0011}
    b.run(300)
    # TSG 1's work appears at 200: TSG 0's timeslice counts from then
    assert b.log[0] == (250, 0, 0)
