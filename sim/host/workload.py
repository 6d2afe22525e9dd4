"""Workload files: a CUDA-like program as JSON, so a scenario can be written without Python.

    {"name": "xstream", "max_connections": 8,
     "program": [{"op": "stream_create", "name": "a", "priority": 0}, ...]}

Ops and their fields are listed in :data:`OPS` (required fields first, then optional ones with
defaults), each with its type, bounds and meaning, and the top-level fields in :data:`TOP`: the
checks read these tables, and so does :func:`reference`, which writes them as Markdown
(``docs/workload.md``: ``python -m gpufe.sim.host.workload --reference``). A bad file is
rejected with :class:`WorkloadError` naming the file, the op's index path
(``program[3].body[1]``) and the reason, before anything runs.

Limits. CUDA's own: a thread block has at most 1,024 threads (x and y at most 1,024, z at most
64); a grid at most 2^31 - 1 blocks in x and 65,535 in y and z. The model's, per field
(:data:`LIMITS`): a block runs at most 1 s (``block_ns``; the launch descriptor holds 32 bits
of ns), a ``host_sleep`` at most 10,000 s, a copy at most 2^32 - 1 bytes (the copy method's
length is 32 bits; drivers split larger copies), a ``repeat`` at most 10^9 times and nested at
most 32 deep, and numbers must be finite (JSON's ``NaN``/``Infinity`` and literals too large for
a double are rejected). A repeat whose body makes no call costs nothing, whatever its count.

Per run (:func:`check_run`, before the simulation starts; repeats multiplied out, graph
launches counted with their nodes): at most :data:`MAX_OPS` ops, :data:`MAX_WORK` kernels and
copies run, :data:`MAX_BLOCKS` thread blocks and :data:`MAX_GRAPH_NODES` graph nodes
instantiated (each is simulated one by one: beyond these a run takes hours;
``gpufe run --no-limits`` lifts them), at most :data:`MAX_DEVICE_BYTES` copied in all (the
model gives every copy fresh device addresses) and at most :data:`MAX_SIM_NS` of simulated time
by a generous upper bound (every call, sleep, block and copy one after another), far below
where 64-bit cycle counters overflow.
"""

import json
import math
import pathlib
import re
import reprlib
from typing import NamedTuple

from gpufe.rtl.layouts import DEVICE_ALLOC_ALIGN


class WorkloadError(ValueError):
    pass


_INT = (int,)
_NUM = (int, float)
#: JSON type -> (its name in the reference, what an error message says it must be)
_NODES = (str, list)
_TYPES = {bool: ("boolean", "true or false"), str: ("string", "a string"),
          list: ("list", "a list"), _INT: ("integer", "an integer"), _NUM: ("number", "a number"),
          _NODES: ("string or list", '"all" or a list of node indices'),
          dict: ("object", "an object")}

#: CUDA's limits on a launch (cudaLaunchKernel fails with cudaErrorInvalidConfiguration)
BLOCK_DIMS = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024
GRID_DIMS = ((1 << 31) - 1, 65535, 65535)
#: repeats nested deeper than this are rejected
MAX_DEPTH = 32

#: a field without a default
REQUIRED = object()


class Field(NamedTuple):
    """One field of an op (or of the file's top level): what the checks use and what the
    reference (:func:`reference`) prints, from the same entry."""
    types: object                 # one of the keys of _TYPES
    default: object               # REQUIRED: the field must be given
    doc: str                      # what it means
    least: object = None          # bounds of a number, with what the most stands for
    most: object = None
    why: str = ""
    choices: tuple = ()           # the only values a string may take
    dims: tuple = ()              # a list of 1 to 3 positive integers, at most these (x, y, z)


class Op(NamedTuple):
    """One op: the CUDA call it models (or what it does), its fields in the order they are
    checked (required first), and the rules that tie fields or ops together."""
    doc: str
    fields: dict
    rules: tuple = ()


