"""The ``gpufe`` command."""

import argparse
import sys

from rtl.config import FrontEndConfig


def _config(args):
    return FrontEndConfig(channels=args.channels, fifo_depth=args.fifo_depth)


def cmd_demo(args):
    from .demo import run_demo
    run_demo(_config(args), vcd=args.vcd)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="gpufe", description=(
        "Cycle-approximate model of a GPU command front end (Amaranth RTL)."))
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run the bundled front-end demo through the RTL, print "
                                       "what happened and write a VCD")
    demo.add_argument("--vcd", default="gpufe_demo.vcd",
                      help="waveform to write (default %(default)s; '' for none)")
    demo.add_argument("--channels", type=int, default=FrontEndConfig.channels)
    demo.add_argument("--fifo-depth", type=int, default=FrontEndConfig.fifo_depth)
    demo.set_defaults(func=cmd_demo)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as e:
        print(f"gpufe: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
