"""Random programs through the model, checked against an independent reference of CUDA's
ordering rules.

    python bench/ordering_fuzz.py --programs 300 --seed 1 --connections 1,4,8,32

Each program (``sim/analysis/program_gen.py``, seeded: single programs, host threads and
processes) runs through ``gpufe.sim.run.simulate``, the code path of ``gpufe run``, in this
process, and its timeline is checked by ``sim/analysis/hb_reference.py`` (a happens-before
model that shares no code with the host driver model). Prints the number of programs,
orderings checked and violations, a table of the op families (``hb_reference.FAMILIES``:
programs that use each, orderings checked, violations, programs with violations, false
deadlocks and other failed runs), and the distinct violation classes. The first failing
program of each class is minimised (delta debugging over every program of the workload:
threads and processes dropped, ops and repeat bodies dropped, repeats shortened or unrolled,
while a violation of the same class persists) and written to ``--out`` as a workload JSON
file (``gpufe run FILE`` replays it), beside the program as generated. A run of the model
that fails (a deadlock, an API error on a valid program) is a failure too: a deadlock on a
valid program is a false deadlock. Exit status 1 on any violation or failure.

``--connections`` is the set ``max_connections`` is drawn from (default: all of 1..32; every
value runs on the same compiled model). ``--start`` runs the programs from that index on (runs
of one seed split in parts, run side by side); ``--violations FILE`` writes every violation
as a JSON line (with its program's seed, its families, its rule and class).
"""

import argparse
import contextlib
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


def run_one(workload, params, backend, times=None, families=None):
    """(violation classes -> first violation, violations, orderings checked) of one program;
    a run that fails is one violation of class ``model-error:<exception>:<message>``, a
    program the reference refuses one of class ``invalid-program:<message>`` (the generator's
    fault). ``families``: a dict that gets the orderings checked and violations per op
    family."""
    w = parse_workload(workload, workload.get("name", "fuzz"))
    times = {} if times is None else times
    t0 = time.perf_counter()

    def key(msg):
        # the class: the message without numbers and names
        return re.sub(r"'[^']*'|\d+", "_", msg)[:80]
    try:
        result = simulate(w, params, backend=backend)
    except Exception as e:                                # noqa: BLE001 - any failure counts
        times["sim"] = time.perf_counter() - t0
        msg = str(e).split("\n")[0]
        return {f"model-error:{type(e).__name__}:{key(msg)}": {
            "rule": "model-error", "class": f"model-error:{type(e).__name__}",
            "message": f"{type(e).__name__}: {msg}"}}, [], 0
    t1 = time.perf_counter()
    try:
        violations, checked, fams = hb.check_families(w, result.records)
    except hb.InvalidProgram as e:
        times["sim"], times["check"] = t1 - t0, time.perf_counter() - t1
        return {f"invalid-program:{key(str(e))}": {
            "rule": "invalid-program", "class": "invalid-program",
            "message": f"the reference refuses the program: {e}"}}, [], 0
    times["sim"], times["check"] = t1 - t0, time.perf_counter() - t1
    if families is not None:
        for f, (n, v) in fams.items():
            c = families.setdefault(f, [0, 0])
            c[0] += n
            c[1] += v
    classes = {}
    for v in violations:
        classes.setdefault(v["class"], v)
    return classes, violations, checked


