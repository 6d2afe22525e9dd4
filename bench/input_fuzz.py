"""Bad input through the gpufe command: every file a user can hand it, mutated.

    python bench/input_fuzz.py --inputs 2000 --seed 1 [--timeout 30] [--jobs 2]

Seeds: the bundled workloads (``examples/*.json``), the reference scenarios' workloads and
traces (``sim/analysis/reference/h200/*.json``, ``*.jsonl.gz``, the Kineto traces of the MLP runs) and
the parameter set ``h200``. Each input is one seed, shrunk so that it runs in a fraction of a
second (repeat counts, grids, block times and sleeps clamped; long traces cut to their first
records), then mutated one to three times: truncation, byte flips, inserted garbage, other
encodings (UTF-16, Latin-1, a BOM, gzip), lone surrogates, type swaps, numbers at and past every
limit (huge, negative, non-finite, 5,000-digit), deep nesting (JSON and repeats), duplicated
ops, events and ids, removed fields and elements, reordered elements, names that do not exist,
overlapping kernels and shared correlation ids in traces, output paths that cannot be written.

Each input goes through the commands that read it, in a child forked from this process after
every module is imported (a fresh Python per run would cost a second of imports):
``gpufe run FILE`` (workloads), ``gpufe metrics FILE`` and ``gpufe run --from-trace FILE``
(traces), ``gpufe run --params FILE`` (parameter sets); always with ``--max-connections 8``
(the compiled model is built once per channel count) and ``--progress``. A run ends as

- a success (exit status 0);
- a clear error: exit status 2 and a last line ``gpufe: ...`` (or argparse's ``gpufe run:
  error: ...``) naming the input (or output) file, no traceback;
- a deadlock: a clear error that says the model deadlocked on a valid program (a bug of the
  model rather than of input handling: listed, and its input kept, apart);
- an unclear error: exit status 2 without the file's name;
- a traceback: a Python traceback on stderr, an exception out of ``main``, gpufe's own
  ``internal error`` line (exit status 70), or a crash (a signal);
- a hang: still running after ``--timeout`` seconds, although the input, if valid at all, is
  small work (its ops, kernels and blocks, as ``gpufe.sim.host.workload.work_totals`` counts them, would
  take under a third of the timeout) and no progress was shown;
- slow: still running after the timeout on a valid input that is legitimately large (the
  mutations avoid making those, but a grid of 10^8 blocks is valid), or that showed progress.

Unclear errors, tracebacks and hangs are bugs: each input is copied to ``--out`` (default
``build/input_fuzz``) with the command and its output (deadlocks too), and the exit status
is 1.
"""

import argparse
import copy
import gc
import gzip
import json
import os
import pathlib
import random
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[1]

from gpufe.sim import cli

REF = ROOT / "sim" / "analysis" / "reference" / "h200"
MAX_CONNECTIONS = "8"
#: records kept of a seed trace, events of a seed Kineto trace
TRACE_RECORDS = 300
KINETO_EVENTS = 2500
#: a child may use this much more address space than the parent
CHILD_MEMORY = 3 << 30


# -- seeds ---------------------------------------------------------------------------------------

def _shrink_ops(ops):
    for op in ops:
        if op.get("op") == "repeat":
            op["count"] = min(op["count"], 4)
            _shrink_ops(op["body"])
        elif op.get("op") == "launch_kernel":
            if "grid" in op:
                op["grid"] = [min(g, 264) for g in op["grid"]]
            op["block_ns"] = min(op.get("block_ns", 0), 50_000)
        elif op.get("op") == "host_sleep":
            op["ns"] = min(op["ns"], 100_000)
        elif op.get("op") == "memcpy_async":
            op["bytes"] = min(op["bytes"], 1 << 20)
    return ops


