"""Workload files: a CUDA-like program as JSON, so a scenario can be written without Python.

    {"name": "xstream", "max_connections": 8,
     "program": [{"op": "stream_create", "name": "a", "priority": 0}, ...]}

Ops and their fields are listed in :data:`OPS` (required fields first, then optional ones with
defaults). A bad file is rejected with :class:`WorkloadError` naming the file, the op's index
path (``program[3].body[1]``) and the reason.
"""

import json
import pathlib


class WorkloadError(ValueError):
    pass


_INT = (int,)
_NUM = (int, float)

#: op -> {field: (types, default or REQUIRED)}
REQUIRED = object()
OPS = {
    "stream_create": {"name": (str, REQUIRED), "priority": (_INT, 0)},
    "event_create": {"name": (str, REQUIRED), "timing": (bool, True)},
    "launch_kernel": {"stream": (str, REQUIRED), "kernel": (str, REQUIRED),
                      "grid": (list, [1, 1, 1]), "block": (list, [32, 1, 1]),
                      "block_ns": (_NUM, 0)},
    "memcpy_async": {"stream": (str, REQUIRED), "kind": (str, REQUIRED),
                     "bytes": (_INT, REQUIRED)},
    "event_record": {"event": (str, REQUIRED), "stream": (str, REQUIRED)},
    "stream_wait_event": {"stream": (str, REQUIRED), "event": (str, REQUIRED)},
    "stream_synchronize": {"stream": (str, REQUIRED)},
    "event_synchronize": {"event": (str, REQUIRED)},
    "event_query": {"event": (str, REQUIRED)},
    "device_synchronize": {},
    "host_sleep": {"ns": (_NUM, REQUIRED)},
    "mark": {"what": (str, REQUIRED)},
    "repeat": {"count": (_INT, REQUIRED), "body": (list, REQUIRED)},
    "stream_begin_capture": {"stream": (str, REQUIRED)},
    "stream_end_capture": {"stream": (str, REQUIRED), "graph": (str, REQUIRED)},
    "graph_instantiate": {"graph": (str, REQUIRED)},
    "graph_launch": {"graph": (str, REQUIRED), "stream": (str, REQUIRED)},
}


def _dims(value, where, name):
    if (not isinstance(value, list) or not 1 <= len(value) <= 3
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1
                       for v in value)):
        raise WorkloadError(f"{where}: {name} must be a list of 1 to 3 positive integers, "
                            f"not {value!r}")
    return list(value) + [1] * (3 - len(value))


def _check_ops(ops, where, names):
    if not isinstance(ops, list):
        raise WorkloadError(f"{where}: must be a list of ops")
    checked = []
    for i, op in enumerate(ops):
        here = f"{where}[{i}]"
        if not isinstance(op, dict):
            raise WorkloadError(f"{here}: an op must be an object, not {op!r}")
        kind = op.get("op")
        if kind not in OPS:
            raise WorkloadError(f"{here}: unknown op {kind!r} (known: {', '.join(OPS)})")
        spec = OPS[kind]
        extra = sorted(set(op) - set(spec) - {"op"})
        if extra:
            raise WorkloadError(f"{here}: {kind} has no field(s) {', '.join(extra)}")
        out = {"op": kind}
        for name, (types, default) in spec.items():
            if name not in op:
                if default is REQUIRED:
                    raise WorkloadError(f"{here}: {kind} needs field {name!r}")
                out[name] = default
                continue
            v = op[name]
            if not isinstance(v, types) or (isinstance(v, bool) and types is not bool):
                raise WorkloadError(f"{here}: {kind}.{name} has the wrong type ({v!r})")
            out[name] = v
        if kind in ("stream_create", "event_create"):
            table = names["stream" if kind == "stream_create" else "event"]
            if out["name"] in table:
                raise WorkloadError(f"{here}: {kind} {out['name']!r} already exists")
            table.add(out["name"])
        if kind == "stream_end_capture":
            if out["graph"] in names["graph"]:
                raise WorkloadError(f"{here}: graph {out['graph']!r} already exists")
            names["graph"].add(out["graph"])
        elif "graph" in spec and out["graph"] not in names["graph"]:
            raise WorkloadError(f"{here}: {kind} refers to graph {out['graph']!r}, which no "
                                f"stream_end_capture before it makes")
        for ref, table in (("stream", "stream"), ("event", "event")):
            if ref in spec and kind not in ("stream_create", "event_create"):
                if out[ref] not in names[table]:
                    raise WorkloadError(f"{here}: {kind} refers to {table} {out[ref]!r}, "
                                        f"which was not created before")
        if kind == "launch_kernel":
            out["grid"] = _dims(out["grid"], here, "grid")
            out["block"] = _dims(out["block"], here, "block")
            if out["block_ns"] < 0:
                raise WorkloadError(f"{here}: block_ns must be >= 0")
        if kind == "memcpy_async":
            if out["kind"] not in ("h2d", "d2h", "d2d"):
                raise WorkloadError(f"{here}: memcpy kind must be h2d, d2h or d2d")
            if out["bytes"] <= 0:
                raise WorkloadError(f"{here}: bytes must be positive")
        if kind == "host_sleep" and out["ns"] < 0:
            raise WorkloadError(f"{here}: ns must be >= 0")
        if kind == "repeat":
            if out["count"] < 0:
                raise WorkloadError(f"{here}: count must be >= 0")
            out["body"] = _check_ops(out["body"], f"{here}.body", names)
        checked.append(out)
    return checked