#: what a reference to a stream or an event must be
_STREAM = "; must have been created by a `stream_create` before"
_EVENT = "; must have been created by an `event_create` before"
OPS = {
    "stream_create": Op(
        "`cudaStreamCreateWithPriority`: a stream, mapped round robin onto the "
        "`max_connections` compute channels (the n-th stream onto channel n mod "
        "max_connections) and given a syncpoint of its own. With more streams than "
        "channels, a kernel launch that finds another stream's launch on its stream's "
        "channel since the stream's own moves the stream to the round robin's next channel.",
        {"name": Field(str, REQUIRED, "the stream's name, which the other ops refer to; "
                                      "unique among streams"),
         "priority": Field(_INT, 0, "CUDA's stream priority: 0 is the least, a negative "
                                    "number a greater one; the stream's channel takes the "
                                    "greatest priority of its streams (clamped to the front "
                                    "end's priority levels)",
                           -(1 << 31), (1 << 31) - 1, "a 32-bit int")},
        ("at most as many streams as the parameter set has syncpoints",
         "not inside a `repeat` that runs more than once")),
    "event_create": Op(
        "`cudaEventCreateWithFlags`: an event.",
        {"name": Field(str, REQUIRED, "the event's name, which the other ops refer to; unique "
                                      "among events"),
         "timing": Field(bool, True, "false is `cudaEventDisableTiming`: a record writes the "
                                     "payload only; a timing event's record writes a "
                                     "timestamp too, which holds its channel until written "
                                     "(and `timestamp_hold_ns` more, its round trip: "
                                     "`stamp_fetch_ns` longer while more than ten "
                                     "entries wait behind it)")},
        ("not inside a `repeat` that runs more than once",)),
    "launch_kernel": Op(
        "`cudaLaunchKernel`: a kernel on a stream (or, while the stream captures, a kernel "
        "node of the graph being captured).",
        {"stream": Field(str, REQUIRED, "the stream it runs on" + _STREAM),
         "kernel": Field(str, REQUIRED, "the kernel's name (in the timeline and traces)"),
         "grid": Field(list, [1, 1, 1], "thread blocks in x, y, z (missing axes are 1)",
                       dims=GRID_DIMS),
         "block": Field(list, [32, 1, 1], "threads per block in x, y, z (missing axes are "
                                          "1); decides how many blocks an SM holds at once",
                        dims=BLOCK_DIMS),
         "block_ns": Field(_NUM, 0, "how long each thread block runs, in ns; 0 for an "
                                    "empty kernel (with PDL: the work after its "
                                    "cudaGridDependencySynchronize returns)",
                           0, 10**9, "1 s per thread block"),
         "pdl": Field(bool, False, "programmatic dependent launch (`cudaLaunchKernelEx` with "
                                   "programmaticStreamSerialization): the kernel may start "
                                   "once the kernel before it in the stream triggers, and its "
                                   "blocks wait in cudaGridDependencySynchronize for that "
                                   "kernel's exit; captured, the dependency becomes a "
                                   "programmatic edge"),
         "trigger_ns": Field(_NUM, None, "each block calls "
                                         "cudaTriggerProgrammaticLaunchCompletion this many ns "
                                         "after it starts; absent: it triggers as it exits",
                             0, 10**9, "1 s"),
         "prologue_ns": Field(_NUM, 0, "work a block does before it calls "
                                       "cudaGridDependencySynchronize, in ns",
                              0, 10**9, "1 s"),
         "device_graph_launch": Field(dict, None, "the kernel holds device-side "
                                      "`cudaGraphLaunch` code: `{\"graph\": g, \"mode\": m, "
                                      "\"count\": N}`, m `\"fire_and_forget\"` or "
                                      "`\"tail\"`; "
                                      "block 0 calls it in the kernel's first N runs (default "
                                      "1) after its graph's launch from the host (a "
                                      "fire-and-forget launch's run counts afresh, a tail "
                                      "launch's run goes on counting); N = 0: the code is "
                                      "there, never called (a host launch of its graph still "
                                      "sets up the device runtime). g may be the graph being "
                                      "captured; it must be instantiated with `device_launch` "
                                      "before the graph holding the kernel is. Only kernels "
                                      "of graphs may call it (count 0 in a stream)")},
        (f"a block has at most {MAX_THREADS_PER_BLOCK:,} threads (x * y * z), as in CUDA",)),
    "memcpy_async": Op(
        "`cudaMemcpyAsync`: a copy on a stream. H2D and D2H copies run on copy channels of "
        "their own, D2D copies on the stream's compute channel; every copy gets fresh device "
        "memory.",
        {"stream": Field(str, REQUIRED, "the stream it is ordered in" + _STREAM),
         "kind": Field(str, REQUIRED, "direction: host to device, device to host, device to "
                                      "device", choices=("h2d", "d2h", "d2d")),
         "bytes": Field(_INT, REQUIRED, "bytes copied", 1, (1 << 32) - 1,
                        "4 GiB - 1 per copy: the copy method's length is 32 bits")}),
    "event_record": Op(
        "`cudaEventRecord`: the event completes when the stream's work before it (and what "
        "the stream waited for) has completed. Inside a capture it marks a point of the "
        "graph instead.",
        {"event": Field(str, REQUIRED, "the event recorded" + _EVENT),
         "stream": Field(str, REQUIRED, "the stream it is recorded in" + _STREAM)}),
    "stream_wait_event": Op(
        "`cudaStreamWaitEvent`: the stream's later work waits until the event's latest "
        "record has completed (a stream that waits on an event recorded in a capture joins "
        "that capture).",
        {"stream": Field(str, REQUIRED, "the stream that waits" + _STREAM),
         "event": Field(str, REQUIRED, "the event waited for" + _EVENT)}),
    "stream_synchronize": Op(
        "`cudaStreamSynchronize`: the CPU waits until the stream's work has completed.",
        {"stream": Field(str, REQUIRED, "the stream waited for" + _STREAM)}),
    "event_synchronize": Op(
        "`cudaEventSynchronize`: the CPU waits until the event's latest record has "
        "completed.",
        {"event": Field(str, REQUIRED, "the event waited for" + _EVENT)}),
    "event_query": Op(
        "`cudaEventQuery`, called again and again until the event has completed (one call, "
        "and one record in the timeline, per query).",
        {"event": Field(str, REQUIRED, "the event queried" + _EVENT)}),
    "device_synchronize": Op(
        "`cudaDeviceSynchronize`: the CPU waits until the work of every stream has "
        "completed.", {}),
    "host_sleep": Op(
        "The CPU thread computes (or sleeps) without calling CUDA; commands not yet kicked "
        "off go out first.",
        {"ns": Field(_NUM, REQUIRED, "how long, in ns", 0, 10**13, "10,000 s")}),
    "mark": Op(
        "A `meta` record in the timeline at the current CPU time; no CPU time. The metrics "
        "measure repetitions between `rep_begin` and `rep_end` marks.",
        {"what": Field(str, REQUIRED, "the record's `what`, e.g. `rep_begin`, `rep_end`")}),
    "barrier": Op(
        "The CPU thread waits until every thread of its process has reached the barrier of "
        "that name; a name starting with `global:` waits for every thread of every process. "
        "A name may be used again: each use is a new meeting of all threads. Commands not yet "
        "kicked off go out first; no CPU time.",
        {"name": Field(str, REQUIRED, "the barrier's name")}),
    "repeat": Op(
        "Runs `body` `count` times; costs nothing itself (a body that makes no call costs "
        "nothing, whatever the count).",
        {"count": Field(_INT, REQUIRED, "how many times", 0, 10**9, "10^9"),
         "body": Field(list, REQUIRED, "the ops repeated (a list of ops, checked as the "
                                       "program's)")},
        (f"nested at most {MAX_DEPTH} deep",
         "a body may not create a stream, event or graph if it runs more than once")),
    "stream_begin_capture": Op(
        "`cudaStreamBeginCapture`: from now on the stream's launches and copies (and those "
        "of streams that join by waiting on an event recorded in the capture) become nodes "
        "of a graph instead of running; events become its edges. Synchronizing or querying "
        "while capturing fails the capture, as in CUDA.",
        {"stream": Field(str, REQUIRED, "the stream that captures" + _STREAM)}),
    "stream_end_capture": Op(
        "`cudaStreamEndCapture`: ends the capture the stream began and names the graph "
        "(every stream that joined must have joined back).",
        {"stream": Field(str, REQUIRED, "the stream that began the capture" + _STREAM),
         "graph": Field(str, REQUIRED, "the graph's name, which `graph_instantiate` and "
                                       "`graph_launch` refer to; unique among graphs")},
        ("not inside a `repeat` that runs more than once",)),
    "graph_instantiate": Op(
        "`cudaGraphInstantiate`: writes every node's launch descriptor and the node table "
        "into device-visible memory, at a CPU cost per node.",
        {"graph": Field(str, REQUIRED, "the graph; must have been made by a "
                                       "`stream_end_capture` before"),
         "device_launch": Field(bool, False, "`cudaGraphInstantiateFlagDeviceLaunch`: kernels "
                                             "may launch the graph from the device "
                                             "(`device_graph_launch`); it is uploaded now")},
        ("a graph has at most as many nodes as the front end's graph walker holds",)),
    "graph_launch": Op(
        "`cudaGraphLaunch`: one short push-buffer entry and one doorbell, whatever the "
        "graph's size; the front end walks the graph. Launches of one graph run in launch "
        "order.",
        {"graph": Field(str, REQUIRED, "the graph; must have been made by a "
                                       "`stream_end_capture` before, and instantiated by a "
                                       "`graph_instantiate` before it runs"),
         "stream": Field(str, REQUIRED, "the stream it is launched in" + _STREAM)}),
    "graph_exec_set_params": Op(
        "`cudaGraphExecKernelNodeSetParams` on each of the given kernel nodes of the graph's "
        "executable graph, one call (and one runtime record) a node: the node's descriptor "
        "is rewritten for the launches that follow (a launch in flight keeps what it had).",
        {"graph": Field(str, REQUIRED, "the graph; instantiated before"),
         "nodes": Field(_NODES, "all", '"all" (every kernel node), or a list of node indices '
                                       'in capture order (each a kernel node)'),
         "block_ns": Field(_NUM, None, "the kernels' new work per thread block, in ns; "
                                       "absent: unchanged", 0, 10**9, "1 s per thread block")},
        ("a graph's nodes are indexed from 0 in the order they were captured",)),
    "graph_exec_update": Op(
        "`cudaGraphExecUpdate`: the graph's executable graph takes the node parameters of "
        "graph `from` (one call, a CPU cost per node); the graphs must have the same "
        "topology (nodes of the same kinds, the same edges), otherwise the call fails as "
        "CUDA's does (cudaErrorGraphExecUpdateFailure).",
        {"graph": Field(str, REQUIRED, "the graph whose executable graph is updated; "
                                       "instantiated before"),
         "from": Field(str, REQUIRED, "the graph whose parameters it takes; made by a "
                                      "`stream_end_capture` before")}),
    "graph_upload": Op(
        "`cudaGraphUpload`: the graph's executable graph set up in the stream ahead of its "
        "launches (a first upload's CPU cost per node; a first launch uploads a graph not "
        "uploaded yet), and the nodes updated since its last launch or upload written: for a "
        "graph instantiated for `device_launch`, its device launches see the update from "
        "the upload on, in stream order (those of launches queued before it keep the old "
        "parameters; an update reaches a device graph with its next upload or host launch).",
        {"graph": Field(str, REQUIRED, "the graph; instantiated before"),
         "stream": Field(str, REQUIRED, "the stream it is uploaded in" + _STREAM)}),
    "graph_exec_destroy": Op(
        "`cudaGraphExecDestroy`: the graph's executable graph is gone (a CPU cost per "
        "node); launching it fails until a `graph_instantiate` makes a new one, whose "
        "first launch uploads it (a CPU cost per node).",
        {"graph": Field(str, REQUIRED, "the graph; instantiated before")}),
    "graph_create": Op(
        "`cudaGraphCreate`: an empty graph, which `graph_add_conditional` adds nodes to.",
        {"graph": Field(str, REQUIRED, "the graph's name; unique among graphs (captured ones "
                                       "too)")}),
    "graph_add_conditional": Op(
        "`cudaGraphAddNode` of a conditional node (CUDA 12.4): appended to `graph` after all "
        "its current nodes, it runs graph `body`'s nodes `iterations` times each time the "
        "graph runs, each iteration started on the device (`cond_iteration_ns`; under "
        "`--profiler cupti` `cupti_cond_record_ns` more per body node: CUPTI records the "
        "body's kernels one by one). The model does not compute the device-side "
        "condition: `iterations` is its outcome.",
        {"graph": Field(str, REQUIRED, "the graph it is added to (captured, or made by "
                                       "`graph_create`)"),
         "kind": Field(str, REQUIRED, "`while` (the body runs while the condition holds) or "
                                      "`if` (once or not at all)", choices=("while", "if")),
         "body": Field(str, REQUIRED, "the graph whose nodes are the body (captured before; "
                                      "its kernels and copies, no conditional node)"),
         "iterations": Field(_INT, REQUIRED, "how many times the body runs each time the "
                                             "graph runs; `if`: 0 or 1", 0, 1_000_000,
                             "10^6")},
        ("at most one conditional node in a graph (the model's graph walker runs one)",)),
}