def load_seeds():
    """(workloads, traces, params): workloads and the params set as dicts, traces as
    ("jsonl", [records]) or ("kineto", doc), each with its name; all shrunk."""
    workloads = []
    for p in sorted((ROOT / "examples").glob("*.json")) + sorted(REF.glob("*.json")):
        w = json.loads(p.read_text())
        for proc in w.get("processes") or [w]:
            for t in proc.get("threads") or [proc]:
                _shrink_ops(t["program"])
        workloads.append((p.stem, w))
    traces = []
    for p in sorted(REF.glob("*.jsonl.gz")):
        with gzip.open(p, "rt") as f:
            lines = []
            for line in f:
                lines.append(json.loads(line))
                if len(lines) >= TRACE_RECORDS:
                    break
        traces.append((p.name.split(".")[0], ("jsonl", lines)))
    for p in sorted(REF.glob("mlp_*_*.json.gz")):
        if "summary" in p.name:
            continue
        doc = json.loads(gzip.decompress(p.read_bytes()))
        doc["traceEvents"] = doc["traceEvents"][:KINETO_EVENTS]
        traces.append((p.name.split(".")[0], ("kineto", doc)))
    params = json.loads((ROOT / "sim" / "params" / "h200.json").read_text())
    return workloads, traces, params


# -- JSON with raw tokens -------------------------------------------------------------------------

class Raw:
    """Text written into the JSON as it is (NaN, 1e400, 5,000 digits, deep nesting)."""

    def __init__(self, text):
        self.text = text


def dumps(value):
    raws = []

    def sub(v):
        if isinstance(v, Raw):
            raws.append(v.text)
            return f"@@RAW{len(raws) - 1}@@"
        if isinstance(v, dict):
            return {k: sub(x) for k, x in v.items()}
        if isinstance(v, list):
            return [sub(x) for x in v]
        return v
    text = json.dumps(sub(value))
    return re.sub(r'"@@RAW(\d+)@@"', lambda m: raws[int(m.group(1))], text)


def _slots(tree):
    """Every (container, key) in a JSON tree, without recursion."""
    out, todo = [], [tree]
    while todo:
        node = todo.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in items:
            out.append((node, k))
            if isinstance(v, (dict, list)):
                todo.append(v)
    return out


# -- values ---------------------------------------------------------------------------------------

BOUNDARY_INTS = [0, 1, -1, 2, 3, 31, 32, 33, 63, 64, 65, 255, 256, 257, 1023, 1024, 1025,
                 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**53, 2**63 - 1, 2**63,
                 2**64, 10**9, 10**9 + 1, 10**12, 10**13, 10**13 + 1, 10**15, 10**18, -2**63,
                 10**30]


def some_value(r):
    """A value of any JSON type, ordinary or pathological."""
    k = r.random()
    if k < 0.25:
        return r.choice(BOUNDARY_INTS)
    if k < 0.35:
        return r.choice([0.5, -0.0, 1e-300, 1.5e308, 123456.789, -1e9, 3.0])
    if k < 0.45:
        return Raw(r.choice(["NaN", "Infinity", "-Infinity", "1e400", "-1e999", "1e308",
                             "9" * 5000, "-" + "9" * 50, "0.0000001e-400"]))
    if k < 0.55:
        return r.choice([None, True, False])
    if k < 0.7:
        return r.choice(["", "x", "a", "s13", "e", "g0", "\ud800", "\x00", "é" * 3,
                         "A" * 10000, "launch_kernel", "repeat", "h2d", "kernel", "meta",
                         "header", "cudaLaunchKernel", "cudaGraphLaunch", "7", "1e9"])
    if k < 0.8:
        return r.choice([[], [1], [1, 1, 1], [1024, 1024, 64], [0], [1, 2, 3, 4], ["1"],
                         [True], [None], [2**31, 65536, 65536], [1e400]])
    if k < 0.85:
        return r.choice([{}, {"op": "mark"}, {"kind": "meta"}, {"a": 1}])
    if k < 0.92:
        depth = r.choice([40, 200, 999, 5000, 100000])
        return Raw("[" * depth + "]" * depth)
    return Raw('{"a":' * 3000 + "1" + "}" * 3000)


