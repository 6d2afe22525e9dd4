"""Trace readers: real and simulated timelines into one form.

The form is the record schema of ``traces/h200/*.jsonl.gz`` (see ``sim/analysis/timeline.py``): a list
of dicts, ``meta`` / ``runtime`` / ``driver`` / ``kernel`` / ``memcpy`` / ``sync``, times in
integer ns. Two readers:

- fe_trace JSONL, plain or gzipped (what ``fe_trace.cu``, ``fe_trace2.cu`` and
  ``gpufe run --timeline`` write);
- PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzipped: ``cuda_runtime`` and
  ``cuda_driver`` calls, ``kernel``, ``gpu_memcpy`` and ``gpu_memset`` events (a memset is a
  ``memset`` record: ``corr``, ``stream``, ``bytes``, ``start``, ``end``), and the
  ``cuda_sync`` records of stream waits when the profiler made them (``stream_wait``:
  ``corr`` of the wait call, ``stream`` waiting, ``wait_on_stream`` and ``record_corr``, the
  record call's correlation id, each None where Kineto could not tell); each
  ``ProfilerStep#N`` annotation becomes a ``rep_begin``/``rep_end`` pair, each
  ``cudaDeviceSynchronize`` / ``cudaStreamSynchronize`` call a ``sync``. Each call carries
  ``cpu_ops``: how many operator records (``cpu_op``: what the profiler records on the CPU
  besides the CUDA calls, each at a cost to the host) began since the call before it.

Kineto's times: ``ts`` and ``dur`` in us, ``ts`` since the Unix epoch (PyTorch 1.13 to 2.3,
~1.7e15) or since ``baseTimeNanoseconds`` where the trace gives it (newer Kineto); read
exactly (ns) either way and made relative to the trace's earliest event. A time must be one
Kineto can write (64-bit ns, from ``baseTimeNanoseconds`` where given) and within
``MAX_TS_US`` of the trace's earliest event.

A malformed or truncated file raises :class:`TraceError` naming the file, the line (JSONL) or
the event index (Kineto) and the reason: not UTF-8, not JSON, ``NaN``/``Infinity`` or numbers
out of range, fields of the wrong type, a record that ends before it starts, a thread block
of more than 1,024 threads, two launches with one correlation id (only the kernels of one
graph launch share theirs; in a Kineto trace, so may kernels, copies and memsets that no
recorded call launched: Triton's launches through the driver API when the profiler recorded
no driver calls; the replay counts them), kernels or copies of one stream that overlap in
time (work of a stream runs in order; programmatic dependent launch is not modelled; the
nodes of one graph launch may run at once).

Several processes on one GPU: every record of a process carries ``"pid"`` (its name, such as
``"p0"``); correlation ids and streams are each process's own (two processes may both have a
stream 13). The model adds ``ctxsw`` records, one per context switch of the GPU between
processes (``start``..``end``: the switch, when no process runs; ``pid_out``, ``pid_in``: the
processes, null for none). fe_trace2 writes one file per process (``OUT.p0.jsonl``, ...):
:func:`merge_processes` makes them one timeline of that form.
"""

import bisect
from decimal import Decimal, ROUND_HALF_EVEN
import gzip
import json
import math
from math import isfinite
import pathlib
import zlib

from gpufe.rtl.layouts import COPY_KINDS
from gpufe.sim.collector import collector_paused
from gpufe.sim.host.workload import decode_utf8, parse_json, show, _check_text


class TraceError(ValueError):
    pass


#: traces larger than this, uncompressed, are not read
MAX_TRACE_BYTES = 1 << 30
#: a JSONL line longer than this is not read
MAX_LINE_BYTES = 16 << 20
#: integers in fe_trace records (times in ns, ids) are at most this large in magnitude
MAX_INT = (1 << 63) - 1
#: Kineto: an event at most this many us from the trace's earliest event; dur at most this
MAX_TS_US = 1e15
MAX_DUR_US = 1e12
#: Kineto: an event's time, ns from the epoch or from baseTimeNanoseconds, is a 64-bit integer
MAX_ABS_TS_US = MAX_INT / 1000
#: a float ts of this many us or more does not hold 1 ns (its text is read exactly instead)
_WIDE_TS_US = float(1 << 43)

