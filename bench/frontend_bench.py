"""Benchmark: FrontEnd in Amaranth's simulator under a steady load of launches.

Prints simulated cycles per wall second with and without VCD writing (the ratio measured in
one run), and dispatched commands per simulated cycle. Not a test: figures depend on the
machine; note it when quoting them.

    python bench/frontend_bench.py [--channels 32] [--active 4] [--cycles 3000]
"""

import argparse
import os
import platform
import tempfile
import time

from gpufe.rtl.config import FrontEndConfig
from gpufe.sim.host.encode import PushBuffer, launch_descriptor
from gpufe.sim.testbench.frontend import FrontEndBench


def loaded_bench(cfg, active, launches_per_segment, block_ns, vcd=None):
    b = FrontEndBench(cfg, vcd=vcd)
    desc = b.put_descriptor(launch_descriptor(block_ns=block_ns, kernel_id=1))
    entries = (1 << cfg.gp_entries_log2_max) - 1
    for c in range(active):
        b.setup_channel(c)
        for _ in range(entries):
            pb = PushBuffer()
            for _ in range(launches_per_segment):
                pb.launch(desc)
            b.submit(c, pb, ring=False)
        b.ring_doorbell(c)
    return b


def measure(cfg, args, vcd):
    b = loaded_bench(cfg, args.active, args.launches_per_segment, args.block_ns, vcd)
    b.run(50)                                   # setup MMIO writes, first fetches
    start_cycle, start_launches = b.cycle, len(b.log.dispatches)
    t0 = time.perf_counter()
    b.run(args.cycles)
    wall = time.perf_counter() - t0
    b.close()
    cycles = b.cycle - start_cycle
    dispatched = len(b.log.dispatches) - start_launches
    return {"wall_s": wall, "cycles": cycles, "cycles_per_s": cycles / wall,
            "dispatch_per_cycle": dispatched / cycles, "dispatched": dispatched}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--channels", type=int, default=32)
    p.add_argument("--fifo-depth", type=int, default=1024)
    p.add_argument("--active", type=int, default=4, help="channels carrying launches")
    p.add_argument("--cycles", type=int, default=3000)
    p.add_argument("--launches-per-segment", type=int, default=8)
    p.add_argument("--block-ns", type=int, default=50)
    args = p.parse_args()
    cfg = FrontEndConfig(channels=args.channels, fifo_depth=args.fifo_depth)
    print(f"FrontEnd {args.channels} channels, FIFO {args.fifo_depth} dwords; {args.active} "
          f"channels of back-to-back launches ({args.block_ns}-cycle kernels)")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python "
          f"{platform.python_version()}, Amaranth pysim")
    plain = measure(cfg, args, None)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.vcd")
        traced = measure(cfg, args, path)
        vcd_bytes = os.path.getsize(path)
    for name, r in (("no VCD", plain), ("with VCD", traced)):
        print(f"  {name:9s} {r['cycles']} cycles in {r['wall_s']:.2f} s: "
              f"{r['cycles_per_s']:,.0f} cycles/s; {r['dispatched']} launches, "
              f"{r['dispatch_per_cycle']:.3f} dispatched per cycle")
    print(f"  VCD costs {plain['cycles_per_s'] / traced['cycles_per_s']:.2f}x "
          f"({vcd_bytes / traced['cycles']:.0f} bytes per cycle)")


if __name__ == "__main__":
    main()