def program_families(w):
    """The op families a (generated) workload uses: what its ops and shape exercise."""
    out = {"work", "cpu", "stream"}
    procs = w.get("processes")
    if procs:
        out.add("processes")
    for p in procs or [w]:
        if p.get("threads"):
            out |= {"threads", "cross-thread"}
        for t in p.get("threads") or [p]:
            for op in _walk(t["program"]):
                k = op["op"]
                if k in ("event_record", "stream_wait_event"):
                    out.add("event")
                elif k in hb.HOST_SYNCS:
                    out.add("host-sync")
                elif k == "barrier":
                    out.add("barrier")
                elif k == "graph_launch":
                    out.add("graph")
                elif k == "graph_add_conditional":
                    out.add("conditional")
                elif k in ("graph_exec_set_params", "graph_exec_update", "graph_exec_destroy"):
                    out.add("graph-update")
                elif k == "graph_upload":
                    out.add("graph-upload")
                elif k == "stream_create" and op.get("priority"):
                    out.add("priority")
                elif k == "launch_kernel":
                    if op.get("pdl"):
                        out.add("pdl")
                    if (op.get("device_graph_launch") or {}).get("count", 0):
                        out.add("device-launch")
                    if op.get("block_ns"):
                        out.add("params")
    return out


def valid(workload):
    """Whether a candidate program is valid (for the workload parser and, for a program of
    one thread, the reference; threads are told by their run)."""
    try:
        w = parse_workload(workload, "candidate")
        for p in w.get("processes") or [w]:
            if not p.get("threads"):
                hb.analyse(p)
        return True
    except (WorkloadError, hb.InvalidProgram):
        return False


def _roots(w):
    """Every program of a workload, as (scope, key path): its processes' (and their
    threads'), its threads' or its own; scope: the process (names are shared within)."""
    out = []
    procs = w.get("processes")
    for j, p in enumerate(procs or [w]):
        base = ("processes", j) if procs else ()
        if p.get("threads"):
            out += [(j, base + ("threads", i, "program")) for i in range(len(p["threads"]))]
        else:
            out.append((j, base + ("program",)))
    return out