_INT = int
# required fields of each record kind (fe_trace schema) and their types
_FIELDS = {
    "meta": {"what": str, "t": _INT},
    "runtime": {"name": str, "corr": _INT, "start": _INT, "end": _INT},
    "driver": {"name": str, "corr": _INT, "start": _INT, "end": _INT},
    "kernel": {"name": str, "corr": _INT, "stream": _INT, "start": _INT, "end": _INT},
    "memcpy": {"copy_kind": _INT, "bytes": _INT, "stream": _INT, "start": _INT, "end": _INT},
    "sync": {"start": _INT, "end": _INT},
    "ctxsw": {"start": _INT, "end": _INT},
}
_OPT_INT = {"corr", "stream", "channel", "channel_type", "graph_id", "graph_node", "type",
            "event", "bytes", "copy_kind"}
_OPT_INT_OR_NULL = {"queued", "submitted"}
#: CUPTI copy kinds by Kineto's memcpy names
_COPY_KINDS = {"HtoD": COPY_KINDS["h2d"], "DtoH": COPY_KINDS["d2h"], "DtoD": COPY_KINDS["d2d"],
               "HtoH": 16, "PtoP": 10}
#: calls whose kernels and copies share the call's correlation id
GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch")
#: launch calls that may carry the programmatic dependent launch attribute
LAUNCH_EX = ("cudaLaunchKernelEx", "cuLaunchKernelEx")


def _opener(path):
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.open if magic == b"\x1f\x8b" else open


_CORRUPT = (EOFError, OSError, zlib.error)


def _read_bytes(path):
    try:
        with _opener(path)(path, "rb") as f:
            data = f.read(MAX_TRACE_BYTES + 1)
    except _CORRUPT as e:
        raise TraceError(f"{path}: unreadable or truncated ({_why(e)})") from None
    if len(data) > MAX_TRACE_BYTES:
        raise TraceError(f"{path}: larger than {MAX_TRACE_BYTES >> 20} MiB uncompressed; "
                         f"not read")
    return data


def _why(e):
    return getattr(e, "strerror", None) or str(e) or type(e).__name__


def _read_text(path):
    return decode_utf8(_read_bytes(path), path, TraceError)


def _int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _dims(v, where, name):
    ok = type(v) is list and 1 <= len(v) <= 3
    if ok:
        for x in v:
            if type(x) is not int or not 0 <= x < 1 << 31:
                ok = False
                break
    if not ok:
        raise TraceError(f"{where}: {name} must be a list of 1 to 3 integers 0..2^31-1, not "
                         f"{show(v)}")


def _threads(block):
    n = 1
    for b in block[:3]:
        if b > 1:
            n *= b
    return n


def _check_block(block, where, what):
    if _threads(block) > 1024:
        raise TraceError(f"{where}: {what} has a block of {_threads(block):,} threads "
                         f"({show(block)}); CUDA allows at most 1,024")


_INT_F, _STR_F, _INT_OR_NULL_F, _DIMS_F, _TID_F = range(5)
#: kind -> {field: how it is checked}: its required fields, then the optional ones read
_SPECS = {}
for _kind, _req in _FIELDS.items():
    _SPECS[_kind] = {n: _INT_F for n in _OPT_INT}
    _SPECS[_kind].update({n: _INT_OR_NULL_F for n in _OPT_INT_OR_NULL}, tid=_TID_F)
    if _kind == "kernel":
        _SPECS[_kind].update(grid=_DIMS_F, block=_DIMS_F)
    _SPECS[_kind].update({n: _STR_F if t is str else _INT_F for n, t in _req.items()})
_WANT = {_INT_F: "int", _STR_F: "str", _INT_OR_NULL_F: "int or null", _TID_F: "int or str"}


