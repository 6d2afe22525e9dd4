"""fe_trace2's actgap and procs as calibration scenarios: their workloads are written from the
trace headers, their figures (``scenario_metrics``) reproduce FIGURES.md of the capture on the
bundled traces, and give the hand-computed values on small made-up model timelines."""

import gzip
import json

import pytest

from gpufe.sim.analysis.metrics import metrics, repetitions, scenario_metrics
from gpufe.sim.analysis.scenarios import (FE_TRACE2_BUNDLE, ScenarioError, program_of,
                                          scenario_names, scenario_paths,
                                          workload_from_header)
from gpufe.sim.analysis.traces import (TraceError, merge_processes, read_fe_trace,
                                       write_fe_trace)
from gpufe.sim.analysis.validate import compare, compared_metrics, measured_metrics
from gpufe.sim.host.workload import load_workload, programs_of

ACTGAP = [n for n in FE_TRACE2_BUNDLE if "actgap" in n]
PROCS = [n for n in FE_TRACE2_BUNDLE if n.startswith("procs_")]
PROCS_ONE = [n for n in PROCS if n.endswith("_P1")]
PROCS_MANY = [n for n in PROCS if not n.endswith("_P1")]


def figures(name):
    return scenario_metrics(read_fe_trace(scenario_paths(name)[1]), program_of(name))


# ------------------------------------------------------------------ the bundle and workloads

def test_the_bundle_is_shipped():
    names = set(scenario_names())
    assert set(FE_TRACE2_BUNDLE) <= names
    assert {program_of(n) for n in FE_TRACE2_BUNDLE} == {"actgap", "procs", "gupdate", "pdl",
                                                          "threads", "cond", "devlaunch"}


@pytest.mark.parametrize("name", FE_TRACE2_BUNDLE)
def test_shipped_workload_is_the_generators(name):
    wpath, tpath = scenario_paths(name)
    header = read_fe_trace(tpath)[0]
    assert json.loads(wpath.read_text()) == workload_from_header(header, name)


@pytest.mark.parametrize("name", ACTGAP + PROCS_ONE)
def test_one_process_workload_loads(name):
    w = load_workload(scenario_paths(name)[0])          # checks every op
    assert w["name"] == name


@pytest.mark.parametrize("name", PROCS_MANY)
def test_processes_workload_loads(name):
    w = load_workload(scenario_paths(name)[0])
    assert [p["name"] for p in w["processes"]] == ["p0", "p1"]


def launches(ops):
    """(stream, kernel, block_ns) of every launch, repeats multiplied out."""
    out = []
    for op in ops:
        if op["op"] == "repeat":
            out += launches(op["body"]) * op["count"]
        elif op["op"] == "launch_kernel":
            out.append((op["stream"], op["kernel"], op.get("block_ns", 0)))
    return out


def test_actgap_program_follows_the_header():
    w = workload_from_header({"scenario": "actgap", "max_connections": "32",
                              "params": {"A": "3", "n": "4", "gate": "5000", "reps": "2"}})
    assert w["max_connections"] == 32
    assert w["description"].startswith("fe_trace2 actgap A=3")
    prog = w["program"]
    assert [op["name"] for op in prog if op["op"] == "stream_create"] == ["s0", "s1", "s2"]
    rep = prog[-1]
    assert rep["op"] == "repeat" and rep["count"] == 2
    body = rep["body"]
    assert [op.get("what") for op in body if op["op"] == "mark"] == \
        ["rep_begin", "gates_issued", "issued", "rep_end"]
    # a gate on each stream, then the chains breadth-first
    assert launches(body) == [(f"s{i}", "k_gate", 5000) for i in range(3)] + \
        [(f"s{i}", "k_empty", 0) for i in range(3)] * 4
    # warm-up: one empty kernel a stream, outside the repetitions
    assert launches(prog[:-1]) == [(f"s{i}", "k_empty", 0) for i in range(3)]


