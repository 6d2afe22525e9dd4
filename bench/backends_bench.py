"""Benchmark: the compiled backend against Amaranth's simulator, in one run.

For launch workloads (``bench/host_bench.py``'s: empty kernels on 4 streams, 8 connections)
prints, per backend and with time jumps on and off: wall time, RTL cycles clocked per second,
simulated cycles per second (clocked + jumped over), simulated launches per wall second, and
the ratios, all from this one run. Runs that would take too long are left out: Amaranth's
simulator above ``--pysim-max`` launches, and without jumps above ``--pysim-no-jumps-max``
(it clocks every idle cycle, about 20,000 a launch: 200 s for 40 launches).

    python bench/backends_bench.py [--launches 20 2000 20000] [--pysim-max 20000] [--repeat 3]
"""

import argparse
import os
import platform
import statistics
import time

from gpufe.sim.params import load
from gpufe.sim.run import simulate
from host_bench import launch_workload


def measure(w, params, backend, jumps, repeat=1):
    """One simulation, timed; with ``repeat``, that many, their wall times kept in ``walls``
    (``wall`` is their median)."""
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = simulate(w, params, backend=backend, jumps=jumps)
        walls.append(time.perf_counter() - t0)
    kernels = sum(1 for x in r.records if x["kind"] == "kernel")
    st = r.stats
    simulated = st["rtl_cycles"] + st["jumped_cycles"] + st.get("stable_cycles_skipped", 0)
    return {"wall": statistics.median(walls), "walls": walls, "cycles": st["rtl_cycles"],
            "simulated": simulated, "launches": kernels, "result": r}


def show(n, backend, jumps, m):
    spread = (f" (median of {len(m['walls'])}: "
              + " ".join(f"{x:.2f}" for x in m["walls"]) + ")") if len(m["walls"]) > 1 else ""
    print(f"  {n:6d} launches  {backend:8s} jumps {'on ' if jumps else 'off'}: "
          f"wall {m['wall']:8.2f} s, {m['cycles']:10,d} cycles clocked "
          f"({m['cycles'] / m['wall']:9,.0f}/s), "
          f"{m['simulated'] / m['wall']:13,.0f} simulated cycles/s, "
          f"{m['launches'] / m['wall']:8,.1f} launches/s{spread}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, nargs="+", default=[20, 2000, 20000])
    ap.add_argument("--pysim-max", type=int, default=20000,
                    help="largest workload to run on Amaranth's simulator")
    ap.add_argument("--pysim-no-jumps-max", type=int, default=20,
                    help="largest workload to run on Amaranth's simulator with jumps off")
    ap.add_argument("--repeat", type=int, default=3,
                    help="compiled runs with jumps on are this many before the Python "
                         "simulator's runs and as many after, their median wall time counts "
                         "(they are short, so a moment of load elsewhere would skew one); "
                         "every other run is one")
    args = ap.parse_args()
    params = load("h200")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python "
          f"{platform.python_version()}; params h200, 8 connections; load average "
          f"{os.getloadavg()[0]:.2f} (1 min) at start")
    simulate(launch_workload(8), params, backend="compiled")     # build (or load) it first
    for n in args.launches:
        w = launch_workload(n)
        rows = {}
        # the short compiled runs are sampled before and after the long Python-simulator
        # runs and their median taken: the machine's speed drifts over the latter's minutes
        rows["compiled", True] = before = measure(w, params, "compiled", True, args.repeat)
        rows["compiled", False] = measure(w, params, "compiled", False)
        show(n, "compiled", False, rows["compiled", False])
        for jumps in (True, False):
            if n > args.pysim_max or (not jumps and n > args.pysim_no_jumps_max):
                continue
            rows["pysim", jumps] = measure(w, params, "pysim", jumps)
            show(n, "pysim", jumps, rows["pysim", jumps])
        if ("pysim", True) in rows:
            after = measure(w, params, "compiled", True, args.repeat)
            before["walls"] += after["walls"]
            before["wall"] = statistics.median(before["walls"])
        show(n, "compiled", True, before)
        for jumps in (True, False):
            c, p = rows.get(("compiled", jumps)), rows.get(("pysim", jumps))
            if c and p:
                same = c["result"].records == p["result"].records
                print(f"  {n:6d} launches, jumps {'on ' if jumps else 'off'}: compiled / pysim = "
                      f"{(c['launches'] / c['wall']) / (p['launches'] / p['wall']):.1f}x "
                      f"launches/s (timelines identical: {same})")
        c, c0 = rows.get(("compiled", True)), rows.get(("compiled", False))
        if c and c0:
            print(f"  {n:6d} launches, compiled: jumps on / off = {c0['wall'] / c['wall']:.1f}x "
                  f"(timelines identical: {c['result'].records == c0['result'].records})")


    print(f"load average {os.getloadavg()[1]:.2f} over the last 5 min at the end")


if __name__ == "__main__":
    main()
