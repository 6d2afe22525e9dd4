"""The compiled backend gives the same timeline as Amaranth's simulator, byte for byte, on
every bundled example.

Builds the CXXRTL model once for the h200 parameters (a few minutes the first time; then
cached in $GPUFE_CACHE or ~/.cache/gpufe). The Python simulator's side is the slow one, so
its runs start at once, all of them, in worker processes (one per CPU), while the compiled
runs go on here. (The 10000-node graph is a calibration scenario, graph_nodes10000 in
sim/analysis/reference/h200, run by ``gpufe validate``; as an example it took five minutes here.)"""

import concurrent.futures
import json
import os
import pathlib

import pytest

from gpufe.sim.params import load
from gpufe.sim.run import simulate
from gpufe.sim.host.workload import load_workload

EXAMPLES = pathlib.Path(__file__).parents[3] / "examples"
ALL = sorted(p.stem for p in EXAMPLES.glob("*.json"))


def dump(result):
    return "\n".join(json.dumps(r, sort_keys=True) for r in result.records)


def run(name, backend):
    r = simulate(load_workload(EXAMPLES / f"{name}.json"), load("h200"), backend=backend)
    return r.backend, dump(r), r.stats


@pytest.fixture(scope="module")
def pysim_runs():
    # biggest first, so that the longest run is not the last to start
    order = sorted(ALL, key=lambda n: -(EXAMPLES / f"{n}.json").stat().st_size)
    with concurrent.futures.ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        yield {n: pool.submit(run, n, "pysim") for n in order}


def test_there_are_examples():
    assert len(ALL) >= 17


@pytest.mark.parametrize("name", ALL)
def test_compiled_and_pysim_timelines_are_identical(name, pysim_runs):
    kind_b, b, stats_b = run(name, "compiled")
    kind_a, a, stats_a = pysim_runs[name].result()
    assert (kind_a, kind_b) == ("pysim", "compiled")
    assert a == b
    # the compiled loop also skips cycles in which a stable design cannot change
    assert stats_b["rtl_cycles"] <= stats_a["rtl_cycles"]
    assert stats_b["doorbells"] == stats_a["doorbells"]