def test_actgap_stamp_program_names_its_kernels_and_copies_the_stamps():
    w = workload_from_header({"scenario": "actgap", "max_connections": "32",
                              "params": {"A": "2", "n": "3", "gate": "100", "reps": "1",
                                         "stamp": "1"}})
    body = w["program"][-1]["body"]
    assert {k for _, k, _ in launches(body)} == {"k_gate2", "k_stampp"}
    copies = [op for op in body if op["op"] == "memcpy_async"]
    assert [(c["kind"], c["bytes"]) for c in copies] == [("d2h", 2 * 4 * 8)]
    assert body.index(copies[0]) > [op.get("what") for op in body].index("rep_end")


def test_procs_program_follows_the_header():
    w = workload_from_header({"scenario": "procs", "max_connections": "default",
                              "params": {"P": "2", "k": "3", "ns": "20000000", "grid": "1",
                                         "block": "32", "reps": "3"}})
    assert "program" not in w and "max_connections" not in w
    assert [p["name"] for p in w["processes"]] == ["p0", "p1"]
    assert w["processes"][0]["program"] == w["processes"][1]["program"]
    prog = w["processes"][0]["program"]
    rep = prog[-1]
    assert rep["count"] == 3
    # every repetition starts with the global meeting, then the marks around the work
    assert rep["body"][0] == {"op": "barrier", "name": "global:start"}
    assert [op.get("what") for op in rep["body"] if op["op"] == "mark"] == \
        ["rep_begin", "issued", "rep_end"]
    assert launches(rep["body"]) == [("s", "k_work", 20000000)] * 3
    # the k_work records come back after each repetition: k x 132 words, k x grid words
    assert [op["bytes"] for op in rep["body"] if op["op"] == "memcpy_async"] == \
        [3 * 132 * 8, 3 * 8]
    # warm-ups: k_gtres, a short k_work, 10 empty kernels
    assert [k for _, k, _ in launches(prog[:-1])] == ["k_gtres", "k_work"] + ["k_empty"] * 10


def test_procs_with_one_process_is_a_plain_program():
    w = workload_from_header({"scenario": "procs", "max_connections": "8",
                              "params": {"P": "1", "empty": "1", "n": "5", "reps": "2"}})
    assert "processes" not in w and w["max_connections"] == 8
    rep = w["program"][-1]
    assert not any(op["op"] == "barrier" for op in rep["body"])
    assert launches(rep["body"]) == [("s", "k_empty", 0)] * 5
    assert not any(op["op"] == "memcpy_async" for op in rep["body"])


def test_procs_gives_each_process_the_connections():
    w = workload_from_header({"scenario": "procs", "max_connections": "4",
                              "params": {"P": "3"}})
    assert [(p["name"], p["max_connections"]) for p in w["processes"]] == \
        [("p0", 4), ("p1", 4), ("p2", 4)]


def test_procs_needs_a_process():
    with pytest.raises(ScenarioError, match="procs needs P >= 1"):
        workload_from_header({"scenario": "procs", "params": {"P": "0"}})


def test_kernel_count_stays_modest():
    for name in FE_TRACE2_BUNDLE:
        progs = programs_of(load_workload(scenario_paths(name)[0]))
        # threads: 2,000 launches a thread, 3 repetitions, as recorded (8 threads: 20 s)
        most = 50_000 if program_of(name) == "threads" else 20_000
        assert sum(len(launches(p)) for p in progs) <= most, name


# ------------------------------------------------------------------ reference figures

#: FIGURES.md, actgap, 32 connections, 100 ms gates: mean_period_med_stream (ns) and
#: kernels_per_us_all of the CUPTI rows, stamp_mean_period_med_stream and
#: stamp_kernels_per_us_all of the stamp_nocupti rows
ACTGAP_FIGURES = {1: (2866, 0.35, 1377, 0.73), 2: (3192, 0.622, 1710, 1.159),
                  4: (7599, 0.521, 4100, 0.967), 8: (14257, 0.557, 7868, 1.006),
                  16: (25589, 0.62, 15685, 1.009), 32: (55683, 0.566, 31850, 0.998)}


