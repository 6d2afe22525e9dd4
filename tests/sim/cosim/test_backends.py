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


#: examples compared in the default run (the quickest that together reach every kind of work:
#: kernels on several channels, copies, events with timing, graphs, host waits); the rest
#: run with --slow
QUICK = ("copies", "events_notiming", "graph_branches", "graph_fork_join", "host_sync", "hyperq_c8_s8",
         "priority")


@pytest.fixture(scope="module")
def pysim_runs(request):
    # only the examples this session runs, biggest first, so that the longest run is not the
    # last to start
    selected = {item.callspec.params["name"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")
                and not item.get_closest_marker("skip")}
    order = sorted(selected, key=lambda n: -(EXAMPLES / f"{n}.json").stat().st_size)
    with concurrent.futures.ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        yield {n: pool.submit(run, n, "pysim") for n in order}


def test_there_are_examples():
    assert len(ALL) >= 17
    assert set(QUICK) <= set(ALL)


@pytest.mark.parametrize("name", [n if n in QUICK else pytest.param(n, marks=pytest.mark.slow)
                                  for n in ALL])
def test_compiled_and_pysim_timelines_are_identical(name, pysim_runs):
    kind_b, b, stats_b = run(name, "compiled")
    kind_a, a, stats_a = pysim_runs[name].result()
    assert (kind_a, kind_b) == ("pysim", "compiled")
    assert a == b
    # the compiled loop also skips cycles in which a stable design cannot change; each stop it
    # makes for the driver to see a logged GP_GET update (Amaranth's simulator stops at the
    # update itself instead) clocks one idle cycle more
    assert stats_b["rtl_cycles"] <= stats_a["rtl_cycles"] + stats_b["retire_stops"]
    assert stats_b["doorbells"] == stats_a["doorbells"]


def test_a_full_ring_wakes_the_cpu_at_the_same_time_on_both_backends():
    """The compiled loop logs GP_GET updates (``retired``) instead of stopping at each, and
    stops by the time the driver could see the first: a CPU blocked on a full GPFIFO ring
    resumes exactly when it does in Amaranth's simulator, which stops at every update."""
    from tests.sim.workloads import streams, launch, workload
    p = load("h200").with_overrides(gpfifo_entries=8)
    w = workload(streams("s") + [launch("s", 100_000, "k_gate")]
                 + [launch("s") for _ in range(30)] + [{"op": "stream_synchronize", "stream": "s"}])
    runs = {b: simulate(w, p, backend=b) for b in ("pysim", "compiled")}
    assert runs["compiled"].blocked_launches > 0
    assert dump(runs["pysim"]) == dump(runs["compiled"])


def test_dma_reads_answered_in_the_compiled_loop_match_the_harness(monkeypatch):
    """The compiled loop answers DMA reads itself from its mirror of host memory; a run gives
    the timeline of Amaranth's simulator, whose reads the harness answers, including a read
    outside host memory (a GPFIFO entry pointing nowhere: the channel's fetch fault) while the
    other channel runs on."""
    from gpufe.sim.host import umd
    from tests.sim.workloads import streams, launch, workload
    real, calls = umd.gp_entry, []

    def gp_entry(address, length):
        calls.append(address)
        # the third kickoff of stream b: a segment in no allocation
        return real(0x10_0000_0000 if len(calls) == 6 else address, length)

    monkeypatch.setattr(umd, "gp_entry", gp_entry)
    w = workload(streams("a", "b") + [launch(s, 2000) for _ in range(4) for s in "ab"]
                 + [{"op": "stream_synchronize", "stream": "a"}], max_connections=2)
    runs = {}
    for b in ("pysim", "compiled"):
        calls.clear()
        runs[b] = simulate(w, load("h200"), backend=b)
    assert dump(runs["pysim"]) == dump(runs["compiled"])
    assert runs["compiled"].stats["dma_reads_in_loop"] > 8     # every entry and segment
    done = [r["stream"] for r in runs["compiled"].records if r["kind"] == "kernel"]
    a, b = sorted(set(done))                                 # (stream ids in creation order)
    assert done.count(a) == 4 and done.count(b) == 2         # b's kernels from the fault on: none
