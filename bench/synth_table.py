"""Resources and Fmax of the FrontEnd on an ECP5 for several sizes: the table in docs/fpga.md.

Runs ``gpufe synth``'s flow (YoWASP Yosys, nextpnr-ecp5, ecppack) once per size, one after
the other, and prints a Markdown table; each run's summary (and its reports and bitstream)
stays under ``--out``/<size>. Not a test: a 32-channel run takes about 40 minutes here,
4 and 8 channels 5 to 8 with 1,024 FIFO dwords.

    python bench/synth_table.py [--board ulx3s-85f] [--sizes 4:1024 8:1024 32:1024 ...]
"""

import argparse
import json
import pathlib
import platform
import os

from gpufe.constraints.boards import board
from gpufe.constraints import flow as synth


def row(s):
    cfg, r = s["config"], s["resources"]
    fmax = min(f["achieved_mhz"] for f in s["fmax"].values())
    cp = s["critical_path"] or {}
    return (f"| {cfg['channels']} | {cfg['fifo_depth']} | {r['luts']['used']:,} | "
            f"{r['flip_flops']['used']:,} | {r['block_rams']['used']} | "
            f"{r.get('lutram_writers', {}).get('used', 0)} | {fmax:.1f} | "
            f"{cp.get('logic_levels', '')} | `{cp.get('start', '')}` -> `{cp.get('end', '')}` | "
            f"{s['seconds'] / 60:.1f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="ulx3s-85f")
    ap.add_argument("--sizes", nargs="+", default=["4:1024", "8:1024", "32:1024", "4:4096",
                                                    "8:4096", "32:4096"],
                    help="channels:fifo_depth pairs")
    ap.add_argument("--out", default="build/synth_table")
    ap.add_argument("--clock-mhz", type=float, default=synth.CLOCK_MHZ)
    args = ap.parse_args()
    b = board(args.board)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus; board {b.name}", flush=True)
    summaries = []
    for size in args.sizes:
        channels, depth = (int(x) for x in size.split(":"))
        out = pathlib.Path(args.out) / f"c{channels}_f{depth}"
        s = synth.run(b, synth.fpga_config(channels, depth), out, clock_mhz=args.clock_mhz)
        summaries.append(s)
        print(synth.format_summary(s), flush=True)
    print("\n| channels | FIFO dwords | LUT4 | FF | DP16KD | LUTRAM | Fmax MHz | logic levels | "
          "critical path | minutes |\n|---|---|---|---|---|---|---|---|---|---|")
    for s in summaries:
        print(row(s))
    (pathlib.Path(args.out) / "table.json").write_text(json.dumps(summaries, indent=1) + "\n")


if __name__ == "__main__":
    main()