@pytest.mark.parametrize("A", sorted(ACTGAP_FIGURES))
def test_actgap_reference_figures(A):
    period, rate, stamp_period, stamp_rate = ACTGAP_FIGURES[A]
    cupti = figures(f"actgap_c32_A{A}_g100")
    stamps = figures(f"nocupti_actgap_stamp_c32_A{A}_g100")
    assert round(cupti["stream_period_us"] * 1e3) == period
    assert round(stamps["stream_period_us"] * 1e3) == stamp_period
    assert round(stamps["kernels_per_us"], 3) == stamp_rate
    # FIGURES.md divides by last end - first start with CUPTI, the metric by last start
    # (as the stamps): the last kernel's 0.6 us more of a span of 570 us and more
    assert cupti["kernels_per_us"] == pytest.approx(rate, rel=5e-3)


def test_actgap_without_cupti_has_only_the_stamps():
    recs = read_fe_trace(scenario_paths("nocupti_actgap_stamp_c32_A4_g100")[1])
    assert not any(r["kind"] == "kernel" for r in recs)
    assert sum(r["kind"] == "meta" and r["what"] == "act_stamps" for r in recs) == 8


#: FIGURES.md, procs with CUPTI (us; run_len a count)
PROCS_FIGURES = {
    "procs_small_P1": {"kernel_span_us": 1000.71, "makespan_us": 20050.5},
    "procs_small_P2": {"timeslice_run_us": 2091.3, "switched_out_us": 2401.8,
                       "kernel_span_us": 1000.77, "makespan_us": 43170.5},
    "procs_long_P1": {"kernel_span_us": 20000.65, "makespan_us": 60005.0},
    "procs_long_P2": {"timeslice_run_us": 2090.6, "switched_out_us": 2396.6,
                      "kernel_span_us": 41578.95, "makespan_us": 128736.5},
    "procs_empty_P2": {"run_len": 143, "switch_gap_us": 137.513, "kernel_span_us": 0.58,
                       "makespan_us": 14944.9},
}


@pytest.mark.parametrize("name", sorted(PROCS_FIGURES))
def test_procs_reference_figures(name):
    got = figures(name)
    want = PROCS_FIGURES[name]
    for key, value in want.items():
        digits = len(str(value).split(".")[1]) if "." in str(value) else 0
        assert round(got[key], digits) == value, key
    switches = {"timeslice_run_us", "switched_out_us", "switch_us"}
    if name.endswith("_P1"):
        # alone, a process is never switched out: nothing but its kernels and makespan
        assert set(got) == {"kernel_span_us", "makespan_us"}
    elif "empty" in name:
        assert not switches & set(got)          # no k_work timer, no jumps
    else:
        # a jump is the switch out, the other's run, the switch back: about 155 us each
        assert got["switch_us"] == pytest.approx(
            (got["switched_out_us"] - got["timeslice_run_us"]) / 2)
        assert 150 < got["switch_us"] < 160
        assert "run_len" not in got and "switch_gap_us" not in got


def test_procs_reference_carries_its_processes():
    recs = read_fe_trace(scenario_paths("procs_long_P2")[1])
    header = recs[0]
    assert header["processes"] == ["p0", "p1"] and "proc" not in header
    assert header["merged_from"] == ["procs_long_P2.jsonl", "procs_long_P2.p0.jsonl",
                                     "procs_long_P2.p1.jsonl"]
    assert {r.get("pid") for r in recs[1:] if r["kind"] != "meta"} == {"p0", "p1"}
    assert sum(r["kind"] == "meta" and r["what"] == "footer" for r in recs) == 1
    assert {p: len(w) for p, w in repetitions(recs).items()} == {"p0": 3, "p1": 3}


def test_validate_compares_the_program_figures():
    assert {"stream_period_us", "kernels_per_us"} <= set(
        compared_metrics("nocupti_actgap_stamp_c32_A8_g100"))
    assert {"timeslice_run_us", "switch_us", "switched_out_us", "run_len", "switch_gap_us",
            "kernel_span_us", "makespan_us"} <= set(compared_metrics("procs_empty_P2"))
    measured = measured_metrics("procs_small_P2")
    model = dict(measured, timeslice_run_us=measured["timeslice_run_us"] * 1.1)
    rows = {r["metric"]: r for r in compare("procs_small_P2", model, measured)}
    assert rows["timeslice_run_us"]["rel_error"] == pytest.approx(0.1)
    assert rows["switch_us"]["rel_error"] == 0
    assert "stream_period_us" in measured_metrics("actgap_c32_A2_g100")


