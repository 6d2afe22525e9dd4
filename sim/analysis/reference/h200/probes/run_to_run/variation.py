"""The probe's figures: per trace, the median cudaLaunchKernel time, the median gap between
consecutive calls of one thread (the program's own code), the median submitted -> start and
the median kernel time.

    python variation.py [folder]      # default: this folder
"""

import collections
import gzip
import json
import pathlib
import statistics
import sys


def figures(path):
    calls = collections.defaultdict(list)
    launches, s2s, dur = [], [], []
    with gzip.open(path, "rt") as f:
        for line in f:
            r = json.loads(line)
            if r["kind"] == "runtime":
                calls[r["tid"]].append((r["start"], r["end"]))
                if r["name"].startswith("cudaLaunchKernel"):
                    launches.append(r["end"] - r["start"])
            elif r["kind"] == "kernel" and r.get("submitted"):
                s2s.append(r["start"] - r["submitted"])
                dur.append(r["end"] - r["start"])
    gaps = [b[0] - a[1] for v in calls.values() for a, b in zip(sorted(v), sorted(v)[1:])]
    med = lambda xs: statistics.median(xs) / 1e3 if xs else float("nan")
    return med(launches), med(gaps), med(s2s), med(dur)


def main(folder):
    print(f"{'trace':34s} {'launch us':>9s} {'gap us':>7s} {'s2s us':>7s} {'kernel us':>9s}")
    for p in sorted(pathlib.Path(folder).glob("*.jsonl.gz")):
        launch, gap, s2s, dur = figures(p)
        print(f"{p.name[:-9]:34s} {launch:9.2f} {gap:7.3f} {s2s:7.3f} {dur:9.3f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent)
