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

    if bool(args.workload) == bool(args.from_trace):
        raise ValueError("give a workload file or --from-trace TRACE (one of them)")
    if args.as_graph and not args.from_trace:
        raise ValueError("--as-graph goes with --from-trace")
    params = load(args.params)
    backend = args.backend
    if backend == "compiled" and args.vcd:
        print("gpufe: --vcd needs the Python simulator; using --backend pysim", file=sys.stderr)
        backend = "pysim"
    progress = sys.stderr.isatty() or args.progress
    if args.from_trace:
        return _run_from_trace(args, params, backend, progress)
    workload = load_workload(args.workload)
    result = simulate(workload, params, args.max_connections, vcd=args.vcd or None,
                      jumps=not args.no_jumps, progress=progress,
                      backend=backend, profiler=args.profiler)
    if args.timeline:
        write_jsonl(result.records, args.timeline)
    if args.perfetto:
        with open(args.perfetto, "w") as f:
            json.dump(perfetto(result.records), f)
    print_summary(result, outputs={"timeline": args.timeline, "perfetto": args.perfetto,
                                   "vcd": args.vcd})
    return 0


def _run_from_trace(args, params, backend, progress):
    from .replay import replay, step_summary
    from .timeline import write_jsonl
    from .traces import read_trace
    from .metrics import metrics
    measured = metrics(read_trace(args.from_trace))
    runs = [("eager", False)] + ([("graph", True)] if args.as_graph else [])
    print(f"gpufe run --from-trace {args.from_trace} (profiler {args.profiler}, params "
          f"{params.name})")
    print(f"  measured (trace): {measured.get('kernels', 0)} kernels, GPU span "
          f"{measured.get('gpu_span_us', 0):,.1f} us")
    out = {}
    for label, as_graph in runs:
        result, steps = replay(args.from_trace, params, as_graph=as_graph,
                               profiler=args.profiler, backend=backend, progress=progress)
        s = out[label] = step_summary(result, steps)
        print(f"  model, {label:5s}: {s['kernels']} kernels in {steps} steps; "
              f"{s['per_step_us']:,.1f} us per step, GPU span {s['gpu_span_us']:,.1f} us, "
              f"wall {s['wall_us']:,.1f} us (simulated in {result.wall_s:.1f} s)")
        if args.timeline and (as_graph or not args.as_graph):
            write_jsonl(result.records, args.timeline)
    if args.as_graph:
        e, g = out["eager"]["per_step_us"], out["graph"]["per_step_us"]
        print(f"  CUDA graphs would take {g:,.1f} us per step instead of {e:,.1f} "
              f"({100 * (1 - g / e):.0f}% less)")
    return 0


def cmd_metrics(args):
    from .traces import read_trace
    from .metrics import metrics, format_metrics
    for path in args.trace:
        records = read_trace(path)
        h = records[0]
        print(f"{path}: {h.get('scenario', '?')} on {h.get('device', '?')}")
        print(format_metrics(metrics(records)))
    return 0


def cmd_validate(args):
    from .params import load
    from .scenarios import scenario_names
    from . import validate as v
    params = load(args.params)
    names = scenario_names()
    if args.scenarios:
        unknown = sorted(set(args.scenarios) - set(names))
        if unknown:
            raise ValueError(f"unknown scenarios: {', '.join(unknown)} (known: "
                             f"{', '.join(names)})")
        names = args.scenarios
    print(f"gpufe validate: {len(names)} scenarios, params {params.name}, backend "
          f"{args.backend}", file=sys.stderr)
    rows = v.validate(params, names, backend=args.backend,
                      log=lambda m: print(m, file=sys.stderr))
    print(v.format_table(rows))
    if args.json:
        v.write_json(rows, args.json)
    if args.plot:
        v.plot(rows, args.plot)
    return 0


def cmd_calibrate(args):
    import pathlib
    from .calibrate import calibrate, write
    params, residuals = calibrate(args.base, backend=args.backend,
                                  log=lambda m: print(m, file=sys.stderr))
    out = pathlib.Path(args.out)
    params = params.with_overrides(name=out.stem)
    res = out.with_name(f"{out.stem}_residuals.json")
    write(params, residuals, out, res)
    print(f"gpufe calibrate: wrote {out} and {res}")
    return 0


