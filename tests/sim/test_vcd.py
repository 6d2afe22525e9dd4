"""VCD waveforms of a run, whole or a window of it (`gpufe run --vcd F --vcd-from NS --vcd-to
NS`): the window holds exactly the changes of its cycles, the same as the whole run's VCD
there, and tracing does not change the timeline."""

from collections import defaultdict
from dataclasses import replace
import json

import pytest

from gpufe.sim import cli
from gpufe.sim.cosim.backend import VcdWindow
from gpufe.sim.params import Params
from gpufe.sim.run import simulate
from tests.sim.workloads import launch, streams, workload

PROGRAM = streams("a", "b") + [
    launch("a", 2000), launch("b", 500),
    {"op": "event_create", "name": "e", "timing": True},
    {"op": "event_record", "event": "e", "stream": "a"},
    {"op": "stream_wait_event", "stream": "b", "event": "e"},
    launch("b", 300), {"op": "device_synchronize"}]


@pytest.fixture(scope="module")
def small_walker():
    """A graph walker of 64 nodes (the program makes no graph): its memories are most of a
    full-size FrontEnd's VCD, 200,000 variables."""
    full = Params.frontend_config
    with pytest.MonkeyPatch.context() as m:
        m.setattr(Params, "frontend_config", lambda self: replace(
            full(self), graph_nodes_max=64, graph_edges_max=128, graph_inflight_max=16))
        yield


@pytest.fixture(scope="module")
def plain(params, small_walker):
    """The run without a VCD."""
    return run(params)


class Vcd:
    """A VCD file read back: the change lines at each timestamp (the initial values apart),
    by variable name."""

    def __init__(self, path):
        names, scope = {}, []
        self.initial, self.changes = {}, defaultdict(list)
        t, dumping = None, False
        with open(path) as f:
            lines = iter(f)
            for line in lines:                       # declarations
                word = line.split()
                if not word:
                    continue
                if word[0] == "$scope":
                    scope.append(word[2])
                elif word[0] == "$upscope":
                    scope.pop()
                elif word[0] == "$var":
                    names.setdefault(word[3], ".".join(scope + [word[4]]))
                elif word[0] == "$enddefinitions":
                    break
            for line in lines:                       # values
                line = line.rstrip("\n")
                if not line:
                    continue
                if line[0] == "#":
                    t = int(line[1:])
                elif line.startswith("$dumpvars"):
                    dumping = True
                elif line.startswith("$"):
                    dumping = dumping and not line.startswith("$end")
                else:
                    if line[0] in "bsr":             # vector, string, real: "bVALUE ID"
                        value, code = line[1:].split(" ")
                    else:                            # scalar: "VID"
                        value, code = line[0], line[1:]
                    change = (names[code], value)
                    if dumping:
                        self.initial[change[0]] = value
                    else:
                        self.changes[t].append(change)
        self.times = sorted(self.changes)
        self.now = next(n for n in set(names.values()) if n.endswith("top.now"))

    def state_at(self, t):
        """Every variable's value after the changes at time ``t``."""
        state = dict(self.initial)
        for u in self.times:
            if u > t:
                break
            state.update(self.changes[u])
        return state

    def values_of(self, name):
        """(time, value) of every change of ``name``."""
        return [(t, v) for t in self.times for n, v in self.changes[t] if n == name]


def run(params, vcd=None):
    return simulate(workload(PROGRAM, max_connections=1), params, vcd=vcd, backend="pysim")


def timeline(result):
    return [json.dumps(r, sort_keys=True, default=str) for r in result.records]


def test_a_window_holds_the_changes_of_its_cycles_and_nothing_else(params, plain, tmp_path):
    whole = run(params, str(tmp_path / "whole.vcd"))
    full = Vcd(tmp_path / "whole.vcd")
    # a window over busy cycles: the 100th to the 160th value of `now` the RTL was clocked at
    nows = full.values_of(full.now)
    (t0, first), (_, last) = nows[100], nows[160]
    first, last = int(first, 2), int(last, 2)
    assert last - first >= 60
    win = run(params, VcdWindow(str(tmp_path / "win.vcd"), first, last))
    # tracing only observes
    assert timeline(whole) == timeline(plain) == timeline(win)
    assert whole.stats["rtl_cycles"] == win.stats["rtl_cycles"] == plain.stats["rtl_cycles"]

    w = Vcd(tmp_path / "win.vcd")
    assert set(w.initial) == set(full.initial)
    # it starts with the design as it is at the window's first cycle, inputs set...
    assert w.initial == full.state_at(t0)
    assert int(w.initial[w.now], 2) == first
    # ...then every change of the whole run's VCD, at the same times (counted from the
    # window's start; in any order within a time: Amaranth's writer takes them from a set),
    # up to the clock edge that ends the window's last cycle; there the next cycle's inputs
    # are not set yet
    assert w.times[0] > 0
    state = dict(w.initial)
    for t in w.times[:-1]:
        assert sorted(w.changes[t]) == sorted(full.changes[t0 + t]), t
        state.update(w.changes[t])
        assert state == full.state_at(t0 + t)
    end = w.times[-1]
    assert set(w.changes[end]) <= set(full.changes[t0 + end])
    now_values = [int(v, 2) for _, v in w.values_of(w.now)]
    assert now_values == [int(v, 2) for _, v in nows if first < int(v, 2) <= last]
    assert int(dict(full.changes[t0 + end])[full.now], 2) > last    # the next cycle's input
    assert w.now not in dict(w.changes[end])
    # a small part of the whole (its changes: both files start with every variable's value,
    # most of them the channels' context memories)
    assert (sum(len(c) for c in w.changes.values())
            < sum(len(c) for c in full.changes.values()) / 3)