#: the fields of the file's top level
TOP = {
    "name": Field(str, None, "the workload's name (the timeline's `scenario`); default: the "
                             "file's name without its extension"),
    "max_connections": Field(_INT, None, "`CUDA_DEVICE_MAX_CONNECTIONS`: compute channels "
                                         "the streams are spread over; default: the "
                                         "parameter set's (`gpufe run --max-connections` "
                                         "overrides both); a driver setting: every value "
                                         "runs on the same compiled model, the KMD giving "
                                         "the process that many of the front end's "
                                         "`hw_channels` (plus two copy channels)",
                                         1, 32, "CUDA's most"),
    "description": Field(str, "", "free text, for the reader"),
    "program": Field(list, None, "the ops the CPU thread runs, in order; required unless "
                                 "`processes` is given"),
    "processes": Field(list, None, "instead of `program`: several processes on the GPU, "
                                   "each its own CUDA context (its own channels, its own "
                                   "time slice) and CPU thread: a list of 1 to 4 objects "
                                   "with `name` (required, unique), `max_connections` "
                                   "(default: the file's) and `program` (or `threads`); "
                                   "streams, events and graphs are named per process; their "
                                   "channels (max_connections + 2 each) must fit the front "
                                   "end's `hw_channels`"),
    "threads": Field(list, None, "instead of `program` (here or in a process): host threads "
                                 "of one process, each running its program on its own CPU: a "
                                 "list of 1 to 32 objects with `name` (required, unique) and "
                                 "`program`; streams, events and graphs are shared by name "
                                 "within the process (a name made by one thread may be used "
                                 "by another once it exists: order them with a `barrier`); "
                                 "launches from several threads contend for the driver's "
                                 "locks (a stream's, for the whole call) and its shared "
                                 "state (`thread_contention_ns`, "
                                 "`thread_contention_per_thread_ns`); records carry the "
                                 "thread's name as `tid`"),
}

#: (op, field) -> (least, most, what the most is): the bounds of :data:`OPS`
LIMITS = {(kind, name): (f.least, f.most, f.why) for kind, op in OPS.items()
          for name, f in op.fields.items() if f.most is not None}

#: workload and parameter files larger than this are not read
MAX_FILE_BYTES = 64 << 20

#: per run (see the module's docstring); --no-limits lifts the first four
MAX_OPS = 1_000_000
MAX_WORK = 2_000_000
MAX_BLOCKS = 100_000_000
MAX_GRAPH_NODES = 1_000_000
MAX_DEVICE_BYTES = 1 << 39
MAX_SIM_NS = 10**16

_repr = reprlib.Repr()
_repr.maxlevel, _repr.maxstring, _repr.maxother, _repr.maxlist, _repr.maxdict = 2, 40, 40, 4, 4


def show(value):
    """A short repr of a value from an input file, for an error message (never recursive)."""
    return _repr.repr(value)


def number(v):
    """Whether ``v`` is a finite int or float (not a bool)."""
    return (isinstance(v, (int, float)) and not isinstance(v, bool)
            and (isinstance(v, int) or math.isfinite(v)))


def _key(k):
    """A field name from a file, for a message."""
    return k if isinstance(k, str) and len(k) <= 40 and k.isprintable() else show(k)


def _fmt(n):
    if isinstance(n, float) and n.is_integer() and abs(n) < 1e18:
        n = int(n)
    return f"{n:,}" if isinstance(n, int) else f"{n:g}"


def _short(where):
    """``FILE: op path``, the op path shortened in the middle when repeats nest deep (the
    file's name whole, however long)."""
    source, sep, path = where.rpartition(": ")
    return where if len(path) <= 160 else f"{source}{sep}{path[:70]}...{path[-70:]}"


