"""The aggregate compute engine: the same outcomes as its per-block reference, for far fewer
events."""

import pytest

from gpufe.sim.cosim.compute import ComputeEngine, aggregate_applies
from gpufe.sim.cosim.engines import BlockComputeEngine, Kernel
from gpufe.sim.cosim.events import EventQueue, ps
from gpufe.sim.testbench.compute_programs import random_program, outcome


@pytest.mark.parametrize("first", range(0, 120, 30))
def test_the_engines_agree_on_random_programs(params, first):
    for seed in range(first, first + 30):
        program = random_program(seed, big=False)
        assert (outcome(program, ComputeEngine, params)
                == outcome(program, BlockComputeEngine, params)), f"seed {seed}"


@pytest.mark.slow
def test_the_engines_agree_on_random_programs_with_grids_up_to_100000(params):
    for seed in range(1000, 1012):
        program = random_program(seed, big=True)
        assert (outcome(program, ComputeEngine, params)
                == outcome(program, BlockComputeEngine, params)), f"seed {seed}"


def run(engine_class, params, grids, gap_ns=20_000.0, block_ns=1000.0):
    """Kernels of ``grids`` blocks (128 threads) launched ``gap_ns`` apart: their completions
    (ns) and the events the engine scheduled."""
    ev = EventQueue()
    done = []
    eng = engine_class(params, ev, lambda k: done.append((k.key[1], ev.now // 1000)))
    for i, blocks in enumerate(grids):
        t = ps(i * gap_ns)
        ev.run_due(t)
        ev.now = max(ev.now, t)
        eng.launch(Kernel(("c", i, 0, 0), blocks, 128, block_ns, release=(0, i)))
    while ev.next_time() is not None:
        ev.run_due(ev.next_time())
    return done, ev._seq


def test_a_kernel_of_100000_blocks_takes_waves_not_blocks(params):
    done, events = run(ComputeEngine, params, [100_000])
    # 132 SMs x 16 blocks of 128 threads = 2,112 at once: 48 waves of 1,385.7 ns
    ref_done, ref_events = run(BlockComputeEngine, params, [100_000])
    assert done == ref_done
    assert ref_events > 200_000                # two events a block
    assert events < 200                        # a few a wave


def test_waves_resume_after_an_arrival_in_their_middle(params):
    # the second kernel arrives while the first is in its waves: the first's next wave
    # resumes where the arrival cut it, and its events stay a few per wave
    grids = [50_000, 3, 50_000]
    done, events = run(ComputeEngine, params, grids, gap_ns=7_000.0)
    assert done == run(BlockComputeEngine, params, grids, gap_ns=7_000.0)[0]
    assert events < 400


def test_parameters_the_aggregate_engine_does_not_take(params):
    assert aggregate_applies(params)
    for bad in ({"block_dispatch_ns": 0}, {"block_overhead_ns": 0.5},
                {"launch_latency_ns": 0.3}):
        p = params.with_overrides(**bad)
        assert not aggregate_applies(p)
        with pytest.raises(ValueError, match="block_dispatch_ns"):
            ComputeEngine(p, EventQueue(), lambda k: None)


def test_the_cosimulation_falls_back_to_the_reference(params):
    from gpufe.sim.cosim.compiled import _elaborated_elsewhere
    from gpufe.sim.cosim.harness import CoSim

    def engine(p, **kw):
        sim = CoSim(p, **kw)
        _elaborated_elsewhere(sim.dut)        # built, never run: no warning of it
        return sim.compute
    assert isinstance(engine(params), ComputeEngine)
    assert isinstance(engine(params, compute="blocks"), BlockComputeEngine)
    assert isinstance(engine(params.with_overrides(block_dispatch_ns=0)), BlockComputeEngine)
    with pytest.raises(ValueError, match="compute"):
        CoSim(params, compute="waves")