def _check_record(r, where):
    if not isinstance(r, dict):
        raise TraceError(f"{where}: a record must be a JSON object")
    kind = r.get("kind")
    if not isinstance(kind, str) or kind not in _FIELDS:
        raise TraceError(f"{where}: unknown record kind {show(kind)}")
    spec = _SPECS[kind]
    for name in _FIELDS[kind]:
        if r.get(name) is None:
            raise TraceError(f"{where}: {kind} record without {name!r}")
    for name, v in r.items():
        code = spec.get(name)
        if code is None:
            continue                   # other fields are kept as they are, not read
        t = type(v)
        if code == _INT_F:
            ok = t is int
        elif code == _STR_F:
            ok = t is str
        elif code == _DIMS_F:
            _dims(v, where, f"kernel field {name!r}")
            continue
        elif code == _INT_OR_NULL_F:
            ok = t is int or v is None
        else:
            ok = t is int or t is str
        if not ok:
            raise TraceError(f"{where}: {kind} field {name!r} is {show(v)}, not "
                             f"{_WANT[code]}")
        if t is int:
            if not -MAX_INT <= v <= MAX_INT:
                raise TraceError(f"{where}: {kind} field {name!r} is {v}; out of range "
                                 f"(a 64-bit integer)")
        elif t is str and not v.isascii():
            _check_text(v, f"{where}: {kind} field {name!r}", TraceError)
    # a process's name; the header's "pid" is fe_trace2's operating-system process id
    for name in ("pid", "pid_in", "pid_out") if kind == "ctxsw" else ("pid",):
        v = r.get(name)
        if v is None or (kind == "meta" and r["what"] == "header"):
            continue
        if not isinstance(v, str):
            raise TraceError(f"{where}: {kind} field {name!r} is {show(v)}, not a process "
                             f"name (str)")
        _check_text(v, f"{where}: {kind} field {name!r}", TraceError)
    if kind == "meta" and r["what"] in _STAMPS:
        _check_stamps(r, where)
    if kind == "meta" and r["what"] == "header":
        for name in ("scenario", "device"):
            if name in r and not isinstance(r[name], str):
                raise TraceError(f"{where}: header field {name!r} is {show(r[name])}, not str")
            if name in r:
                _check_text(r[name], f"{where}: header field {name!r}", TraceError)
    if "start" in r and r["end"] < r["start"]:
        raise TraceError(f"{where}: {kind} record ends ({r['end']}) before it starts "
                         f"({r['start']})")
    if kind == "kernel" and isinstance(r.get("block"), list):
        _check_block(r["block"], where, "the kernel")


#: fe_trace2's in-kernel timer records that the metrics read: field -> what it must be
_STAMPS = {"act_stamps": {"rep": "int", "stamps": "ints"},
           "pdl_stamps": {"rep": "int", "in_wait_out": "ints"},
           "cond_rep": {"rep": "int", "wall_ns": "int", "iters": "int", "stamps": "ints"},
           "thread_loop": {"rep": "int", "thread": "int", "loop_start": "int",
                           "loop_end": "int"},
           "kspan": {"rep": "int", "i": "int", "gt_start": "int", "gt_end": "int",
                     "gaps": "pairs"}}


def _check_stamps(r, where):
    for name, want in _STAMPS[r["what"]].items():
        v = r.get(name)
        if want == "int":
            ok = _int(v)
        elif want == "ints":
            ok = type(v) is list and all(_int(x) for x in v)
        else:
            ok = type(v) is list and all(type(g) is list and len(g) == 2
                                         and all(_int(x) for x in g) for g in v)
        if not ok:
            what = {"int": "an integer", "ints": "a list of integers",
                    "pairs": "a list of [from, to] integer pairs"}[want]
            raise TraceError(f"{where}: {r['what']} field {name!r} is {show(v)}, not {what}")


def _other(loc, path):
    """Another place in the same file, for a message that already names the file."""
    loc, path = str(loc), str(path)
    if loc.startswith(path + ": "):
        return loc[len(path) + 2:]
    if loc.startswith(path + ":"):
        return "line " + loc[len(path) + 1:]
    return loc


