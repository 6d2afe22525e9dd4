"""Trace readers: real and simulated timelines into one form.

The form is the record schema of ``traces/h200/*.jsonl.gz`` (see ``sim/timeline.py``): a list
of dicts, ``meta`` / ``runtime`` / ``driver`` / ``kernel`` / ``memcpy`` / ``sync``, times in
integer ns. Two readers:

- fe_trace JSONL, plain or gzipped (what ``fe_trace.cu`` and ``gpufe run --timeline`` write);
- PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzipped: ``cuda_runtime`` and
  ``cuda_driver`` calls, ``kernel``, ``gpu_memcpy`` and ``gpu_memset`` events; each
  ``ProfilerStep#N`` annotation becomes a ``rep_begin``/``rep_end`` pair, each
  ``cudaDeviceSynchronize`` / ``cudaStreamSynchronize`` call a ``sync``.

A malformed or truncated file raises :class:`TraceError` naming the file, the line (JSONL) or
the event index (Kineto) and the reason.
"""

import gzip
import json
import pathlib
import zlib


class TraceError(ValueError):
    pass


_INT = int
# required fields of each record kind (fe_trace schema) and their types
_FIELDS = {
    "meta": {"what": str, "t": _INT},
    "runtime": {"name": str, "corr": _INT, "start": _INT, "end": _INT},
    "driver": {"name": str, "corr": _INT, "start": _INT, "end": _INT},
    "kernel": {"name": str, "corr": _INT, "stream": _INT, "start": _INT, "end": _INT},
    "memcpy": {"copy_kind": _INT, "bytes": _INT, "stream": _INT, "start": _INT, "end": _INT},
    "sync": {"start": _INT, "end": _INT},
}
#: CUPTI copy kinds by Kineto's memcpy names
_COPY_KINDS = {"HtoD": 1, "DtoH": 2, "DtoD": 8, "HtoH": 16, "PtoP": 10}


def _opener(path):
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.open if magic == b"\x1f\x8b" else open


def _read_text(path):
    try:
        with _opener(path)(path, "rt", encoding="utf-8") as f:
            return f.read()
    except (EOFError, OSError, zlib.error, UnicodeDecodeError) as e:
        raise TraceError(f"{path}: unreadable or truncated ({e})") from None


def _check_record(r, where):
    if not isinstance(r, dict):
        raise TraceError(f"{where}: a record must be a JSON object")
    kind = r.get("kind")
    if kind not in _FIELDS:
        raise TraceError(f"{where}: unknown record kind {kind!r}")
    for name, typ in _FIELDS[kind].items():
        v = r.get(name)
        if v is None:
            raise TraceError(f"{where}: {kind} record without {name!r}")
        if not isinstance(v, typ) or isinstance(v, bool):
            raise TraceError(f"{where}: {kind} field {name!r} is {v!r}, not {typ.__name__}")
    if "start" in r and r["end"] < r["start"]:
        raise TraceError(f"{where}: {kind} record ends ({r['end']}) before it starts "
                         f"({r['start']})")


def read_fe_trace(path):
    """Records of an fe_trace JSONL file (.jsonl or .jsonl.gz)."""
    path = pathlib.Path(path)
    records = []
    try:
        f = _opener(path)(path, "rt", encoding="utf-8")
        with f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                where = f"{path}:{n}"
                try:
                    r = json.loads(line)
                except json.JSONDecodeError as e:
                    raise TraceError(f"{where}: not JSON ({e.msg} at column {e.colno})") from None
                _check_record(r, where)
                records.append(r)
    except (EOFError, zlib.error, gzip.BadGzipFile, UnicodeDecodeError) as e:
        raise TraceError(f"{path}:{len(records) + 1}: truncated or corrupt ({e})") from None
    if not records:
        raise TraceError(f"{path}: no records")
    if records[0]["kind"] != "meta" or records[0]["what"] != "header":
        raise TraceError(f"{path}:1: the first record must be the header meta record")
    return records


def _ns(us):
    return int(round(us * 1000))


