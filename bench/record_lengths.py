"""How long a profiled kernel's record lasts, by what the front end has on its other channels:
the H200's trace beside gpufe's timeline of the same scenario.

    python bench/record_lengths.py [SCENARIO ...]
    python bench/record_lengths.py graph_nodes10 chain_graph_gate dl_hostplain_b1_m100

For each kernel record (CUPTI's start to end) it prints the median length (us) and the count,
grouped two ways:

- by the kernels of *other* channels that were pending as it ended (queued before its end,
  starting after its start; 3 or more together). On the H200 an empty kernel's record lasts
  0.58-0.61 us with none pending, and grows to 0.74-1.2 us with two and 1.05-1.18 us with
  three or more (threads_T4..T12_sh0): the front end's moves between channels show in the
  records, not the kernels' own time.
- by its place in its channel's visit (a run of consecutive kernels on one channel): first,
  middle or last (a visit of one kernel counts as `only`). With several streams a channel
  (actgap A = 24), the H200's long record is the first of a visit and gpufe's the last.

A graph's kernels (a scenario with graphs) are grouped a third way, by their node's place in
its launch: `only` (a graph of one kernel), first, middle or last, with the median gap from
the record before (into the middle nodes and into the last). On the H200 the first and last
records are the long ones (graph_nodes10: 0.86, 0.64, 0.80 us; chain_graph_gate: 0.88, 0.70,
0.90) and the gap into the last node of a 2-node graph is 0.29 us against 0.13 in longer
ones (dl_hostplain_b1/b2_m100); gpufe's records are one length wherever the node is.

Not a test: it says where a model and the H200 disagree, for the mechanism work it calls for
(issue 42's CUPTI record rows); each scenario runs the compiled model once (threads_T8_sh0,
actgap A = 24 and threads_T12_sh0: 94 s in all on this 2-core machine)."""

import argparse
import statistics

from gpufe.sim.analysis.scenarios import scenario_paths
from gpufe.sim.analysis.traces import read_fe_trace
from gpufe.sim.analysis.validate import profiler_of, scenario_params
from gpufe.sim.host.workload import load_workload
from gpufe.sim.params import load
from gpufe.sim.run import simulate

DEFAULT = ("threads_T2_sh0", "threads_T4_sh0", "threads_T8_sh0", "threads_T12_sh0",
           "actgap_c16_A24_g100_hi0")
#: pending kernels of other channels counted up to this (more count as this many)
MOST_PENDING = 3
#: how far past a kernel's end its successors are looked for (ns)
LOOKAHEAD_NS = 3000


def kernels(records):
    return sorted((r for r in records if r.get("kind") == "kernel" and r.get("end") is not None
                   and r.get("queued") is not None), key=lambda r: (r["start"], r["end"]))


def by_pending(ks):
    """{pending other-channel kernels at a kernel's end (at most MOST_PENDING): its lengths}"""
    out = {}
    for i, k in enumerate(ks):
        pending, j = 0, i + 1
        while j < len(ks) and ks[j]["start"] < k["end"] + LOOKAHEAD_NS:
            if ks[j]["queued"] < k["end"] and ks[j]["channel"] != k["channel"]:
                pending += 1
            j += 1
        out.setdefault(min(pending, MOST_PENDING), []).append(k["end"] - k["start"])
    return out


def by_visit(ks):
    """{place in its channel's visit (first, middle, last, only): its lengths}"""
    out = {}
    for i, k in enumerate(ks):
        first = i == 0 or ks[i - 1]["channel"] != k["channel"]
        last = i == len(ks) - 1 or ks[i + 1]["channel"] != k["channel"]
        place = "only" if first and last else "first" if first else "last" if last else "middle"
        out.setdefault(place, []).append(k["end"] - k["start"])
    return out


def by_graph_place(records):
    """({place of a graph node's kernel in its launch: its record lengths}, {"to_middle",
    "to_last": gaps from the record before}); places: only, first, middle, last."""
    launches = {}
    for r in records:
        if r.get("kind") == "kernel" and r.get("graph_id") and r.get("end") is not None:
            launches.setdefault((r["graph_id"], r["corr"]), []).append(r)
    lengths, gaps = {}, {}
    for ks in launches.values():
        ks.sort(key=lambda r: r["start"])
        for i, k in enumerate(ks):
            place = ("only" if len(ks) == 1 else "first" if i == 0
                     else "last" if i == len(ks) - 1 else "middle")
            lengths.setdefault(place, []).append(k["end"] - k["start"])
            if i:
                gaps.setdefault(f"to_{place}", []).append(k["start"] - ks[i - 1]["end"])
    return lengths, gaps


def row(groups, keys):
    return "  ".join(f"{k}: {statistics.median(groups[k]) / 1e3:5.2f} ({len(groups[k]):6d})"
                     if k in groups else f"{k}: {'-':>5s} ({0:6d})" for k in keys)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("scenarios", nargs="*", default=DEFAULT)
    args = p.parse_args()
    params = load("h200")
    pend_keys = list(range(MOST_PENDING + 1))
    visit_keys = ["only", "first", "middle", "last"]
    for name in args.scenarios:
        if profiler_of(name) != "cupti":
            print(f"{name}: unprofiled (no kernel records), left out")
            continue
        workload, trace = scenario_paths(name)
        result = simulate(load_workload(workload), scenario_params(name, params),
                          profiler="cupti", backend="compiled")
        print(name)
        for label, records in (("H200", read_fe_trace(trace)), ("gpufe", result.records)):
            ks = kernels(records)
            if ks:
                print(f"  {label:5s} by pending  {row(by_pending(ks), pend_keys)}")
                print(f"  {label:5s} by visit    {row(by_visit(ks), visit_keys)}")
            lengths, gaps = by_graph_place(records)
            if lengths:
                print(f"  {label:5s} graph place {row(lengths, visit_keys)}")
                print(f"  {label:5s} graph gaps  {row(gaps, ['to_middle', 'to_last'])}")


if __name__ == "__main__":
    main()