def _check_work(records, locs, path, tolerance=0, unlaunched=False):
    """Correlation ids: one per launch (the kernels and copies of one graph launch share
    theirs; so may a runtime call and a driver call it makes; with ``unlaunched``, so may
    kernels and copies whose correlation id no call has: a Kineto trace's launches through
    the driver API when no driver call was recorded). Work of one stream runs in order:
    kernels and copies of a stream must not overlap, except the nodes of one graph launch,
    and a kernel launched by cudaLaunchKernelEx (which may carry the programmatic dependent
    launch attribute: it may start before the work before it ends). Correlation ids and
    streams are each process's own (``pid``)."""
    graph_corrs = {(r.get("pid"), r["corr"]) for r in records
                   if r["kind"] in ("runtime", "driver")
                   and r["name"].startswith(GRAPH_LAUNCHES)}
    ex_corrs = {(r.get("pid"), r["corr"]) for r in records
                if r["kind"] == "runtime" and r["name"].startswith(LAUNCH_EX)}
    seen = {}
    called = set()                  # (pid, corr) of every call
    for kind in ("runtime", "driver"):
        calls = {}
        for r, loc in zip(records, locs):
            if r["kind"] == kind:
                key = (r.get("pid"), r["corr"])
                if key in calls:
                    other = _other(calls[key], path)
                    raise TraceError(f"{loc}: {kind} call {show(r['name'])} has correlation id "
                                     f"{r['corr']}, as {other} has: each call has its own")
                calls[key] = loc
        called |= calls.keys()

    def graph(r):
        return bool(r.get("graph_id")) or (r.get("pid"), r["corr"]) in graph_corrs

    units = {}                 # ((pid, stream), unit) -> [start, end, loc]; unit: a launch
    for r, loc in zip(records, locs):
        if r["kind"] not in ("kernel", "memcpy"):
            continue
        g = graph(r)
        pid = r.get("pid")
        prev = seen.get((pid, r["corr"]))
        if prev is not None and not (g and prev[0]) \
                and not (unlaunched and (pid, r["corr"]) not in called):
            raise TraceError(f"{loc}: {r['kind']} has correlation id {r['corr']}, as "
                             f"{_other(prev[1], path)} has: each launch has its own (only the "
                             f"kernels of one graph launch share theirs)")
        seen.setdefault((pid, r["corr"]), (g, loc))
        key = ((pid, r["stream"]), ("graph", r["corr"]) if g else ("one", id(r)))
        u = units.get(key)
        if u is None:
            units[key] = [r["start"], r["end"], loc, r["kind"], (pid, r["corr"]) in ex_corrs]
        else:
            if r["start"] < u[0]:
                u[0], u[2], u[3] = r["start"], loc, r["kind"]
            u[1] = max(u[1], r["end"])
    by_stream = {}
    for ((pid, stream), _), u in units.items():
        by_stream.setdefault((pid, stream), []).append(u)
    for (pid, stream), us in by_stream.items():
        of = "" if pid is None else f" of process {pid}"
        us.sort(key=lambda u: (u[0], u[1]))
        last = None
        for u in us:
            if last is not None and u[0] < last[1] - tolerance and not u[4]:
                raise TraceError(
                    f"{u[2]}: {u[3]} on stream {stream}{of} starts at {u[0]} ns, before the "
                    f"{last[3]} of {_other(last[2], path)} on the same stream ends ({last[1]} "
                    f"ns): the work of one stream runs in order (only a programmatic dependent "
                    f"launch, by cudaLaunchKernelEx, may start early)")
            if last is None or u[1] > last[1]:
                last = u


def _lines(path):
    """(line number, bytes) of a JSONL file, plain or gzipped."""
    total = n = 0
    try:
        with _opener(path)(path, "rb") as f:
            while True:
                line = f.readline(MAX_LINE_BYTES + 1)
                if not line:
                    return
                n += 1
                total += len(line)
                if len(line) > MAX_LINE_BYTES:
                    raise TraceError(f"{path}:{n}: line longer than "
                                     f"{MAX_LINE_BYTES >> 20} MiB")
                if total > MAX_TRACE_BYTES:
                    raise TraceError(f"{path}: larger than {MAX_TRACE_BYTES >> 20} MiB "
                                     f"uncompressed; not read")
                yield n, line
    except _CORRUPT as e:
        raise TraceError(f"{path}:{n + 1}: truncated or corrupt ({_why(e)})") from None


