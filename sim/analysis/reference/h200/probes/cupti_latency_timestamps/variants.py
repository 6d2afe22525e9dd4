"""What each CUPTI setting costs on the device, from this folder's traces.

    python variants.py

actgap (A streams of 200 dependent k_stampp kernels behind a gate, stamp=1): the per-stream
period from the kernels' own %globaltimer stamps (the same clock with CUPTI on or off), all
but the last 12, and over the last 10; with kernel records, the median kernel duration and
submitted -> start. chain (100 empty kernels behind a gate, 3 reps): the gap between
dependent kernels with more than 10 left in the queue and with 10 or fewer. hyperq and
fanout2 (record_more.sh: kernels of 100 us / 2 ms, several streams a channel): the gap
between consecutive kernels of a stream, with and without latency timestamps.
"""

import os
import statistics
import sys

from gpufe.sim.analysis.traces import read_fe_trace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cupti_queue_depth"))
from gap_by_depth import reps_of, gaps_by_left  # noqa: E402

VARIANTS = {"nocupti": "CUPTI off", "rt": "runtime API records only",
            "kern_nolat": "kernel + runtime records, no latency timestamps",
            "nolat": "all records, no latency timestamps",
            "kern": "kernel + runtime records, latency timestamps",
            "full": "all records, latency timestamps (as the calibration set)"}


def actgap_row(path):
    recs = read_fe_trace(path)
    body, tail = [], []
    for r in recs:
        if r.get("what") == "act_stamps":
            s = r["stamps"]
            p = [(b - a) / 1000 for a, b in zip(s, s[1:])]
            body += p[:-12]
            tail += p[-10:]
    ks = [r for r in recs if r["kind"] == "kernel" and "stamp" in r["name"]]
    dur = statistics.median((k["end"] - k["start"]) / 1000 for k in ks) if ks else None
    sub = [(k["start"] - k["submitted"]) / 1000 for k in ks if k.get("submitted")]
    return statistics.median(body), statistics.median(tail), dur, (statistics.median(sub)
                                                                   if sub else None)


def chain_row(path):
    by_left = gaps_by_left(reps_of(path))
    deep = [g for k, v in by_left.items() if k > 10 for g in v]
    shallow = [g for k, v in by_left.items() if k <= 10 for g in v]
    return statistics.median(deep), statistics.median(shallow)


def stream_gap(path):
    """Median gap between consecutive long kernels of one stream (us)."""
    ks = sorted((r for r in read_fe_trace(path) if r["kind"] == "kernel"
                 and r["end"] - r["start"] > 50000), key=lambda r: r["start"])
    by_stream = {}
    for k in ks:
        by_stream.setdefault(k["stream"], []).append(k)
    gaps = [(b["start"] - a["end"]) / 1000 for run in by_stream.values()
            for a, b in zip(run, run[1:]) if b["start"] - a["end"] < 50000]
    return statistics.median(gaps)


def _fmt(x):
    return "-" if x is None else f"{x:.3f}"


def main():
    for a in (1, 8):
        print(f"actgap A={a}: period, last 10, kernel, submitted->start (us)")
        for v, what in VARIANTS.items():
            path = os.path.join(HERE, f"actgap_stamp_A{a}_{v}.jsonl.gz")
            if os.path.exists(path):
                print(f"  {what:58s} " + "  ".join(_fmt(x) for x in actgap_row(path)))
    print("chain n=100: gap with more than 10 left, with 10 or fewer (us)")
    for v, what in VARIANTS.items():
        path = os.path.join(HERE, f"chain_gate_n100_{v}.jsonl.gz")
        if os.path.exists(path) and v != "rt":
            print(f"  {what:58s} " + "  ".join(_fmt(x) for x in chain_row(path)))
    print("several channels: gap between a stream's kernels, all records with / without "
          "latency timestamps (us)")
    for name in ("hyperq_c2_s2", "hyperq_c8_s8", "fanout2_c8_s32"):
        gaps = [stream_gap(os.path.join(HERE, f"{name}_{v}.jsonl.gz")) for v in ("full", "nolat")]
        print(f"  {name:58s} " + "  ".join(_fmt(x) for x in gaps))


if __name__ == "__main__":
    main()
