"""Benchmark: simulation speed as launches (or graph nodes) per wall second, one run each.

Rows (issue 19's table): empty kernels on 1 stream and over 32 streams (32 connections),
kernels of 132 blocks (2 us each) on 4 streams, kernels of 1,320 blocks (1 us each) on one
stream, a 5,000-node graph launched 4 times, and a replay of the largest bundled PyTorch trace
(``torch2/optstep_loop_cap``; kernel and copy launches per second). Every row runs the
compiled backend with ``--profiler off``, after one warm-up run that builds (or finds) the
compiled model. The machine and its load average are printed with the table: figures depend
on them; quote them together.

    python bench/speed.py [--scale 1.0] [--only SUBSTRING]

``--scale`` multiplies every row's launch count (0.1 for a quick look).
"""

import argparse
import os
import pathlib
import platform
import time

from gpufe.sim.params import load
from gpufe.sim.run import simulate
from gpufe.sim.host.workload import parse_workload

ROOT = pathlib.Path(__file__).resolve().parent.parent
REPLAY_TRACE = ROOT / "sim/analysis/reference/h200/torch2/optstep_loop_cap.json.gz"


def stream_workload(name, kernels, streams, grid=1, block_ns=0, connections=8):
    """``kernels`` launches of ``grid`` blocks x 128 threads, breadth-first over ``streams``
    streams, then a device synchronize."""
    names = [f"s{i}" for i in range(streams)]
    body = [{"op": "launch_kernel", "stream": n, "kernel": "k", "grid": [grid, 1, 1],
             "block": [128, 1, 1], "block_ns": block_ns} for n in names]
    program = ([{"op": "stream_create", "name": n} for n in names]
               + [{"op": "repeat", "count": max(kernels // streams, 1), "body": body},
                  {"op": "device_synchronize"}])
    return parse_workload({"name": name, "max_connections": connections,
                           "program": program}, "bench")


def graph_workload(name, nodes, launches):
    """A chain of ``nodes`` empty kernels captured on one stream, launched ``launches``
    times."""
    chain = [{"op": "launch_kernel", "stream": "s", "kernel": "k"}]
    program = [{"op": "stream_create", "name": "s"},
               {"op": "stream_begin_capture", "stream": "s"},
               {"op": "repeat", "count": nodes, "body": chain},
               {"op": "stream_end_capture", "stream": "s", "graph": "g"},
               {"op": "graph_instantiate", "graph": "g"},
               {"op": "repeat", "count": launches,
                "body": [{"op": "graph_launch", "graph": "g", "stream": "s"}]},
               {"op": "stream_synchronize", "stream": "s"}]
    return parse_workload({"name": name, "program": program}, "bench")


def rows(scale):
    """(label, unit, count, run) of every row; ``run()`` simulates it."""
    n = lambda x: max(int(x * scale), 1)
    p = load("h200")

    def sim(w):
        return lambda: simulate(w, p, backend="compiled", profiler="off")

    def replay_run():
        from gpufe.sim.analysis.replay import replay
        return replay(REPLAY_TRACE, p)[0]

    out = [(f"{n(10_000):,} empty kernels, 1 stream", "launches", n(10_000),
            sim(stream_workload("empty_1", n(10_000), 1))),
           (f"{n(10_000):,} empty kernels over 32 streams, 32 connections", "launches",
            n(10_000), sim(stream_workload("empty_32", n(10_000), 32, connections=32))),
           (f"{n(10_000):,} kernels of 132 blocks (2 us each), 4 streams", "launches",
            n(10_000), sim(stream_workload("g132", n(10_000), 4, 132, 2000))),
           (f"{n(2_000):,} kernels of 1,320 blocks (1 us each), 1 stream", "launches",
            n(2_000), sim(stream_workload("g1320", n(2_000), 1, 1320, 1000))),
           (f"a {n(5_000):,}-node graph launched 4 times", "nodes", 4 * n(5_000),
            sim(graph_workload("graph", n(5_000), 4)))]
    out.append((f"replay {REPLAY_TRACE.name} (PyTorch)", "launches", None, replay_run))
    return out


def launched(result):
    """Kernels and copies a run dispatched."""
    return sum(1 for r in result.records if r["kind"] in ("kernel", "memcpy"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--only", help="only rows whose label contains this")
    args = ap.parse_args()
    print(f"machine: {platform.node()}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    table = [r for r in rows(args.scale) if not args.only or args.only in r[0]]
    # the compiled model is built (or found in the cache) once, before any timing
    simulate(stream_workload("warm", 4, 1), load("h200"), backend="compiled")
    print(f"{'workload':58s} {'count':>9s} {'wall s':>8s} {'per second':>12s}")
    for label, unit, count, run in table:
        t0 = time.perf_counter()
        result = run()
        wall = time.perf_counter() - t0
        done = launched(result) if count is None else count
        print(f"{label:58s} {done:9,d} {wall:8.2f} {done / wall:12,.0f} {unit}/s")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
