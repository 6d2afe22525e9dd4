"""Dependent-kernel gap against the number of kernels still queued, from this folder's traces.

    python gap_by_depth.py     # every trace here: median gap for 1..14 kernels left, and deeper

A rep is a run of kernels with no gap over 50 us between them; "left" counts the kernel that
starts and those queued behind it.
"""

import glob
import os
import statistics

from gpufe.sim.analysis.traces import read_fe_trace


def reps_of(path):
    kernels = sorted((r for r in read_fe_trace(path)
                      if r["kind"] == "kernel" and "empty" in r["name"]),
                     key=lambda r: r["start"])
    reps = [[kernels[0]]]
    for a, b in zip(kernels, kernels[1:]):
        if b["start"] - a["end"] > 50000:
            reps.append([b])
        else:
            reps[-1].append(b)
    return [r for r in reps if len(r) >= 15]


def gaps_by_left(reps):
    by_left = {}
    for rep in reps:
        for i in range(1, len(rep)):
            gap = (rep[i]["start"] - rep[i - 1]["end"]) / 1000
            by_left.setdefault(len(rep) - i, []).append(gap)
    return by_left


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(here, "*.jsonl.gz"))):
        by_left = gaps_by_left(reps_of(path))
        shallow = [g for k, v in by_left.items() if k <= 10 for g in v]
        deep = [g for k, v in by_left.items() if k > 10 for g in v]
        row = " ".join(f"{k}:{statistics.median(by_left[k]):.2f}" for k in sorted(by_left)[:14])
        print(f"{os.path.basename(path):32s} <=10 left {statistics.median(shallow):.2f} us, "
              f">10 left {statistics.median(deep):.2f} us   [{row}]")


if __name__ == "__main__":
    main()
