"""Benchmark: the compiled backend against Amaranth's simulator, in one run.

For launch workloads (``bench/host_bench.py``'s: empty kernels on 4 streams, 8 connections)
prints, per backend and with time jumps on and off: wall time, RTL cycles clocked per second,
simulated launches per wall second, and the ratios. Runs that would take too long (a Python
simulator without jumps on a long workload) are left out with ``--pysim-max``.

    python bench/backends_bench.py [--launches 2000 20000] [--pysim-max 2000]
"""

import argparse
import os
import platform
import time

from sim.params import load
from sim.run import simulate
from host_bench import launch_workload


def measure(w, params, backend, jumps):
    t0 = time.perf_counter()
    r = simulate(w, params, backend=backend, jumps=jumps)
    wall = time.perf_counter() - t0
    kernels = sum(1 for x in r.records if x["kind"] == "kernel")
    return {"wall": wall, "cycles": r.stats["rtl_cycles"], "launches": kernels, "result": r}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, nargs="+", default=[2000, 20000])
    ap.add_argument("--pysim-max", type=int, default=2000,
                    help="largest workload to run on Amaranth's simulator")
    ap.add_argument("--no-jumps-max", type=int, default=200,
                    help="largest workload to run with time jumps off")
    args = ap.parse_args()
    params = load("h200")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python "
          f"{platform.python_version()}; params h200, 8 connections")
    for n in args.launches:
        w = launch_workload(n)
        rows = {}
        for backend in ("compiled", "pysim"):
            for jumps in (True, False):
                if backend == "pysim" and n > args.pysim_max:
                    continue
                if not jumps and n > args.no_jumps_max:
                    continue
                rows[backend, jumps] = m = measure(w, params, backend, jumps)
                print(f"  {n:6d} launches  {backend:8s} jumps {'on ' if jumps else 'off'}: "
                      f"wall {m['wall']:8.2f} s, {m['cycles'] / m['wall']:12,.0f} cycles/s, "
                      f"{m['launches'] / m['wall']:10,.1f} launches/s", flush=True)
        c, p = rows.get(("compiled", True)), rows.get(("pysim", True))
        if c and p:
            same = c["result"].records == p["result"].records
            print(f"  {n:6d} launches: compiled / pysim = "
                  f"{(c['launches'] / c['wall']) / (p['launches'] / p['wall']):.0f}x launches/s "
                  f"(timelines identical: {same})")


if __name__ == "__main__":
    main()