def near(r, v):
    """A number near ``v`` or past a limit near it."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return some_value(r)
    return r.choice([v + 1, v - 1, -v, v * 2, v * 1000, v * 10**9, 0, -1,
                     r.choice(BOUNDARY_INTS), float(v) + 0.5])


# -- mutations ------------------------------------------------------------------------------------

def mutate_tree(r, tree, kind):
    """One structural mutation of a parsed JSON document, in place; returns its name."""
    slots = _slots(tree)
    if not slots:
        return "none"
    m = r.choice(["value", "value", "number", "number", "remove", "duplicate", "swap",
                  "type", "deep", "names"] + (["overlap", "corr", "timeshift"] * 2
                                              if kind != "workload" else
                                              ["repeat", "op", "nest"]))
    container, key = r.choice(slots)
    v = container[key]
    if m == "value":
        container[key] = some_value(r)
    elif m == "number":
        nums = [(c, k) for c, k in slots if isinstance(c[k], (int, float))
                and not isinstance(c[k], bool)]
        if nums:
            container, key = r.choice(nums)
            container[key] = near(r, container[key])
    elif m == "type":
        container[key] = (str(v) if isinstance(v, (int, float)) else
                          [v] if not isinstance(v, list) else {"v": v})
    elif m == "remove":
        del container[key]
    elif m == "duplicate":
        lists = [(c, k) for c, k in slots if isinstance(c[k], list) and c[k]]
        if lists:
            c, k = r.choice(lists)
            i = r.randrange(len(c[k]))
            c[k].insert(r.randrange(len(c[k]) + 1), copy.deepcopy(c[k][i]))
    elif m == "swap":
        lists = [(c, k) for c, k in slots if isinstance(c[k], list) and len(c[k]) > 1]
        if lists:
            c, k = r.choice(lists)
            i, j = r.randrange(len(c[k])), r.randrange(len(c[k]))
            c[k][i], c[k][j] = c[k][j], c[k][i]
    elif m == "deep":
        d = r.choice([50, 500, 3000, 50000])
        # balanced, or not (the file ends inside the nesting)
        container[key] = Raw("[" * d + "]" * (d if r.random() < 0.7 else 0))
    elif m == "names":
        strs = [(c, k) for c, k in slots if isinstance(c[k], str)]
        if strs:
            c, k = r.choice(strs)
            other = r.choice(strs)
            c[k] = other[0][other[1]] if r.random() < 0.7 else c[k] + "_"
    elif m == "repeat":
        reps = [(c, k) for c, k in slots if isinstance(c[k], dict) and c[k].get("op") == "repeat"]
        if reps:
            c, k = r.choice(reps)
            c[k]["count"] = r.choice([0, 1, 10**9, 10**9 + 1, -1, 2**63, 10**7, True, 1.0])
            if r.random() < 0.3:
                c[k]["body"] = []
    elif m == "op":
        ops = [(c, k) for c, k in slots if isinstance(c[k], dict) and "op" in c[k]]
        if ops:
            c, k = r.choice(ops)
            c[k]["op"] = r.choice(["launch_kernel", "memcpy_async", "event_record",
                                   "stream_wait_event", "graph_launch", "repeat", "host_sleep",
                                   "stream_begin_capture", "stream_end_capture",
                                   "event_query", "device_synchronize", "stream_create",
                                   "nope"])
    elif m == "nest":
        ops = [(c, k) for c, k in slots if isinstance(c[k], dict) and "op" in c[k]]
        if ops:
            c, k = r.choice(ops)
            text = dumps(c[k])
            for _ in range(r.choice([2, 31, 33, 100, 400])):
                text = (f'{{"op": "repeat", "count": {r.choice([1, 1, 2, 1000])}, '
                        f'"body": [{text}]}}')
            c[k] = Raw(text)
    elif m in ("overlap", "corr", "timeshift"):
        _trace_mutation(r, tree, m)
    return m


def _trace_mutation(r, tree, m):
    if isinstance(tree, dict) and isinstance(tree.get("traceEvents"), list):
        evs = [e for e in tree["traceEvents"] if isinstance(e, dict)
               and e.get("cat") in ("kernel", "gpu_memcpy", "cuda_runtime")
               and isinstance(e.get("args"), dict)]
        ks = [e for e in evs if e.get("cat") == "kernel"]
        if len(ks) < 2:
            return
        i = r.randrange(1, len(ks))
        a, b = ks[i - 1], ks[i]
        if m == "overlap" and all(isinstance(x, (int, float)) for x in
                                  (a.get("ts"), a.get("dur"))):
            b["ts"] = a["ts"] + a["dur"] * r.choice([0.0, 0.5, 0.99])
        elif m == "corr":
            other = r.choice(evs)
            b["args"]["correlation"] = other["args"].get("correlation")
        elif isinstance(b.get("ts"), (int, float)):
            b["ts"] += r.choice([-1e6, 1e6, 1e12, -1e15, 1e16])
    elif isinstance(tree, list):             # fe_trace records
        ks = [x for x in tree if isinstance(x, dict) and x.get("kind") in ("kernel", "memcpy")]
        if len(ks) < 2:
            return
        i = r.randrange(1, len(ks))
        a, b = ks[i - 1], ks[i]
        if m == "overlap" and isinstance(a.get("start"), int) and isinstance(a.get("end"), int):
            b["stream"] = a.get("stream")
            b["start"] = (a["start"] + a["end"]) // 2
            b["end"] = max(b["start"], b.get("end", 0) if isinstance(b.get("end"), int) else 0)
        elif m == "corr":
            b["corr"] = r.choice(ks)["corr"] if r.random() < 0.7 else a.get("corr")
            b["graph_id"] = 0
        elif isinstance(b.get("start"), int):
            d = r.choice([-10**6, 10**6, 10**15, 2**63, -2**63])
            b["start"] += d
            if isinstance(b.get("end"), int):
                b["end"] += d


def mutate_bytes(r, data):
    """One byte-level mutation; returns (bytes, name)."""
    m = r.choice(["truncate", "flip", "insert", "delete", "utf16", "latin1", "bom",
                  "invalid_utf8", "nul", "empty"])
    if m == "truncate" and data:
        return data[:r.randrange(len(data))], m
    if m == "flip" and data:
        b = bytearray(data)
        for _ in range(r.randint(1, 8)):
            b[r.randrange(len(b))] = r.randrange(256)
        return bytes(b), m
    if m == "insert":
        i = r.randrange(len(data) + 1)
        junk = bytes(r.randrange(256) for _ in range(r.randint(1, 16)))
        return data[:i] + junk + data[i:], m
    if m == "delete" and data:
        i = r.randrange(len(data))
        return data[:i] + data[i + r.randint(1, 64):], m
    if m == "utf16":
        return data.decode("utf-8", "replace").encode("utf-16"), m
    if m == "latin1":
        text = data.decode("utf-8", "replace")
        i = r.randrange(len(text) + 1)
        return (text[:i] + "\u00e9\u00ff" + text[i:]).encode("latin-1", "replace"), m
    if m == "bom":
        return b"\xef\xbb\xbf" + data, m
    if m == "invalid_utf8":
        i = r.randrange(len(data) + 1)
        return data[:i] + r.choice([b"\xc3", b"\xed\xa0\x80", b"\xff\xfe", b"\x80"]) + \
            data[i:], m
    if m == "nul":
        return data.replace(b":", b":\x00", 1), m
    return b"", "empty"


# -- making inputs ---------------------------------------------------------------------------------

def make_input(r, seeds, tmp, index):
    """One input: (family, path, [argv...], names, mutations). ``names``: strings one of
    which a clear error must contain."""
    workloads, traces, params = seeds
    family = r.choices(["workload", "trace", "params"], weights=[5, 4, 1])[0]
    muts = []
    if family == "workload":
        name, w = r.choice(workloads)
        tree = copy.deepcopy(w)
        for _ in range(r.choice([1, 1, 1, 2, 3])):
            muts.append(mutate_tree(r, tree, "workload"))
        data = dumps(tree).encode("utf-8", "surrogatepass")
        suffix = ".json"
    elif family == "params":
        name, tree = "h200", copy.deepcopy(params)
        rtl = ("fifo_depth", "slot_words", "syncpoints", "dma_burst", "gpfifo_entries")
        for _ in range(r.choice([1, 1, 2])):
            key = r.choice(list(tree))
            if key in rtl:
                # a valid new size would build a new compiled model (minutes): invalid only
                tree[key] = r.choice([None, "x", True, -1, 0, 1.5, Raw("NaN"), 2**40, [8]])
                muts.append(f"rtl:{key}")
            elif r.random() < 0.15:
                tree.pop(key)
                muts.append(f"remove:{key}")
            elif r.random() < 0.1:
                tree[key + "_typo"] = 1
                muts.append("unknown")
            else:
                tree[key] = near(r, tree[key]) if r.random() < 0.6 else some_value(r)
                muts.append(f"value:{key}")
        data = dumps(tree).encode("utf-8", "surrogatepass")
        suffix = ".json"
    else:
        name, (form, doc) = r.choice(traces)
        tree = copy.deepcopy(doc)
        for _ in range(r.choice([1, 1, 1, 2])):
            muts.append(mutate_tree(r, tree, "trace"))
        if form == "jsonl":
            lines = []
            for rec in tree:
                lines.append(dumps(rec))
            data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
            suffix = ".jsonl"
        else:
            data = dumps(tree).encode("utf-8", "surrogatepass")
            suffix = ".json"
    if r.random() < 0.3:
        data, m = mutate_bytes(r, data)
        muts.append(m)
    if family == "trace" and r.random() < 0.5:
        data = gzip.compress(data, compresslevel=1, mtime=0)
        suffix += ".gz"
        if r.random() < 0.1:
            data = data[:r.randrange(len(data))]
            muts.append("gzip_truncate")
    elif family == "workload" and r.random() < 0.03:
        data = gzip.compress(data, mtime=0)
        muts.append("gzip")
    path = tmp / f"in{index:05d}_{name}{suffix}"
    path.write_bytes(data)
    p = str(path)
    names = [p]
    base = ["--max-connections", MAX_CONNECTIONS, "--progress"]
    if family == "workload":
        runs = [["run", p] + base]
    elif family == "params":
        runs = [["run", str(ROOT / "examples" / "priority.json"), "--params", p] + base]
    else:
        runs = [["metrics", p], ["run", "--from-trace", p] + base
                + (["--as-graph"] if r.random() < 0.2 else [])]
    if family != "trace" and r.random() < 0.08:
        # an output that cannot be written: said before anything runs
        bad = r.choice([str(tmp / "missing" / "t.jsonl"), str(tmp), ""])
        runs[0] += [r.choice(["--timeline", "--perfetto"]), bad]
        names.append(bad or "empty file name")
        muts.append("bad_output")
    return family, path, runs, names, muts


# -- running --------------------------------------------------------------------------------------

def _vm_size():
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _child(argv, out, err):
    """In the forked child: run ``gpufe argv`` with stdout and stderr into files."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        for fd, path in ((1, out), (2, err)):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(f, fd)
            os.close(f)
        # new streams on the new descriptors (under pytest, sys.stdout is not fd 1); line
        # buffered, so that a child killed at the timeout leaves what it said (a build's
        # progress) in the files
        sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", closefd=False,
                                           buffering=1)
        sys.stderr = sys.__stderr__ = open(2, "w", encoding="utf-8", closefd=False,
                                           buffering=1)
        limit = _vm_size() + CHILD_MEMORY
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        try:
            rc = cli.main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
        except BaseException:                     # noqa: BLE001 - what the fuzzer looks for
            traceback.print_exc()
            rc = 99
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:                         # noqa: BLE001
        rc = 98
    os._exit(rc if isinstance(rc, int) else 1)


