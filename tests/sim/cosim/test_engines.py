"""The compute engine's context switches: preempted blocks keep the time they have left."""

from gpufe.sim.cosim.engines import BlockComputeEngine as ComputeEngine, Kernel
from gpufe.sim.cosim.events import EventQueue, ps


def engine(params):
    ev = EventQueue()
    done = []
    eng = ComputeEngine(params, ev, lambda k: done.append((k.tsg, ev.now // 1000)))
    return ev, eng, done


def kernel(tsg, blocks, block_ns, order=0):
    k = Kernel((tsg, order, 0, 0), blocks, 32, block_ns)
    k.tsg = tsg
    return k


def test_a_switched_out_context_resumes_where_it_stopped(params):
    p = params.with_overrides(launch_latency_ns=0, block_overhead_ns=0, kernel_end_ns=0,
                              block_dispatch_ns=0)
    ev, eng, done = engine(p)
    eng.launch(kernel(0, 1, 10_000))
    ev.at(ps(4_000), eng.context_switch, 0, False)       # 4 us done, 6 us left
    ev.at(ps(9_000), eng.context_switch, 0, True)
    while ev.next_time() is not None:
        ev.run_due(ev.next_time())
    assert done == [(0, 15_000)]                          # 9 us + the 6 us it had left


def test_the_other_context_runs_while_one_is_switched_out(params):
    p = params.with_overrides(launch_latency_ns=0, block_overhead_ns=0, kernel_end_ns=0,
                              block_dispatch_ns=0, sms=1, max_blocks_per_sm=1)
    ev, eng, done = engine(p)
    eng.launch(kernel(0, 1, 10_000, order=0))
    eng.launch(kernel(1, 1, 3_000, order=1))
    # one SM, one block at a time: TSG 1's kernel waits for the SM, then gets it when
    # TSG 0 is switched out
    ev.at(ps(2_000), eng.context_switch, 0, False)
    ev.at(ps(2_500), eng.context_switch, 1, True)
    ev.at(ps(6_000), eng.context_switch, 1, False)
    ev.at(ps(6_500), eng.context_switch, 0, True)
    while ev.next_time() is not None:
        ev.run_due(ev.next_time())
    assert done == [(1, 5_500), (0, 14_500)]
