"""Benchmark: simulation speed as launches (or graph nodes) per wall second, one run each.

Rows (issue 19's table): empty kernels on 1 stream and over 32 streams (32 connections),
kernels of 132 blocks (2 us each) on 4 streams, kernels of 1,320 blocks (1 us each) on one
stream, a 5,000-node graph launched 4 times, a replay of the largest bundled PyTorch trace
(``torch2/optstep_loop_cap``; kernel and copy launches per second), and a replay of a
synthetic 100,000-kernel trace with realistic grids (:func:`synthetic_trace`: kernels drawn
from the bundled eager PyTorch programs, 4 to 1,024 blocks, on two streams). Every row runs
the compiled backend with ``--profiler off``, after one warm-up run that builds (or finds) the
compiled model; the synthetic trace is written before the clock starts, its reading is timed.
The machine and its load average are printed with the table: figures depend on them; quote
them together.

    python bench/speed.py [--scale 1.0] [--only SUBSTRING] [--compute aggregate|blocks]
    python bench/speed.py --vs REV [--scale 1.0] [--only SUBSTRING]

``--scale`` multiplies every row's launch count (0.1 for a quick look); ``--compute blocks``
runs the per-block compute engine (the aggregate one's reference: the same timelines).
``--vs REV``: each row on commit ``REV`` (a temporary worktree) and on this checkout, one
after the other, each in a fresh process, with this checkout's row definitions; the table has
both figures and their ratio.
"""

import argparse
import gzip
import json
import os
import pathlib
import platform
import random
import subprocess
import sys
import tempfile
import time

from gpufe.sim.params import load
from gpufe.sim.run import simulate
from gpufe.sim.host.workload import parse_workload

ROOT = pathlib.Path(__file__).resolve().parent.parent
TORCH2 = ROOT / "sim/analysis/reference/h200/torch2"
REPLAY_TRACE = TORCH2 / "optstep_loop_cap.json.gz"
#: the eager programs whose kernels the synthetic trace draws from (grids of 4 to 1,024)
EAGER_TRACES = ("loader_eager", "twostream_eager", "optstep_foreach")


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


def synthetic_trace(path, kernels, seed=19):
    """A Kineto trace of ``kernels`` launches in steps of 1,000 (a ``ProfilerStep#`` mark and a
    device synchronisation each): each launch a kernel of the bundled eager PyTorch programs
    (its name, grid, block and duration) on one of two streams, with the CPU time before it
    (its operator record and launch call) as that program spent it."""
    rng = random.Random(seed)
    pool = []
    for name in EAGER_TRACES:
        events = json.load(gzip.open(TORCH2 / f"{name}.json.gz"))["traceEvents"]
        calls = sorted((e for e in events if e.get("cat") == "cuda_runtime"
                        and e.get("name") == "cudaLaunchKernel"), key=lambda e: e["ts"])
        gaps = [b["ts"] - a["ts"] - a["dur"] for a, b in zip(calls, calls[1:])]
        gaps = [g for g in gaps if 0 < g < 50]          # within a step
        for e in events:
            if e.get("cat") == "kernel":
                a = e["args"]
                pool.append((e["name"], a["grid"], a["block"], e["dur"], rng.choice(gaps)))
    out, ts, corr = [], 1_000.0, 1
    free = {7: 0.0, 13: 0.0}                   # each stream's last kernel ends (us)
    for i in range(kernels):
        if i % 1000 == 0:
            if i:
                out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize",
                            "pid": 1, "tid": 1, "ts": ts, "dur": 5.0,
                            "args": {"correlation": corr}})
                corr += 1
                ts = max(ts, *free.values())    # the synchronisation waits for both streams
                out[-1]["dur"] = ts + 5.0 - out[-1]["ts"]
                out[step]["dur"] = ts + 5.0 - out[step]["ts"]
                ts += 10.0
            step = len(out)
            out.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i // 1000}",
                        "pid": 1, "tid": 1, "ts": ts, "dur": 0.0, "args": {}})
        name, grid, block, dur, gap = rng.choice(pool)
        ts += gap
        out.append({"ph": "X", "cat": "cpu_op", "name": "aten::op", "pid": 1, "tid": 1,
                    "ts": ts - 1.0, "dur": 4.0, "args": {}})
        out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                    "tid": 1, "ts": ts, "dur": 2.5, "args": {"correlation": corr}})
        stream = rng.choice((7, 13))
        start = max(ts + 4.0, free[stream] + 1.0)
        free[stream] = start + dur
        out.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream,
                    "ts": start, "dur": dur,
                    "args": {"correlation": corr, "stream": stream, "grid": grid,
                             "block": block}})
        corr += 1
        ts += 2.5
    doc = {"schemaVersion": 1, "deviceProperties": [{"name": "NVIDIA H200", "numSms": 132}],
           "traceEvents": out}
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return path


