"""The compiled backend gives the same timeline as Amaranth's simulator, byte for byte.

Builds the CXXRTL model once for the h200 parameters (a few minutes the first time; then
cached in $GPUFE_CACHE or ~/.cache/gpufe)."""

import json
import pathlib

import pytest

from sim.params import load
from sim.run import simulate
from sim.workload import load_workload

EXAMPLES = pathlib.Path(__file__).parents[2] / "examples"
# examples that Amaranth's simulator runs in seconds; both backends must agree on each
QUICK = ["hyperq_c8_s8", "graph_fork_join", "copies", "priority"]


def dump(result):
    return "\n".join(json.dumps(r, sort_keys=True) for r in result.records)


@pytest.mark.parametrize("name", QUICK)
def test_compiled_and_pysim_timelines_are_identical(name):
    w = load_workload(EXAMPLES / f"{name}.json")
    params = load("h200")
    a = simulate(w, params, backend="pysim")
    b = simulate(w, params, backend="compiled")
    assert b.backend == "compiled"
    assert dump(a) == dump(b)
    assert a.stats["rtl_cycles"] == b.stats["rtl_cycles"]
