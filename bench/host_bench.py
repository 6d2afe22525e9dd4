"""Benchmark: simulated kernel launches per wall second through host model + RTL.

The workload: ``--launches`` empty kernels spread over 4 streams (each stream a chain, so
every launch carries its syncpoint acquire and release), 8 connections, then a device
synchronize. Prints wall time, RTL cycles stepped, simulated time, and launches per second.
Not a test: figures depend on the machine; note it when quoting them.

    python bench/host_bench.py [--launches 2000] [--streams 4] [--no-jumps]
"""

import argparse
import os
import platform

from gpufe.sim.params import load
from gpufe.sim.run import simulate
from gpufe.sim.host.workload import parse_workload


def launch_workload(launches, streams=4, block_ns=0):
    names = [f"s{i}" for i in range(streams)]
    body = [{"op": "launch_kernel", "stream": n, "kernel": "k_empty", "block_ns": block_ns}
            for n in names]
    program = ([{"op": "stream_create", "name": n} for n in names]
               + [{"op": "mark", "what": "rep_begin"},
                  {"op": "repeat", "count": launches // streams, "body": body},
                  {"op": "device_synchronize"}, {"op": "mark", "what": "rep_end"}])
    return parse_workload({"name": f"launches_{launches}", "max_connections": 8,
                           "program": program}, "bench")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--params", default="h200")
    ap.add_argument("--no-jumps", action="store_true")
    args = ap.parse_args()
    params = load(args.params)
    w = launch_workload(args.launches, args.streams)
    print(f"{args.launches} launches on {args.streams} streams, params {params.name}, "
          f"time jumps {'off' if args.no_jumps else 'on'}; backend pysim")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python "
          f"{platform.python_version()}")
    r = simulate(w, params, jumps=not args.no_jumps, progress=True)
    st = r.stats
    kernels = sum(1 for x in r.records if x["kind"] == "kernel")
    sim_us = r.records[-1]["t"] / 1e3
    print(f"  wall {r.wall_s:.1f} s; simulated {sim_us:.0f} us; RTL cycles stepped "
          f"{st['rtl_cycles']} ({st['rtl_cycles'] / r.wall_s:,.0f}/s), {st['jumps']} jumps")
    print(f"  {kernels} kernels: {kernels / r.wall_s:.1f} simulated launches per wall second")


if __name__ == "__main__":
    main()