def _at(w, keys):
    for k in keys:
        w = w[k]
    return w


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
        if op["op"] in ("stream_end_capture", "graph_create"):
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
    """A smaller program that still breaks an ordering of class ``cls`` (a workload of host
    threads or processes too: each of its programs is minimised, and whole threads and
    processes are dropped)."""
    best = copy.deepcopy(workload)
    t0 = time.perf_counter()
    tests = [0]

    def still_fails(cand):
        if time.perf_counter() - t0 > budget_s or not valid(cand):
            return False
        tests[0] += 1
        classes, _, _ = run_one(cand, params, backend)
        return cls in classes

    def with_list(w, root, path, new):
        c = copy.deepcopy(w)
        if path:
            _get(_at(c, root), path[:-1])[path[-1]]["body"] = new
        else:
            _at(c, root[:-1])[root[-1]] = new
        return c

    def groups(w):
        """Lists of processes and of threads, which may lose a member."""
        out = [("processes",)] if w.get("processes") else []
        for j, p in enumerate(w.get("processes") or [w]):
            if p.get("threads"):
                out.append((("processes", j) if w.get("processes") else ()) + ("threads",))
        return out

    progress = True
    while progress and time.perf_counter() - t0 < budget_s:
        progress = False
        # whole processes, then whole threads
        for keys in groups(best):
            i = 0
            while True:
                try:
                    lst = _at(best, keys)
                except (KeyError, IndexError):
                    break
                if i >= len(lst) or len(lst) < 2:
                    break
                cand = copy.deepcopy(best)
                del _at(cand, keys)[i]
                if still_fails(cand):
                    best, progress = cand, True
                else:
                    i += 1
        roots = _roots(best)
        # drop whole things at once: a graph (its capture, instantiation and launches), a
        # stream or an event with every op that names it, in every program of its process
        for scope in sorted({sc for sc, _ in roots}):
            mine = [keys for sc, keys in roots if sc == scope]
            names = []
            for keys in mine:
                names += [n for n in _names(_at(best, keys)) if n not in names]
            for key, name in names:
                cand = copy.deepcopy(best)
                for keys in mine:
                    _at(cand, keys[:-1])[keys[-1]] = _without(_at(best, keys), key, name)
                if cand != best and still_fails(cand):
                    best, progress = cand, True
        # drop chunks of ops from every list, largest chunks first
        for _, root in _roots(best):
            for path in list(_lists(_at(best, root))):
                try:
                    lst = _get(_at(best, root), path)
                except (IndexError, KeyError):
                    continue
                size = max(1, len(lst) // 2)
                while size >= 1:
                    start = 0
                    while start < len(lst):
                        cand = with_list(best, root, path, lst[:start] + lst[start + size:])
                        if lst[start:start + size] and still_fails(cand):
                            best, lst, progress = cand, _get(_at(cand, root), path), True
                        else:
                            start += size
                    size //= 2
        # shorten repeats, then unroll them into their body
        for _, root in _roots(best):
            for path in list(_lists(_at(best, root)))[1:]:
                try:
                    parent, i = _get(_at(best, root), path[:-1]), path[-1]
                    op = parent[i]
                except (IndexError, KeyError):
                    continue
                if op["op"] != "repeat":
                    continue
                for count in sorted({1, 2, op["count"] // 2}):
                    if count < op["count"]:
                        cand = copy.deepcopy(best)
                        _get(_at(cand, root), path[:-1])[i]["count"] = count
                        if still_fails(cand):
                            best, progress = cand, True
                            break
                parent = _get(_at(best, root), path[:-1])
                op = parent[i]
                if op["count"] == 1:
                    cand = with_list(best, root, path[:-1],
                                     parent[:i] + op["body"] + parent[i + 1:])
                    if still_fails(cand):
                        best, progress = cand, True
                        break                             # the paths changed
    # plainer ops, all at once where the violation allows it
    for field, value, kinds in (("grid", [1], ("launch_kernel",)),
                                ("block", [32], ("launch_kernel",)),
                                ("priority", 0, ("stream_create",)),
                                ("timing", False, ("event_create",))):
        cand = copy.deepcopy(best)
        for _, root in _roots(cand):
            for op in _walk(_at(cand, root)):
                if op["op"] in kinds:
                    op[field] = value
        if cand != best and still_fails(cand):
            best = cand
    if log:
        log(f"    minimised in {tests[0]} runs, {time.perf_counter() - t0:.1f} s: "
            f"{calls_of(workload)} -> {calls_of(best)} calls")
    return best


@dataclass
class FuzzResult:
    programs: int = 0
    calls: int = 0
    checked: int = 0
    violations: int = 0
    failing: int = 0                 # programs with a violation or a failed run
    deadlocks: int = 0               # runs that deadlocked (valid programs: false deadlocks)
    first: dict = field(default_factory=dict)      # class -> (seed, workload, violation)
    counts: dict = field(default_factory=dict)     # class -> programs
    # op family -> [programs using it, orderings checked, violations, programs with
    # violations, deadlocked runs, other failed runs]
    families: dict = field(default_factory=dict)
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

    def family_table(self):
        """The op families: programs using each, orderings checked, violations, programs
        with violations, false deadlocks, other failed runs (an ordering counts in every
        family it involves)."""
        head = ("family", "programs", "orderings", "violations", "failing", "deadlocks",
                "errors")
        rows = [head] + [(f, *self.families[f]) for f in
                         [f for f in hb.FAMILIES if f in self.families] +
                         sorted(set(self.families) - set(hb.FAMILIES))]
        width = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
        return "\n".join("  " + "  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                                           for i, (c, w) in enumerate(zip(r, width)))
                         for r in rows)

    def add(self, other):
        """Another run's figures added to these (runs of other seeds)."""
        for k in ("programs", "calls", "checked", "violations", "failing", "deadlocks",
                  "sim_s", "check_s", "elapsed_s"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        for cls, n in other.counts.items():
            self.counts[cls] = self.counts.get(cls, 0) + n
            self.first.setdefault(cls, other.first[cls])
        for f, row in other.families.items():
            mine = self.families.setdefault(f, [0] * 6)
            for i, x in enumerate(row):
                mine[i] += x


def calls_of(w):
    """API calls of a generated program, over its processes and host threads if it has
    them."""
    return sum(count_ops(t["program"]) for p in w.get("processes") or [w]
               for t in p.get("threads") or [p])


def fuzz(programs, seed, connections, params, backend="compiled", log=None, verbose=False,
         start=0, violations_to=None):
    """Run ``programs`` generated programs (seeds ``"{seed}.{i}"``, i from ``start``) and
    check each. ``violations_to``: a text file that gets every violation (and failed run)
    as a JSON line, with its program's seed."""
    res = FuzzResult(programs=programs)
    t0 = time.perf_counter()
    for i in range(start, start + programs):
        name = f"{seed}.{i}"
        w = generate(name, connections)
        times, fams = {}, {}
        classes, violations, checked = run_one(w, params, backend, times, fams)
        res.sim_s += times.get("sim", 0.0)
        res.check_s += times.get("check", 0.0)
        res.checked += checked
        res.calls += calls_of(w)
        res.violations += len(violations) or len(classes)
        res.failing += bool(classes)
        deadlock = any(c.startswith("model-error:Deadlock") for c in classes)
        error = not deadlock and any(c.startswith(("model-error", "invalid-program"))
                                     for c in classes)
        res.deadlocks += deadlock
        if violations_to is not None:
            for v in violations or classes.values():
                violations_to.write(json.dumps(dict(v, seed=name), default=str) + "\n")
            violations_to.flush()
        for f in program_families(w) | set(fams):
            row = res.families.setdefault(f, [0] * 6)
            if f in program_families(w):
                row[0] += 1
            n, v = fams.get(f, (0, 0))
            row[1] += n
            row[2] += v
            row[3] += v > 0
            if f in program_families(w):
                row[4] += deadlock
                row[5] += error
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
        if minimise_budget:
            # start from a program already minimised for another class, if it shows this one
            _, start, origin = min(((n, p, o) for n, p, shown, o in done if cls in shown),
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
    ap.add_argument("--start", type=int, default=0,
                    help="the first program's index (seeds SEED.START, SEED.START+1, ...)")
    ap.add_argument("--backend", choices=("compiled", "pysim"), default="compiled")
    ap.add_argument("--connections", type=parse_connections, default=list(range(1, 33)),
                    help="max_connections values to draw from: 1,4,8,32 or 1-32 (default)")
    ap.add_argument("--params", default="h200")
    ap.add_argument("--out", default="out/ordering_fuzz")
    ap.add_argument("--no-minimise", action="store_true")
    ap.add_argument("--minimise-budget", type=float, default=120.0,
                    help="seconds of minimisation per violation class")
    ap.add_argument("--violations", metavar="FILE",
                    help="write every violation (and failed run) there, a JSON line each")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)

    params = load(args.params)
    log = lambda m: print(m, file=sys.stderr, flush=True)
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(args.violations, "w")) if args.violations else None
        res = fuzz(args.programs, args.seed, args.connections, params, args.backend, log,
                   args.verbose, args.start, out)
    written = write_failures(res, pathlib.Path(args.out), params, args.backend,
                             None if args.no_minimise else args.minimise_budget, log)
    n = max(res.programs, 1)
    print(f"ordering fuzz: {res.programs} programs (seed {args.seed}, backend {args.backend}, "
          f"connections {','.join(map(str, args.connections))}): {res.calls} API calls, "
          f"{res.checked} orderings checked, {res.violations} violations in {res.failing} "
          f"programs")
    print(f"  {res.elapsed_s:.1f} s, {res.elapsed_s / n:.3f} s a program (model "
          f"{res.sim_s / n:.3f} s, reference {res.check_s / n:.4f} s); "
          f"{res.deadlocks} deadlocks")
    print(res.family_table())
    for cls in sorted(res.first):
        print(f"  {cls}: {res.counts[cls]} programs; first seed {res.first[cls][0]}; "
              f"written: {written.get(cls)}")
    return 1 if res.first else 0


if __name__ == "__main__":
    sys.exit(main())