def _fe_trace(path):
    path = pathlib.Path(path)
    records, locs = [], []
    for n, raw in _lines(path):
        where = f"{path}:{n}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TraceError(f"{where}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column "
                             f"{e.start + 1})") from None
        if n == 1 and line.startswith("\ufeff"):
            line = line[1:]
        if not line.strip():
            continue
        try:
            r = _DECODER.decode(line)
        except json.JSONDecodeError as e:
            raise TraceError(f"{where}: not JSON ({e.msg} at column {e.colno})") from None
        except RecursionError:
            raise TraceError(f"{where}: nested too deeply to read") from None
        except ValueError as e:
            raise TraceError(f"{where}: not JSON ({e})") from None
        _check_record(r, where)
        records.append(r)
        locs.append(where)
    if not records:
        raise TraceError(f"{path}: no records")
    if records[0]["kind"] != "meta" or records[0]["what"] != "header":
        raise TraceError(f"{path}:1: the first record must be the header meta record")
    _check_work(records, locs, path)
    return records, locs


def _reject_constant(token):
    raise ValueError(f"{token} is not a number JSON allows")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def read_fe_trace(path):
    """Records of an fe_trace JSONL file (.jsonl or .jsonl.gz)."""
    return _fe_trace(path)[0]


def _ns(us):
    if type(us) is Decimal:
        return _dec_ns(us)
    return int(round(us * 1000))


def _dec(v):
    """A Kineto number (int, float or the Decimal of a wide float) as a Decimal, exactly as
    written."""
    if type(v) is Decimal:
        return v
    return Decimal(repr(v)) if type(v) is float else Decimal(v)


def _dec_ns(d):
    return int((d * 1000).to_integral_value(rounding=ROUND_HALF_EVEN))


def _times_ns(ts, dur):
    """(start, end) in ns of an event's ``ts`` and ``dur`` (us): exact where ``ts`` was read
    as a Decimal (times since the epoch), else as floats (as traces were always read)."""
    if type(ts) is Decimal or type(dur) is Decimal:
        t = _dec(ts)
        return _dec_ns(t), _dec_ns(t + _dec(dur))
    return int(round(ts * 1000)), int(round((ts + dur) * 1000))


def _beyond(ts, base_us, limit):
    """Whether ``base_us + ts`` (us) is more than ``limit`` from 0, for any number ``ts``."""
    if type(ts) is int and abs(ts) > 1 << 80:
        return True
    return abs(float(ts) + base_us) > limit


def _wide_float(text):
    """A JSON number with a fraction: a float, or, where a float would not hold 1 ns of it
    (times since the epoch, us), its exact Decimal."""
    v = float(text)
    if isfinite(v) and abs(v) >= _WIDE_TS_US:
        return Decimal(text)
    return v


_WIDE_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_wide_float)


def _number(v):
    """A finite JSON number (an int of any size, a finite float, a wide float's Decimal)."""
    t = type(v)
    return t is int or t is Decimal or t is float and math.isfinite(v)


def _g(v):
    """A number for a message."""
    try:
        return f"{v:g}"
    except OverflowError:                   # an integer of hundreds of digits
        return show(v)


#: the Kineto event categories read (``cpu_op`` is counted apart)
_KINETO_CATS = frozenset(("cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy", "gpu_memset",
                          "user_annotation", "cuda_sync"))


