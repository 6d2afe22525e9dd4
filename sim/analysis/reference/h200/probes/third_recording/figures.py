"""The third recording's figures: python figures.py [--model] [--wider]

Repeats: every validation metric of each repeated host-bound program, the bundled trace's
value beside the five new runs', their median and spread ((max - min) / median), and with
--model gpufe's (the h200 set, as `gpufe validate` runs it); the torch2 programs' unprofiled
and profiled steps over the five step_cost processes. --wider: the new sizes' validation
rows (model against measured; the calibration never saw these sizes). Reads the bundle
(`reference/h200/repeats/`, the scenarios `THIRD_BUNDLE` names), so it runs anywhere gpufe
is installed.
"""

import json
import statistics
import sys

from gpufe.sim.analysis.scenarios import HERE, THIRD_BUNDLE
from gpufe.sim.analysis.validate import (REPEATS, compared_metrics, measured_metrics,
                                         repeated_metrics, run_scenario, validate)
from gpufe.sim.params import load

#: the repeated programs (their bundled scenario names)
REPEATED = ([f"fanout_c{c}_s{s}" for c in (1, 8, 32) for s in (16, 32, 64, 128, 256)]
            + [f"fanout2_c{c}_s{s}" for c in (1, 8) for s in (32, 64)]
            + ["xstream_t1", "copy_busy0", "copy_busy1", "procs_empty_P2"])
#: metrics whose run-to-run spread is reported (counts equal by construction left out)
SPREAD_OF = ("wall_per_rep_us", "gpu_span_us", "median_gap_us", "launch_api_us",
             "queued_to_submitted_us", "submitted_to_start_us", "max_concurrent",
             "run_len", "switch_gap_us", "makespan_us", "copy_h2d_gbps", "copy_d2h_gbps",
             "copy_d2d_gbps")


def spread(values):
    m = statistics.median(values)
    return m, ((max(values) - min(values)) / m if m else 0.0)


def repeats(model=False):
    params = load("h200")
    print(f"{'scenario':16s} {'metric':22s} {'bundled':>10s} {'runs 1-5':>54s} "
          f"{'median':>10s} {'spread':>7s}" + (f" {'gpufe':>10s}" if model else ""))
    for name in REPEATED:
        runs = repeated_metrics(name)
        bundled = measured_metrics(name)
        sim = run_scenario(name, params)[0] if model else None
        for m in compared_metrics(name):
            if m not in SPREAD_OF or m not in bundled:
                continue
            vals = [r[m] for r in runs if r.get(m) is not None]
            med, rel = spread([bundled[m]] + vals)
            line = (f"{name:16s} {m:22s} {bundled[m]:10.2f} "
                    + "".join(f"{v:11.2f}" for v in vals).rjust(54)
                    + f" {med:10.2f} {100 * rel:6.0f}%")
            if sim and m in sim:
                line += f" {sim[m]:10.2f}"
            print(line)


def torch_steps():
    print(f"\n{'program':10s} {'variant':9s} {'unprofiled us (median, range)':>34s} "
          f"{'profiled us (median, range)':>34s}")
    for prog in ("twostream", "loader", "optstep"):
        by_variant = {}
        for p in sorted((HERE / "h200" / REPEATS).glob(f"steps_{prog}_r*.json")):
            for v, d in json.loads(p.read_text())["variants"].items():
                off, on = by_variant.setdefault(v, ([], []))
                off += d["off_us"]
                on += d["on_us"]
        for v, (off, on) in by_variant.items():
            print(f"{prog:10s} {v:9s} {statistics.median(off):12,.1f} "
                  f"({min(off):,.0f}-{max(off):,.0f}, {len(off)} rounds)".ljust(34)
                  + f" {statistics.median(on):12,.1f} ({min(on):,.0f}-{max(on):,.0f})")


def wider():
    rows = validate(load("h200"), THIRD_BUNDLE)
    for r in rows:
        print(f"{r['scenario']:44s} {r['metric']:24s} {r['model']:12.3f} {r['measured']:12.3f} "
              f"{100 * r['rel_error']:+7.1f}%")


if __name__ == "__main__":
    if "--wider" in sys.argv:
        wider()
    else:
        repeats("--model" in sys.argv)
        torch_steps()
