"""Calibration scenarios: the programs of ``fe_trace.cu`` as workloads, beside their traces.

Every reference trace's header names its program (``scenario``), its arguments (``params``)
and ``max_connections``; :func:`workload_from_header` writes the same program as a workload,
step for step (warm-ups, gates, repetitions, marks), with the fe_trace defaults for missing
arguments. The bundled scenarios (``sim/analysis/reference/h200/``) are a trace (``NAME.jsonl.gz``,
copied from the recording) and its workload (``NAME.json``, written by
``python -m sim.scenarios``); the ``nocupti_*`` traces, recorded with CUPTI off, hold only the
marks and are compared with runs under ``--profiler off``.
"""

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).parent / "reference"
SMS_DEFAULT = 132


def _arg(params, key, default):
    return int(params.get(key, default))


def _dims(n):
    return [int(n), 1, 1]


def _work(stream, ns, grid=1, block=32):
    """fe_trace's launch_work: an empty kernel, or a spin kernel of ``ns`` a block."""
    if ns == 0:
        return {"op": "launch_kernel", "stream": stream, "kernel": "k_empty",
                "grid": _dims(grid), "block": _dims(block)}
    return {"op": "launch_kernel", "stream": stream, "kernel": "k_spin", "grid": _dims(grid),
            "block": _dims(block), "block_ns": ns}


def _gate(stream, ns):
    return {"op": "launch_kernel", "stream": stream, "kernel": "k_gate", "grid": [1, 1, 1],
            "block": [32, 1, 1], "block_ns": ns}


def _mark(what):
    return {"op": "mark", "what": what}


def _repeat(count, body):
    return {"op": "repeat", "count": count, "body": body}


def _chain(p, sms):
    n, ns, graph = _arg(p, "n", 1000), _arg(p, "ns", 0), _arg(p, "graph", 0)
    gate, reps = _arg(p, "gate", 0), _arg(p, "reps", 3)
    grid, block = _arg(p, "grid", 1), _arg(p, "block", 32)
    prog = [{"op": "stream_create", "name": "s"}]
    if graph:
        prog += [{"op": "stream_begin_capture", "stream": "s"},
                 _repeat(n, [_work("s", ns, grid, block)]),
                 {"op": "stream_end_capture", "stream": "s", "graph": "g"},
                 {"op": "graph_instantiate", "graph": "g"},
                 {"op": "graph_launch", "graph": "g", "stream": "s"},      # warm-up replay
                 {"op": "stream_synchronize", "stream": "s"}]
        body = [{"op": "graph_launch", "graph": "g", "stream": "s"}]
    else:
        prog += [_repeat(10, [_work("s", ns, grid, block)]),
                 {"op": "stream_synchronize", "stream": "s"}]
        body = [_repeat(n, [_work("s", ns, grid, block)])]
    rep = [_mark("rep_begin")] + ([_gate("s", gate)] if gate else []) + body + [
        _mark("issued"), {"op": "stream_synchronize", "stream": "s"}, _mark("rep_end")]
    return prog + [_repeat(reps, rep)]


def _hyperq(p, sms):
    S, K, ns = _arg(p, "streams", 8), _arg(p, "k", 4), _arg(p, "ns", 100000)
    order, reps = _arg(p, "order", 0), _arg(p, "reps", 3)
    names = [f"s{i}" for i in range(S)]
    prog = [{"op": "stream_create", "name": n} for n in names]
    prog += [_work(n, 0) for n in names] + [{"op": "device_synchronize"}]
    if order == 0:
        issue = [_repeat(K, [_work(n, ns)]) for n in names]
    else:
        issue = [_repeat(K, [_work(n, ns) for n in names])]
    rep = [_mark("rep_begin")] + issue + [{"op": "device_synchronize"}, _mark("rep_end")]
    return prog + [_repeat(reps, rep)]


def _events(p, sms):
    n, timing, gate = _arg(p, "n", 500), _arg(p, "timing", 1), _arg(p, "gate", 0)
    reps, ns = _arg(p, "reps", 3), _arg(p, "ns", 0)
    prog = [{"op": "stream_create", "name": "s"}]
    body = [_work("s", ns)]
    if timing >= 0:
        # fe_trace records a different event each time; one event re-recorded is the same
        # work for the front end
        prog.append({"op": "event_create", "name": "e", "timing": bool(timing)})
        body.append({"op": "event_record", "event": "e", "stream": "s"})
    rep = [_mark("rep_begin")] + ([_gate("s", gate)] if gate else []) + [_repeat(n, body)] + [
        {"op": "stream_synchronize", "stream": "s"}, _mark("rep_end")]
    return prog + [_repeat(reps, rep)]


def _xstream(p, sms):
    n, ns, timing = _arg(p, "n", 200), _arg(p, "ns", 20000), _arg(p, "timing", 0)
    prog = [{"op": "stream_create", "name": "a"}, {"op": "stream_create", "name": "b"},
            {"op": "event_create", "name": "e", "timing": bool(timing)},
            _work("a", 0), _work("b", 0), {"op": "device_synchronize"}, _mark("rep_begin"),
            _repeat(n, [_work("a", ns), {"op": "event_record", "event": "e", "stream": "a"},
                        {"op": "stream_wait_event", "stream": "b", "event": "e"},
                        _work("b", 0)]),
            {"op": "device_synchronize"}, _mark("rep_end")]
    return prog