# ------------------------------------------------------------------ made-up model timelines

def meta(what, t, pid=None, **kw):
    r = {"kind": "meta", "what": what, "t": t, **kw}
    if pid is not None:
        r["pid"] = pid
    return r


def kernel(corr, stream, start, end, name="k_empty", pid=None, queued=None):
    r = {"kind": "kernel", "name": name, "corr": corr, "stream": stream, "channel": 0,
         "queued": queued or 0, "submitted": 0, "start": start, "end": end,
         "grid": [1, 1, 1], "block": [32, 1, 1], "graph_id": 0, "graph_node": 0}
    if pid is not None:
        r["pid"] = pid
    return r


def ctxsw(start, end, pid_out, pid_in):
    return {"kind": "ctxsw", "start": start, "end": end, "pid_out": pid_out, "pid_in": pid_in}


def test_actgap_figures_of_a_made_up_timeline():
    recs = [meta("header", 0), kernel(1, 1, 50, 60),           # a warm-up: outside
            meta("rep_begin", 1000),
            kernel(2, 1, 2000, 99_000, "k_gate"), kernel(3, 2, 2100, 99_500, "k_gate"),
            kernel(4, 1, 100_000, 100_500), kernel(5, 2, 101_000, 101_500),
            kernel(6, 1, 102_000, 102_500), kernel(7, 2, 104_000, 104_500),
            kernel(8, 1, 104_000, 104_400), kernel(9, 2, 107_000, 107_500),
            meta("rep_end", 110_000), meta("rep_begin", 200_000),
            kernel(10, 1, 201_000, 290_000, "k_gate"), kernel(11, 2, 201_000, 290_000, "k_gate"),
            kernel(12, 1, 300_000, 300_500), kernel(13, 1, 304_000, 304_500),
            kernel(14, 2, 300_000, 300_500), kernel(15, 2, 305_000, 305_500),
            meta("rep_end", 310_000)]
    m = scenario_metrics(recs, "actgap")
    # periods 2000, 3000 (repetition 0), 4000, 5000 (repetition 1): median 3500 ns
    assert m["stream_period_us"] == 3.5
    # 6 kernels in 7 us, 4 kernels in 5 us: median of 6/7 and 4/5
    assert m["kernels_per_us"] == pytest.approx((6 / 7 + 4 / 5) / 2)


def test_actgap_figures_from_stamps():
    recs = [meta("header", 0), meta("rep_begin", 10), meta("rep_end", 20),
            meta("act_stamps", 30, rep=0, stream_idx=0, gate_end=5, stamps=[100, 110, 120]),
            meta("act_stamps", 31, rep=0, stream_idx=1, gate_end=5, stamps=[105, 125, 145]),
            # a kernel record is not read where there are stamps
            kernel(1, 1, 12, 13)]
    m = scenario_metrics(recs, "actgap")
    assert m["stream_period_us"] == pytest.approx(0.015)          # median of 10 and 20 ns
    assert m["kernels_per_us"] == pytest.approx(6 / 0.045)        # 6 starts in 45 ns


def test_procs_figures_of_a_made_up_model_timeline():
    # p0 and p1 each run one k_work kernel; the GPU switches between them five times
    recs = [meta("header", 0), meta("rep_begin", 0, "p0"), meta("rep_begin", 0, "p1"),
            kernel(1, 13, 2000, 45_000, "k_work", "p0", queued=1000),
            kernel(1, 13, 11_000, 50_000, "k_work", "p1", queued=1500),
            ctxsw(10_000, 11_000, "p0", "p1"),     # p0 interrupted
            ctxsw(20_000, 21_500, "p1", "p0"),     # p1 interrupted; p0 back: out 11.5 us
            ctxsw(29_500, 30_500, "p0", "p1"),     # p0 ran 8 us, interrupted; p1 out 10.5 us
            ctxsw(39_500, 41_000, "p1", "p0"),     # p1 ran 9 us; p0 back: out 11.5 us
            ctxsw(45_000, 46_000, "p0", "p1"),     # p0 done: no interruption; p1 out 6.5 us
            ctxsw(55_000, 58_000, "p1", "p0"),     # both done: p0 has nothing to run
            ctxsw(200_000, 201_000, "p1", "p0"),   # after the repetitions: not counted
            meta("rep_end", 60_000, "p0"), meta("rep_end", 60_000, "p1")]
    m = scenario_metrics(recs, "procs")
    assert m == {"timeslice_run_us": 8.5,           # 8 and 9 us
                 "switched_out_us": 11.0,           # 11.5, 11.5, 10.5, 6.5 us
                 "switch_us": 1.0,                  # 1, 1.5, 1, 1.5, 1 us (not the 3)
                 "kernel_span_us": 41.0,            # 43 and 39 us
                 "makespan_us": 48.0}               # 2 .. 50 us
    # the timeline's own metrics take each process's repetitions and streams apart
    assert metrics(recs)["wall_per_rep_us"] == 60.0