def test_a_window_inside_an_idle_stretch_starts_at_its_first_cycle(params, plain, tmp_path):
    """The simulator jumps over idle time: the jump stops at the window's first cycle, which
    is clocked; the timeline does not change."""
    kernel = next(r for r in plain.records if r["kind"] == "kernel" and r["name"] == "k_a")
    first = (kernel["start"] + kernel["end"]) // 2          # the 2 us kernel runs: RTL idle
    win = run(params, VcdWindow(str(tmp_path / "win.vcd"), first, first + 5))
    assert timeline(win) == timeline(plain)
    # one jump became two, with the window's first cycle clocked between them
    assert win.stats["rtl_cycles"] == plain.stats["rtl_cycles"] + 1
    assert win.stats["jumps"] == plain.stats["jumps"] + 1
    w = Vcd(tmp_path / "win.vcd")
    assert int(w.initial[w.now], 2) == first
    assert all(first <= int(v, 2) <= first + 5 for _, v in w.values_of(w.now))


def test_a_window_after_the_run_holds_its_final_state(params, plain, tmp_path, capsys):
    end = plain.records[-1]["t"]
    run(params, VcdWindow(str(tmp_path / "win.vcd"), end + 1000))
    w = Vcd(tmp_path / "win.vcd")
    assert not any(w.changes.values()) and w.initial
    assert "before the VCD window" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--vcd-from", "10"], "--vcd-from and --vcd-to go with --vcd FILE"),
    (["--vcd", "{tmp}/w.vcd", "--vcd-from", "10", "--vcd-to", "5"],
     "the end is before the start"),
])
def test_bad_windows_are_refused_before_the_run(args, message, tmp_path, capsys):
    w = tmp_path / "w.json"
    w.write_text(json.dumps({"program": PROGRAM}))
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert cli.main(["run", str(w), "--backend", "pysim"] + args) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "w.vcd").exists()


def test_window_options_reach_the_run(tmp_path, monkeypatch):
    """`gpufe run --vcd F --vcd-from A --vcd-to B` runs with a VcdWindow (A..B ns), plain
    `--vcd F` with the path."""
    seen = []

    def fake_simulate(*a, vcd=None, **kw):
        seen.append(vcd)
        raise KeyboardInterrupt           # stop there: nothing to run

    monkeypatch.setattr("gpufe.sim.run.simulate", fake_simulate)
    w = tmp_path / "w.json"
    w.write_text(json.dumps({"program": PROGRAM}))
    vcd = str(tmp_path / "w.vcd")
    cli.main(["run", str(w), "--vcd", vcd, "--vcd-from", "100", "--vcd-to", "250"])
    cli.main(["run", str(w), "--vcd", vcd, "--vcd-to", "250"])
    cli.main(["run", str(w), "--vcd", vcd])
    assert seen == [VcdWindow(vcd, 100, 250), VcdWindow(vcd, 0, 250), vcd]


@pytest.mark.slow
def test_the_pbdma_switching_channels_is_named_in_the_waveform(params, small_walker, tmp_path):
    """actgap with four streams, in small: four chains of dependent kernels, each queued
    behind its own gate; the PBDMA loads their channels in turn, draining and saving each
    as its acquire fails."""
    names = ["s0", "s1", "s2", "s3"]
    prog = streams(*names) + [launch(n, 20_000) for n in names] + [
        {"op": "repeat", "count": 3, "body": [launch(n, 0) for n in names]},
        {"op": "device_synchronize"}]
    path = tmp_path / "actgap4.vcd"
    simulate(workload(prog, max_connections=4), params, vcd=str(path), backend="pysim")
    v = Vcd(path)
    channel = next(n for n in v.initial if n.endswith("pbdma.pbdma0_channel"))
    state = next(n for n in v.initial if n.endswith("pbdma.pbdma0_state"))
    visited = [int(x, 2) for _, x in v.values_of(channel)]
    assert set(visited) >= {0, 1, 2, 3}
    # the chains interleave: the PBDMA comes back to a channel after the others
    assert len(visited) >= 8
    states = {x for _, x in v.values_of(state)}
    assert {"LOAD", "RUN", "DRAIN", "SAVE"} <= states, states
