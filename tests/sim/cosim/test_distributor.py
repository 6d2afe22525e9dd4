"""The work distributor's switch between kernels (``dispatch_switch_ns``): cutting into a
kernel that has blocks left for a kernel of greater priority, and going back to it, each cost
the distributor that long; taking kernels in turn costs nothing. Both engines alike."""

import pytest

from gpufe.sim.cosim.compute import ComputeEngine
from gpufe.sim.cosim.engines import BlockComputeEngine, Kernel
from gpufe.sim.cosim.events import EventQueue, ps


def run(engine_class, params, switch_ns, hi_priority):
    """A low-priority load of 3 waves (2 SMs x 2 blocks of 992 threads, 10 us each), and a
    one-block kernel of 32 threads arriving in its first wave, room for it beside the load's
    blocks: (the small kernel's start, the load's completion, the load), ps."""
    p = params.with_overrides(sms=2, max_threads_per_sm=2048, max_blocks_per_sm=32,
                              block_dispatch_ns=1.0, launch_latency_ns=100.0,
                              block_overhead_ns=100.0, kernel_end_ns=0.0,
                              dispatch_switch_ns=switch_ns)
    ev = EventQueue()
    done = {}
    eng = engine_class(p, ev, lambda k: done.__setitem__(k.key[1], ev.now))
    load = Kernel(("c", 0, 0, 0), 12, 992, 10_000.0, priority=0)
    small = Kernel(("c", 1, 0, 0), 1, 32, 0.0, priority=hi_priority)
    eng.launch(load)
    ev.run_due(ps(5_000))
    ev.now = ps(5_000)
    eng.launch(small)
    while ev.next_time() is not None:
        ev.run_due(ev.next_time())
    return small.start, done[0], load


@pytest.mark.parametrize("engine_class", [BlockComputeEngine, ComputeEngine])
def test_a_kernel_of_greater_priority_cutting_in_costs_a_switch_each_way(params, engine_class):
    s0, load0, _ = run(engine_class, params, 0.0, 1)
    s1, load1, _ = run(engine_class, params, 300.0, 1)
    # the load has blocks left (waiting for room): the urgent kernel, which has room, is
    # placed once the distributor has set up for it
    assert s0 == ps(5_000 + 100)                # as it becomes eligible
    assert s1 - s0 == ps(300)
    # and the load's next wave once the distributor has set up for the load again
    assert load1 - load0 == ps(300)


@pytest.mark.parametrize("engine_class", [BlockComputeEngine, ComputeEngine])
def test_a_kernel_of_the_same_priority_waits_its_turn_at_no_switch(params, engine_class):
    # the same priority: it goes after the load's last block, not into its waves
    s0, load0, _ = run(engine_class, params, 0.0, 0)
    s1, load1, _ = run(engine_class, params, 300.0, 0)
    assert (s1, load1) == (s0, load0)
    assert s0 > load0 - ps(10_200)              # placed after the load's last block


def test_both_engines_place_the_same_blocks_at_the_same_times(params):
    for prio in (0, 1):
        a = run(BlockComputeEngine, params, 300.0, prio)
        b = run(ComputeEngine, params, 300.0, prio)
        assert a[:2] == b[:2]
        assert (a[2].start, a[2].end, a[2].placed) == (b[2].start, b[2].end, b[2].placed)