def _check_text(s, where, error=None):
    """Strings from files must be valid Unicode (no lone surrogates from ``\\ud800`` escapes):
    they are printed and written back out."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise (error or WorkloadError)(f"{where}: {show(s)} is not valid Unicode (a lone "
                                       f"surrogate escape)") from None
    return s


# -- reading JSON files -------------------------------------------------------------------------

class _BadToken(ValueError):
    def __init__(self, token, reason):
        super().__init__(reason)
        self.token, self.reason = token, reason


def _reject_constant(token):
    raise _BadToken(token, f"{token} is not a number JSON allows (only finite numbers)")


def _finite_float(token):
    v = float(token)
    if not math.isfinite(v):
        raise _BadToken(token, f"number {token[:30]} is too large (not a finite double)")
    return v


def _bounded_int(token):
    if len(token) > 40:
        raise _BadToken(token, f"integer {token[:20]}... has {len(token)} digits (more than 40)")
    return int(token)


_STRING = r'"(?:[^"\\]|\\.)*"'


def _locate(text, token):
    """Line and column of the first ``token`` outside a JSON string."""
    pattern = re.compile(_STRING + "|" + re.escape(token), re.S)
    for m in pattern.finditer(text):
        if m.group(0) == token:
            line = text.count("\n", 0, m.start()) + 1
            return line, m.start() - text.rfind("\n", 0, m.start())
    return None, None


def decode_utf8(data, where, error):
    """Bytes of a text file as str, or ``error`` naming the file, line and byte."""
    if data[:2] == b"\x1f\x8b":
        raise error(f"{where}: gzip-compressed data, not a JSON text file")
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise error(f"{where}: UTF-16 text; gpufe reads UTF-8")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise error(f"{where}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                    f"{e.start})") from None
    return text[1:] if text.startswith("\ufeff") else text


def read_file(path, error, max_bytes=MAX_FILE_BYTES):
    """The bytes of a file, or ``error`` naming it: unreadable, or larger than ``max_bytes``."""
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise error(f"{path}: cannot read ({e.strerror or e})") from None
    if len(data) > max_bytes:
        raise error(f"{path}: larger than {max_bytes >> 20} MiB; not read")
    return data


def parse_json(text, where, error, *, strict_numbers=True):
    """JSON text as Python values, or ``error`` naming the line: not JSON, ``NaN`` or
    ``Infinity`` (always), numbers that overflow a double or integers of more than 40 digits
    (``strict_numbers``; for large traces only NaN/Infinity are caught here and the fields
    read are checked after), nesting deeper than Python's parser goes."""
    hooks = {"parse_constant": _reject_constant}
    if strict_numbers:
        hooks.update(parse_float=_finite_float, parse_int=_bounded_int)
    try:
        return json.loads(text, **hooks)
    except _BadToken as e:
        line, col = _locate(text, e.token)
        raise error(f"{where}:{line}:{col}: {e.reason}" if line else
                    f"{where}: {e.reason}") from None
    except json.JSONDecodeError as e:
        raise error(f"{where}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None
    except RecursionError:
        raise error(f"{where}: nested too deeply to read (JSON arrays or objects more than "
                    f"several hundred levels deep)") from None
    except ValueError as e:           # e.g. Python's limit on the digits of an integer
        raise error(f"{where}: not valid JSON ({e})") from None


def load_json(path, error, max_bytes=MAX_FILE_BYTES):
    """A small JSON file (workload, parameters): read, decoded and parsed strictly."""
    return parse_json(decode_utf8(read_file(path, error, max_bytes), path, error), path, error)


# -- checking a workload --------------------------------------------------------------------------

def _dims(value, where, name, limits):
    ok = isinstance(value, list) and 1 <= len(value) <= 3
    if ok:
        for v in value:
            if not isinstance(v, int) or type(v) is bool or v < 1:
                ok = False
                break
    if not ok:
        raise WorkloadError(f"{where}: {name} must be a list of 1 to 3 positive integers, "
                            f"not {show(value)}")
    dims = list(value) + [1] * (3 - len(value))
    if dims[0] <= limits[0] and dims[1] <= limits[1] and dims[2] <= limits[2]:
        return dims
    for axis, v, most in zip("xyz", dims, limits):
        if v > most:
            raise WorkloadError(f"{where}: {name}.{axis} is {_fmt(v)}; CUDA allows at most "
                                f"{_fmt(most)}")
    return dims


def _check_value(kind, name, v, here):
    if isinstance(v, float) and not math.isfinite(v):
        raise WorkloadError(f"{here}: {kind}.{name} is {v}: not a finite number")
    if isinstance(v, str):
        _check_text(v, f"{here}: {kind}.{name}")
    lim = LIMITS.get((kind, name))
    if lim is not None:
        lo, hi, what = lim
        if v < lo:
            raise WorkloadError(f"{here}: {kind}.{name} is {_fmt(v)}; it must be at least "
                                f"{_fmt(lo)}")
        if v > hi:
            raise WorkloadError(f"{here}: {kind}.{name} is {_fmt(v)}; at most {_fmt(hi)} "
                                f"({what})")


#: op kind -> what _check_ops reads of its fields, once: ((name, types, default, (least,
#: most) or None) of each field in order; {False: the keys it may have, True: with "_at"};
#: (name, field) of the fields with choices or dimensions)
_PLANS = {kind: (tuple((n, f.types, f.default,
                        LIMITS[kind, n][:2] if (kind, n) in LIMITS else None)
                       for n, f in op.fields.items()),
                 {False: frozenset(op.fields) | {"op"}, True: frozenset(op.fields) | {"op", "_at"}},
                 tuple((n, f) for n, f in op.fields.items() if f.choices or f.dims))
          for kind, op in OPS.items()}

#: ops that create a name: inside a repeat that runs them twice, the second fails
_CREATES = {"stream_create": "stream", "event_create": "event", "stream_end_capture": "graph",
            "graph_create": "graph"}


def _check_ops(ops, where, names, *, depth=0, mult=1, located=False):
    if not isinstance(ops, list):
        raise WorkloadError(f"{where}: must be a list of ops")
    if depth > MAX_DEPTH:
        raise WorkloadError(f"{_short(where)}: repeats nested more than {MAX_DEPTH} deep")
    checked = []
    for i, op in enumerate(ops):
        here = f"{where}[{i}]"
        if not isinstance(op, dict):
            raise WorkloadError(f"{here}: an op must be an object, not {show(op)}")
        if located and isinstance(op.get("_at"), str):
            here = op["_at"]
        kind = op.get("op")
        if not isinstance(kind, str) or kind not in OPS:
            raise WorkloadError(f"{here}: unknown op {show(kind)} (known: {', '.join(OPS)})")
        spec = OPS[kind].fields
        fields, allowed, shaped = _PLANS[kind]
        if not (allowed[located]).issuperset(op):
            extra = sorted(set(op) - allowed[located])
            raise WorkloadError(f"{here}: {kind} has no field(s) "
                                f"{', '.join(_key(e) for e in extra)}")
        out = {"op": kind}
        if located and "_at" in op:
            out["_at"] = here
        for name, types, default, lim in fields:
            if name not in op:
                if default is REQUIRED:
                    raise WorkloadError(f"{here}: {kind} needs field {name!r}")
                out[name] = default
                continue
            v = op[name]
            t = type(v)
            if not isinstance(v, types) or (t is bool and types is not bool):
                raise WorkloadError(f"{here}: {kind}.{name} has the wrong type ({show(v)}; "
                                    f"{_TYPES[types][1]})")
            # _check_value's checks, inlined (the common case: nothing to report)
            if (t is float and not math.isfinite(v) or t is str and not v.isascii()
                    or lim is not None and not lim[0] <= v <= lim[1]):
                _check_value(kind, name, v, here)
            out[name] = v
        if kind in _CREATES and mult > 1:
            raise WorkloadError(f"{here}: {kind} inside a repeat that runs it {_fmt(mult)} "
                                f"times would make {_CREATES[kind]} "
                                f"{show(out['graph' if _CREATES[kind] == 'graph' else 'name'])}"
                                f" again")
        if kind in ("stream_create", "event_create"):
            table = names["stream" if kind == "stream_create" else "event"]
            if out["name"] in table:
                raise WorkloadError(f"{here}: {kind} {out['name']!r} already exists")
            table.add(out["name"])
        if kind in ("stream_end_capture", "graph_create"):
            if out["graph"] in names["graph"]:
                raise WorkloadError(f"{here}: graph {out['graph']!r} already exists")
            names["graph"].add(out["graph"])
        else:
            for ref in ("graph", "from", "body"):
                if ref in spec and kind != "repeat" and out[ref] not in names["graph"]:
                    raise WorkloadError(f"{here}: {kind} refers to graph {out[ref]!r}, which "
                                        f"no stream_end_capture or graph_create before it "
                                        f"makes")
        if kind == "graph_exec_set_params" and out["nodes"] != "all" and (
                isinstance(out["nodes"], str) or not out["nodes"]
                or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 31
                           for n in out["nodes"])):
            raise WorkloadError(f"{here}: graph_exec_set_params.nodes must be \"all\" or a "
                                f"non-empty list of node indices (0 or more), not "
                                f"{show(out['nodes'])}")
        for ref, table in (("stream", "stream"), ("event", "event")):
            if ref in spec and kind not in ("stream_create", "event_create"):
                if out[ref] not in names[table]:
                    raise WorkloadError(f"{here}: {kind} refers to {table} {out[ref]!r}, "
                                        f"which was not created before")
        for name, field in shaped:
            if field.choices and out[name] not in field.choices:
                *most, last = field.choices
                raise WorkloadError(f"{here}: {kind.split('_')[0]} {name} must be "
                                    f"{', '.join(most)} or {last}")
            if field.dims:
                out[name] = _dims(out[name], here, name, field.dims)
        if kind == "launch_kernel" and out["device_graph_launch"] is not None:
            out["device_graph_launch"] = _device_graph_launch(out["device_graph_launch"], here)
        if kind == "launch_kernel":
            block = out["block"]
            threads = block[0] * block[1] * block[2]
            if threads > MAX_THREADS_PER_BLOCK:
                raise WorkloadError(f"{here}: block {block} has {_fmt(threads)} threads; CUDA "
                                    f"allows at most {MAX_THREADS_PER_BLOCK} per block")
        if kind == "repeat":
            inner = mult * out["count"]
            # a body that never runs is checked, but what it creates does not exist after it
            scope = names if inner else {k: set(v) for k, v in names.items()}
            out["body"] = _check_ops(out["body"], f"{here}.body", scope, depth=depth + 1,
                                     mult=inner, located=located)
        checked.append(out)
    return checked


