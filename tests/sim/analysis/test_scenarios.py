"""Calibration scenarios: every shipped trace has its workload, written from its header by
the generator, and every workload is a valid program."""

import json

import pytest

from gpufe.sim.analysis.scenarios import (ScenarioError, scenario_names, scenario_paths,
                                          workload_from_header)
from gpufe.sim.analysis.traces import read_fe_trace
from gpufe.sim.host.workload import load_workload

NAMES = scenario_names()


def test_every_fe_trace_program_is_covered():
    # 89 of fe_trace, 75 of fe_trace2 (actgap, procs, gupdate, pdl, threads, cond,
    # devlaunch), 118 of the third recording (fe_trace2's programs at other sizes)
    assert len(NAMES) == 282
    programs = {read_fe_trace(scenario_paths(n)[1])[0]["scenario"] for n in NAMES}
    assert programs == {"chain", "hyperq", "events", "xstream", "priority", "copy", "sync",
                        "grid", "actgap", "procs", "gupdate", "pdl", "threads", "cond",
                        "devlaunch"}


@pytest.mark.parametrize("name", NAMES)
def test_shipped_workload_is_the_generators(name):
    wpath, tpath = scenario_paths(name)
    header = read_fe_trace(tpath)[0]
    assert json.loads(wpath.read_text()) == workload_from_header(header, name)
    load_workload(wpath)                     # validates every op


def test_hyperq_program_follows_the_header():
    w = workload_from_header({"scenario": "hyperq", "max_connections": "4",
                              "params": {"streams": "3", "k": "2", "ns": "1000",
                                         "order": "0", "reps": "1"}})
    assert w["max_connections"] == 4
    rep = w["program"][-1]
    assert rep["count"] == 1
    issue = [op for op in rep["body"] if op["op"] == "repeat"]
    assert [(op["count"], op["body"][0]["stream"]) for op in issue] == [(2, "s0"), (2, "s1"),
                                                                       (2, "s2")]


def test_unknown_program_is_rejected():
    with pytest.raises(ScenarioError, match="unknown fe_trace program 'nope'"):
        workload_from_header({"scenario": "nope"})
