"""Summarise probe graph_branches' runs (branches.jsonl): per configuration (CUPTI, issue
order, branches B, kernels a branch N, spin ns), the medians over its launches of the launch
call, the sync, each branch's first start after the launch's first kernel, and the gap
between a branch's kernels.  Run: python figures.py [branches.jsonl[.gz]] (default: the H100
run kept in h100/)"""
import collections
import gzip
import json
import pathlib
import statistics
import sys


def summary(path):
    runs = collections.defaultdict(list)
    path = pathlib.Path(path)
    text = (gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz"
            else path.read_text())
    for line in text.splitlines():
        r = json.loads(line)
        runs[(r["cupti"], r["order"], r["B"], r["N"], r["ns"])].append(r)
    out = []
    for key in sorted(runs):
        rs = runs[key]
        med = statistics.median
        firsts = [med(r["branches"][b]["first"] for r in rs) / 1e3 for b in range(key[2])]
        gaps = [med(r["branches"][b]["gap"] for r in rs) for b in range(key[2])]
        out.append({"cupti": key[0], "order": key[1], "B": key[2], "N": key[3], "ns": key[4],
                    "launches": len(rs), "launch_us": med(r["launch_ns"] for r in rs) / 1e3,
                    "sync_us": med(r["sync_ns"] for r in rs) / 1e3,
                    "first_us": firsts, "gap_ns": gaps,
                    # each branch's start after the one before it, per kernel of a branch
                    "stagger_per_node_us": [(b - a) / key[3] for a, b in zip(firsts, firsts[1:])]})
    return out


if __name__ == "__main__":
    here = pathlib.Path(__file__).parent
    for s in summary(sys.argv[1] if len(sys.argv) > 1 else here / "h100" / "branches.jsonl.gz"):
        print(f"cupti {s['cupti']} order {s['order']} B {s['B']} N {s['N']:3d} ns {s['ns']:5d}: "
              f"launch {s['launch_us']:7.1f} us, sync {s['sync_us']:7.1f} us, branch starts "
              f"{', '.join(f'{x:.2f}' for x in s['first_us'])} us, gaps "
              f"{', '.join(str(int(g)) for g in s['gap_ns'])} ns"
              + (f", {statistics.median(s['stagger_per_node_us']):.2f} us a node between branches"
                 if s["stagger_per_node_us"] else ""))