def test_procs_run_lengths_of_a_made_up_model_timeline():
    recs = [meta("header", 0)]
    corr = 0

    def run(pid, starts):
        nonlocal corr
        out = []
        for s in starts:
            corr += 1
            out.append(kernel(corr, 13, s, s + 500, "k_empty", pid))
        return out

    for base in (0, 1_000_000):
        recs += [meta("rep_begin", base, "p0"), meta("rep_begin", base + 10, "p1")]
        recs += run("p0", [base + 1000, base + 2000, base + 3000])      # 3 in a row
        recs += run("p1", [base + 140_000, base + 141_000])            # 2, gap 136.5 us
        recs += run("p0", [base + 280_000])                            # 1, gap 138.5 us
        recs += run("p1", [base + 420_000, base + 421_000, base + 422_000, base + 423_000])
        recs += [meta("rep_end", base + 500_000, "p0"), meta("rep_end", base + 500_000, "p1")]
    recs.append(kernel(999, 13, 3_000_000, 3_000_500, "k_empty", "p0"))   # outside
    m = scenario_metrics(recs, "procs")
    assert m["run_len"] == 2.5                        # 3, 2, 1, 4 twice
    assert m["switch_gap_us"] == 138.5                # 136.5, 138.5, 139.5 twice
    assert m["makespan_us"] == 422.5                  # 1 .. 423.5 us
    assert m["kernel_span_us"] == 0.5
    assert "switch_us" not in m                       # no ctxsw, no kspan


def test_the_timeline_metrics_keep_processes_apart():
    recs = [meta("header", 0), meta("rep_begin", 0, "p0"), meta("rep_begin", 100, "p1")]
    for i in range(6):                  # stream 13 and channel 0 in both processes
        recs.append(kernel(1 + i, 13, 200 + 10 * i, 205 + 10 * i, pid="p0"))
        recs.append(kernel(1 + i, 13, 202 + 10 * i, 207 + 10 * i, pid="p1"))
    recs += [meta("rep_end", 1000, "p1"), meta("rep_end", 5000, "p0"),
             meta("rep_begin", 6000, "p0"), meta("rep_end", 6500, "p0")]
    m = metrics(recs)
    # each rep_end closes its own process's repetition: 5000, 900 and 500 ns
    assert m["wall_per_rep_us"] == 0.9
    assert m["median_gap_us"] == 0.005          # 5 ns in each process's stream 13
    assert m["channels_used"] == 2


def test_one_process_model_timeline_has_no_switch_figures():
    recs = [meta("header", 0), meta("rep_begin", 0),
            kernel(1, 13, 1000, 21_000, "k_work"), kernel(2, 13, 21_500, 41_500, "k_work"),
            meta("rep_end", 50_000)]
    assert scenario_metrics(recs, "procs") == {"kernel_span_us": 20.0, "makespan_us": 40.5}
    assert scenario_metrics(recs, "chain") == {}