_PROGRESS = re.compile(r"(\d+)% of \d+ calls")
#: a compiled model being built for a parameter set's hardware sizes (a minute or two, once
#: per design): legitimate work, not a hang
_BUILDING = "gpufe build ["


def _progress_shown(err_text):
    return _BUILDING in err_text or any(int(p) > 0 for p in _PROGRESS.findall(err_text))


def _estimate_s(argv, path):
    """Wall seconds the input's valid work would take (0 if it is not valid): ~2,000 calls,
    ~5,000 kernels or graph nodes and ~80,000 thread blocks a second."""
    try:
        from gpufe.sim.params import load
        from gpufe.sim.host.workload import load_workload, check_run, work_totals
        params = load("h200")
        if "--from-trace" in argv:
            from gpufe.sim.analysis.replay import prepare
            w, _ = prepare(path, params)
        elif "--params" in argv:
            params = load(argv[argv.index("--params") + 1])
            w = load_workload(argv[1])
        else:
            w = load_workload(path)
        check_run(w, params, str(path))
        t = work_totals(w["program"])
    except Exception:                             # noqa: BLE001 - not valid: no legit work
        return 0.0
    work = t["work"]
    return (t["ops"] / 2000 + (work.kernels + work.copies + t["graph_node_runs"]) / 5000
            + work.blocks / 80000)


