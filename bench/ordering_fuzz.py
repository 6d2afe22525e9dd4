"""Random programs through the model, checked against an independent reference of CUDA's
ordering rules.

    python bench/ordering_fuzz.py --programs 300 --seed 1 --connections 1,4,8,32

Each program (``sim/analysis/program_gen.py``, seeded) runs through ``gpufe.sim.run.simulate``, the code
path of ``gpufe run``, in this process, and its timeline is checked by ``sim/analysis/hb_reference.py``
(a happens-before model that shares no code with the host driver model). Prints the number of
programs, orderings checked and violations, and the distinct violation classes. The first
failing program of each class is minimised (delta debugging: ops and repeat bodies dropped,
repeats shortened or unrolled, while a violation of the same class persists) and written to
``--out`` as a workload JSON file (``gpufe run FILE`` replays it), beside the program as
generated. A run of the model that fails (a deadlock, an API error on a valid program) is a
failure too. Exit status 1 on any violation or failure.

``--connections`` is the set ``max_connections`` is drawn from (default: all of 1..32). The
compiled backend builds the RTL once per distinct value (minutes each, then cached), so quick
runs and CI pass a few values.
"""

import argparse
import copy
from dataclasses import dataclass, field
import json
import pathlib
import re
import sys
import time


from gpufe.sim.analysis import hb_reference as hb
from gpufe.sim.params import load
from gpufe.sim.analysis.program_gen import generate
from gpufe.sim.run import simulate
from gpufe.sim.host.workload import parse_workload, WorkloadError, count_ops


def parse_connections(text):
    out = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-")
            out.update(range(int(a), int(b) + 1))
        else:
            out.add(int(part))
    if not out or not all(1 <= c <= 32 for c in out):
        raise argparse.ArgumentTypeError("connections: values in 1..32, e.g. 1,4,8,32 or 1-32")
    return sorted(out)


def run_one(workload, params, backend, times=None):
    """(violation classes -> first violation, violations, orderings checked) of one program;
    a run that fails is one violation of class ``model-error:<exception>:<message>``."""
    w = parse_workload(workload, workload.get("name", "fuzz"))
    times = {} if times is None else times
    t0 = time.perf_counter()
    try:
        result = simulate(w, params, backend=backend)
    except Exception as e:                                # noqa: BLE001 - any failure counts
        times["sim"] = time.perf_counter() - t0
        msg = str(e).split("\n")[0]
        # the class: the exception and its message without numbers and names
        key = re.sub(r"'[^']*'|\d+", "_", msg)[:80]
        return {f"model-error:{type(e).__name__}:{key}": {
            "rule": "model-error", "class": f"model-error:{type(e).__name__}",
            "message": f"{type(e).__name__}: {msg}"}}, [], 0
    t1 = time.perf_counter()
    violations, checked = hb.check(w, result.records)
    times["sim"], times["check"] = t1 - t0, time.perf_counter() - t1
    classes = {}
    for v in violations:
        classes.setdefault(v["class"], v)
    return classes, violations, checked


def valid(workload):
    """Whether a candidate program is valid (for the reference and the workload parser)."""
    try:
        hb.analyse(parse_workload(workload, "candidate"))
        return True
    except (WorkloadError, hb.InvalidProgram):
        return False


def _lists(program, path=()):
    """Paths to every op list of the program: () and each repeat body (index paths)."""
    yield path
    for i, op in enumerate(_get(program, path)):
        if op["op"] == "repeat":
            yield from _lists(program, path + (i,))


def _get(program, path):
    lst = program
    for i in path:
        lst = lst[i]["body"]
    return lst


def _names(program):
    """(field, name) of every graph, stream and event the program makes, in that order."""
    out = []
    for op in _walk(program):
        if op["op"] == "stream_end_capture":
            out.append(("graph", op["graph"]))
    for op in _walk(program):
        if op["op"] in ("stream_create", "event_create"):
            out.append((op["op"].split("_")[0], op["name"]))
    return out


def _walk(program):
    for op in program:
        yield op
        if op["op"] == "repeat":
            yield from _walk(op["body"])


def _without(program, key, name):
    """The program without the ops that name stream, event or graph ``name``; a graph goes
    with its whole capture (begin to end on its origin stream)."""
    ends = {}
    if key == "graph":
        for lst in [program] + [op["body"] for op in _walk(program) if op["op"] == "repeat"]:
            for j, op in enumerate(lst):
                if op["op"] == "stream_end_capture" and op["graph"] == name:
                    i = max((k for k in range(j) if lst[k]["op"] == "stream_begin_capture"
                             and lst[k]["stream"] == op["stream"]), default=j)
                    ends[id(lst)] = (i, j)
    return _without_list(program, key, name, ends)