#: device_graph_launch.mode: how the kernel launches the graph
_DGL_MODES = ("fire_and_forget", "tail")


def _device_graph_launch(d, here):
    """launch_kernel.device_graph_launch checked, with its count filled in."""
    where = f"{here}: launch_kernel.device_graph_launch"
    extra = sorted(set(d) - {"graph", "mode", "count"})
    if extra:
        raise WorkloadError(f"{where} has no field(s) {', '.join(_key(e) for e in extra)}")
    for name in ("graph", "mode"):
        if name not in d:
            raise WorkloadError(f"{where} needs field {name!r}")
    if not isinstance(d["graph"], str):
        raise WorkloadError(f"{where}.graph must be a graph's name, not {show(d['graph'])}")
    _check_text(d["graph"], f"{where}.graph")
    if d["mode"] not in _DGL_MODES:
        raise WorkloadError(f"{where}.mode must be \"fire_and_forget\" or \"tail\", not "
                            f"{show(d['mode'])}")
    count = d.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count < 1 << 31:
        raise WorkloadError(f"{where}.count must be an integer from 0 (the code is there, "
                            f"never called), not {show(count)}")
    return {"graph": d["graph"], "mode": d["mode"], "count": count}


def parse_workload(data, source="<workload>", *, located=False):
    """A workload (dict from JSON) checked and with defaults filled in, or
    :class:`WorkloadError`. ``located``: ops may carry ``"_at"``, the place they came from
    (a trace event), which errors then name instead of the op's index path."""
    if not isinstance(data, dict):
        raise WorkloadError(f"{source}: the top level must be an object")
    extra = sorted(set(data) - set(TOP))
    if extra:
        raise WorkloadError(f"{source}: unknown top-level field(s) "
                            f"{', '.join(_key(e) for e in extra)}")
    given = [k for k in ("program", "processes", "threads") if k in data]
    if len(given) > 1:
        raise WorkloadError(f"{source}: both {given[0]!r} and {given[1]!r}: give one")
    if not given:
        raise WorkloadError(f"{source}: no 'program' (or 'processes', or 'threads')")
    mc = data.get("max_connections")
    lo, hi = TOP["max_connections"].least, TOP["max_connections"].most
    if mc is not None and (not isinstance(mc, int) or isinstance(mc, bool)
                           or not lo <= mc <= hi):
        raise WorkloadError(f"{source}: max_connections must be {lo}..{hi} (an integer), not "
                            f"{show(mc)}")
    for key in ("name", "description"):
        if data.get(key) is not None:
            if not isinstance(data[key], str):
                raise WorkloadError(f"{source}: {key} must be a string, not {show(data[key])}")
            _check_text(data[key], f"{source}: {key}")
    name, description = data.get("name"), data.get("description")
    out = {"name": pathlib.Path(str(source)).stem if name is None else name,
           "max_connections": mc, "description": "" if description is None else description}
    if "processes" in data:
        out["processes"] = _check_processes(data["processes"], source, lo, hi, located)
        out["program"] = []
        _check_barriers(out, source)
        return out
    if "threads" in data:
        out["threads"] = _check_threads(data["threads"], f"{source}: threads", located)
        out["program"] = []
        _check_barriers(out, source)
        return out
    names = {"stream": set(), "event": set(), "graph": set()}
    out["program"] = _check_ops(data["program"], f"{source}: program", names, located=located)
    return out


def _barrier_counts(program, m=1, out=None):
    """{barrier name: times the program reaches it}, repeats multiplied out."""
    out = {} if out is None else out
    for op in program:
        if op["op"] == "repeat":
            if op["count"]:
                _barrier_counts(op["body"], m * op["count"], out)
        elif op["op"] == "barrier":
            out[op["name"]] = out.get(op["name"], 0) + m
    return out


def _barrier_seq(program, scope):
    """The barrier names the program reaches, in order, repeats multiplied out, of one scope
    (``global:`` names or the others); a generator."""
    for op in program:
        if op["op"] == "repeat":
            if op["count"] and _barrier_counts(op["body"]):
                for _ in range(op["count"]):
                    yield from _barrier_seq(op["body"], scope)
        elif op["op"] == "barrier" and op["name"].startswith("global:") == scope:
            yield op["name"]


def _check_barriers(workload, source):
    """Every thread that meets at a barrier reaches it as often as the others, and the
    barriers of one scope in the same order (each use is a meeting of all the process's
    threads, of every process's for a ``global:`` name): otherwise some can never be met."""
    procs = workload.get("processes") or [workload]
    everyone = []
    for j, p in enumerate(procs):
        who = [(f"{p['name']}/" if workload.get("processes") else "")
               + (t if t is not None else "main") for t, _ in threads_of(p)]
        counts = [_barrier_counts(prog) for _, prog in threads_of(p)]
        everyone += list(zip(who, counts))
        local = [(w, {k: v for k, v in c.items() if not k.startswith("global:")})
                 for w, c in zip(who, counts)]
        _same_counts(local, source, "the process's threads")
        _same_order([(w, _barrier_seq(prog, False)) for w, (_, prog) in
                     zip(who, threads_of(p))], source)
    global_ = [(w, {k: v for k, v in c.items() if k.startswith("global:")})
               for w, c in everyone]
    _same_counts(global_, source, "every process's threads")
    _same_order([(w, _barrier_seq(prog, True)) for w, (_, prog) in
                 zip([w for w, _ in everyone],
                     [tp for p in procs for tp in threads_of(p)])], source)


def _same_order(seqs, source):
    """The threads' barrier sequences (of equal counts) are the same, in lockstep."""
    if len(seqs) < 2:
        return
    for n, names in enumerate(zip(*(s for _, s in seqs)), start=1):
        if len(set(names)) > 1:
            b, y = seqs[0][0], names[0]
            a, x = next((w, nm) for (w, _), nm in zip(seqs, names) if nm != y)
            raise WorkloadError(f"{source}: at its barrier use {_fmt(n)}, thread {a!r} waits "
                                f"at barrier {x!r} and thread {b!r} at {y!r}: neither can "
                                f"ever be met")


def _same_counts(counts, source, whom):
    names = sorted({k for _, c in counts for k in c})
    for name in names:
        seen = [(c.get(name, 0), w) for w, c in counts]
        (lo, a), (hi, b) = min(seen), max(seen)
        if lo != hi:
            raise WorkloadError(f"{source}: barrier {name!r} is reached {_fmt(hi)} times by "
                                f"thread {b!r} and {_fmt(lo)} by thread {a!r}: each use is a "
                                f"meeting of {whom}, so it can never be met")


#: processes a workload may run on the GPU at once (the front end's TSGs)
MAX_PROCESSES = 4


def _check_processes(procs, source, lo, hi, located):
    if not isinstance(procs, list) or not procs:
        raise WorkloadError(f"{source}: processes must be a non-empty list")
    if len(procs) > MAX_PROCESSES:
        raise WorkloadError(f"{source}: {len(procs)} processes; the model runs at most "
                            f"{MAX_PROCESSES} (the front end's TSGs)")
    out, seen = [], set()
    for i, p in enumerate(procs):
        here = f"{source}: processes[{i}]"
        name = _named_entry(p, here, {"max_connections", "program", "threads"}, "process",
                            seen)
        mc = p.get("max_connections")
        if mc is not None and (not isinstance(mc, int) or isinstance(mc, bool)
                               or not lo <= mc <= hi):
            raise WorkloadError(f"{here}: max_connections must be {lo}..{hi} (an integer), "
                                f"not {show(mc)}")
        if ("program" in p) == ("threads" in p):
            raise WorkloadError(f"{here}: give 'program' or 'threads' (one of them)")
        proc = {"name": name, "max_connections": mc}
        if "threads" in p:
            proc["threads"] = _check_threads(p["threads"], f"{here}.threads", located)
            proc["program"] = []
        else:
            names = {"stream": set(), "event": set(), "graph": set()}
            proc["program"] = _check_ops(p["program"], f"{here}.program", names,
                                         located=located)
        out.append(proc)
    return out


