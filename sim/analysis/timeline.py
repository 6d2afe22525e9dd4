"""Timelines in the reference traces' record schema, and the views made from them.

A timeline is a list of dicts, one per record, exactly as in ``traces/h200/*.jsonl.gz``:
``meta`` (header, marks, footer), ``runtime``, ``kernel``, ``memcpy``, ``sync``; times in ns.
A run of several processes gives every record the ``pid`` of its process, and adds ``ctxsw``
records (``start``, ``end``, ``pid_out``, ``pid_in``): the GPU's context switches between
them, during which no process runs.

A run keeps its records and orders them at its end (:func:`finish_records`), or, in the
bounded mode of ``simulate``, hands each one out in the same order as soon as it can
(:class:`TimelineStream`), gathering its metrics as it goes (:class:`TimelineDigest`, from
``metrics.py``): the same JSONL and the same figures, in memory that does not grow with the
run.
"""

import heapq
import json
import os
import stat
import tempfile
from collections import OrderedDict, deque

# the figures of a timeline have one definition, in metrics.py; a streamed run gathers them
# with its TimelineDigest
from gpufe.sim.analysis.metrics import COPY_KIND_NAMES, TimelineDigest, metrics  # noqa: F401
from gpufe.sim.host.records import CHANNEL_COPY

#: records of one time are ordered by kind, then by correlation id, then as they were made
ORDER = {"meta": 0, "runtime": 1, "kernel": 2, "memcpy": 3, "sync": 4, "ctxsw": 5}


def finish_record(rec):
    """A runtime model record as the timeline has it: engine times (ns) filled in, private
    ``_`` fields dropped; None for a kernel or copy that never ran (the run stopped early)."""
    r = {k: v for k, v in rec.items() if k[0] != "_"}
    job = rec.get("_kernel") or rec.get("_copy")
    if job is not None:
        if job.start is None or job.end is None:
            return None
        # (an end written behind a time stamp in flight: ``sim/host/profiler.py``)
        r["start"], r["end"] = job.start // 1000, rec.get("_end", job.end // 1000)
        if getattr(job, "sync", None) is not None:
            # PDL: block 0's dependency wait returned, the last block's code ended
            r["sync"], r["exit"] = job.sync // 1000, job.exit_at // 1000
        if getattr(job, "graph_launched", None) is not None:
            # block 0's device-side cudaGraphLaunch returned
            r["graph_launched"] = job.graph_launched // 1000
    return r


def sort_key(r):
    return (r.get("t", r.get("start")), ORDER[r["kind"]], r.get("corr", 0))


def finish_records(header, marks, records, end_ns):
    """Fill engine times into kernel/memcpy records and order everything deterministically."""
    out = [dict(header)]
    body = [r for r in map(finish_record, records) if r is not None]
    body.extend(marks)
    body.sort(key=sort_key)
    out.extend(body)
    out.append({"kind": "meta", "what": "footer", "t": end_ns})
    return out


def jsonl_line(r):
    return json.dumps(r, separators=(",", ":")) + "\n"


def write_jsonl(records, path):
    with open(path, "w") as f:
        for r in records:
            f.write(jsonl_line(r))


