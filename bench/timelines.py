"""Write the timeline of every bundled example and reference scenario, and their digests.

    python bench/timelines.py --out /tmp/before     # before a change
    python bench/timelines.py --out /tmp/after      # after it
    python bench/timelines.py --compare /tmp/before /tmp/after

Refactors must keep timelines byte-identical; a fix that changes one must say which and why.
Examples run with ``--profiler off``; reference scenarios with the profiler their trace was
recorded with (as ``gpufe validate`` runs them) and again with the other one
(``scenario-<profiler>/``); the bench workload (``bench/host_bench.py``'s 2,000 launches on
4 streams) last. The compiled backend is used unless ``--backend pysim``; ``--compute blocks``
runs the per-block compute engine (the aggregate one's reference).
"""

import argparse
import hashlib
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def workloads():
    """(label, workload path, profiler) for every example and scenario."""
    from gpufe.sim.analysis.scenarios import scenario_names, scenario_paths
    from gpufe.sim.analysis.validate import profiler_of
    out = [(f"example/{p.stem}", p, "off") for p in sorted((ROOT / "examples").glob("*.json"))]
    out += [(f"scenario/{n}", scenario_paths(n)[0], profiler_of(n)) for n in scenario_names()]
    out += [(f"scenario-{other}/{n}", scenario_paths(n)[0], other) for n in scenario_names()
            for other in ("off", "cupti") if other != profiler_of(n)]
    out += [("bench/host_bench_2000", None, "off")]
    return out


def bench_workload():
    sys.path.insert(0, str(ROOT / "bench"))
    from host_bench import launch_workload
    return launch_workload(2000, streams=4)


def write_all(out_dir, only=None, backend="compiled", compute="aggregate"):
    from gpufe.sim.params import load
    from gpufe.sim.run import simulate
    from gpufe.sim.analysis.timeline import write_jsonl
    from gpufe.sim.host.workload import load_workload
    params = load()
    out_dir = pathlib.Path(out_dir)
    for label, path, profiler in workloads():
        if only and only not in label:
            continue
        dest = out_dir / f"{label}.jsonl"
        dest.parent.mkdir(parents=True, exist_ok=True)
        w = bench_workload() if path is None else load_workload(path)
        r = simulate(w, params, backend=backend, profiler=profiler, compute=compute)
        write_jsonl(r.records, dest)
        digest = hashlib.sha256(dest.read_bytes()).hexdigest()[:16]
        print(f"{label:40s} {digest}  ({r.wall_s:.1f} s)", flush=True)


def compare(a, b):
    a, b = pathlib.Path(a), pathlib.Path(b)
    names = sorted({p.relative_to(a) for p in a.rglob("*.jsonl")}
                   | {p.relative_to(b) for p in b.rglob("*.jsonl")})
    changed = 0
    for n in names:
        pa, pb = a / n, b / n
        if not pa.exists() or not pb.exists():
            print(f"{n}: only in {'the second' if pb.exists() else 'the first'}")
            changed += 1
        elif pa.read_bytes() != pb.read_bytes():
            print(f"{n}: differs")
            changed += 1
    print(f"{len(names)} timelines, {changed} differ")
    return changed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="folder for the timelines")
    ap.add_argument("--only", help="only labels containing this")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    ap.add_argument("--backend", choices=("compiled", "pysim"), default="compiled")
    ap.add_argument("--compute", choices=("aggregate", "blocks"), default="aggregate")
    args = ap.parse_args()
    if args.compare:
        return 1 if compare(*args.compare) else 0
    if not args.out:
        ap.error("--out or --compare")
    write_all(args.out, args.only, args.backend, args.compute)
    return 0


if __name__ == "__main__":
    sys.exit(main())
