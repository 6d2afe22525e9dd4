"""The validation metrics of each repeated run next to the bundled trace's (and the model's with
--model): python noise.py [--model]. Run from anywhere; reads the traces beside it."""

import statistics
import sys
from pathlib import Path

from gpufe.sim.analysis.traces import read_fe_trace
from gpufe.sim.analysis.validate import all_metrics, run_scenario, measured_metrics
from gpufe.sim.analysis.scenarios import program_of
from gpufe.sim.params import load

HERE = Path(__file__).parent
METRICS = ("median_gap_us", "launch_api_us", "max_concurrent", "wall_per_rep_us")
SCENARIOS = ("fanout_c32_s16", "fanout_c32_s32", "fanout_c8_s16", "fanout_c8_s32",
             "copy_busy1", "xstream_t1")


def main(model=False):
    params = load("h200")
    for name in SCENARIOS:
        runs = [all_metrics(read_fe_trace(p), program_of(name))
                for p in sorted(HERE.glob(f"{name}_r*.jsonl.gz"))]
        bundled = measured_metrics(name)
        sim = run_scenario(name, params)[0] if model else None
        for m in METRICS:
            if m not in bundled:
                continue
            vals = [r[m] for r in runs]
            line = (f"{name:16s} {m:16s} bundled {bundled[m]:9.2f}  runs "
                    + " ".join(f"{v:9.2f}" for v in vals)
                    + f"  median {statistics.median(vals):9.2f}")
            if sim:
                line += f"  model {sim[m]:9.2f}"
            print(line)


if __name__ == "__main__":
    main("--model" in sys.argv)
