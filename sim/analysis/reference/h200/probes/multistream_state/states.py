"""Prints, for each run of record.sh, submitted -> start of every kernel in launch order (us),
with the stream as a letter: where the longer state begins."""
import glob, gzip, json, os, statistics

HERE = os.path.dirname(os.path.abspath(__file__))
for path in sorted(glob.glob(os.path.join(HERE, "*.jsonl.gz"))):
    recs = [json.loads(l) for l in gzip.open(path)]
    ks = sorted((r for r in recs if r["kind"] == "kernel"), key=lambda r: r["submitted"])
    streams = {s: chr(ord("A") + i) for i, s in enumerate(sorted({k["stream"] for k in ks}))}
    s2s = [(k["start"] - k["submitted"]) / 1000 for k in ks]
    first_slow = next((i for i in range(len(s2s) - 2) if min(s2s[i:i + 3]) > 0.6), None)
    name = os.path.basename(path)[:-9]
    print(f"{name:16s} n={len(ks):3d} median {statistics.median(s2s):.3f} us; longer from "
          f"kernel {first_slow}")
    print("   " + " ".join(f"{streams[k['stream']]}{v * 1000:.0f}" for k, v in zip(ks, s2s)))