def test_in_kernel_switch_figures():
    # the reference's view: each process's timer jumps, in kernel order
    def kspan(pid, rep, i, gaps):
        return meta("kspan", 100 + i, pid, rep=rep, i=i, gt_start=0, gt_end=10**6,
                    gaps=gaps)
    recs = [meta("header", 0),
            kspan("p0", 0, 1, [[30_000, 50_000]]), kspan("p0", 0, 0, [[10_000, 22_000]]),
            kspan("p1", 0, 0, [[22_000, 30_000], [39_000, 60_000]])]
    m = scenario_metrics(recs, "procs")
    # p0: runs 22 -> 30 us (8 us), out 12 and 20 us; p1: run 30 -> 39 us, out 8 and 21 us
    assert m["timeslice_run_us"] == 8.5
    assert m["switched_out_us"] == 16.0
    assert m["switch_us"] == pytest.approx((16.0 - 8.5) / 2)


# ------------------------------------------------------------------ traces of processes

def write(path, records):
    with gzip.open(path, "wt") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def child(i, t0):
    return [meta("header", t0, scenario="procs", pid=4000 + i, proc=i, params={"P": "2"}),
            {"kind": "runtime", "name": "cudaLaunchKernel", "corr": 5, "tid": 1,
             "start": t0 + 10, "end": t0 + 20},
            kernel(5, 13, t0 + 30, t0 + 40), meta("footer", t0 + 50)]


def test_merge_processes_gives_one_timeline(tmp_path):
    write(tmp_path / "x.jsonl.gz", [meta("header", 900, scenario="procs"),
                                    meta("procs_parent", 901), meta("footer", 902)])
    write(tmp_path / "x.p0.jsonl.gz", child(0, 100))
    write(tmp_path / "x.p1.jsonl.gz", child(1, 95))
    recs = merge_processes(tmp_path / "x.jsonl.gz",
                           [tmp_path / "x.p0.jsonl.gz", tmp_path / "x.p1.jsonl.gz"])
    h = recs[0]
    assert (h["t"], h["processes"], h["os_pids"]) == (95, ["p0", "p1"], [4000, 4001])
    assert "pid" not in h and "proc" not in h
    # both processes' correlation id 5 and stream 13 stay apart
    assert [(r["kind"], r.get("pid")) for r in recs[1:]] == [
        ("runtime", "p1"), ("runtime", "p0"), ("kernel", "p1"), ("kernel", "p0"),
        ("meta", None), ("meta", None)]
    assert recs[-1] == meta("footer", 902)
    write_fe_trace(recs, tmp_path / "m.jsonl.gz")
    assert read_fe_trace(tmp_path / "m.jsonl.gz") == recs
    with pytest.raises(TraceError, match="no child traces"):
        merge_processes(tmp_path / "x.jsonl.gz", [])


def test_a_process_name_must_be_a_string(tmp_path):
    bad = child(0, 100)
    bad[2]["pid"] = 3
    write(tmp_path / "b.jsonl.gz", bad)
    with pytest.raises(TraceError, match=r"b.jsonl.gz:3: kernel field 'pid' is 3, not a "
                                         r"process name"):
        read_fe_trace(tmp_path / "b.jsonl.gz")


def test_one_process_still_has_one_correlation_id_a_call(tmp_path):
    recs = child(0, 100)
    recs.insert(2, dict(recs[1], start=115, end=116))
    for r in recs[1:]:
        r["pid"] = "p0"
    write(tmp_path / "c.jsonl.gz", recs)
    with pytest.raises(TraceError, match="has correlation id 5, as line 2 has"):
        read_fe_trace(tmp_path / "c.jsonl.gz")


def test_ctxsw_records_are_read(tmp_path):
    write(tmp_path / "s.jsonl.gz", [meta("header", 0), ctxsw(10, 20, "p0", "p1"),
                                    ctxsw(30, 40, None, "p0")])
    assert [r["kind"] for r in read_fe_trace(tmp_path / "s.jsonl.gz")] == \
        ["meta", "ctxsw", "ctxsw"]
    write(tmp_path / "t.jsonl.gz", [meta("header", 0), ctxsw(10, 5, "p0", "p1")])
    with pytest.raises(TraceError, match="ctxsw record ends"):
        read_fe_trace(tmp_path / "t.jsonl.gz")
    write(tmp_path / "u.jsonl.gz", [meta("header", 0), ctxsw(10, 20, 0, "p1")])
    with pytest.raises(TraceError, match="ctxsw field 'pid_out' is 0"):
        read_fe_trace(tmp_path / "u.jsonl.gz")


