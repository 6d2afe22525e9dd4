"""Timelines in the reference traces' record schema, and the views made from them.

A timeline is a list of dicts, one per record, exactly as in ``traces/h200/*.jsonl.gz``:
``meta`` (header, marks, footer), ``runtime``, ``kernel``, ``memcpy``, ``sync``; times in ns.
"""

import json
import statistics

from .metrics import max_concurrent


def finish_records(header, marks, records, end_ns):
    """Fill engine times into kernel/memcpy records and order everything deterministically."""
    out = [dict(header)]
    body = []
    for rec in records:
        r = {k: v for k, v in rec.items() if k[0] != "_"}
        job = rec.get("_kernel") or rec.get("_copy")
        if job is not None:
            if job.start is None or job.end is None:
                continue                     # never ran (the run stopped early)
            r["start"], r["end"] = job.start // 1000, job.end // 1000
        body.append(r)
    body.extend(marks)
    order = {"meta": 0, "runtime": 1, "kernel": 2, "memcpy": 3, "sync": 4}
    body.sort(key=lambda r: (r.get("t", r.get("start")), order[r["kind"]], r.get("corr", 0)))
    out.extend(body)
    out.append({"kind": "meta", "what": "footer", "t": end_ns})
    return out


def write_jsonl(records, path):
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")


def kernels(records):
    return [r for r in records if r["kind"] == "kernel"]


def summary(records):
    """Key figures of a timeline (model or measured)."""
    ks = sorted(kernels(records), key=lambda r: r["start"])
    marks = {}
    for r in records:
        if r["kind"] == "meta":
            marks.setdefault(r["what"], []).append(r["t"])
    out = {"kernels": len(ks)}
    reps = list(zip(marks.get("rep_begin", []), marks.get("rep_end", [])))
    if reps:
        out["wall_per_rep_us"] = statistics.median(e - b for b, e in reps) / 1e3
    if ks:
        out["gpu_span_us"] = (max(k["end"] for k in ks) - ks[0]["start"]) / 1e3
        gaps = []
        by_stream = {}
        for k in ks:
            by_stream.setdefault(k["stream"], []).append(k)
        for lst in by_stream.values():
            gaps += [b["start"] - a["end"] for a, b in zip(lst, lst[1:])]
        if gaps:
            out["median_gap_us"] = statistics.median(gaps) / 1e3
        out["median_kernel_us"] = statistics.median(k["end"] - k["start"] for k in ks) / 1e3
        lat = [k["start"] - k["submitted"] for k in ks if k.get("submitted")]
        if lat:
            out["submitted_to_start_us"] = statistics.median(lat) / 1e3
        out["max_concurrent"] = max_concurrent(ks)
        out["channels_used"] = len({k["channel"] for k in ks})
    glaunch = [r["end"] - r["start"] for r in records if r["kind"] == "runtime"
               and r["name"].startswith("cudaGraphLaunch")]
    if glaunch:
        out["graph_launch_api_us"] = statistics.median(glaunch) / 1e3
    launches = [r for r in records if r["kind"] == "runtime"
                and r["name"].startswith("cudaLaunchKernel")]
    if launches:
        out["launch_api_us"] = statistics.median(r["end"] - r["start"] for r in launches) / 1e3
        out["launches_blocked"] = sum(1 for r in launches if r.get("blocked"))
    return out


def perfetto(records):
    """Chrome trace JSON (ui.perfetto.dev): the CPU thread, a track per stream and per
    channel, and a flow arrow from each API call to the kernel or copy it launched."""
    ev = []
    pid_cpu, pid_stream, pid_chan = 1, 2, 3
    ev += [{"ph": "M", "pid": pid_cpu, "name": "process_name", "args": {"name": "CPU"}},
           {"ph": "M", "pid": pid_stream, "name": "process_name", "args": {"name": "Streams"}},
           {"ph": "M", "pid": pid_chan, "name": "process_name",
            "args": {"name": "Hardware channels"}}]
    us = lambda ns: ns / 1000.0
    calls = {}
    seen_streams, seen_chans = set(), set()
    for r in records:
        if r["kind"] == "runtime":
            e = {"ph": "X", "pid": pid_cpu, "tid": r["tid"], "name": r["name"].split("_v")[0],
                 "ts": us(r["start"]), "dur": us(r["end"] - r["start"]),
                 "args": {"corr": r["corr"]}}
            if r.get("blocked"):
                e["args"]["blocked"] = True
            ev.append(e)
            calls[r["corr"]] = r
        elif r["kind"] == "meta" and r["what"] not in ("header", "footer"):
            ev.append({"ph": "i", "pid": pid_cpu, "tid": 1, "name": r["what"], "ts": us(r["t"]),
                       "s": "p"})
    for r in records:
        if r["kind"] not in ("kernel", "memcpy"):
            continue
        name = r["name"] if r["kind"] == "kernel" else f"memcpy {r['bytes']} B"
        args = {k: r[k] for k in ("corr", "queued", "submitted", "grid", "block") if k in r}
        for pid, tid, seen, label in ((pid_stream, r["stream"], seen_streams, "stream"),
                                      (pid_chan, r["channel"], seen_chans, "channel")):
            if tid not in seen:
                seen.add(tid)
                ev.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                           "args": {"name": f"{label} {tid}"}})
            ev.append({"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": us(r["start"]),
                       "dur": us(r["end"] - r["start"]), "args": args})
        call = calls.get(r["corr"])
        if call is not None:
            ev.append({"ph": "s", "id": r["corr"], "pid": pid_cpu, "tid": call["tid"],
                       "name": "launch", "cat": "launch", "ts": us(call["start"])})
            ev.append({"ph": "f", "id": r["corr"], "pid": pid_stream, "tid": r["stream"],
                       "name": "launch", "cat": "launch", "ts": us(r["start"]), "bp": "e"})
    return {"traceEvents": ev, "displayTimeUnit": "ns"}
