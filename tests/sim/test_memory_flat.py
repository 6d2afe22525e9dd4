"""A run's memory does not grow with its length (issue 41, "Memory, again").

A run's cyclic garbage collector is paused (``CoSim.run``: records and events by the million,
freed by reference counting), so per-launch objects that refer to one another in a cycle
(a kernel and its run of block ends in the aggregate compute engine, once) are freed only at
the run's end: a run of 100,000 launches peaked at 404 MiB, 3.7 KB a launch. Two tests: no
cyclic garbage per launch (fast, and names what leaks), and the peak resident memory of two
run lengths in fresh processes (``bench/memory.py``'s run), as a ratio.
"""

import collections
import gc
import os
import pathlib
import subprocess
import sys

from gpufe.sim.host.workload import parse_workload
from gpufe.sim.run import simulate

ROOT = pathlib.Path(__file__).parents[2]


def _program(n):
    """Launches on two streams, a PDL chain, an event, a copy and a graph launch, ``n``
    times."""
    body = [{"op": "launch_kernel", "stream": "s", "kernel": "k", "grid": [3],
             "block_ns": 2000},
            {"op": "launch_kernel", "stream": "t", "kernel": "p", "pdl": True},
            {"op": "event_record", "event": "e", "stream": "s"},
            {"op": "stream_wait_event", "stream": "t", "event": "e"},
            {"op": "memcpy_async", "stream": "t", "kind": "h2d", "bytes": 4096},
            {"op": "graph_launch", "graph": "g", "stream": "s"}]
    program = [{"op": "stream_create", "name": "s"}, {"op": "stream_create", "name": "t"},
               {"op": "stream_create", "name": "c"}, {"op": "event_create", "name": "e"},
               {"op": "stream_begin_capture", "stream": "c"},
               {"op": "launch_kernel", "stream": "c", "kernel": "ga"},
               {"op": "launch_kernel", "stream": "c", "kernel": "gb", "grid": [2]},
               {"op": "stream_end_capture", "stream": "c", "graph": "g"},
               {"op": "graph_instantiate", "graph": "g"},
               {"op": "repeat", "count": n, "body": body}, {"op": "device_synchronize"}]
    return parse_workload({"name": f"cycles_{n}", "program": program}, "test")


def _cyclic_garbage(workload, params, **kw):
    """What a run leaves to the cyclic collector, by type (the collector off throughout, as
    during the run itself)."""
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        simulate(workload, params, backend="compiled", bounded=True, timeline=os.devnull, **kw)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        found = collections.Counter(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if collecting:
            gc.enable()
    return found


def test_a_run_leaves_no_cyclic_garbage_per_launch(params):
    """Ten times the launches leave no more for the collector: the run's own objects (the
    co-simulation, the driver, the model's ports) and a few of its last state, whatever its
    length; before the fix, some 7 more a kernel (the kernel, its run, their lists)."""
    for kw in ({}, {"profiler": "cupti"}, {"compute": "blocks"}):
        small = _cyclic_garbage(_program(20), params, **kw)
        big = _cyclic_garbage(_program(200), params, **kw)
        grew = {t: big[t] - small[t] for t in big if big[t] > small[t]}
        assert sum(grew.values()) < 50, f"cyclic garbage growing with the run ({kw}): {grew}"


def _peak_rss_kb(launches, tmp_path):
    """Peak resident memory of ``bench/memory.py``'s run (the bounded mode, its timeline
    to a file) of ``launches`` empty-kernel launches in a fresh process, KiB."""
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "memory.py"),
                          "--child", str(launches), "--timeline-dir", str(tmp_path)],
                         check=True, capture_output=True, text=True, timeout=300).stdout
    fig = dict(kv.split("=") for kv in out.strip().splitlines()[-1].split())
    assert int(fig["kernels"]) == launches
    return int(fig["peak_rss_kb"])


def test_peak_memory_does_not_grow_with_the_run(tmp_path):
    """5,000 and 50,000 launches: the same peak within 12% (the push-buffer ring, written
    lazily, fills up to 1 MiB per channel in the first tens of thousands of launches; the
    rest is the process's fixed cost, some 50 MiB): 1.05x here. Before the fix, 3.7 KB a
    launch: 3.5x."""
    small = _peak_rss_kb(5_000, tmp_path)
    big = _peak_rss_kb(50_000, tmp_path)
    assert big / small < 1.12, (f"peak RSS {small / 1024:.1f} MiB at 5,000 launches, "
                                f"{big / 1024:.1f} MiB at 50,000: "
                                f"{(big - small) * 1024 / 45_000:,.0f} bytes a launch")
