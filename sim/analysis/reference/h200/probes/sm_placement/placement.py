"""Probe sm_placement's figures: python placement.py [FILE ...] (default: every sm_*.json.gz)

Per run (the second repetition): each chain's period during the load ((last - first start) /
(kernels - 1), us; the high-priority chains first), the gates' SMs and their end after the
load's start, the SMs the load's first wave gave one block (the others two), how the load's
block starts cluster (starts within 0.5 us of each other, over 800 us of the load's middle:
one cluster a wave when the waves stay in step), the high-priority kernels' start against
the latest load block end on their SM, and the gaps between a high-priority chain's starts.
"""

import bisect
import collections
import gzip
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent


def quantiles(xs, qs=(0.1, 0.5, 0.9)):
    xs = sorted(xs)
    return [round(xs[int(q * len(xs))], 2) for q in qs] if xs else []


def figures(path):
    d = json.load(gzip.open(path))
    r = d["reps"][-1]
    load, chains, gates = r["load"], r["chains"], r["gates"]
    l0, l1 = min(b[1] for b in load), max(b[2] for b in load)
    period = [round((c[-1][1] - c[0][1]) / (len(c) - 1) / 1e3, 2) for c in chains]
    first = collections.Counter(b[0] for b in load if b[1] - l0 < 1000)
    single = sorted(sm for sm in range(d["sms"]) if first.get(sm, 0) == 1)
    starts = sorted(b[1] for b in load if l0 + 600e3 < b[1] < l0 + 1400e3)
    clusters = []
    for t in starts:
        if clusters and t - clusters[-1][-1] < 500:
            clusters[-1].append(t)
        else:
            clusters.append([t])
    ends = collections.defaultdict(list)
    for b in load:
        ends[b[0]].append(b[2])
    for v in ends.values():
        v.sort()
    lag, gaps = [], []
    for c in chains[:d["hi"]]:
        during = [k for k in c if l0 < k[1] < l1]
        gaps += [(b[1] - a[1]) / 1e3 for a, b in zip(during, during[1:])]
        for sm, t in during:
            i = bisect.bisect_right(ends[sm], t)
            if i:
                lag.append((t - ends[sm][i - 1]) / 1e3)
    return {"A": d["A"], "hi": d["hi"], "period_us": period,
            "gates": [(g[0], round((g[2] - l0) / 1e3, 1)) for g in gates],
            "one_block_sms": single, "clusters_800us": len(clusters),
            "hi_start_after_block_end_us": quantiles(lag), "hi_gap_us": quantiles(gaps),
            "load_us": round((l1 - l0) / 1e3)}


if __name__ == "__main__":
    for p in sys.argv[1:] or sorted(HERE.glob("sm_*.json.gz")):
        f = figures(p)
        print(pathlib.Path(p).name, json.dumps(f))
