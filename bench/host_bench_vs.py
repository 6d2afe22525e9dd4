"""Benchmark: this checkout against another commit, in one run, on the compiled backend.

The workload is ``host_bench.py``'s (``--launches`` empty kernels on 4 streams, 8
connections). Each round runs both sides once, one after the other, each in a fresh process
(the compiled build is warmed first and not timed); the medians over the rounds and their
ratio are printed with the machine's load, so that a shared, noisy host still gives a fair
comparison.

    python bench/host_bench_vs.py be686b0 [--launches 20000] [--rounds 3]

The other commit is checked out in a temporary git worktree (removed at the end) and imported
from there ahead of this checkout's install.
"""

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys

from worktree import other_commit

ROOT = pathlib.Path(__file__).resolve().parent.parent

CHILD = r'''
import json, sys, time
sys.path.insert(0, {bench!r})
from host_bench import launch_workload
from gpufe.sim.params import load
from gpufe.sim.run import simulate
import gpufe.sim.run as run
p = load("h200")
simulate(launch_workload(200, 4), p, backend="compiled")        # the build, found or made
t = time.perf_counter()
r = simulate(launch_workload({launches}, 4), p, backend="compiled")
print(json.dumps({{"wall": time.perf_counter() - t, "cycles": r.stats["rtl_cycles"],
                  "c_wall": r.stats.get("rtl_wall_s"), "module": run.__file__}}))
'''


def run_side(pythonpath, launches):
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    code = CHILD.format(bench=str(ROOT / "bench"), launches=launches)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"benchmark run failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", help="the commit to compare with (e.g. the one before a change)")
    ap.add_argument("--launches", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with other_commit(args.rev) as other:
        sides = {args.rev: other, "this checkout": ""}
        walls = {k: [] for k in sides}
        for i in range(args.rounds):
            for label, path in sides.items():
                d = run_side(path, args.launches)
                walls[label].append(d["wall"])
                print(f"round {i + 1}: {label:14s} {d['wall']:6.2f} s, {d['cycles']:,} clocked "
                      f"cycles, C loop {d['c_wall']:.2f} s  ({d['module']})", flush=True)
    for label, v in walls.items():
        m = statistics.median(v)
        print(f"{label}: median {m:.2f} s = {args.launches / m:,.0f} launches/s")
    ratio = statistics.median(walls["this checkout"]) / statistics.median(walls[args.rev])
    print(f"ratio this checkout / {args.rev}: {ratio:.3f} (below 1: faster) on "
          f"{platform.machine()}, {os.cpu_count()} cpus, load {os.getloadavg()}")


if __name__ == "__main__":
    main()