def test_bad_stamps_are_rejected(tmp_path):
    write(tmp_path / "a.jsonl.gz", [meta("header", 0),
                                    meta("act_stamps", 1, rep=0, stamps=[1, "2"])])
    with pytest.raises(TraceError, match=r"a.jsonl.gz:2: act_stamps field 'stamps' is .* not "
                                         r"a list of integers"):
        read_fe_trace(tmp_path / "a.jsonl.gz")
    write(tmp_path / "k.jsonl.gz", [meta("header", 0),
                                    meta("kspan", 1, rep=0, i=0, gt_start=0, gt_end=1,
                                         gaps=[[1, 2, 3]])])
    with pytest.raises(TraceError, match="kspan field 'gaps'"):
        read_fe_trace(tmp_path / "k.jsonl.gz")


# ------------------------------------------------------------------ pdl


@pytest.mark.parametrize("name, period, dep, wait", [
    # FIGURES.md's pdl stamps table (medians over 5 reps x 299 pairs)
    ("nocupti_pdl_stamp_p0_t0_ns0_g0", 1.600, 1.536, None),
    ("nocupti_pdl_stamp_p1_t0_ns0_g0", 0.704, 0.608, None),
    ("nocupti_pdl_stamp_p1_t1_ns2000_g0", 2.592, 0.352, 16.800),
    ("nocupti_pdl_stamp_p1_t1_ns2000_g1", 2.400, 0.320, 289.952),
    ("pdl_stamp_p1_t1_ns2000_g0", 2.624, 0.416, 16.160),
])
def test_pdl_figures_of_the_traces_are_the_recordings(name, period, dep, wait):
    f = figures(name)
    assert f["pdl_exit_period_us"] == pytest.approx(period, abs=1e-3)
    assert f["pdl_dep_latency_us"] == pytest.approx(dep, abs=1e-3)
    assert f.get("pdl_resident_wait_us") == (None if wait is None else pytest.approx(wait,
                                                                                      abs=1e-3))


def test_pdl_workloads_launch_the_chain_with_the_attribute():
    w = load_workload(scenario_paths("nocupti_pdl_stamp_p1_t1_ns2000_g0")[0])
    chain = [op for op in w["program"][-1]["body"] if op["op"] == "repeat"][0]["body"][0]
    assert (chain["pdl"], chain["trigger_ns"], chain["block_ns"]) == (True, 0, 2064)
    g = load_workload(scenario_paths("nocupti_pdl_stamp_p0_t0_ns0_g1")[0])
    assert [op["op"] for op in g["program"][1:4]] == ["stream_begin_capture", "repeat",
                                                      "stream_end_capture"]


# ------------------------------------------------------------------ threads


@pytest.mark.parametrize("name, per_launch, aggregate", [
    # FIGURES.md's threads table, no CUPTI (per_launch_loop_ns, agg_launches_per_us)
    ("nocupti_threads_T1_sh0", 3.545, 0.282),
    ("nocupti_threads_T8_sh0", 9.170, 0.855),
    ("nocupti_threads_T4_sh1", 18.270, 0.210),
    # and with CUPTI
    ("threads_T1_sh0", 6.535, 0.153),
    ("threads_T8_sh1", 54.156, 0.122),
])
def test_threads_figures_of_the_traces_are_the_recordings(name, per_launch, aggregate):
    f = figures(name)
    assert f["thread_launch_us"] == pytest.approx(per_launch, abs=1e-3)
    assert f["threads_launches_per_us"] == pytest.approx(aggregate, abs=5e-3)


def test_threads_workloads_run_a_thread_per_launcher_and_a_main_thread():
    w = load_workload(scenario_paths("nocupti_threads_T4_sh1")[0])
    assert [t["name"] for t in w["threads"]] == ["main", "t0", "t1", "t2", "t3"]
    loops = [op for t in w["threads"][1:] for op in t["program"][1]["body"]
             if op["op"] == "repeat"]
    assert {op["body"][0]["stream"] for op in loops} == {"s"}


# ------------------------------------------------------------------ cond


