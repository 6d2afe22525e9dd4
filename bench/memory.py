"""Benchmark: peak memory of a run against its length.

Runs 20,000, 200,000 and 2,000,000 empty-kernel launches (one stream, a ``repeat`` op, then a
device synchronize; the parameter set's max_connections), each in a fresh Python process, in
the bounded mode of ``gpufe run`` (records streamed out, summary gathered as it goes; the
JSONL timeline goes to /dev/null unless ``--timeline-dir``), and prints each one's peak
resident memory (``ru_maxrss``) and the ratio of the longest to the shortest. Memory that
does not grow with the run keeps the ratio near 1. Not a test: figures depend on the machine
(noted in the output). 2,000,000 launches take several minutes at a few thousand simulated
launches per second.

    python bench/memory.py [--launches 20000 200000 2000000] [--list] [--backend compiled]

``--list`` runs the default mode instead (the whole timeline kept as a list of records,
as ``simulate`` returns it), to see what a launch costs there.
"""

import argparse
import os
import platform
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def launch_workload(launches):
    from gpufe.sim.host.workload import parse_workload
    program = [{"op": "stream_create", "name": "s"},
               {"op": "mark", "what": "rep_begin"},
               {"op": "repeat", "count": launches,
                "body": [{"op": "launch_kernel", "stream": "s", "kernel": "k_empty"}]},
               {"op": "device_synchronize"}, {"op": "mark", "what": "rep_end"}]
    return parse_workload({"name": f"launches_{launches}", "program": program}, "bench")


def child(launches, bounded, backend, timeline):
    """One run, in this process; prints one line of key=value figures."""
    from gpufe.sim.params import load
    from gpufe.sim.run import simulate
    from gpufe.sim.analysis.timeline import summary
    params = load()
    w = launch_workload(launches)
    t0 = time.perf_counter()
    r = simulate(w, params, backend=backend, bounded=bounded,
                 timeline=timeline if bounded else None)
    wall = time.perf_counter() - t0
    s = r.digest.summary() if bounded else summary(r.records)
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss     # KiB on Linux
    print(f"launches={launches} kernels={s['kernels']} wall_s={wall:.1f} "
          f"peak_rss_kb={rss_kb} backend={r.backend}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, nargs="+", default=[20_000, 200_000, 2_000_000])
    ap.add_argument("--list", action="store_true",
                    help="keep the records as a list (simulate's default) instead")
    ap.add_argument("--backend", default="compiled", choices=("compiled", "pysim"))
    ap.add_argument("--timeline-dir", help="write each run's JSONL timeline here")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    bounded = not args.list
    if args.child is not None:
        timeline = (os.path.join(args.timeline_dir, f"launches_{args.child}.jsonl")
                    if args.timeline_dir else os.devnull)
        child(args.child, bounded, args.backend, timeline)
        return 0
    print(f"{'bounded (streamed timeline)' if bounded else 'list of records'}, one stream of "
          f"empty kernels, backend {args.backend}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python "
          f"{platform.python_version()}, {platform.platform()}")
    peaks = {}
    for n in args.launches:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", str(n),
               "--backend", args.backend] + (["--list"] if args.list else []) + (
               ["--timeline-dir", args.timeline_dir] if args.timeline_dir else [])
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        line = out.strip().splitlines()[-1]
        fig = dict(kv.split("=") for kv in line.split())
        peaks[n] = int(fig["peak_rss_kb"])
        print(f"  {n:>9,} launches: peak RSS {peaks[n] / 1024:8.1f} MiB  "
              f"(wall {float(fig['wall_s']):7.1f} s, "
              f"{n / max(float(fig['wall_s']), 1e-9):,.0f} launches/s)", flush=True)
    lo, hi = min(peaks), max(peaks)
    if hi != lo:
        print(f"  peak at {hi:,} / peak at {lo:,}: {peaks[hi] / peaks[lo]:.2f}x; "
              f"{(peaks[hi] - peaks[lo]) * 1024 / (hi - lo):,.0f} bytes per extra launch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