def _kineto(path):
    path = pathlib.Path(path)
    text = _read_text(path)
    try:
        doc = _DECODER.decode(text)
    except json.JSONDecodeError as e:
        raise TraceError(f"{path}:{e.lineno}: not JSON, or truncated ({e.msg})") from None
    except RecursionError:
        raise TraceError(f"{path}: nested too deeply to read") from None
    except ValueError as e:
        parse_json(text, path, TraceError)       # names the line of the bad number
        raise TraceError(f"{path}: not JSON ({e})") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise TraceError(f"{path}: no traceEvents list (not a Chrome trace)")
    if any(type(e) is dict and type(e.get("ts")) is float and isfinite(e["ts"])
           and abs(e["ts"]) >= _WIDE_TS_US for e in events):
        # times since the epoch (PyTorch 1.13 to 2.3: ~1.7e15 us, written to the ns): a
        # double holds them to 0.25 us, so they are read again, exactly
        doc = _WIDE_DECODER.decode(text)
        events = doc["traceEvents"]
    # newer Kineto writes each ts from baseTimeNanoseconds (ns since the epoch)
    base = doc.get("baseTimeNanoseconds", 0)
    if not (_int(base) or type(base) in (float, Decimal) and isfinite(base)
            and base == int(base)) or abs(base) > MAX_INT:
        raise TraceError(f"{path}: baseTimeNanoseconds must be a whole number of ns, "
                         f"|value| at most 2^63-1, not {show(base)}")
    base_us = int(base) / 1000
    since = " from baseTimeNanoseconds" if base else ""
    props = doc.get("deviceProperties")
    if props is None or props == []:
        props = {}
    elif not isinstance(props, list) or not isinstance(props[0], dict):
        raise TraceError(f"{path}: deviceProperties must be a list of objects, not "
                         f"{show(props)}")
    else:
        props = props[0]
    device, sms = props.get("name", "?"), props.get("numSms", 0)
    if not isinstance(device, str) or not _int(sms):
        raise TraceError(f"{path}: deviceProperties[0]: name must be a string and numSms an "
                         f"integer, not {show(device)} and {show(sms)}")
    _check_text(device, f"{path}: deviceProperties[0].name", TraceError)
    versions = [doc.get(k, 0) for k in ("cuda_driver_version", "cuda_runtime_version")]
    for k, v in zip(("cuda_driver_version", "cuda_runtime_version"), versions):
        if not (_int(v) or isinstance(v, str)):
            raise TraceError(f"{path}: {k} must be an integer or a string, not {show(v)}")
        if isinstance(v, str):
            _check_text(v, f"{path}: {k}", TraceError)
    header = {"kind": "meta", "what": "header", "t": 0, "scenario": path.name.split(".")[0],
              "device": device, "sms": sms, "driver": versions[0], "runtime": versions[1],
              "max_connections": "default", "params": {}, "source": "kineto"}
    out, locs = [], []
    t0 = t0_loc = t1 = t1_loc = None          # the earliest and the latest start, and where
    optimizer_steps = 0
    op_starts = []             # ns of each cpu_op record's start
    prefix = f"{path}: traceEvents["
    for i, e in enumerate(events):
        if type(e) is not dict:
            raise TraceError(f"{prefix}{i}]: an event must be a JSON object")
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat == "cpu_op":
            ts = e.get("ts")
            if _number(ts) and not _beyond(ts, base_us, MAX_ABS_TS_US):
                op_starts.append(_ns(ts))
            continue
        if cat not in _KINETO_CATS:
            continue
        where = f"{prefix}{i}]"
        ts, dur, args = e.get("ts"), e.get("dur"), e.get("args")
        tt, td = type(ts), type(dur)
        if not ((tt is int or tt is float and isfinite(ts) or tt is Decimal)
                and (td is int or td is float and isfinite(dur) or td is Decimal)
                and dur >= 0):
            raise TraceError(f"{where}: {cat} event without a valid ts/dur (finite numbers, "
                             f"dur >= 0): ts {show(ts)}, dur {show(dur)}")
        if (abs(ts + base_us) > MAX_ABS_TS_US if tt is float
                else _beyond(ts, base_us, MAX_ABS_TS_US)) or dur > MAX_DUR_US:
            raise TraceError(f"{where}: {cat} event's ts {_g(ts)} or dur {_g(dur)} is out of "
                             f"range (Kineto's times are 64-bit ns{since}: |ts| at most "
                             f"{MAX_ABS_TS_US:.4g} us; dur at most {MAX_DUR_US:g} us)")
        if args is None:
            args = {}
        elif type(args) is not dict:
            raise TraceError(f"{where}: args must be an object, not {show(args)}")
        name = e.get("name", "")
        if type(name) is not str:
            raise TraceError(f"{where}: name must be a string, not {show(name)}")
        if not name.isascii():
            _check_text(name, f"{where}: name", TraceError)
        if tt is Decimal or td is Decimal:
            start, end = _times_ns(ts, dur)
        else:
            start, end = int(round(ts * 1000)), int(round((ts + dur) * 1000))
        if t0 is None or start < t0:
            t0, t0_loc = start, where
        if t1 is None or start > t1:
            t1, t1_loc = start, where
        if cat == "user_annotation":
            if name.startswith("ProfilerStep#"):
                out.append({"kind": "meta", "what": "rep_begin", "t": start})
                out.append({"kind": "meta", "what": "rep_end", "t": end})
                locs += [where, where]
            elif name.startswith("Optimizer.step"):
                optimizer_steps += 1
            continue
        corr = args.get("correlation")
        if type(corr) is not int:
            raise TraceError(f"{where}: {cat} event without a correlation id (an integer; "
                             f"got {show(corr)})")
        if cat in ("cuda_runtime", "cuda_driver"):
            tid = e.get("tid", 0)
            if type(tid) is not int and type(tid) is not str:
                raise TraceError(f"{where}: tid must be an integer or a string, not {show(tid)}")
            out.append({"kind": "runtime" if cat == "cuda_runtime" else "driver", "name": name,
                        "corr": corr, "tid": tid, "start": start, "end": end})
            locs.append(where)
            if name in ("cudaDeviceSynchronize", "cudaStreamSynchronize"):
                out.append({"kind": "sync", "type": 0, "corr": corr, "stream": 0, "event": 0,
                            "start": start, "end": end})
                locs.append(where)
            continue
        stream = args.get("stream")
        if type(stream) is not int:
            raise TraceError(f"{where}: {cat} event without a stream (an integer; got "
                             f"{show(stream)})")
        if cat == "cuda_sync":
            # Kineto's synchronisation records (enable_cuda_sync_events): a stream wait names
            # the waiting stream, the recording one and the record call's correlation id
            # (-1 where Kineto could not tell: without CUDA event records, only the waiting
            # stream is known)
            ws, rc = args.get("wait_on_stream"), args.get("wait_on_cuda_event_record_corr_id")
            if name == "Stream Wait Event" and stream >= 0:
                out.append({"kind": "stream_wait", "corr": corr, "stream": stream,
                            "wait_on_stream": ws if _int(ws) and ws >= 0 else None,
                            "record_corr": rc if _int(rc) and rc >= 0 else None,
                            "start": start, "end": end})
                locs.append(where)
            continue
        if cat == "kernel":
            grid, block = args.get("grid", [1, 1, 1]), args.get("block", [1, 1, 1])
            _dims(grid, where, "args.grid")
            _dims(block, where, "args.block")
            if _threads(block) > 1024:         # (the name is shown only in the error)
                _check_block(block, where, f"kernel {show(name)}")
            gid = args.get("graph id", 0)
            if type(gid) is not int:
                raise TraceError(f"{where}: args['graph id'] must be an integer, not "
                                 f"{show(gid)}")
            out.append({"kind": "kernel", "name": name, "corr": corr, "stream": stream,
                        "channel": -1, "channel_type": 1, "queued": 0, "submitted": 0,
                        "start": start, "end": end, "grid": grid, "block": block,
                        "graph_id": gid, "graph_node": 0})
            locs.append(where)
        elif cat == "gpu_memcpy":
            nbytes = args.get("bytes", 0)
            if not (_int(nbytes) or type(nbytes) in (float, Decimal) and _number(nbytes)
                    and nbytes == int(nbytes)) \
                    or not 0 <= nbytes <= MAX_INT:
                raise TraceError(f"{where}: args.bytes must be a whole number of bytes "
                                 f"0..2^63-1, not {show(nbytes)}")
            kind = next((v for k, v in _COPY_KINDS.items() if k in name), COPY_KINDS["d2d"])
            out.append({"kind": "memcpy", "copy_kind": kind, "bytes": int(nbytes),
                        "corr": corr, "stream": stream, "channel": -1, "channel_type": 2,
                        "start": start, "end": end, "graph_id": 0, "graph_node": 0})
            locs.append(where)
        elif cat == "gpu_memset":
            nbytes = args.get("bytes", 0)
            out.append({"kind": "memset", "bytes": int(nbytes) if _int(nbytes) else 0,
                        "corr": corr, "stream": stream, "start": start, "end": end})
            locs.append(where)
    if not out:
        raise TraceError(f"{path}: no CUDA runtime, kernel or copy events")
    if optimizer_steps:
        header["optimizer_steps"] = optimizer_steps
    _count_cpu_ops(out, op_starts)
    # times relative to the first event, as the model's are; a trace spans at most MAX_TS_US
    if t1 - t0 > MAX_TS_US * 1000:
        raise TraceError(f"{t1_loc}: event {(t1 - t0) / 1e3:.15g} us after the trace's "
                         f"earliest one ({_other(t0_loc, path)}); a trace spans at most "
                         f"{MAX_TS_US:g} us")
    keys = []
    for r in out:
        if "t" in r:
            r["t"] -= t0
            keys.append((r["t"], r["kind"]))
        else:
            r["start"] -= t0
            r["end"] -= t0
            keys.append((r["start"], r["kind"]))
    order = sorted(range(len(out)), key=keys.__getitem__)
    out, locs = [out[j] for j in order], [locs[j] for j in order]
    _check_work(out, locs, path, tolerance=1, unlaunched=True)
    return [header] + out, [f"{path}"] + locs