@pytest.mark.parametrize("name, period", [
    # FIGURES.md's cond table, stamp_period_med_ns
    ("nocupti_cond_b1_m1000", 4.992), ("nocupti_condhost_b1_m1000", 2.400),
    ("nocupti_condhost_b1_m100_gate", 2.432), ("cond_b1_m100", 9.600),
])
def test_cond_figures_of_the_traces_are_the_recordings(name, period):
    assert figures(name)["cond_iteration_us"] == pytest.approx(period, abs=1e-3)


def test_cond_workloads_hold_a_while_node_or_host_launches():
    w = load_workload(scenario_paths("nocupti_cond_b1_m100")[0])
    (add,) = [op for op in w["program"] if op["op"] == "graph_add_conditional"]
    assert (add["kind"], add["iterations"], add["body"]) == ("while", 100, "body")
    h = load_workload(scenario_paths("nocupti_condhost_b1_m100_gate")[0])
    assert not any(op["op"] == "graph_add_conditional" for op in h["program"])


# ------------------------------------------------------------------ devlaunch


@pytest.mark.parametrize("name, period, to_next, call, ret", [
    # FIGURES.md's devlaunch table: stamp_period_med_ns, ctrl_to_next_first_ns,
    # launcher_call_ns, launcher_ret_to_first_ns
    ("nocupti_dl_host_b1_m100", 6.080, 5.312, None, None),
    ("nocupti_dl_hostplain_b1_m100_gate", 2.720, 1.952, None, None),
    ("nocupti_dl_ff_b1_m100", 9.824, 9.024, 2.240, 0.832),
    ("nocupti_dl_tail_b1_m100", 5.696, 4.928, None, None),
    ("dl_tailff_b1_m100", 6.848, 6.016, 3.168, 0.864),
])
def test_devlaunch_figures_of_the_traces_are_the_recordings(name, period, to_next, call, ret):
    f = figures(name)
    assert f["dl_period_us"] == pytest.approx(period, abs=1e-3)
    assert f["dl_ctrl_to_next_us"] == pytest.approx(to_next, abs=1e-3)
    assert f.get("dl_call_us") == (None if call is None else pytest.approx(call, abs=1e-3))
    assert f.get("dl_ret_to_first_us") == (None if ret is None else pytest.approx(ret, abs=1e-3))


def test_devlaunch_workloads_follow_the_mode():
    def program(name):
        return load_workload(scenario_paths(name)[0])["program"]

    def ctrl(prog):
        return next(op for op in prog if op.get("kernel", "").startswith("k_ctrl"))

    tail = program("nocupti_dl_tail_b1_m100")
    assert ctrl(tail)["device_graph_launch"] == {"graph": "G", "mode": "tail", "count": 99}
    assert {"op": "graph_instantiate", "graph": "G", "device_launch": True} in tail
    ff = program("nocupti_dl_ff_b1_m100")
    launcher = next(op for op in ff if op.get("kernel") == "k_launcher")
    assert launcher["device_graph_launch"]["mode"] == "fire_and_forget"
    assert ctrl(ff)["device_graph_launch"]["count"] == 0       # the code, never called
    plain = program("nocupti_dl_hostplain_b1_m100")
    assert ctrl(plain)["device_graph_launch"] is None


@pytest.mark.parametrize("name, issue", [
    # a repetition's start -> its issued mark / m, median of three: the host's time a graph
    # launch, unprofiled
    ("nocupti_dl_ff_b1_m100", 4.49949),
    ("nocupti_dl_hostplain_b2_m100", 1.90498),
    ("nocupti_dl_host_b4_m100_gate", 3.50773),
    ("nocupti_dl_tail_b1_m100", None),          # one host launch: no figure
])
def test_devlaunch_issue_is_the_host_launch_loop_per_launch(name, issue):
    assert figures(name).get("dl_issue_us") == (
        None if issue is None else pytest.approx(issue, abs=1e-5))


def test_devlaunch_issue_is_compared_unprofiled_only():
    # profiled, the API records time the launch call itself (graph_launch_api_us)
    assert "dl_issue_us" in compared_metrics("nocupti_dl_ff_b1_m100")
    assert "dl_issue_us" not in compared_metrics("dl_ff_b1_m100")
    assert "graph_launch_api_us" in compared_metrics("dl_ff_b1_m100")
