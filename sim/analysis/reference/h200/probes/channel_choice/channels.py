"""Which channel a stream's kernels go on: python channels.py [--model] [SCENARIO ...]

For each bundled CUPTI trace named below (CUPTI's channel of every kernel record), a line:
the connections and streams, how often a stream's next kernel is on the channel of its
previous one ("stay"), how many channels a stream's kernels used and how many streams a
channel carried (medians). With --model, gpufe's line beside it (the h200 set, the
scenario as `gpufe validate` runs it). Reads the bundle only, so it runs anywhere gpufe is
installed.
"""

import statistics
import sys
from collections import defaultdict

from gpufe.sim.analysis.scenarios import scenario_paths
from gpufe.sim.analysis.traces import read_fe_trace
from gpufe.sim.analysis.validate import load_workload, profiler_of, scenario_params
from gpufe.sim.params import load
from gpufe.sim.run import simulate

#: streams against connections, launched breadth first or depth first
SCENARIOS = ("actgap_c16_A4_g100_hi0", "actgap_c16_A12_g100_hi0", "actgap_c16_A24_g100_hi0",
             "actgap_c32_A32_g100", "hyperq_c4_s8_o0", "hyperq_c8_s16_o0", "hyperq_c8_s64_o0",
             "fanout_c8_s32", "fanout2_c8_s64", "threads_T8_sh0", "threads_T12_sh0")


def choice(records):
    """(streams, stay fraction, median channels a stream, median streams a channel)."""
    ks = sorted((r for r in records if r["kind"] == "kernel"), key=lambda r: r["corr"])
    by_stream, by_channel = defaultdict(list), defaultdict(set)
    for k in ks:
        by_stream[k["stream"]].append(k["channel"])
        by_channel[k["channel"]].add(k["stream"])
    pairs = [(a, b) for seq in by_stream.values() for a, b in zip(seq, seq[1:])]
    stay = sum(a == b for a, b in pairs) / len(pairs) if pairs else 1.0
    return (len(by_stream), stay, statistics.median(len(set(s)) for s in by_stream.values()),
            statistics.median(len(s) for s in by_channel.values()))


def model_records(name, params):
    w = load_workload(scenario_paths(name)[0])
    return simulate(w, scenario_params(name, params), backend="compiled",
                    profiler=profiler_of(name)).records


def main(model=False, names=SCENARIOS):
    params = load("h200") if model else None
    print(f"{'scenario':26s} {'conn':>4s} {'streams':>7s} {'stay':>6s} {'ch/stream':>9s} "
          f"{'streams/ch':>10s}" + ("   gpufe: stay, ch/stream, streams/ch" if model else ""))
    for name in names:
        records = read_fe_trace(scenario_paths(name)[1])
        mc = records[0].get("max_connections") or "8"
        n, stay, cps, spc = choice(records)
        line = f"{name:26s} {mc:>4s} {n:7d} {stay:6.2f} {cps:9.1f} {spc:10.1f}"
        if model:
            _, mstay, mcps, mspc = choice(model_records(name, params))
            line += f"   {mstay:6.2f} {mcps:9.1f} {mspc:10.1f}"
        print(line)


if __name__ == "__main__":
    args = sys.argv[1:]
    main("--model" in args, [a for a in args if not a.startswith("--")] or SCENARIOS)
