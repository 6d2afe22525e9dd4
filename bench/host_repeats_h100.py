"""The H100 runs of the unprofiled programs (probe unprofiled_repeats, ``h100_all/`` and
``h100/``) beside the H200's one recording of each: the host's spread from process to
process and from machine to machine, which a host-bound figure recorded once on the H200 is
one draw of.

    python bench/host_repeats_h100.py [--validate VAL.json] [--metrics dl_issue_us ...]

For each scenario and host figure (:data:`gpufe.sim.analysis.validate.HOST_METRICS`): the
H200's value, each H100 run set's median and range, and with ``--validate`` (a JSON that
``gpufe validate --json`` wrote) gpufe's value and whether it lies in the H100 range. Then,
for the devlaunch programs, the correlation over the H100 processes between the one
``cudaGraphInstantiate`` a process makes before its repetitions and its issue time per
repetition (the process's vCPU speed, told by its own host call)."""
import argparse
import json
import re
import statistics
import sys
from pathlib import Path

from gpufe.sim.analysis.scenarios import HERE, program_of
from gpufe.sim.analysis.traces import read_fe_trace
from gpufe.sim.analysis.validate import HOST_METRICS, all_metrics

PROBE = HERE / "h200" / "probes" / "unprofiled_repeats"
SETS = ("h100_all", "h100")


def runs(set_, name):
    return sorted((PROBE / set_).glob(f"{name}_r*.jsonl.gz"),
                  key=lambda p: int(p.name[len(name) + 2:-len(".jsonl.gz")]))


def devlaunch_process(path):
    """(instantiate us, median issue us a repetition) of one devlaunch recording."""
    inst, begin, issue = None, None, []
    for r in read_fe_trace(path):
        if r["kind"] != "meta":
            continue
        if r["what"] == "dl_built":
            inst = r["instantiate_ns"] / 1e3
        elif r["what"] == "rep_begin":
            begin = r["t"]
        elif r["what"] == "issued" and begin is not None:
            issue.append((r["t"] - begin) / 1e3)
    return inst, statistics.median(issue)


def correlation(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / (sxx * syy) ** 0.5


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--validate", help="gpufe validate --json output, for gpufe's values")
    ap.add_argument("--metrics", nargs="*", default=sorted(HOST_METRICS),
                    help="figures to show (default: every host figure)")
    a = ap.parse_args(argv)
    model = {}
    if a.validate:
        for r in json.loads(Path(a.validate).read_text())["rows"]:
            if not r.get("cv"):
                model[(r["scenario"], r["metric"])] = r["model"]
    names = sorted({re.sub(r"_r\d+\.jsonl\.gz$", "", p.name)
                    for p in (PROBE / SETS[0]).glob("*_r*.jsonl.gz")})
    print(f"{'scenario':36s} {'figure':24s} {'H200':>9s} {'gpufe':>9s}  "
          + "  ".join(f"{s + ' median [range]':>30s}" for s in SETS))
    for name in names:
        bundled = all_metrics(read_fe_trace(HERE / "h200" / f"{name}.jsonl.gz"),
                              program_of(name))
        per_set = {s: [all_metrics(read_fe_trace(p), program_of(name)) for p in runs(s, name)]
                   for s in SETS}
        for m in a.metrics:
            if not isinstance(bundled.get(m), (int, float)):
                continue
            g = model.get((name, m))
            cols = []
            inside = ""
            for s in SETS:
                vals = [r[m] for r in per_set[s] if isinstance(r.get(m), (int, float))]
                if not vals:
                    cols.append(f"{'-':>30s}")
                    continue
                cols.append(f"{statistics.median(vals):10.3f} [{min(vals):8.3f},{max(vals):8.3f}]")
                if g is not None and s == SETS[0] and min(vals) <= g <= max(vals):
                    inside = "  gpufe inside"
            gs = f"{g:9.3f}" if g is not None else f"{'-':>9s}"
            print(f"{name:36s} {m:24s} {bundled[m]:9.3f} {gs}  " + "  ".join(cols) + inside)
    print("\ndevlaunch: a process's instantiate (us) against its issue time a repetition (us)")
    for mode in ("hostplain", "ff", "host"):
        xs, ys, h200 = [], [], []
        for b in (1, 2, 4):
            for gate in ("", "_gate"):
                name = f"nocupti_dl_{mode}_b{b}_m100{gate}"
                for s in SETS:
                    for p in runs(s, name):
                        x, y = devlaunch_process(p)
                        xs.append(x)
                        ys.append(y)
                h200.append(devlaunch_process(HERE / "h200" / f"{name}.jsonl.gz"))
        print(f"  {mode:10s} r = {correlation(xs, ys):.2f} over {len(xs)} H100 processes; "
              f"H200 (instantiate, issue): "
              + ", ".join(f"({x:.0f}, {y:.0f})" for x, y in h200))


if __name__ == "__main__":
    sys.exit(main())