def rows(scale, compute="aggregate", synthetic=None):
    """(label, unit, count, run) of every row; ``run()`` simulates it. ``synthetic``: where
    the synthetic trace is (or is to be written: the second value returned writes it)."""
    n = lambda x: max(int(x * scale), 1)
    p = load("h200")
    # (the default engine unnamed: a commit from before the aggregate engine takes no such
    # argument)
    kw = {} if compute == "aggregate" else {"compute": compute}

    def sim(w):
        return lambda: simulate(w, p, backend="compiled", profiler="off", **kw)

    def replay_run(path):
        from gpufe.sim.analysis.replay import replay
        return lambda: replay(path, p, **kw)[0]

    if synthetic is None:
        synthetic = pathlib.Path(tempfile.mkdtemp(prefix="gpufe-speed-")) / "synthetic.json.gz"

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
    out.append((f"replay {REPLAY_TRACE.name} (PyTorch)", "launches", None,
                replay_run(REPLAY_TRACE)))
    out.append((f"replay a synthetic {n(100_000):,}-kernel trace (eager grids)", "launches",
                None, replay_run(synthetic)))
    return out, lambda: synthetic_trace(synthetic, n(100_000))


def launched(result):
    """Kernels and copies a run dispatched."""
    return sum(1 for r in result.records if r["kind"] in ("kernel", "memcpy"))


def timed(run, count):
    """(items, wall seconds) of one run of a row."""
    t0 = time.perf_counter()
    result = run()
    wall = time.perf_counter() - t0
    return (launched(result) if count is None else count), wall


def one_row(args):
    """The child of ``--vs``: row ``--row`` timed, as JSON on stdout."""
    table, _ = rows(args.scale, synthetic=pathlib.Path(args.synthetic))
    _, _, count, run = table[args.row]
    simulate(stream_workload("warm", 4, 1), load("h200"), backend="compiled")
    done, wall = timed(run, count)
    import gpufe.sim.run
    print(json.dumps({"done": done, "wall": wall, "module": gpufe.sim.run.__file__}))


def versus(args, table, indices, synthetic):
    from worktree import other_commit
    print(f"{'workload':58s} {'count':>9s} {args.vs[:10]:>12s} {'this':>12s} {'ratio':>7s}")
    with other_commit(args.vs) as other:
        for i in indices:
            label, unit, _, _ = table[i]
            out = []
            for path in (other, ""):
                env = dict(os.environ, PYTHONPATH=path) if path else dict(os.environ)
                cmd = [sys.executable, __file__, "--row", str(i), "--scale", str(args.scale),
                       "--synthetic", str(synthetic)]
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if proc.returncode:
                    sys.exit(f"row {label!r} failed:\n{proc.stderr[-3000:]}")
                out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            (a, b) = (o["done"] / o["wall"] for o in out)
            print(f"{label:58s} {out[1]['done']:9,d} {a:12,.0f} {b:12,.0f} {b / a:6.1f}x "
                  f"{unit}/s", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--only", help="only rows whose label contains this")
    ap.add_argument("--compute", choices=("aggregate", "blocks"), default="aggregate")
    ap.add_argument("--vs", metavar="REV", help="each row on commit REV too, ratio printed")
    ap.add_argument("--row", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--synthetic", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.row is not None:
        return one_row(args)
    engine = "each commit's default" if args.vs else args.compute
    print(f"machine: {platform.node()}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"compute engine: {engine}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    all_rows, write_synthetic = rows(args.scale, args.compute)
    indices = [i for i, r in enumerate(all_rows) if not args.only or args.only in r[0]]
    synthetic = None
    if any("synthetic" in all_rows[i][0] for i in indices):
        synthetic = write_synthetic()
    if args.vs:
        versus(args, all_rows, indices, synthetic)
    else:
        # the compiled model is built (or found in the cache) once, before any timing
        simulate(stream_workload("warm", 4, 1), load("h200"), backend="compiled")
        print(f"{'workload':58s} {'count':>9s} {'wall s':>8s} {'per second':>12s}")
        for i in indices:
            label, unit, count, run = all_rows[i]
            done, wall = timed(run, count)
            print(f"{label:58s} {done:9,d} {wall:8.2f} {done / wall:12,.0f} {unit}/s",
                  flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