def _count_cpu_ops(records, op_starts):
    """Each call's ``cpu_ops``: the operator records begun after the call before it (in start
    order, any thread) and up to its own start."""
    op_starts.sort()
    prev = 0
    for r in sorted((r for r in records if r["kind"] in ("runtime", "driver")),
                    key=lambda r: (r["start"], r["corr"])):
        k = bisect.bisect_right(op_starts, r["start"])
        r["cpu_ops"] = k - prev
        prev = k


def read_kineto(path):
    """Records of a PyTorch profiler Chrome trace (.json or .json.gz)."""
    return _kineto(path)[0]


def read_trace_located(path):
    """(records, where): the records of any trace (as :func:`read_trace`) and, for each, the
    place in the file it came from (``path:line`` or ``path: traceEvents[i]``)."""
    path = pathlib.Path(path)
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    try:
        with _opener(path)(path, "rb") as f:
            head = f.read(512)
    except _CORRUPT as e:
        raise TraceError(f"{path}: unreadable or truncated ({_why(e)})") from None
    if head[:3] == b"\xef\xbb\xbf":
        head = head[3:]
    head = head.decode("utf-8", errors="replace").lstrip()
    if head.startswith('{"kind"') or head.startswith('{ "kind"'):
        with collector_paused():
            return _fe_trace(path)
    if head.startswith("{"):
        with collector_paused():
            return _kineto(path)
    raise TraceError(f"{path}:1: neither fe_trace JSONL nor a Chrome trace")


