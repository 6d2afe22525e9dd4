"""The ``gpufe`` command."""

import argparse
import math
import os
import pathlib
import stat
import sys

from gpufe.rtl.config import FrontEndConfig


class UsageError(ValueError):
    """Options that do not go together, or an output that cannot be written."""


def _config(args):
    try:
        return FrontEndConfig(channels=args.channels, fifo_depth=args.fifo_depth)
    except ValueError as e:
        raise UsageError(f"--channels {args.channels} --fifo-depth {args.fifo_depth}: "
                         f"{e}") from None


def check_outputs(outputs, inputs=()):
    """Before any work: every output path (option -> path, None for not given) can be
    written (its folder exists, it is not a folder, a file can be created or appended there),
    no two outputs are one file, and no output is one of the ``inputs``."""
    seen = {}
    for opt, path in outputs.items():
        if path is None:
            continue
        if path == "":
            raise UsageError(f"{opt}: empty file name")
        p = pathlib.Path(path)
        key = os.path.abspath(path)
        if key in seen:
            raise UsageError(f"{opt} and {seen[key]} both write {path}")
        seen[key] = opt
        for i in inputs:
            if i and os.path.abspath(i) == key:
                raise UsageError(f"{opt} {path} would overwrite an input file")
        parent = p.parent
        if not parent.exists():
            raise UsageError(f"{opt} {path}: folder {parent} does not exist")
        if not parent.is_dir():
            raise UsageError(f"{opt} {path}: {parent} is not a folder")
        if p.is_dir():
            raise UsageError(f"{opt} {path} is a folder")
        try:
            if p.exists() and not stat.S_ISREG(p.stat().st_mode):
                continue              # /dev/null, a pipe: written as they are
            existed = p.exists()
            with open(p, "a"):
                pass
            if not existed:
                p.unlink()
        except OSError as e:
            raise UsageError(f"{opt} {path}: cannot write ({e.strerror or e})") from None