def cmd_synth(args):
    from constraints.boards import board
    from . import synth
    b = board(args.board)
    cfg = synth.fpga_config(args.channels, args.fifo_depth, args.graph_nodes, args.graph_edges)
    if args.check:
        print(synth.check(cfg))
        return 0
    try:
        summary = synth.run(b, cfg, args.out, seed=args.seed, clock_mhz=args.clock_mhz,
                            router=args.router,
                            log=lambda m: print(m, file=sys.stderr))
    except synth.SynthError as e:
        print(f"gpufe synth: {e}", file=sys.stderr)
        return 1
    print(synth.format_summary(summary))
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
    run.add_argument("workload", nargs="?", help="workload file (see examples/)")
    run.add_argument("--from-trace", metavar="TRACE",
                     help="replay a profiler trace (Kineto JSON or fe_trace JSONL) instead")
    run.add_argument("--as-graph", action="store_true",
                     help="with --from-trace: also run the launches between host "
                          "synchronisations as one CUDA graph, and compare")
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
    run.add_argument("--profiler", choices=("off", "cupti"), default="off",
                     help="run as under CUPTI activity tracing (as the reference traces were "
                          "taken: cupti) or without a profiler (off, default)")
    run.set_defaults(func=cmd_run)

    met = sub.add_parser("metrics", help="print the metrics of traces (fe_trace JSONL, Kineto "
                                         "JSON or a gpufe timeline; .gz too)")
    met.add_argument("trace", nargs="+")
    met.set_defaults(func=cmd_metrics)

    val = sub.add_parser("validate", help="run every calibration scenario and compare it with "
                                          "its H200 trace, metric by metric")
    val.add_argument("--params", default="h200", help="parameter set name or JSON file")
    val.add_argument("--json", help="write the rows as JSON")
    val.add_argument("--plot", help="write a PNG of model against measured")
    val.add_argument("--scenarios", nargs="+", help="only these scenarios")
    val.add_argument("--backend", choices=("pysim", "compiled"), default="compiled")
    val.set_defaults(func=cmd_validate)

    cal = sub.add_parser("calibrate", help="fit the parameter set to the reference scenarios "
                                           "and write it, with the fit's residuals beside it")
    cal.add_argument("--base", default="h200", help="parameter set to start from")
    cal.add_argument("--out", default="h200.json",
                     help="parameter file to write (default %(default)s; the shipped set is "
                          "sim/params/h200.json)")
    cal.add_argument("--backend", choices=("pysim", "compiled"), default="compiled")
    cal.set_defaults(func=cmd_calibrate)

    from constraints.boards import BOARDS
    from .synth import FPGA_GRAPH_NODES, FPGA_GRAPH_EDGES, CLOCK_MHZ, ROUTER, ROUTERS
    syn = sub.add_parser("synth", help="synthesize, place and route the FrontEnd (with an "
                                       "on-chip traffic generator) for an FPGA board with the "
                                       "open toolchain; print resources and Fmax")
    syn.add_argument("--board", default="ulx3s-85f", choices=sorted(BOARDS))
    syn.add_argument("--channels", type=int, default=None,
                     help=f"hardware channels (default {FrontEndConfig.channels})")
    syn.add_argument("--fifo-depth", type=int, default=None,
                     help=f"FIFO SRAM dwords (default {FrontEndConfig.fifo_depth})")
    syn.add_argument("--graph-nodes", type=int, default=FPGA_GRAPH_NODES,
                     help="graph walker nodes (default %(default)s; the simulation default "
                          f"{FrontEndConfig.graph_nodes_max} needs more block RAM than an ECP5)")
    syn.add_argument("--graph-edges", type=int, default=FPGA_GRAPH_EDGES)
    syn.add_argument("--clock-mhz", type=float, default=CLOCK_MHZ,
                     help="front-end clock from the board's PLL (default %(default)s; 0: the "
                          "board oscillator itself)")
    syn.add_argument("--seed", type=int, default=1, help="nextpnr placement seed")
    syn.add_argument("--router", choices=ROUTERS, default=ROUTER,
                     help="nextpnr's router (default %(default)s)")
    syn.add_argument("--out", default="build/synth", help="directory for reports and bitstream")
    syn.add_argument("--check", action="store_true",
                     help="only elaborate the design and convert it (seconds, no tools run)")
    syn.set_defaults(func=cmd_synth)

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
