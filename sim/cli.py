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


def cmd_run(args):
    import json
    from .params import load
    from .run import simulate
    from .timeline import write_jsonl, perfetto
    from .summary import print_summary
    from .workload import load_workload

    workload = load_workload(args.workload)
    params = load(args.params)
    backend = args.backend
    if backend == "compiled" and args.vcd:
        print("gpufe: --vcd needs the Python simulator; using --backend pysim", file=sys.stderr)
        backend = "pysim"
    result = simulate(workload, params, args.max_connections, vcd=args.vcd or None,
                      jumps=not args.no_jumps, progress=sys.stderr.isatty() or args.progress,
                      backend=backend)
    if args.timeline:
        write_jsonl(result.records, args.timeline)
    if args.perfetto:
        with open(args.perfetto, "w") as f:
            json.dump(perfetto(result.records), f)
    print_summary(result, outputs={"timeline": args.timeline, "perfetto": args.perfetto,
                                   "vcd": args.vcd})
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

    run = sub.add_parser("run", help="run a workload (JSON) through the host model and the RTL")
    run.add_argument("workload", help="workload file (see examples/)")
    run.add_argument("--params", default="h200", help="parameter set name or JSON file")
    run.add_argument("--max-connections", type=int, default=None,
                     help="CUDA_DEVICE_MAX_CONNECTIONS (1..32); default: the workload's, "
                          "else the parameter set's")
    run.add_argument("--timeline", help="write the timeline as JSONL (reference trace schema)")
    run.add_argument("--perfetto", help="write a Chrome/Perfetto trace JSON")
    run.add_argument("--vcd", help="write a VCD of the RTL (large for long runs)")
    run.add_argument("--backend", choices=("pysim", "compiled"), default="compiled",
                     help="RTL simulator: the design compiled by Yosys CXXRTL (compiled, "
                          "default: built once per parameter set, then cached; falls back to "
                          "pysim without a compiler) or Amaranth's own (pysim)")
    run.add_argument("--no-jumps", action="store_true",
                     help="step the RTL every cycle instead of jumping over idle time")
    run.add_argument("--progress", action="store_true", help="progress bar even when not a tty")
    run.set_defaults(func=cmd_run)

    args = parser.parse_args(argv)
    if getattr(args, "max_connections", None) is not None and \
            not 1 <= args.max_connections <= 32:
        parser.error("--max-connections must be 1..32")
    from .cosim import Deadlock
    try:
        return args.func(args)
    except (ValueError, Deadlock) as e:
        print(f"gpufe: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