def _without_list(lst, key, name, ends):
    span = ends.get(id(lst))
    out = []
    for k, op in enumerate(lst):
        if span and span[0] <= k <= span[1]:
            continue
        if op.get(key) == name or (op["op"] == f"{key}_create" and op.get("name") == name):
            continue
        if op["op"] == "repeat":
            op = dict(op, body=_without_list(op["body"], key, name, ends))
        out.append(op)
    return out


def minimise(workload, cls, params, backend, budget_s=120.0, log=None):
    """A smaller program that still breaks an ordering of class ``cls``."""
    best = copy.deepcopy(workload)
    t0 = time.perf_counter()
    tests = [0]

    def still_fails(cand):
        if time.perf_counter() - t0 > budget_s or not valid(cand):
            return False
        tests[0] += 1
        classes, _, _ = run_one(cand, params, backend)
        return cls in classes

    def with_list(w, path, new):
        c = copy.deepcopy(w)
        if path:
            _get(c["program"], path[:-1])[path[-1]]["body"] = new
        else:
            c["program"] = new
        return c

    progress = True
    while progress and time.perf_counter() - t0 < budget_s:
        progress = False
        # drop whole things at once: a graph (its capture, instantiation and launches), a
        # stream or an event with every op that names it
        for key, name in _names(best["program"]):
            cand = dict(best, program=_without(best["program"], key, name))
            if cand["program"] != best["program"] and still_fails(cand):
                best, progress = cand, True
        # drop chunks of ops from every list, largest chunks first
        for path in list(_lists(best["program"])):
            try:
                lst = _get(best["program"], path)
            except (IndexError, KeyError):
                continue
            size = max(1, len(lst) // 2)
            while size >= 1:
                start = 0
                while start < len(lst):
                    cand = with_list(best, path, lst[:start] + lst[start + size:])
                    if lst[start:start + size] and still_fails(cand):
                        best, lst, progress = cand, _get(cand["program"], path), True
                    else:
                        start += size
                size //= 2
        # shorten repeats, then unroll them into their body
        for path in list(_lists(best["program"]))[1:]:
            try:
                parent, i = _get(best["program"], path[:-1]), path[-1]
                op = parent[i]
            except (IndexError, KeyError):
                continue
            if op["op"] != "repeat":
                continue
            for count in sorted({1, 2, op["count"] // 2}):
                if count < op["count"]:
                    cand = copy.deepcopy(best)
                    _get(cand["program"], path[:-1])[i]["count"] = count
                    if still_fails(cand):
                        best, progress = cand, True
                        break
            parent = _get(best["program"], path[:-1])
            op = parent[i]
            if op["count"] == 1:
                cand = with_list(best, path[:-1], parent[:i] + op["body"] + parent[i + 1:])
                if still_fails(cand):
                    best, progress = cand, True
                    break                                 # the paths changed
    # plainer ops, all at once where the violation allows it
    for field, value, kinds in (("grid", [1], ("launch_kernel",)),
                                ("block", [32], ("launch_kernel",)),
                                ("priority", 0, ("stream_create",)),
                                ("timing", False, ("event_create",))):
        cand = copy.deepcopy(best)
        for op in _walk(cand["program"]):
            if op["op"] in kinds:
                op[field] = value
        if cand != best and still_fails(cand):
            best = cand
    if log:
        log(f"    minimised in {tests[0]} runs, {time.perf_counter() - t0:.1f} s: "
            f"{count_ops(workload['program'])} -> {count_ops(best['program'])} calls")
    return best


@dataclass
class FuzzResult:
    programs: int = 0
    calls: int = 0
    checked: int = 0
    violations: int = 0
    failing: int = 0                 # programs with a violation or a failed run
    first: dict = field(default_factory=dict)      # class -> (seed, workload, violation)
    counts: dict = field(default_factory=dict)     # class -> programs
    sim_s: float = 0.0
    check_s: float = 0.0
    elapsed_s: float = 0.0

    def report(self):
        lines = []
        for cls in sorted(self.first):
            seed, _, v = self.first[cls]
            lines.append(f"{cls}: {self.counts[cls]} programs, first seed {seed}: "
                         f"{v['message']}")
        return "\n".join(lines)


def calls_of(w):
    """API calls of a generated program, over its host threads if it has them."""
    return sum(count_ops(t["program"]) for t in w["threads"]) if "threads" in w \
        else count_ops(w["program"])


def fuzz(programs, seed, connections, params, backend="compiled", log=None, verbose=False):
    """Run ``programs`` generated programs (seeds ``"{seed}.{i}"``) and check each."""
    res = FuzzResult(programs=programs)
    t0 = time.perf_counter()
    for i in range(programs):
        name = f"{seed}.{i}"
        w = generate(name, connections)
        times = {}
        classes, violations, checked = run_one(w, params, backend, times)
        res.sim_s += times.get("sim", 0.0)
        res.check_s += times.get("check", 0.0)
        res.checked += checked
        res.calls += calls_of(w)
        res.violations += len(violations) or len(classes)
        res.failing += bool(classes)
        for cls, v in classes.items():
            res.counts[cls] = res.counts.get(cls, 0) + 1
            if cls not in res.first:
                res.first[cls] = (name, w, v)
                if log:
                    log(f"  program {i} (seed {name}, max_connections "
                        f"{w['max_connections']}): new class {cls}\n    {v['message']}")
        if verbose and log:
            log(f"  program {i}: max_connections {w['max_connections']}, "
                f"{calls_of(w)} calls, {checked} orderings, "
                f"{len(violations)} violations, {times.get('sim', 0):.2f} s")
    res.elapsed_s = time.perf_counter() - t0
    return res


def write_failures(res, out, params, backend, minimise_budget=None, log=None):
    """Each class's first failing program, as generated and minimised, into ``out``."""
    written = {}
    done = []                        # (calls, minimised program, its classes, its seed)
    for cls, (seed, w, v) in sorted(res.first.items()):
        out.mkdir(parents=True, exist_ok=True)
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", cls).strip("_")
        full = dict(w, description=f"{w['description']}; breaks {cls}: {v['message']}")
        (out / f"{stem}.full.json").write_text(json.dumps(full, indent=1) + "\n")
        small, origin = w, seed
        if minimise_budget and "threads" not in w:
            # (a program of host threads is written as generated)
            # start from a program already minimised for another class, if it shows this one
            _, start, origin = min(((n, p, o) for n, p, shown, o in done
                                    if cls in shown and "threads" not in p),
                                   default=(0, w, seed), key=lambda x: x[0])
            if log:
                log(f"  minimising {cls} (seed {seed}"
                    f"{', from a smaller program' if start is not w else ''})")
            small = minimise(start, cls, params, backend, minimise_budget, log)
        classes, _, _ = run_one(small, params, backend)
        done.append((calls_of(small), small, set(classes), origin))
        msg = classes.get(cls, v)["message"]
        small = dict(small, name=f"fuzz_{stem}",
                     description=f"ordering fuzzer, seed {origin!r}"
                                 f"{', minimised' if minimise_budget else ''}; breaks {cls}: "
                                 f"{msg}")
        path = out / f"{stem}.json"
        path.write_text(json.dumps(small, indent=1) + "\n")
        written[cls] = path
    return written


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--backend", choices=("compiled", "pysim"), default="compiled")
    ap.add_argument("--connections", type=parse_connections, default=list(range(1, 33)),
                    help="max_connections values to draw from: 1,4,8,32 or 1-32 (default)")
    ap.add_argument("--params", default="h200")
    ap.add_argument("--out", default="out/ordering_fuzz")
    ap.add_argument("--no-minimise", action="store_true")
    ap.add_argument("--minimise-budget", type=float, default=120.0,
                    help="seconds of minimisation per violation class")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)

    params = load(args.params)
    log = lambda m: print(m, file=sys.stderr, flush=True)
    res = fuzz(args.programs, args.seed, args.connections, params, args.backend, log,
               args.verbose)
    written = write_failures(res, pathlib.Path(args.out), params, args.backend,
                             None if args.no_minimise else args.minimise_budget, log)
    n = max(res.programs, 1)
    print(f"ordering fuzz: {res.programs} programs (seed {args.seed}, backend {args.backend}, "
          f"connections {','.join(map(str, args.connections))}): {res.calls} API calls, "
          f"{res.checked} orderings checked, {res.violations} violations in {res.failing} "
          f"programs")
    print(f"  {res.elapsed_s:.1f} s, {res.elapsed_s / n:.3f} s a program (model "
          f"{res.sim_s / n:.3f} s, reference {res.check_s / n:.4f} s)")
    for cls in sorted(res.first):
        print(f"  {cls}: {res.counts[cls]} programs; first seed {res.first[cls][0]}; "
              f"written: {written.get(cls)}")
    return 1 if res.first else 0


if __name__ == "__main__":
    sys.exit(main())