def parse_workload(data, source="<workload>"):
    if not isinstance(data, dict):
        raise WorkloadError(f"{source}: the top level must be an object")
    extra = sorted(set(data) - {"name", "max_connections", "program", "description"})
    if extra:
        raise WorkloadError(f"{source}: unknown top-level field(s) {', '.join(extra)}")
    if "program" not in data:
        raise WorkloadError(f"{source}: no 'program'")
    mc = data.get("max_connections")
    if mc is not None and (not isinstance(mc, int) or not 1 <= mc <= 32):
        raise WorkloadError(f"{source}: max_connections must be 1..32")
    names = {"stream": set(), "event": set(), "graph": set()}
    program = _check_ops(data["program"], f"{source}: program", names)
    return {"name": data.get("name", pathlib.Path(source).stem), "max_connections": mc,
            "description": data.get("description", ""), "program": program}


def load_workload(path):
    path = pathlib.Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise WorkloadError(f"{path}: cannot read ({e.strerror})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise WorkloadError(f"{path}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None
    return parse_workload(data, str(path))


def count_ops(program):
    """Number of API calls the program makes (repeats expanded)."""
    n = 0
    for op in program:
        n += op["count"] * count_ops(op["body"]) if op["op"] == "repeat" else 1
    return n


class ProgramError(ValueError):
    """An API call of the program failed while it ran; names the op's path."""


def run_program(program, rt, progress=None):
    """Generator: the CPU thread executing ``program`` on runtime ``rt``."""
    yield from _run_ops(program, rt, progress, "program")
    yield from rt.finish()


def _run_ops(program, rt, progress, where):
    for i, op in enumerate(program):
        kind = op["op"]
        if kind == "repeat":
            for _ in range(op["count"]):
                yield from _run_ops(op["body"], rt, progress, f"{where}[{i}].body")
            continue
        try:
            yield from _run_op(op, rt)
        except ProgramError:
            raise
        except ValueError as e:
            raise ProgramError(f"{where}[{i}] ({kind}): {e}") from None
        if progress:
            progress()


#: op -> the runtime call it makes
_CALLS = {
    "stream_create": lambda rt, op: rt.stream_create(op["name"], op["priority"]),
    "event_create": lambda rt, op: rt.event_create(op["name"], op["timing"]),
    "launch_kernel": lambda rt, op: rt.launch_kernel(op["kernel"], op["grid"], op["block"],
                                                     op["block_ns"], op["stream"]),
    "memcpy_async": lambda rt, op: rt.memcpy_async(op["kind"], op["bytes"], op["stream"]),
    "event_record": lambda rt, op: rt.event_record(op["event"], op["stream"]),
    "stream_wait_event": lambda rt, op: rt.stream_wait_event(op["stream"], op["event"]),
    "stream_synchronize": lambda rt, op: rt.stream_synchronize(op["stream"]),
    "event_synchronize": lambda rt, op: rt.event_synchronize(op["event"]),
    "event_query": lambda rt, op: rt.event_query(op["event"]),
    "device_synchronize": lambda rt, op: rt.device_synchronize(),
    "host_sleep": lambda rt, op: rt.host_sleep(op["ns"]),
    "mark": lambda rt, op: rt.mark(op["what"]),
    "stream_begin_capture": lambda rt, op: rt.stream_begin_capture(op["stream"]),
    "stream_end_capture": lambda rt, op: rt.stream_end_capture(op["stream"], op["graph"]),
    "graph_instantiate": lambda rt, op: rt.graph_instantiate(op["graph"]),
    "graph_launch": lambda rt, op: rt.graph_launch(op["graph"], op["stream"]),
}


#: ops that are not CUDA API calls (no profiler cost)
_NOT_API = ("mark", "host_sleep")


def _run_op(op, rt):
    call = _CALLS[op["op"]](rt, op)
    return call if op["op"] in _NOT_API else rt.api_call(call)