def check_out_dir(opt, path):
    """A folder that will be made if missing: it, or its nearest existing parent, must be a
    folder one can write into."""
    p = pathlib.Path(path)
    if p.exists():
        if not p.is_dir():
            raise UsageError(f"{opt} {path} is not a folder")
        probe = p
    else:
        probe = p.parent
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if not probe.is_dir():
            raise UsageError(f"{opt} {path}: {probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"{opt} {path}: cannot write into {probe}")


def cmd_demo(args):
    from gpufe.sim.testbench.demo import run_demo
    cfg = _config(args)
    check_outputs({"--vcd": args.vcd or None})
    run_demo(cfg, vcd=args.vcd)
    return 0


def cmd_run(args):
    import json
    from gpufe.sim.params import load
    from gpufe.sim.run import simulate
    from gpufe.sim.analysis.timeline import write_jsonl, perfetto
    from gpufe.sim.analysis.summary import print_summary
    from gpufe.sim.host.workload import load_workload

    from gpufe.sim.params import apply_settings, check_config
    from gpufe.sim.host.workload import check_run
    if bool(args.workload) == bool(args.from_trace):
        raise UsageError("give a workload file or --from-trace TRACE (one of them)")
    if args.as_graph and not args.from_trace:
        raise UsageError("--as-graph goes with --from-trace")
    if args.pdl and not args.from_trace:
        raise UsageError("--pdl goes with --from-trace")
    # everything given is checked before anything runs
    check_outputs({"--timeline": args.timeline, "--perfetto": args.perfetto,
                   "--vcd": args.vcd}, inputs=(args.workload, args.from_trace,
                                              args.params if pathlib.Path(args.params).suffix
                                              else None))
    params = apply_settings(load(args.params), args.set)
    vcd = _vcd_target(args, params)
    if args.from_trace:
        trace_run = _prepare_from_trace(args, params)
    else:
        workload = load_workload(args.workload)
        mc = args.max_connections or workload["max_connections"] or params.max_connections
        check_config(params, mc, args.params,
                     processes=[p["max_connections"] or mc
                                for p in workload.get("processes") or ()] or None)
        check_run(workload, params, args.workload, max_connections=mc,
                  limits=not args.no_limits)
    backend = args.backend
    if backend == "compiled" and args.vcd:
        print("gpufe: --vcd needs the Python simulator; using --backend pysim", file=sys.stderr)
        backend = "pysim"
    progress = sys.stderr.isatty() or args.progress
    if args.from_trace:
        return _run_from_trace(args, params, backend, progress, *trace_run)
    # the timeline is streamed out as the run goes (memory bounded however long it is; the
    # same JSONL and summary); a Perfetto trace is made from the whole list of records
    bounded = not args.perfetto
    result = simulate(workload, params, args.max_connections, vcd=vcd,
                      jumps=not args.no_jumps, progress=progress,
                      backend=backend, profiler=args.profiler, bounded=bounded,
                      timeline=args.timeline if bounded else None)
    if args.timeline and not bounded:
        write_jsonl(result.records, args.timeline)
    if args.perfetto:
        with open(args.perfetto, "w") as f:
            json.dump(perfetto(result.records, result.stream_names), f)
    print_summary(result, outputs={"timeline": args.timeline, "perfetto": args.perfetto,
                                   "vcd": args.vcd}, as_json=args.json)
    return 0


def _vcd_target(args, params):
    """What --vcd writes: None, the path (the whole run), or a window of the run
    (--vcd-from/--vcd-to, a :class:`gpufe.sim.cosim.backend.VcdWindow`)."""
    if args.vcd_from is None and args.vcd_to is None:
        return args.vcd or None
    if not args.vcd:
        raise UsageError("--vcd-from and --vcd-to go with --vcd FILE")
    from gpufe.sim.cosim.backend import VcdWindow
    from gpufe.sim.cosim.events import ps
    try:
        window = VcdWindow(args.vcd, args.vcd_from or 0, args.vcd_to)
    except ValueError as e:
        raise UsageError(f"--vcd-from/--vcd-to: {e}") from None
    first, last = window.cycles(ps(params.cycle_ns))
    if first > last:
        raise UsageError(f"--vcd-from {window.from_ns} --vcd-to {window.to_ns}: no RTL cycle "
                         f"begins in between (a cycle is {params.cycle_ns:g} ns)")
    return window


def _prepare_from_trace(args, params):
    """The trace read and its replays prepared and checked: (measured per step, steps, runs),
    each run (label, as_graph, profiler, workload, the parameters it runs with). Eager and
    (with --as-graph) as a graph, each profiled and unprofiled; the run of --profiler comes
    last of its kind."""
    from gpufe.sim.params import check_config
    from gpufe.sim.analysis.replay import prepare, per_step_us, replay_params
    from gpufe.sim.analysis.traces import read_trace_located
    trace = read_trace_located(args.from_trace)
    runs, steps = [], 1
    other = "off" if args.profiler == "cupti" else "cupti"
    for as_graph in (False, True) if args.as_graph else (False,):
        if args.pdl:
            # what PDL would save: the stream launches with the attribute, unprofiled
            w, steps = prepare(args.from_trace, params, as_graph=as_graph, profiler="off",
                               max_connections=args.max_connections,
                               limits=not args.no_limits, trace=trace, pdl=True)
            label = ("as graph" if as_graph else "eager") + ", unprofiled, PDL"
            runs.append((label, as_graph, "off", w, replay_params(trace[0], params, "off")))
        for profiler in (other, args.profiler):
            w, steps = prepare(args.from_trace, params, as_graph=as_graph, profiler=profiler,
                               max_connections=args.max_connections,
                               limits=not args.no_limits, trace=trace)
            check_config(params, args.max_connections or w["max_connections"]
                         or params.max_connections, args.params)
            label = ("as graph" if as_graph else "eager") + (", profiled" if profiler == "cupti"
                                                             else ", unprofiled")
            runs.append((label, as_graph, profiler, w,
                         replay_params(trace[0], params, profiler)))
    return per_step_us(trace[0], steps), steps, runs


def _run_from_trace(args, params, backend, progress, measured, steps, runs):
    """Every replay of the trace, and one screen: time per step, measured (the trace, under
    its profiler) and the model's, profiled and not, eager and as a graph. The timeline, trace
    and VCD written are the last run's: --profiler's, as a graph with --as-graph."""
    import json
    from gpufe.sim.analysis.replay import step_summary
    from gpufe.sim.run import simulate
    from gpufe.sim.analysis.timeline import write_jsonl, perfetto
    # --json: the same figures as one JSON object, printed at the end instead of the lines
    say = (lambda *a: None) if args.json else print
    say(f"gpufe run --from-trace {args.from_trace} (params {params.name}; {steps} steps)")
    say(f"  {'measured (the trace, profiled)':34s} {measured:12,.1f} us a step")
    notes = runs[0][3].get("replay_notes") if runs else None
    if notes and notes.get("unlaunched"):
        # a recorder's quirk (kernels launched through the driver API without a record):
        # said once, the same for every run
        say(f"  {notes['unlaunched']} kernels/copies without a launch record "
            f"({notes['sharing_correlation']} sharing a correlation id): "
            f"{notes['launched_after_stream_previous']} launched after their stream's previous "
            f"call, {notes['launched_after_call_before']} after the call before them, "
            f"{notes['skipped']} skipped")
    out = {}
    for i, (label, as_graph, profiler, w, run_params) in enumerate(runs):
        last = i == len(runs) - 1          # the run whose timeline, trace and VCD are written
        result = simulate(w, run_params, args.max_connections,
                          vcd=_vcd_target(args, params) if last else None,
                          jumps=not args.no_jumps, progress=progress,
                          backend=backend, profiler=profiler)
        s = out[label] = dict(step_summary(result, steps), wall_s=result.wall_s)
        vs = (f" ({100 * (s['per_step_us'] / measured - 1):+.1f}% against the trace)"
              if profiler == "cupti" and not as_graph and measured > 0 else "")
        say(f"  {'model, ' + label:34s} {s['per_step_us']:12,.1f} us a step, "
            f"{s['kernels_per_step']:,.1f} kernels{vs} (simulated in {result.wall_s:.1f} s)")
        if last and args.timeline:
            write_jsonl(result.records, args.timeline)
        if last and args.perfetto:
            with open(args.perfetto, "w") as f:
                json.dump(perfetto(result.records, result.stream_names), f)
    def saving(what, new, old):
        say(f"  {what}: {new:,.1f} us a step instead of {old:,.1f}"
            + (f" ({100 * (1 - new / old):.0f}% less)" if old > 0 else ""))
    if args.as_graph:
        for regime in ("profiled", "unprofiled"):
            saving(f"CUDA graphs, {regime}", out[f"as graph, {regime}"]["per_step_us"],
                   out[f"eager, {regime}"]["per_step_us"])
    if args.pdl:
        for kind in ("eager", "as graph") if args.as_graph else ("eager",):
            saving(f"PDL, {kind}, unprofiled", out[f"{kind}, unprofiled, PDL"]["per_step_us"],
                   out[f"{kind}, unprofiled"]["per_step_us"])
    if args.json:
        print(json.dumps({"trace": args.from_trace, "profiler": args.profiler,
                          "params": params.name, "steps": steps,
                          "measured": {"per_step_us": measured}, "model": out}, indent=1))
    return 0


def cmd_params(args):
    from gpufe.sim.params import load, apply_settings, format_params, format_sets
    if args.name is None and not args.set:
        print(format_sets())
    else:
        print(format_params(apply_settings(load(args.name or "h200"), args.set)))
    return 0


def cmd_metrics(args):
    from gpufe.sim.analysis.traces import read_trace
    from gpufe.sim.analysis.metrics import metrics, format_metrics
    traces = [(path, read_trace(path)) for path in args.trace]     # all read before any output
    for path, records in traces:
        h = records[0]
        print(f"{path}: {h.get('scenario', '?')} on {h.get('device', '?')}")
        print(format_metrics(metrics(records)))
    return 0


def cmd_validate(args):
    from gpufe.sim.params import load
    from gpufe.sim.analysis import validate as v
    check_outputs({"--json": args.json, "--plot": args.plot}, inputs=(args.params,))
    from gpufe.sim.params import apply_settings
    params = apply_settings(load(args.params), args.set)
    if args.cv or args.family:
        rows = _cross_validate(args, params)
    else:
        names = v.validation_names()
        if args.scenarios:
            unknown = sorted(set(args.scenarios) - set(names))
            if unknown:
                raise UsageError(f"unknown scenarios: {', '.join(unknown)} (known: "
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


def _cross_validate(args, params):
    """``gpufe validate --cv``'s rows."""
    from gpufe.sim.analysis import crossval as cv
    if args.scenarios:
        raise UsageError("--cv predicts each family's left-out sizes: it takes --family, "
                         "not --scenarios")
    try:
        families = [cv.family(f) for f in args.family] if args.family else None
    except KeyError as e:
        raise UsageError(e.args[0])
    print(f"gpufe validate --cv: {len(families or cv.FAMILIES)} families, params "
          f"{params.name}, backend {args.backend}", file=sys.stderr)
    return cv.cv_rows(params, families, backend=args.backend,
                      log=lambda m: print(m, file=sys.stderr))


def cmd_calibrate(args):
    from gpufe.sim.analysis.calibrate import calibrate, write
    from gpufe.sim.params import load
    out = pathlib.Path(args.out)
    res = out.with_name(f"{out.stem}_residuals.json")
    check_outputs({"--out": args.out, "--out (residuals)": str(res)}, inputs=(args.base,))
    from gpufe.sim.params import apply_settings
    base = apply_settings(load(args.base), args.set)   # a bad set is said now, not after the fit
    params, residuals = calibrate(base, backend=args.backend,
                                  log=lambda m: print(m, file=sys.stderr))
    params = params.with_overrides(name=out.stem)
    write(params, residuals, out, res)
    print(f"gpufe calibrate: wrote {out} and {res}")
    return 0


def cmd_build(args):
    import time
    from gpufe.sim.params import load, apply_settings, check_config
    from gpufe.sim.cosim.compiled import build_for, BackendUnavailable
    params = apply_settings(load(args.params), args.set)
    cfg = check_config(params, source=args.params)
    what = (f"the front end of params {params.name} ({cfg.channels} hardware channels, "
            f"{cfg.pbdmas} PBDMA{'s' if cfg.pbdmas > 1 else ''}: every max_connections and "
            f"process count)")
    t0 = time.monotonic()
    try:
        lib, cached = build_for(params, log=lambda m: print(m, file=sys.stderr))
    except BackendUnavailable as e:
        print(f"gpufe build: {what}: {e}", file=sys.stderr)
        return 1
    print(f"gpufe build: {what}: " + (f"cached, {lib}" if cached else
                                      f"built in {time.monotonic() - t0:.0f} s, {lib}"))
    return 0


def cmd_prove(args):
    from gpufe.rtl.formal import proofs_of, blocks
    from gpufe.sim.prove import prove, report, ToolMissing
    if args.list:
        for p in proofs_of():
            how = "k-induction" if p.mode == "prove" else "bounded"
            print(f"{p.block + '.' + p.name:32s} {how}, depth {p.depth}; covers to "
                  f"{p.cover_depth} cycles  [{p.sizes}]")
        return 0
    try:
        chosen = proofs_of(args.blocks)
    except ValueError as e:
        raise UsageError(str(e)) from None
    check_out_dir("--vcd-dir", args.vcd_dir)
    bad = 0
    for proof in chosen:
        try:
            r = prove(proof, args.vcd_dir)
        except ToolMissing as e:
            raise UsageError(str(e)) from None
        print(report(r), flush=True)
        bad += not r.ok
    print(f"{len(chosen) - bad} of {len(chosen)} proofs hold"
          + (f"; {bad} do not" if bad else ""))
    return 1 if bad else 0


def cmd_synth(args):
    from gpufe.constraints.boards import board
    from gpufe.constraints import flow as synth
    b = board(args.board)
    try:
        cfg = synth.fpga_config(args.channels, args.fifo_depth, args.graph_nodes,
                                args.graph_edges)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if not args.check:
        check_out_dir("--out", args.out)
        if args.clock_mhz:
            from gpufe.constraints.ecp5_pll import pll_params
            f_in = b.make_platform().default_clk_frequency / 1e6
            try:
                pll_params(f_in, args.clock_mhz)
            except ValueError as e:
                raise UsageError(f"--clock-mhz {args.clock_mhz:g}: {e}") from None
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


def _int_in(lo, hi):
    """argparse type: an integer lo..hi."""
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{v} is not in {lo}..{hi}")
        return v
    return parse


def _mhz(text):
    """argparse type: a finite frequency >= 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v) or not 0 <= v <= 1000:
        raise argparse.ArgumentTypeError(f"{text} is not a frequency 0..1000 MHz")
    return v


#: errors that are about what the user gave (printed as one line, exit status 2)
def _user_errors():
    from gpufe.sim.cosim.harness import Deadlock
    from gpufe.sim.params import ParamsError
    from gpufe.sim.analysis.scenarios import ScenarioError
    from gpufe.sim.analysis.traces import TraceError
    from gpufe.sim.host.workload import WorkloadError, ProgramError
    return (UsageError, WorkloadError, TraceError, ParamsError, ProgramError, ScenarioError,
            Deadlock)


def _internal_error(e):
    """One line that says a bug in gpufe (not the input) stopped it, and where."""
    import traceback
    frames = traceback.extract_tb(e.__traceback__)
    here = ""
    if frames:
        f = frames[-1]
        try:
            name = os.path.relpath(f.filename)
        except ValueError:
            name = f.filename
        here = f" at {name}:{f.lineno} in {f.name}"
    if os.environ.get("GPUFE_TRACEBACK"):
        traceback.print_exception(e)
    msg = str(e).splitlines()[0][:300] if str(e) else ""
    print(f"gpufe: internal error (a bug in gpufe, not in the input): {type(e).__name__}"
          f"{': ' + msg if msg else ''}{here}; please report it with the command and its input "
          f"(GPUFE_TRACEBACK=1 shows the traceback)", file=sys.stderr)


def version():
    """The installed distribution's version (pyproject.toml)."""
    from importlib.metadata import version as dist_version, PackageNotFoundError
    try:
        return dist_version("gpufe")
    except PackageNotFoundError:
        return "unknown (not installed)"


def main(argv=None):
    # names and paths from files go to stdout: never let one that cannot be encoded kill it
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass
    parser = argparse.ArgumentParser(prog="gpufe", description=(
        "Cycle-approximate model of a GPU command front end (Amaranth RTL)."))
    parser.add_argument("--version", action="version", version=f"gpufe {version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run the bundled front-end demo through the RTL, print "
                                       "what happened and write a VCD")
    demo.add_argument("--vcd", default="gpufe_demo.vcd",
                      help="waveform to write (default %(default)s; '' for none)")
    demo.add_argument("--channels", type=_int_in(1, 256), default=FrontEndConfig.channels)
    demo.add_argument("--fifo-depth", type=_int_in(16, 1 << 16),
                      default=FrontEndConfig.fifo_depth)
    demo.set_defaults(func=cmd_demo)

    from gpufe.sim.host.workload import REFERENCE_COMMAND
    run = sub.add_parser("run", help="run a workload (JSON) through the host model and the RTL",
                         epilog="The workload format, every op and field with its type, "
                                "default and meaning: docs/workload.md; print it with "
                                f"'{REFERENCE_COMMAND.split(' >')[0]}' (regenerate the file: "
                                f"'{REFERENCE_COMMAND}').")
    run.add_argument("workload", nargs="?", help="workload file (see examples/ and "
                                                 "docs/workload.md)")
    run.add_argument("--from-trace", metavar="TRACE",
                     help="replay a profiler trace (Kineto JSON or fe_trace JSONL) instead: "
                          "the program it recorded, profiled and unprofiled (the profiler's "
                          "own CPU time taken out), time per step against the trace's; "
                          "--profiler picks the run whose timeline is written")
    run.add_argument("--as-graph", action="store_true",
                     help="with --from-trace: also run the launches between host "
                          "synchronisations as one CUDA graph, and compare")
    run.add_argument("--pdl", action="store_true",
                     help="with --from-trace: also run the trace's stream launches with "
                          "programmatic dependent launch (unprofiled; as a graph too with "
                          "--as-graph): what PDL would save")
    run.add_argument("--params", default="h200", help="parameter set name or JSON file")
    run.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="override one parameter of the set (repeatable; gpufe params lists "
                          "them)")
    run.add_argument("--json", action="store_true",
                     help="print the summary as JSON (the same figures) instead of text")
    run.add_argument("--max-connections", type=_int_in(1, 32), default=None,
                     help="CUDA_DEVICE_MAX_CONNECTIONS (1..32); default: the workload's, "
                          "else the parameter set's")
    run.add_argument("--timeline", help="write the timeline as JSONL (reference trace schema)")
    run.add_argument("--perfetto", help="write a Chrome/Perfetto trace JSON (keeps the whole "
                                        "timeline in memory, about 1 KB a launch; without it "
                                        "the timeline is streamed and memory stays bounded)")
    run.add_argument("--vcd", help="write a VCD of the RTL (large for long runs: see "
                                   "--vcd-from, --vcd-to)")
    run.add_argument("--vcd-from", type=_int_in(0, 10**16), metavar="NS",
                     help="with --vcd: only from this simulated time on, in ns as in the "
                          "timeline and the VCD's now signal (the run goes at full speed "
                          "until then; the VCD's own times count from there)")
    run.add_argument("--vcd-to", type=_int_in(0, 10**16), metavar="NS",
                     help="with --vcd: only up to this simulated time, in ns, included "
                          "(default: the end of the run)")
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
    run.add_argument("--no-limits", action="store_true",
                     help="run a program larger than the model's work limits (1,000,000 ops, "
                          "2,000,000 kernels and copies, 10^8 thread blocks, 10^6 graph "
                          "nodes: hours of simulation); the simulated-time and address-space "
                          "limits stay")
    run.set_defaults(func=cmd_run)

    met = sub.add_parser("metrics", help="print the metrics of traces (fe_trace JSONL, Kineto "
                                         "JSON or a gpufe timeline; .gz too)")
    met.add_argument("trace", nargs="+")
    met.set_defaults(func=cmd_metrics)

    par = sub.add_parser("params", help="list the parameter sets, or every parameter of one "
                                        "with its value, unit and meaning")
    par.add_argument("name", nargs="?", help="parameter set name or JSON file")
    par.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="show the set with this parameter overridden (repeatable)")
    par.set_defaults(func=cmd_params)

    val = sub.add_parser("validate", help="run every calibration scenario and compare it with "
                                          "its H200 trace, metric by metric")
    val.add_argument("--params", default="h200", help="parameter set name or JSON file")
    val.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="override one parameter of the set (repeatable)")
    val.add_argument("--json", help="write the rows as JSON")
    val.add_argument("--plot", help="write a PNG of model against measured")
    val.add_argument("--scenarios", nargs="+", help="only these scenarios")
    val.add_argument("--backend", choices=("pysim", "compiled"), default="compiled")
    val.add_argument("--cv", action="store_true",
                     help="cross-validate: refit each family's parameters without its largest "
                          "size (then its smallest) and predict the left-out scenarios")
    val.add_argument("--family", action="append", metavar="NAME",
                     help="with --cv: only this family (repeatable; implies --cv)")
    val.set_defaults(func=cmd_validate)

    cal = sub.add_parser("calibrate", help="fit the parameter set to the reference scenarios "
                                           "and write it, with the fit's residuals beside it")
    cal.add_argument("--base", default="h200", help="parameter set to start from")
    cal.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="override one parameter of the starting set (repeatable)")
    cal.add_argument("--out", default="h200.json",
                     help="parameter file to write (default %(default)s; the shipped set is "
                          "sim/params/h200.json)")
    cal.add_argument("--backend", choices=("pysim", "compiled"), default="compiled")
    cal.set_defaults(func=cmd_calibrate)

    bld = sub.add_parser("build", help="build the compiled model (Yosys CXXRTL and g++, a few "
                                       "minutes each) ahead of the runs that need it; say "
                                       "where it is if it is cached",
                         description="Builds the compiled FrontEnd that 'gpufe run' (backend "
                                     "compiled) uses for a parameter set (one model serves "
                                     "every max_connections and process count: they are "
                                     "driver settings), into the cache (~/.cache/gpufe or "
                                     "$GPUFE_CACHE), printing each stage; a first run would "
                                     "build it itself. Processes that need the same model "
                                     "wait for one build.")
    bld.add_argument("--params", default="h200", help="parameter set name or JSON file")
    bld.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="override one parameter of the set, as gpufe run --set (sizes such "
                          "as fifo_depth, hw_channels or pbdmas make another model)")
    bld.set_defaults(func=cmd_build)

    from gpufe.constraints.boards import BOARDS
    from gpufe.constraints.flow import (FPGA_GRAPH_NODES, FPGA_GRAPH_EDGES, CLOCK_MHZ, ROUTER,
                                        ROUTERS)
    syn = sub.add_parser("synth", help="synthesize, place and route the FrontEnd (with an "
                                       "on-chip traffic generator) for an FPGA board with the "
                                       "open toolchain; print resources and Fmax")
    syn.add_argument("--board", default="ulx3s-85f", choices=sorted(BOARDS))
    syn.add_argument("--channels", type=_int_in(1, 256), default=None,
                     help=f"hardware channels (default {FrontEndConfig.channels})")
    syn.add_argument("--fifo-depth", type=_int_in(16, 1 << 16), default=None,
                     help=f"FIFO SRAM dwords (default {FrontEndConfig.fifo_depth})")
    syn.add_argument("--graph-nodes", type=_int_in(2, 1 << 16), default=FPGA_GRAPH_NODES,
                     help="graph walker nodes (default %(default)s; the simulation default "
                          f"{FrontEndConfig.graph_nodes_max} needs more block RAM than an ECP5)")
    syn.add_argument("--graph-edges", type=_int_in(1, 1 << 17), default=FPGA_GRAPH_EDGES)
    syn.add_argument("--clock-mhz", type=_mhz, default=CLOCK_MHZ,
                     help="front-end clock from the board's PLL (default %(default)s; 0: the "
                          "board oscillator itself)")
    syn.add_argument("--seed", type=_int_in(0, (1 << 31) - 1), default=1,
                     help="nextpnr placement seed")
    syn.add_argument("--router", choices=ROUTERS, default=ROUTER,
                     help="nextpnr's router (default %(default)s)")
    syn.add_argument("--out", default="build/synth", help="directory for reports and bitstream")
    syn.add_argument("--check", action="store_true",
                     help="only elaborate the design and convert it (seconds, no tools run)")
    syn.set_defaults(func=cmd_synth)

    prv = sub.add_parser("prove", help="prove the blocks' formal properties with SymbiYosys "
                                       "(k-induction or bounded); a failure writes its "
                                       "counterexample as a VCD")
    prv.add_argument("blocks", nargs="*", metavar="BLOCK",
                     help="blocks (or block.proof) to prove; default all (--list names them)")
    prv.add_argument("--list", action="store_true", help="list the proofs and stop")
    prv.add_argument("--vcd-dir", default=".",
                     help="where a counterexample's VCD goes (default: here)")
    prv.set_defaults(func=cmd_prove)

    args = parser.parse_args(argv)
    user_errors = _user_errors()
    from gpufe.sim.cosim.harness import Deadlock
    from gpufe.sim.host.workload import ProgramError
    err = sys.stderr = _LineTracker(sys.stderr)
    try:
        return args.func(args)
    except user_errors as e:
        msg = str(e)
        source = getattr(args, "workload", None) or getattr(args, "from_trace", None)
        if isinstance(e, (ProgramError, Deadlock)) and source and not msg.startswith(source):
            msg = f"{source}: {msg}"           # an error while the program ran
        err.end_line()
        print(f"gpufe: {msg}", file=sys.stderr)
        return 2
    except OSError as e:             # writing an output: disk full, permissions changed...
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        err.end_line()
        print(f"gpufe: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        err.end_line()
        print("gpufe: interrupted", file=sys.stderr)
        return 130
    except Exception as e:          # noqa: BLE001 - anything else is a bug, said as one
        err.end_line()
        _internal_error(e)
        return 70
    finally:
        sys.stderr = err.stream


class _LineTracker:
    """stderr, remembering whether a line was left open (a progress bar), so that an error
    goes on a line of its own."""

    def __init__(self, stream):
        self.stream = stream
        self.open = False

    def write(self, s):
        if s:
            self.open = not s.endswith("\n")
        return self.stream.write(s)

    def end_line(self):
        if self.open:
            self.write("\n")

    def __getattr__(self, name):
        return getattr(self.stream, name)


if __name__ == "__main__":
    sys.exit(main())