def read_kineto(path):
    """Records of a PyTorch profiler Chrome trace (.json or .json.gz)."""
    path = pathlib.Path(path)
    text = _read_text(path)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError(f"{path}:{e.lineno}: not JSON, or truncated ({e.msg})") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise TraceError(f"{path}: no traceEvents list (not a Chrome trace)")
    props = (doc.get("deviceProperties") or [{}])[0]
    header = {"kind": "meta", "what": "header", "t": 0, "scenario": path.name.split(".")[0],
              "device": props.get("name", "?"), "sms": props.get("numSms", 0),
              "driver": doc.get("cuda_driver_version", 0),
              "runtime": doc.get("cuda_runtime_version", 0), "max_connections": "default",
              "params": {}, "source": "kineto"}
    out = []
    t0 = None
    for i, e in enumerate(events):
        where = f"{path}: traceEvents[{i}]"
        if not isinstance(e, dict):
            raise TraceError(f"{where}: an event must be a JSON object")
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat not in ("cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy", "gpu_memset",
                       "user_annotation"):
            continue
        ts, dur, args = e.get("ts"), e.get("dur"), e.get("args") or {}
        if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) or dur < 0:
            raise TraceError(f"{where}: {cat} event without a valid ts/dur")
        start, end = _ns(ts), _ns(ts + dur)
        t0 = start if t0 is None else min(t0, start)
        name = e.get("name", "")
        if cat == "user_annotation":
            if name.startswith("ProfilerStep#"):
                out.append({"kind": "meta", "what": "rep_begin", "t": start})
                out.append({"kind": "meta", "what": "rep_end", "t": end})
            continue
        corr = args.get("correlation")
        if not isinstance(corr, int):
            raise TraceError(f"{where}: {cat} event without a correlation id")
        if cat in ("cuda_runtime", "cuda_driver"):
            out.append({"kind": "runtime" if cat == "cuda_runtime" else "driver", "name": name,
                        "corr": corr, "tid": e.get("tid", 0), "start": start, "end": end})
            if name in ("cudaDeviceSynchronize", "cudaStreamSynchronize"):
                out.append({"kind": "sync", "type": 0, "corr": corr, "stream": 0, "event": 0,
                            "start": start, "end": end})
            continue
        stream = args.get("stream")
        if not isinstance(stream, int):
            raise TraceError(f"{where}: {cat} event without a stream")
        if cat == "kernel":
            grid, block = args.get("grid", [1, 1, 1]), args.get("block", [1, 1, 1])
            out.append({"kind": "kernel", "name": name, "corr": corr, "stream": stream,
                        "channel": -1, "channel_type": 1, "queued": 0, "submitted": 0,
                        "start": start, "end": end, "grid": grid, "block": block,
                        "graph_id": args.get("graph id", 0), "graph_node": 0})
        elif cat == "gpu_memcpy":
            kind = next((v for k, v in _COPY_KINDS.items() if k in name), 8)
            out.append({"kind": "memcpy", "copy_kind": kind, "bytes": int(args.get("bytes", 0)),
                        "corr": corr, "stream": stream, "channel": -1, "channel_type": 2,
                        "start": start, "end": end, "graph_id": 0, "graph_node": 0})
        # gpu_memset: not part of the front-end model's schema
    if not out:
        raise TraceError(f"{path}: no CUDA runtime, kernel or copy events")
    # times relative to the first event, as the model's are
    for r in out:
        for k in ("t", "start", "end"):
            if k in r:
                r[k] -= t0
    out.sort(key=lambda r: (r.get("t", r.get("start")), r["kind"]))
    return [header] + out


def read_trace(path):
    """Records of any trace: fe_trace JSONL or a Kineto Chrome trace, by content."""
    path = pathlib.Path(path)
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    try:
        with _opener(path)(path, "rt", encoding="utf-8") as f:
            head = f.read(512).lstrip()
    except (EOFError, OSError, zlib.error, UnicodeDecodeError) as e:
        raise TraceError(f"{path}: unreadable or truncated ({e})") from None
    if head.startswith('{"kind"') or head.startswith('{ "kind"'):
        return read_fe_trace(path)
    if head.startswith("{"):
        return read_kineto(path)
    raise TraceError(f"{path}:1: neither fe_trace JSONL nor a Chrome trace")