def classify(rc, sig, out, err, names, timed_out, argv, path, timeout):
    if timed_out:
        if _progress_shown(err) or _estimate_s(argv, path) > timeout / 3:
            return "slow"
        return "hang"
    if sig:
        return "traceback"                         # a crash: counted with the tracebacks
    if "Traceback (most recent call last)" in err or rc in (70, 98, 99) \
            or "internal error" in err:
        return "traceback"
    if rc == 0:
        return "success"
    last = [line for line in err.replace("\r", "\n").splitlines() if line.strip()]
    last = last[-1] if last else ""
    if rc == 2 and last.startswith("gpufe"):
        if not any(n and n in last for n in names):
            return "unclear"
        # a valid program the model could not finish: a bug of the model, not of input
        # handling; counted among the clear errors, listed apart
        return "deadlock" if "deadlock at" in last else "clear"
    return "unclear"


def run_fuzz(inputs=2000, seed=1, timeout=30.0, jobs=2, out=None, log=print):
    """Run the fuzz; returns the counts (per run) and the list of bad cases."""
    seeds = load_seeds()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="gpufe_fuzz_"))
    out = pathlib.Path(out) if out else None
    counts = {k: 0 for k in ("success", "clear", "deadlock", "unclear", "traceback", "hang",
                             "slow")}
    by_input = {}
    bad = []
    t_start = time.monotonic()
    # warm up: the compiled model loaded, lazy imports done, before any fork
    import io
    import contextlib
    with contextlib.redirect_stdout(io.StringIO()):
        cli.main(["run", str(ROOT / "examples" / "priority.json"), "--max-connections",
                  MAX_CONNECTIONS])
    cases = []
    for i in range(inputs):
        r = random.Random(f"{seed}:{i}")
        family, path, runs, names, muts = make_input(r, seeds, tmp, i)
        for k, argv in enumerate(runs):
            cases.append((i, k, family, path, argv, names, muts))
    gc.collect()
    gc.freeze()
    running = {}
    pending = list(reversed(cases))
    done = 0
    try:
        while pending or running:
            while pending and len(running) < jobs:
                case = pending.pop()
                i, k = case[0], case[1]
                o, e = tmp / f"out{i}_{k}.txt", tmp / f"err{i}_{k}.txt"
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _child(case[4], str(o), str(e))
                running[pid] = (case, time.monotonic(), o, e)
            finished = []
            for pid, (case, t0, o, e) in running.items():
                got, status = os.waitpid(pid, os.WNOHANG)
                timed_out = False
                if not got:
                    if time.monotonic() - t0 < timeout:
                        continue
                    os.kill(pid, signal.SIGKILL)
                    _, status = os.waitpid(pid, 0)
                    timed_out = True
                finished.append(pid)
                rc = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
                sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) and not timed_out else 0
                out_text = o.read_text(errors="replace") if o.exists() else ""
                err_text = e.read_text(errors="replace") if e.exists() else ""
                i, k, family, path, argv, names, muts = case
                what = classify(rc, sig, out_text, err_text, names, timed_out, argv, path,
                                timeout)
                counts[what] += 1
                by_input.setdefault(i, set()).add(what)
                if what in ("unclear", "traceback", "hang", "deadlock", "slow"):
                    bad.append({"input": i, "family": family, "what": what, "argv": argv,
                                "mutations": muts, "rc": rc, "signal": sig,
                                "stderr": err_text[-2000:], "path": str(path)})
                    if out:
                        d = out / f"{what}_{i:05d}_{k}"
                        d.mkdir(parents=True, exist_ok=True)
                        if path.exists():
                            shutil.copy(path, d / path.name)
                        (d / "case.json").write_text(json.dumps(bad[-1], indent=1))
                        (d / "stdout.txt").write_text(out_text)
                        (d / "stderr.txt").write_text(err_text)
                for f in (o, e):
                    if f.exists():
                        f.unlink()
                done += 1
                if log and done % 200 == 0:
                    log(f"  {done}/{len(cases)} runs, {time.monotonic() - t_start:.0f} s: "
                        + ", ".join(f"{k} {v}" for k, v in counts.items()))
            for pid in finished:
                del running[pid]
            if running and not finished:
                time.sleep(0.005)
    finally:
        for pid in running:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
        gc.unfreeze()
        shutil.rmtree(tmp, ignore_errors=True)
    wall = time.monotonic() - t_start
    worst = {}
    for i, kinds in by_input.items():
        for kind in ("traceback", "hang", "unclear", "deadlock", "slow", "clear", "success"):
            if kind in kinds:
                worst[kind] = worst.get(kind, 0) + 1
                break
    return {"inputs": inputs, "runs": len(cases), "wall_s": wall, "counts": counts,
            "inputs_by_worst": worst, "bad": bad}