class OutputFile:
    """A text file written while a run goes on, that appears only once it is complete: a
    regular file is written beside its path and moved there by :meth:`commit` (a run that
    fails leaves what was there before); anything else (/dev/null, a pipe) is written
    directly. Use as a context manager; call :meth:`commit` on success."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._tmp = None
        try:
            special = not stat.S_ISREG(os.stat(self.path).st_mode)
        except FileNotFoundError:
            special = False
        if special:
            self.file = open(self.path, "w")
            return
        folder, name = os.path.split(os.path.abspath(self.path))
        fd, self._tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".partial")
        self.file = os.fdopen(fd, "w")

    def write(self, text):
        return self.file.write(text)

    def commit(self):
        self.file.close()
        if self._tmp:
            try:
                mode = os.stat(self.path).st_mode & 0o7777
            except FileNotFoundError:
                umask = os.umask(0)
                os.umask(umask)
                mode = 0o666 & ~umask
            os.chmod(self._tmp, mode)
            os.replace(self._tmp, self.path)
            self._tmp = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()
        if self._tmp:
            os.unlink(self._tmp)
            self._tmp = None


class TimelineStream:
    """A run's timeline handed out record by record, in :func:`finish_records`' order, as
    soon as nothing made later can sort before a record: the memory a run keeps is what is
    in flight, not what has happened.

    It stands in for ``Runtime.records`` (``append``, ``len`` and slices of the records made
    since the previous runtime record, which ``Runtime.api_call`` reads) and
    ``Runtime.marks``; the co-simulation tells it when a kernel or copy is dispatched and
    when it ends (:meth:`dispatched`, :meth:`done`). A record is final

    - runtime: once the next runtime record is made (under CUPTI, ``api_call`` moves the
      end of a launch's record after making it, within the same call);
    - sync and meta (marks): as it is made;
    - kernel and memcpy: once the engine has ended it (its start and end are known; the
      submitted time was set at the kickoff, before the dispatch); under CUPTI its
      ``submitted`` becomes the dispatch time, as ``Runtime.cupti_submitted`` does.

    The horizon below which every final record can go is the least of: the start of the
    latest runtime record (every API call starts after the previous call's record ended, and
    every record the CPU makes in a call has a time at or after the call's start); the
    earliest dispatch of a kernel or copy still running (its start is at or after it); and
    the simulated time now (work not dispatched yet starts after now). Records at the
    horizon itself wait, since a later one of the same time may sort first.
    """

    def __init__(self, header, emit, now_ns, cupti=False):
        self._emit = emit                # called with each record, in timeline order
        self._now = now_ns               # the simulated time in ns
        self._cupti = cupti
        self._ready = []                 # heap: (time, kind order, corr, made, record)
        self._made = 0                   # records made so far (len of Runtime.records)
        self._recent = deque()           # (index, record) since the previous runtime record
        self._runtime = None             # the latest runtime record: it may still change
        self._running = OrderedDict()    # id(job) -> (dispatch ns, record), oldest first
        self.marks = _Marks(self)
        self.emitted = 0
        self.peak_held = 0               # most records held at once (waiting to go out)
        emit(dict(header))

    # -- Runtime.records -------------------------------------------------------------------------

    def append(self, rec):
        index = self._made
        self._made += 1
        kind = rec["kind"]
        if kind == "runtime":
            if self._runtime is not None:
                prev_index, prev = self._runtime
                while self._recent and self._recent[0][0] <= prev_index:
                    self._recent.popleft()
                self._push(finish_record(prev), prev_index)
            self._runtime = (index, rec)
        elif kind == "sync":
            self._push(finish_record(rec), index)
        elif kind not in ("kernel", "memcpy"):
            raise ValueError(f"timeline stream: unexpected record kind {kind!r}")
        else:
            rec["_index"] = index        # a kernel or copy waits for done(); its place in ties
        self._recent.append((index, rec))
        self._advance()

    def __len__(self):
        return self._made

    def __getitem__(self, key):
        if not isinstance(key, slice) or key.step is not None or key.stop is not None:
            raise TypeError("a streamed timeline only gives the records since an index")
        start = key.start or 0
        return [r for i, r in self._recent if i >= start]

    def __iter__(self):
        raise TypeError("a streamed timeline's records have gone out already")

    # -- the co-simulation ---------------------------------------------------------------------

    def dispatched(self, job, rec, now_ns):
        self._running[id(job)] = (now_ns, rec)

    def done(self, job):
        _, rec = self._running.pop(id(job))
        if self._cupti and rec["kind"] == "kernel" and rec.get("_dispatched") is not None:
            rec["submitted"] = rec["_dispatched"]
        self._push(finish_record(rec), rec["_index"])
        self._advance()

    # -- ordering ----------------------------------------------------------------------------------

    def _push(self, r, index):
        if r is not None:
            heapq.heappush(self._ready, (r.get("t", r.get("start")), ORDER[r["kind"]],
                                         r.get("corr", 0), index, r))

    def _advance(self):
        h = self._now()
        if self._runtime is not None:
            h = min(h, self._runtime[1]["start"])
        else:
            h = 0                        # the first call has not made its record yet
        if self._running:
            h = min(h, next(iter(self._running.values()))[0])
        ready, emit = self._ready, self._emit
        held = len(ready) + len(self._running)
        if held > self.peak_held:
            self.peak_held = held
        while ready and ready[0][0] < h:
            emit(heapq.heappop(ready)[-1])
            self.emitted += 1

    def finish(self, end_ns):
        """The run has ended: everything left goes out (kernels and copies that never ended
        are left out, as in :func:`finish_records`), then the footer."""
        if self._runtime is not None:
            self._push(finish_record(self._runtime[1]), self._runtime[0])
            self._runtime = None
        self._recent.clear()
        self._running.clear()
        ready, emit = self._ready, self._emit
        while ready:
            emit(heapq.heappop(ready)[-1])
            self.emitted += 1
        emit({"kind": "meta", "what": "footer", "t": end_ns})


class _Marks:
    """``Runtime.marks`` of a streamed timeline: a mark is final as it is made."""

    def __init__(self, stream):
        self._stream = stream
        self._made = 0

    def append(self, rec):
        # after every record of Runtime.records in finish_records' order; no record there is
        # a meta, so marks and records never tie
        self._made += 1
        self._stream._push(rec, (1 << 62) + self._made)
        self._stream._advance()


def kernels(records):
    return [r for r in records if r["kind"] == "kernel"]


def summary(records):
    """The key figures of a timeline (model or measured): its metrics
    (:func:`gpufe.sim.analysis.metrics.metrics`), the figures the run summary prints."""
    return metrics(records)


#: CUPTI channel type of the copy engines' own channels (compute channels are 1)


def track_names(records, stream_names=None):
    """Perfetto track names: ({stream id: name}, {channel: name}). A stream is named as in
    the workload (``stream_names``: id -> name), else ``stream ID``; a channel that ran copies
    as a copy engine's channel (channel type 2) is ``copy channel N (H2D)`` (its copy kinds),
    any other ``channel N``."""
    streams, copy_kinds = {}, {}
    for r in records:
        if r["kind"] not in ("kernel", "memcpy"):
            continue
        sid = r["stream"]
        if sid not in streams:
            name = (stream_names or {}).get(sid)
            streams[sid] = name if name is not None else f"stream {sid}"
        kinds = copy_kinds.setdefault(r["channel"], [])
        if r["kind"] == "memcpy" and r.get("channel_type") == CHANNEL_COPY:
            kind = COPY_KIND_NAMES.get(r["copy_kind"], f"kind {r['copy_kind']}").upper()
            if kind not in kinds:
                kinds.append(kind)
    channels = {c: f"copy channel {c} ({'/'.join(kinds)})" if kinds else f"channel {c}"
                for c, kinds in copy_kinds.items()}
    return streams, channels


def perfetto(records, stream_names=None):
    """Chrome trace JSON (ui.perfetto.dev): the CPU thread, a track per stream and per
    channel (named by :func:`track_names`; ``stream_names``: stream id -> its name in the
    workload), and a flow arrow from each API call to the kernel or copy it launched."""
    ev = []
    pid_cpu, pid_stream, pid_chan = 1, 2, 3
    ev += [{"ph": "M", "pid": pid_cpu, "name": "process_name", "args": {"name": "CPU"}},
           {"ph": "M", "pid": pid_stream, "name": "process_name", "args": {"name": "Streams"}},
           {"ph": "M", "pid": pid_chan, "name": "process_name",
            "args": {"name": "Hardware channels"}}]
    us = lambda ns: ns / 1000.0
    calls = {}
    stream_tracks, channel_tracks = track_names(records, stream_names)
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
        for pid, tid, seen, names in ((pid_stream, r["stream"], seen_streams, stream_tracks),
                                      (pid_chan, r["channel"], seen_chans, channel_tracks)):
            if tid not in seen:
                seen.add(tid)
                ev.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                           "args": {"name": names[tid]}})
            ev.append({"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": us(r["start"]),
                       "dur": us(r["end"] - r["start"]), "args": args})
        call = calls.get(r["corr"])
        if call is not None:
            ev.append({"ph": "s", "id": r["corr"], "pid": pid_cpu, "tid": call["tid"],
                       "name": "launch", "cat": "launch", "ts": us(call["start"])})
            ev.append({"ph": "f", "id": r["corr"], "pid": pid_stream, "tid": r["stream"],
                       "name": "launch", "cat": "launch", "ts": us(r["start"]), "bp": "e"})
    return {"traceEvents": ev, "displayTimeUnit": "ns"}