def read_trace(path):
    """Records of any trace: fe_trace JSONL or a Kineto Chrome trace, by content."""
    return read_trace_located(path)[0]


def merge_processes(parent, children):
    """One timeline of a multi-process fe_trace2 run (``procs``), from the parent's file
    (``OUT.jsonl``: its header and ``procs_parent`` record) and the children's
    (``OUT.p0.jsonl``, ...): every record of child i gains ``"pid": "p<i>"``; the header is
    child 0's (the times are CUPTI's, one clock for all processes) at the earliest child
    header, without its per-process ``proc`` and ``pid`` (kept as ``os_pids``), with
    ``processes`` (the names) and ``merged_from`` (the files' names); one footer, the latest;
    the records in order of time (those of one time as the files list them)."""
    if not children:
        raise TraceError(f"{parent}: no child traces to merge")
    files = [pathlib.Path(p).name.removesuffix(".gz") for p in [parent, *children]]
    parent = read_fe_trace(parent)
    kids = [read_fe_trace(c) for c in children]
    names = [f"p{i}" for i in range(len(kids))]
    header = {k: v for k, v in kids[0][0].items() if k not in ("proc", "pid")}
    header["t"] = min(k[0]["t"] for k in kids)
    header["processes"] = names
    header["os_pids"] = [k[0].get("pid") for k in kids]
    header["merged_from"] = files
    body, footer = [], None
    for name, recs in zip(names, kids):
        for r in recs[1:]:
            if r["kind"] == "meta" and r["what"] == "footer":
                footer = max(footer or r["t"], r["t"])
                continue
            body.append(dict(r, pid=name))
    for r in parent[1:]:
        if r["kind"] == "meta" and r["what"] == "footer":
            footer = max(footer or r["t"], r["t"])
        else:
            body.append(r)
    body.sort(key=lambda r: r.get("t", r.get("start")))
    out = [header] + body
    if footer is not None:
        out.append({"kind": "meta", "what": "footer", "t": footer})
    return out


def write_fe_trace(records, path):
    """Records as fe_trace JSONL, gzipped (reproducibly: no time stamp in the gzip header)
    when ``path`` ends in ``.gz``."""
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()
    if str(path).endswith(".gz"):
        with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0,
                                                  filename="") as g:
            g.write(text)
    else:
        pathlib.Path(path).write_bytes(text)