def format_report(res, seed, jobs):
    c = res["counts"]
    lines = [f"input_fuzz: {res['inputs']} inputs (seed {seed}), {res['runs']} runs of gpufe "
             f"in {res['wall_s']:.0f} s on {jobs} workers",
             f"  successful runs      {c['success']:6d}",
             f"  clear errors         {c['clear'] + c['deadlock']:6d}   (exit 2, one line naming "
             f"the file)",
             f"    of which deadlocks {c['deadlock']:6d}   (a valid program the model did not "
             f"finish: a model bug)",
             f"  unclear errors       {c['unclear']:6d}   (no file named)",
             f"  tracebacks           {c['traceback']:6d}   (tracebacks, internal errors, "
             f"crashes)",
             f"  hangs                {c['hang']:6d}",
             f"  slow valid runs      {c['slow']:6d}   (timed out on legitimately large work)",
             "  inputs by their worst run: " + ", ".join(
                 f"{k} {v}" for k, v in res["inputs_by_worst"].items())]
    for b in res["bad"][:20]:
        tail = b["stderr"].strip().splitlines()[-1:] or [""]
        lines.append(f"  {b['what']}: input {b['input']} ({b['family']}, "
                     f"{'+'.join(b['mutations'])}): gpufe {' '.join(b['argv'][:1])} ... "
                     f"{tail[0][:200]}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="seconds a run may take (default %(default)s)")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once (default %(default)s)")
    ap.add_argument("--out", default=str(ROOT / "build" / "input_fuzz"),
                    help="where inputs that gave a traceback, a hang or an unclear error go")
    args = ap.parse_args(argv)
    res = run_fuzz(args.inputs, args.seed, args.timeout, args.jobs, args.out,
                   log=lambda m: print(m, file=sys.stderr, flush=True))
    print(format_report(res, args.seed, args.jobs))
    c = res["counts"]
    return 1 if c["traceback"] or c["hang"] or c["unclear"] else 0


if __name__ == "__main__":
    sys.exit(main())
