"""The aggregate compute engine against its per-block reference on random programs.

    python bench/compute_fuzz.py --programs 2000 --seed 0

Each program (``sim/testbench/compute_programs.py``, seeded: a GPU shape and kernel launches
with grids from 1 to 100,000 blocks, priorities, occupancy limits, PDL, device-side launches
and context switches) runs on both engines; everything they let out (completions, device
launches, every kernel's start, end, dependency-wait return, trigger and exit, the most kernels
running at once) must be the same. Prints the programs run, the differences, and the time
each engine took; the first differing seeds are listed. Exit status 1 on any difference.
"""

import argparse
import sys
import time

from gpufe.sim.cosim.compute import ComputeEngine, aggregate_applies
from gpufe.sim.cosim.engines import BlockComputeEngine
from gpufe.sim.params import load
from gpufe.sim.testbench.compute_programs import random_program, outcome


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0, help="the first program's seed")
    ap.add_argument("--small", action="store_true", help="no grids over 5,000 blocks")
    args = ap.parse_args()
    params = load("h200")
    ran, differ, skipped, t_ref, t_agg = 0, [], 0, 0.0, 0.0
    blocks = 0
    for seed in range(args.seed, args.seed + args.programs):
        program = random_program(seed, big=not args.small)
        if not aggregate_applies(params.with_overrides(**program.overrides)):
            skipped += 1
            continue
        t0 = time.perf_counter()
        ref = outcome(program, BlockComputeEngine, params)
        t1 = time.perf_counter()
        agg = outcome(program, ComputeEngine, params)
        t2 = time.perf_counter()
        t_ref += t1 - t0
        t_agg += t2 - t1
        ran += 1
        blocks += sum(spec["blocks"] for _, spec in program.launches)
        if ref != agg:
            differ.append(seed)
            print(f"seed {seed}: the engines differ", flush=True)
    print(f"{ran} programs ({skipped} skipped: parameters the aggregate engine does not take), "
          f"{blocks:,} thread blocks; {len(differ)} differ"
          + (f" (seeds {', '.join(map(str, differ[:10]))})" if differ else ""))
    print(f"per-block reference {t_ref:.1f} s, aggregate {t_agg:.1f} s "
          f"({t_ref / max(t_agg, 1e-9):.1f}x)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