def _named_entry(entry, here, fields, what, seen):
    """A process's or thread's object: only ``name`` and ``fields``, a name of its own (added
    to ``seen``); its name."""
    if not isinstance(entry, dict):
        raise WorkloadError(f"{here}: must be an object, not {show(entry)}")
    extra = sorted(set(entry) - {"name"} - fields)
    if extra:
        raise WorkloadError(f"{here}: unknown field(s) {', '.join(_key(e) for e in extra)}")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise WorkloadError(f"{here}: name must be a non-empty string, not {show(name)}")
    _check_text(name, f"{here}: name")
    if name in seen:
        raise WorkloadError(f"{here}: {what} name {name!r} used twice")
    seen.add(name)
    return name


#: host threads a process may run
MAX_THREADS = 32


def _created(ops, out):
    """The names ``ops`` create (streams, events, graphs), repeats included: into ``out``."""
    for op in ops if isinstance(ops, list) else ():
        if not isinstance(op, dict):
            continue
        what = op.get("op")
        kind = _CREATES.get(what) if isinstance(what, str) else None
        name = op.get("graph" if kind == "graph" else "name")
        if kind is not None and isinstance(name, str):  # (the op's own check says what else)
            out[kind].add(name)
        if what == "repeat":
            _created(op.get("body"), out)
    return out


def _check_threads(threads, where, located):
    """A process's host threads: each program checked with the names the others create
    (shared within the process; a name made by two threads is an error)."""
    if not isinstance(threads, list) or not threads:
        raise WorkloadError(f"{where}: must be a non-empty list")
    if len(threads) > MAX_THREADS:
        raise WorkloadError(f"{where}: {len(threads)} threads; at most {MAX_THREADS}")
    seen = set()
    for i, t in enumerate(threads):
        here = f"{where}[{i}]"
        _named_entry(t, here, {"program"}, "thread", seen)
        if "program" not in t:
            raise WorkloadError(f"{here}: no 'program'")
    created = [_created(t["program"], {"stream": set(), "event": set(), "graph": set()})
               for t in threads]
    for i, c in enumerate(created):
        for j in range(i):
            for kind in ("stream", "event", "graph"):
                both = sorted(c[kind] & created[j][kind], key=str)
                if both:
                    raise WorkloadError(f"{where}[{i}].program: makes {kind} {show(both[0])}, "
                                        f"which thread {threads[j]['name']!r} makes too "
                                        f"(names are shared by the process's threads)")
    out = []
    for i, t in enumerate(threads):
        names = {k: set().union(*(c[k] for j, c in enumerate(created) if j != i))
                 for k in ("stream", "event", "graph")}
        out.append({"name": t["name"],
                    "program": _check_ops(t["program"], f"{where}[{i}].program", names,
                                          located=located)})
    return out


def threads_of(entry):
    """(thread name or None, program) of each host thread of a workload or process: its
    ``threads``, or its one ``program`` (None: the only thread)."""
    if entry.get("threads"):
        return [(t["name"], t["program"]) for t in entry["threads"]]
    return [(None, entry["program"])]


def programs_of(workload):
    """Every program a workload runs: its processes' (and their threads') programs, or its
    threads' or its one program."""
    procs = workload.get("processes") or [workload]
    return [prog for p in procs for _, prog in threads_of(p)]


def load_workload(path):
    path = pathlib.Path(path)
    return parse_workload(load_json(path, WorkloadError), str(path))


def count_ops(program):
    """Number of API calls the program makes (repeats expanded)."""
    n = 0
    for op in program:
        n += op["count"] * count_ops(op["body"]) if op["op"] == "repeat" else 1
    return n


# -- what a run will do, before it runs ------------------------------------------------------------

class _Work:
    """Kernels and copies, with what bounds their time."""

    __slots__ = ("kernels", "copies", "blocks", "block_ns", "bytes", "device_bytes")

    def __init__(self):
        self.kernels = self.copies = self.blocks = self.block_ns = self.device_bytes = 0
        self.bytes = {"h2d": 0, "d2h": 0, "d2d": 0}

    def copy(self):
        w = _Work()
        w.add(self, 1)
        return w

    def add(self, other, m):
        self.kernels += m * other.kernels
        self.copies += m * other.copies
        self.blocks += m * other.blocks
        self.block_ns += m * other.block_ns
        for k in self.bytes:
            self.bytes[k] += m * other.bytes[k]


