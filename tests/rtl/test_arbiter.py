from gpufe.rtl.arbiter import PriorityRoundRobin
from tests.helpers import simulate


def grants(dut, requests, priority, steps):
    out = []

    async def tb(ctx):
        ctx.set(dut.requests, requests)
        if priority is not None:
            for i, p in enumerate(priority):
                ctx.set(dut.priority[i], p)
        ctx.set(dut.advance, 1)
        for _ in range(steps):
            out.append(ctx.get(dut.grant) if ctx.get(dut.valid) else None)
            await ctx.tick()

    simulate(dut, tb)
    return out


def test_round_robin_visits_every_requester_in_turn():
    assert grants(PriorityRoundRobin(5), 0b10110, None, 7) == [1, 2, 4, 1, 2, 4, 1]


def test_highest_level_wins_then_round_robin_within_it():
    dut = PriorityRoundRobin(4, levels=4)
    assert grants(dut, 0b1111, [0, 2, 1, 2], 4) == [1, 3, 1, 3]


def test_no_request_no_grant():
    assert grants(PriorityRoundRobin(3), 0, None, 2) == [None, None]