def _priority(p, sms):
    lows, ns, delay = _arg(p, "lows", 10), _arg(p, "ns", 200000), _arg(p, "delay", 500000)
    prio, reps = _arg(p, "prio", 1), _arg(p, "reps", 5)
    prog = [{"op": "stream_create", "name": "low", "priority": 0},
            {"op": "stream_create", "name": "high", "priority": -5 if prio else 0},
            _work("low", 0), _work("high", 0), {"op": "device_synchronize"}]
    rep = [_mark("rep_begin"), _repeat(lows, [_work("low", ns, 2 * sms, 1024)]),
           {"op": "host_sleep", "ns": delay}, _mark("high_issue"), _work("high", 0),
           {"op": "device_synchronize"}, _mark("rep_end")]
    return prog + [_repeat(reps, rep)]


def _copy(p, sms):
    busy, reps = _arg(p, "busy", 0), _arg(p, "reps", 5)
    prog = [{"op": "stream_create", "name": "a"}, {"op": "stream_create", "name": "b"},
            {"op": "device_synchronize"}]
    for size in (4096, 65536, 1 << 20, 16 << 20, 64 << 20):
        for kind in ("h2d", "d2h", "d2d"):
            body = ([_work("a", 2000000)] if busy else []) + [
                {"op": "memcpy_async", "stream": "b", "kind": kind, "bytes": size},
                {"op": "device_synchronize"}]
            prog.append(_repeat(reps, body))
    return prog


def _sync(p, sms):
    n, how = _arg(p, "n", 200), _arg(p, "how", 0)
    prog = [{"op": "stream_create", "name": "s"},
            {"op": "event_create", "name": "e", "timing": False},
            _work("s", 0), {"op": "stream_synchronize", "stream": "s"}, _mark("rep_begin")]
    if how == 0:
        body = [_work("s", 0), {"op": "stream_synchronize", "stream": "s"}]
    else:
        wait = ({"op": "event_synchronize", "event": "e"} if how == 1
                else {"op": "event_query", "event": "e"})
        body = [_work("s", 0), {"op": "event_record", "event": "e", "stream": "s"}, wait]
    return prog + [_repeat(n, body), _mark("rep_end")]


def _grid(p, sms):
    n, grid, block = _arg(p, "n", 20), _arg(p, "grid", 1), _arg(p, "block", 128)
    gate = _arg(p, "gate", 2000000)
    return [{"op": "stream_create", "name": "s"}, _work("s", 0, grid, block),
            {"op": "stream_synchronize", "stream": "s"}, _mark("rep_begin"), _gate("s", gate),
            _repeat(n, [_work("s", 0, grid, block)]),
            {"op": "stream_synchronize", "stream": "s"}, _mark("rep_end")]


PROGRAMS = {"chain": _chain, "hyperq": _hyperq, "events": _events, "xstream": _xstream,
            "priority": _priority, "copy": _copy, "sync": _sync, "grid": _grid}


class ScenarioError(ValueError):
    pass


def workload_from_header(header, name=None):
    """The workload of the fe_trace program a trace header describes."""
    sc = header.get("scenario")
    if sc not in PROGRAMS:
        raise ScenarioError(f"unknown fe_trace program {sc!r} (known: {', '.join(PROGRAMS)})")
    params = header.get("params") or {}
    mc = header.get("max_connections", "default")
    w = {"name": name or sc,
         "description": f"fe_trace {sc} " + " ".join(f"{k}={v}" for k, v in params.items()),
         "program": PROGRAMS[sc](params, header.get("sms") or SMS_DEFAULT)}
    if mc != "default":
        w["max_connections"] = int(mc)
    return w


def program_of(name, device="h200"):
    """The fe_trace program of a bundled scenario ("pbfull" for the push-buffer-full run)."""
    if name == "pbfull":
        return "pbfull"
    from gpufe.sim.analysis.traces import read_fe_trace
    return read_fe_trace(scenario_paths(name, device)[1])[0]["scenario"]


def scenario_names(device="h200"):
    return sorted(p.name[:-len(".jsonl.gz")] for p in (HERE / device).glob("*.jsonl.gz"))


def scenario_paths(name, device="h200"):
    """(workload path, trace path) of a bundled scenario."""
    d = HERE / device
    return d / f"{name}.json", d / f"{name}.jsonl.gz"


def write_workloads(device="h200"):
    """(Re)write the workload of every bundled trace from its header."""
    from gpufe.sim.analysis.traces import read_fe_trace
    for name in scenario_names(device):
        wpath, tpath = scenario_paths(name, device)
        header = read_fe_trace(tpath)[0]
        w = workload_from_header(header, name)
        wpath.write_text(json.dumps(w, indent=1) + "\n")


if __name__ == "__main__":
    write_workloads(*(sys.argv[1:2] or ["h200"]))