def _device_bytes(n):
    return max(DEVICE_ALLOC_ALIGN, -(-n // DEVICE_ALLOC_ALIGN) * DEVICE_ALLOC_ALIGN)


def work_totals(program):
    """What a (checked) program does, repeats multiplied out and graph launches counted with
    their nodes: {ops, graph_launches, sleep_ns, streams, work: _Work run, graph_nodes
    (instantiated), graph_node_runs, device_bytes, graph_sizes: {graph: nodes}}. Captures are
    followed in program order (an upper bound where the program's own errors would stop it
    sooner)."""
    t = {"ops": 0, "graph_launches": 0, "sleep_ns": 0, "streams": 0, "graph_nodes": 0,
         "graph_node_runs": 0, "device_bytes": 0, "work": _Work()}
    # graphs: what each graph (as captured) holds; execs: what each executable graph holds,
    # which updates change and launches run
    state = {"capturing": {}, "event_cap": {}, "caps": {}, "graphs": {}, "execs": {}}
    _walk(program, 1, t, state)
    t["graph_sizes"] = {name: g[2] for name, g in state["graphs"].items()}
    return t


def _walk(program, m, t, st):
    capturing, caps = st["capturing"], st["caps"]
    for op in program:
        kind = op["op"]
        if kind == "repeat":
            if m * op["count"]:
                _walk(op["body"], m * op["count"], t, st)
            continue
        t["ops"] += m
        if kind == "stream_create":
            t["streams"] += m
        elif kind in ("launch_kernel", "memcpy_async"):
            cap = capturing.get(op["stream"])
            w = caps[cap][0] if cap is not None else t["work"]
            if kind == "launch_kernel":
                g = op["grid"]
                blocks = g[0] * g[1] * g[2]
                w.kernels += m
                w.blocks += m * blocks
                w.block_ns += m * blocks * op["block_ns"]
            else:
                w.copies += m
                w.bytes[op["kind"]] += m * op["bytes"]
                if cap is not None:
                    caps[cap][1] += _device_bytes(op["bytes"])
                else:
                    t["device_bytes"] += m * _device_bytes(op["bytes"])
            if cap is not None:
                caps[cap][2] += m
                dgl = op.get("device_graph_launch") if kind == "launch_kernel" else None
                if dgl is not None and dgl["count"]:
                    caps[cap][3].append((dgl["graph"], dgl["mode"], dgl["count"]))
        elif kind == "host_sleep":
            t["sleep_ns"] += m * op["ns"]
        elif kind == "event_record":
            cap = capturing.get(op["stream"])
            if cap is not None:
                st["event_cap"][op["event"]] = cap
            else:
                st["event_cap"].pop(op["event"], None)
        elif kind == "stream_wait_event":
            cap = st["event_cap"].get(op["event"])
            if cap is not None and op["stream"] not in capturing:
                capturing[op["stream"]] = cap
        elif kind == "stream_begin_capture":
            cap = len(caps)
            # work, device bytes, nodes, device launches (graph, mode, count)
            caps[cap] = [_Work(), 0, 0, []]
            capturing[op["stream"]] = cap
        elif kind == "stream_end_capture":
            cap = capturing.get(op["stream"])
            st["graphs"][op["graph"]] = caps[cap] if cap is not None else [_Work(), 0, 0, []]
            for s in [s for s, c in capturing.items() if c == cap]:
                del capturing[s]
        elif kind == "graph_create":
            st["graphs"][op["graph"]] = [_Work(), 0, 0, []]
        elif kind == "graph_add_conditional":
            g, b = st["graphs"].get(op["graph"]), st["graphs"].get(op["body"])
            if g is not None and b is not None:
                # the body's work, as often as it runs; its nodes in the table once
                g[0].add(b[0], op["iterations"])
                g[1] += b[1]
                g[2] += b[2] + 1
        elif kind == "graph_instantiate":
            g = st["graphs"].get(op["graph"])
            if g is not None:
                t["graph_nodes"] += m * g[2]
                t["device_bytes"] += m * g[1]
                st["execs"][op["graph"]] = _snapshot(g)
        elif kind == "graph_exec_update":
            g = st["graphs"].get(op["from"])
            if g is not None and op["graph"] in st["execs"]:
                # the executable graph runs the other graph's work from now on
                st["execs"][op["graph"]] = _snapshot(g)
        elif kind == "graph_exec_set_params":
            x = st["execs"].get(op["graph"])
            if x is not None and op.get("block_ns") is not None:
                # a bound: every block of the graph at the new time, if that is longer
                x[0].block_ns = max(x[0].block_ns, x[0].blocks * op["block_ns"])
        elif kind == "graph_exec_destroy":
            st["execs"].pop(op["graph"], None)
        elif kind == "graph_launch":
            g = st["graphs"].get(op["graph"])
            if g is not None:
                t["graph_launches"] += m
                view = {**st["graphs"], **st["execs"]}
                runs = _launch_runs(view, op["graph"])
                for name, n in runs.items():
                    t["graph_node_runs"] += m * n * view[name][2]
                    t["work"].add(view[name][0], m * n)


def _snapshot(g):
    """A copy of a graph's [work, device bytes, nodes, device launches] (an executable
    graph's, which later changes to the graph do not reach)."""
    return [g[0].copy(), g[1], g[2], list(g[3])]


def _launch_runs(graphs, name):
    """{graph: runs at most} of one host launch of graph ``name`` with the device launches
    its kernels make (see ``device_graph_launch``): its run; for each fire-and-forget kernel,
    ``count`` chains of its target; and a chain's tail launches, each tail-launching kernel
    reached calling at most ``count`` times, each call a run of any graph the chain reaches
    (a bound)."""
    out = {}

    def chain(start, times):
        reach, todo = [], [start]
        while todo:
            g = todo.pop()
            if g in graphs and g not in reach:
                reach.append(g)
                todo += [t for t, mode, _ in graphs[g][3] if mode == "tail"]
        calls = sum(c for g in reach for _, mode, c in graphs[g][3] if mode == "tail")
        for g in reach:
            out[g] = out.get(g, 0) + times * (calls + (g == start))
        return reach

    for g in chain(name, 1):
        for target, mode, count in graphs[g][3]:
            if mode == "fire_and_forget":
                chain(target, count)
    return out


def time_bound_ns(totals, params):
    """A generous upper bound of a run's simulated time: everything one after another (no
    overlap), every call paying every CPU cost and latency of the parameter set, every command
    fetched one dword at a time."""
    ns_costs = sum(getattr(params, name) for name in vars(params)
                   if name.endswith("_ns") and isinstance(getattr(params, name), (int, float)))
    floor = 1e-9                      # parameter files are checked; Python callers may not be
    dword_ns = 16 * params.cycle_ns + 4 / max(params.dma_read_bytes_per_ns, floor)
    per_op = ns_costs + 256 * dword_ns
    w = totals["work"]
    bw = {"h2d": max(params.h2d_bytes_per_ns, floor), "d2h": max(params.d2h_bytes_per_ns, floor),
          "d2d": max(params.d2d_bytes_per_ns, floor)}
    parts = {
        "calls": totals["ops"] * per_op,
        "host_sleep": totals["sleep_ns"],
        "kernel blocks": w.block_ns + w.blocks * (params.block_overhead_ns
                                                  + params.block_dispatch_ns
                                                  + params.cupti_kernel_ns
                                                  + params.cupti_graph_kernel_ns),
        "kernels and copies": (w.kernels + w.copies) * (ns_costs + 16 * dword_ns),
        "copied bytes": sum(n / bw[k] for k, n in w.bytes.items()),
        "graph nodes": (totals["graph_nodes"] + totals["graph_node_runs"]) * (
            ns_costs + 16 * dword_ns),
    }
    return sum(parts.values()), parts


def check_run(workload, params, source=None, *, max_connections=None, limits=True):
    """Reject, before it starts, a run the model cannot do or that would not end in
    reasonable time: more streams than syncpoints, more work than the per-run limits (unless
    ``limits`` is false), more device memory than the model hands out, a simulated time past
    :data:`MAX_SIM_NS`. Returns the totals (:func:`work_totals`)."""
    where = source or workload.get("name", "<workload>")
    t = work_totals([{"op": "repeat", "count": 1, "body": p} for p in programs_of(workload)])
    w = t["work"]
    if t["streams"] > params.syncpoints:
        raise WorkloadError(f"{where}: {_fmt(t['streams'])} streams; the model has "
                            f"{params.syncpoints} syncpoints, one per stream (parameter "
                            f"syncpoints)")
    most_nodes = params.frontend_config().graph_nodes_max
    for name, nodes in t["graph_sizes"].items():
        if nodes > most_nodes:
            raise WorkloadError(f"{where}: graph {name!r} captures {_fmt(nodes)} nodes; the "
                                f"front end's graph walker holds {_fmt(most_nodes)} "
                                f"(cudaGraphInstantiate would fail)")
    if limits:
        for what, n, most, hint in (
                ("ops (API calls, sleeps and marks)", t["ops"], MAX_OPS,
                 "about 10 minutes at ~2,000 calls a second"),
                ("kernels and copies (graph nodes included)",
                 w.kernels + w.copies, MAX_WORK, "each is simulated one by one"),
                ("thread blocks", w.blocks, MAX_BLOCKS,
                 "about 20 minutes at ~100,000 blocks a second"),
                ("graph nodes instantiated", t["graph_nodes"], MAX_GRAPH_NODES,
                 "each takes host memory")):
            if n > most:
                raise WorkloadError(f"{where}: the program runs {_fmt(n)} {what}, repeats "
                                    f"multiplied out; the limit is {_fmt(most)} ({hint}); "
                                    f"gpufe run --no-limits runs it anyway")
    if t["device_bytes"] > MAX_DEVICE_BYTES:
        raise WorkloadError(f"{where}: the program copies {_fmt(t['device_bytes'])} bytes in "
                            f"all; the model gives every copy fresh device memory and has "
                            f"{_fmt(MAX_DEVICE_BYTES)} bytes (512 GiB) of it")
    bound, parts = time_bound_ns(t, params)
    if bound > MAX_SIM_NS:
        big = ", ".join(f"{k} {v:.3g}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1])
                        if v > MAX_SIM_NS / 100)
        raise WorkloadError(f"{where}: the program could run up to {bound:.3g} ns of simulated "
                            f"time ({big}); the model simulates at most {MAX_SIM_NS:.0e} ns "
                            f"(about 115 days)")
    return t


# -- running --------------------------------------------------------------------------------------

class ProgramError(ValueError):
    """An API call of the program failed while it ran; names the op's path."""


def run_program(program, rt, progress=None, where="program", thread=None):
    """Generator: the CPU thread executing ``program`` on runtime ``rt``. ``where``: the
    program's path in the workload (``threads[1].program``, ...), ``thread``: the name of its
    host thread (None: the only one), both for the errors it raises."""
    yield from _run_ops(program, rt, progress, where, thread)
    yield from rt.finish()


def program_paths(workload):
    """(path, thread name) of each program of :func:`programs_of`, in its order: where a
    run-time error of that program says it happened."""
    procs = workload.get("processes")
    out = []
    for j, p in enumerate(procs or [workload]):
        base = f"processes[{j}]." if procs else ""
        if p.get("threads"):
            out += [(f"{base}threads[{i}].program", t["name"])
                    for i, t in enumerate(p["threads"])]
        else:
            out.append((f"{base}program", None))
    return out


def _run_ops(program, rt, progress, where, thread=None):
    for i, op in enumerate(program):
        kind = op["op"]
        if kind == "repeat":
            # a body that makes no call costs nothing, however often it is repeated
            if op["count"] and count_ops(op["body"]):
                for _ in range(op["count"]):
                    yield from _run_ops(op["body"], rt, progress, f"{where}[{i}].body",
                                        thread)
            continue
        try:
            yield from _run_op(op, rt)
        except ProgramError:
            raise
        except ValueError as e:
            by = f", thread {thread!r}" if thread is not None else ""
            raise ProgramError(f"{op.get('_at') or f'{where}[{i}]'} ({kind}{by}): {e}") \
                from None
        if progress:
            progress()


#: op -> the runtime call it makes
_CALLS = {
    "stream_create": lambda rt, op: rt.stream_create(op["name"], op["priority"]),
    "event_create": lambda rt, op: rt.event_create(op["name"], op["timing"]),
    "launch_kernel": lambda rt, op: rt.launch_kernel(op["kernel"], op["grid"], op["block"],
                                                     op["block_ns"], op["stream"], op["pdl"],
                                                     op["trigger_ns"], op["prologue_ns"],
                                                     op["device_graph_launch"]),
    "memcpy_async": lambda rt, op: rt.memcpy_async(op["kind"], op["bytes"], op["stream"]),
    "event_record": lambda rt, op: rt.event_record(op["event"], op["stream"]),
    "stream_wait_event": lambda rt, op: rt.stream_wait_event(op["stream"], op["event"]),
    "stream_synchronize": lambda rt, op: rt.stream_synchronize(op["stream"]),
    "event_synchronize": lambda rt, op: rt.event_synchronize(op["event"]),
    "event_query": lambda rt, op: rt.event_query(op["event"]),
    "device_synchronize": lambda rt, op: rt.device_synchronize(),
    "host_sleep": lambda rt, op: rt.host_sleep(op["ns"]),
    "mark": lambda rt, op: rt.mark(op["what"]),
    "barrier": lambda rt, op: rt.barrier(op["name"]),
    "stream_begin_capture": lambda rt, op: rt.stream_begin_capture(op["stream"]),
    "stream_end_capture": lambda rt, op: rt.stream_end_capture(op["stream"], op["graph"]),
    "graph_instantiate": lambda rt, op: rt.graph_instantiate(op["graph"],
                                                             op["device_launch"]),
    "graph_launch": lambda rt, op: rt.graph_launch(op["graph"], op["stream"]),
    "graph_exec_set_params": lambda rt, op: rt.graph_exec_set_params(op["graph"], op["nodes"],
                                                                     op["block_ns"]),
    "graph_exec_update": lambda rt, op: rt.graph_exec_update(op["graph"], op["from"]),
    "graph_exec_destroy": lambda rt, op: rt.graph_exec_destroy(op["graph"]),
    "graph_upload": lambda rt, op: rt.graph_upload(op["graph"], op["stream"]),
    "graph_create": lambda rt, op: rt.graph_create(op["graph"]),
    "graph_add_conditional": lambda rt, op: rt.graph_add_conditional(
        op["graph"], op["kind"], op["body"], op["iterations"]),
}


#: ops that are not CUDA API calls (no profiler cost)
_NOT_API = ("mark", "host_sleep", "barrier")


def _run_op(op, rt):
    call = _CALLS[op["op"]](rt, op)
    return call if op["op"] in _NOT_API else rt.api_call(call)


# -- the reference --------------------------------------------------------------------------------

#: how to write docs/workload.md (it says so at its top)
REFERENCE_COMMAND = "python -m gpufe.sim.host.workload --reference > docs/workload.md"


def _md(text):
    """Text for a Markdown table cell."""
    return text.replace("|", "\\|")


def _type_text(f):
    if f.dims:
        return "list of 1 to 3 positive integers"
    if f.choices:
        *most, last = f.choices
        return f"string: {', '.join(f'`{c}`' for c in most)} or `{last}`"
    return _TYPES[f.types][0]


def _default_text(f):
    if f.default is REQUIRED:
        return "**required**"
    if f.default is None:
        return "(see meaning)"
    return f"`{json.dumps(f.default)}`"


def _meaning_text(f):
    text = f.doc
    if f.most is not None:
        text += f"; {_fmt(f.least)} to {_fmt(f.most)} ({f.why})"
    if f.dims:
        text += "; at most " + ", ".join(f"{_fmt(m)} in {axis}" for axis, m in zip("xyz", f.dims))
    return text


def _field_table(fields):
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    rows += [f"| `{name}` | {_md(_type_text(f))} | {_md(_default_text(f))} | "
             f"{_md(_meaning_text(f))} |" for name, f in fields.items()]
    return rows


def reference():
    """The workload format as Markdown, every op and field from :data:`OPS` and :data:`TOP`
    (the tables the checks use) and the limits from this module's constants: what
    ``docs/workload.md`` holds."""
    out = ["# Workload files", "",
           "<!-- Generated from the tables the workload checks use (OPS and TOP in "
           "sim/host/workload.py) by", f"     {REFERENCE_COMMAND}",
           "     Do not edit by hand: tests/sim/host/test_workload_reference.py fails when "
           "this file differs. -->", "",
           "A workload is a CUDA-like program as JSON: one CPU thread calling a CUDA-like "
           "runtime. `gpufe run FILE` runs it through the host model and the RTL; "
           "`examples/` has one per kind of reference scenario. A bad file is rejected "
           "before anything runs, in one line naming the file, the op's path (such as "
           "`program[3].body[1]`) and the reason.", "",
           "Everywhere: a field not listed is an error; integers are JSON integers (`true` "
           "and `false` are not integers, and `2.0` is not one); numbers must be finite (no "
           "`NaN` or `Infinity`); strings must be valid Unicode. A file larger than "
           f"{MAX_FILE_BYTES >> 20} MiB is not read.", "",
           "## Top level", "", *_field_table(TOP), "",
           "## Ops", "",
           "Each op is an object whose `\"op\"` names it; its other fields follow. Names "
           "(streams, events, graphs) are strings chosen by the program.", ""]
    out += [", ".join(f"[`{kind}`](#{kind})" for kind in OPS), ""]
    for kind, op in OPS.items():
        out += [f"### {kind}", "", op.doc, ""]
        if op.fields:
            out += [*_field_table(op.fields), ""]
        else:
            out += ["No fields.", ""]
        if op.rules:
            out += [f"- {rule[0].upper()}{rule[1:]}." for rule in op.rules] + [""]
    out += ["## Limits of a run", "",
            "Checked before the run starts, repeats multiplied out and graph launches "
            "counted with their nodes (each is simulated one by one: beyond these a run "
            "takes hours; `gpufe run --no-limits` lifts the first four):", "",
            f"- at most {_fmt(MAX_OPS)} ops (API calls, sleeps and marks);",
            f"- at most {_fmt(MAX_WORK)} kernels and copies (graph nodes included);",
            f"- at most {_fmt(MAX_BLOCKS)} thread blocks;",
            f"- at most {_fmt(MAX_GRAPH_NODES)} graph nodes instantiated;",
            f"- at most {_fmt(MAX_DEVICE_BYTES)} bytes copied in all (every copy gets fresh "
            "device memory);",
            f"- at most {MAX_SIM_NS:.0e} ns of simulated time, by a generous upper bound "
            "(every call, sleep, block and copy one after another).", ""]
    return "\n".join(out)


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(prog="python -m gpufe.sim.host.workload",
                                 description="The workload file format.")
    ap.add_argument("--reference", action="store_true", required=True,
                    help=f"print the format's reference as Markdown ({REFERENCE_COMMAND})")
    ap.parse_args(argv)
    print(reference(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
