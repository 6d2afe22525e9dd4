"""Size of each RTL block: named signals, flip-flop bits, memory bits (from Amaranth's RTLIL).

    python bench/block_sizes.py [--channels 32] [--fifo-depth 1024]
"""

import argparse
import re

from amaranth.back import rtlil

from gpufe.rtl.config import FrontEndConfig
from gpufe.rtl.doorbell import DoorbellRegisterFile
from gpufe.rtl.fetcher import DmaFetcher
from gpufe.rtl.fifo_sram import PartitionedFifo
from gpufe.rtl.command_processor import CommandProcessor
from gpufe.rtl.syncpoint import SyncpointUnit
from gpufe.rtl.graph_walker import GraphWalker
from gpufe.rtl.frontend import FrontEnd

BLOCKS = (DoorbellRegisterFile, DmaFetcher, PartitionedFifo, CommandProcessor, SyncpointUnit,
          GraphWalker, FrontEnd)


def block_size(component):
    text = rtlil.convert(component)
    named = len(re.findall(r"^\s*wire (?:width \d+ )?(?:(?:input|output) \d+ )?\\", text, re.M))
    ff_bits = sum(int(w) for w in re.findall(
        r"cell \$(?:a?dff|sdff|dffe)\b[^\n]*\n\s*parameter \\WIDTH (\d+)", text))
    mem_bits = sum(int(w) * int(s) for w, s in re.findall(r"memory width (\d+) size (\d+)", text))
    return named, ff_bits, mem_bits


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--channels", type=int, default=32)
    p.add_argument("--fifo-depth", type=int, default=1024)
    args = p.parse_args()
    cfg = FrontEndConfig(channels=args.channels, fifo_depth=args.fifo_depth)
    print(f"{'block':24s} {'signals':>8s} {'FF bits':>8s} {'memory bits':>12s}")
    for block in BLOCKS:
        named, ff, mem = block_size(block(cfg))
        print(f"{block.__name__:24s} {named:8d} {ff:8d} {mem:12d}")


if __name__ == "__main__":
    main()
