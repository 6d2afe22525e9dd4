"""Run a workload through the co-simulation and collect its timeline."""

from dataclasses import dataclass
import sys
import time

from gpufe.sim.cosim.harness import CoSim
from gpufe.sim.host.runtime import Runtime, Process
import contextlib

from gpufe.sim.analysis.timeline import (finish_records, TimelineStream, TimelineDigest, OutputFile,
                                         jsonl_line, write_jsonl)
from gpufe.sim.host.workload import run_program, count_ops, threads_of, program_paths


@dataclass
class RunResult:
    records: list                   # the timeline; None for a bounded run
    stats: dict
    wall_s: float
    workload: dict
    params: object
    max_connections: int
    blocked_launches: int
    backend: str = "pysim"
    digest: TimelineDigest = None   # a bounded run's summary figures (see summary.py)
    stream_names: dict = None       # stream id -> its name in the workload (Perfetto tracks)


class Progress:
    """A one-line progress bar on stderr for long runs."""

    def __init__(self, total, enabled):
        self.total, self.done, self.enabled = total, 0, enabled and total >= 200
        self._shown = -1

    def __call__(self):
        self.done += 1
        pct = 100 * self.done // self.total
        if self.enabled and pct != self._shown:
            self._shown = pct
            bar = "#" * (pct // 4)
            sys.stderr.write(f"\r  [{bar:25s}] {pct:3d}% of {self.total} calls")
            if self.done == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def timeline_header(workload, params, mc, profiler, **extra):
    """The model timeline's header record (``extra``: fields before its ``params``)."""
    return {"kind": "meta", "what": "header", "t": 0, "scenario": workload["name"],
            "device": params.device, "sms": params.sms, "driver": "gpufe",
            "runtime": "gpufe", "max_connections": mc, **extra,
            "params": {"params": params.name, "profiler": profiler}, "model": True}


def simulate(workload, params, max_connections=None, *, vcd=None, jumps=True,
             progress=False, backend="pysim", profiler="off", bounded=False, timeline=None,
             compute="aggregate"):
    """Run ``workload``; the result holds its timeline (``records``).

    ``bounded``: keep no list of records, so that memory does not grow with the run's length:
    each record goes out once nothing later can sort before it (``TimelineStream``), to
    ``timeline`` (a JSONL path) if given, and into the summary figures (``result.digest``);
    ``result.records`` is None. The JSONL and the figures are the same as without.
    ``timeline`` without ``bounded``: the JSONL is written once the run has ended.
    ``compute``: the compute engine (``harness.COMPUTE_ENGINES``; the same timeline).
    """
    mc = max_connections or workload.get("max_connections") or params.max_connections
    if workload.get("processes"):
        return _simulate_processes(workload, params, mc, vcd=vcd, jumps=jumps,
                                   progress=progress, backend=backend, profiler=profiler,
                                   bounded=bounded, timeline=timeline, compute=compute)
    sim = CoSim(params, mc, vcd=vcd, jumps=jumps, backend=backend, profiler=profiler,
                compute=compute)
    threads = threads_of(workload)
    rt = Runtime(sim, threads=[name for name, _ in threads])
    header = timeline_header(workload, params, mc, profiler)
    with contextlib.ExitStack() as stack:
        digest, stream = None, None
        if bounded:
            digest = TimelineDigest()
            out = stack.enter_context(OutputFile(timeline)) if timeline else None

            def emit(r, add=digest.add, write=out.write if out else None):
                add(r)
                if write:
                    write(jsonl_line(r))
            stream = TimelineStream(header, emit, lambda: sim.ev.now // 1000,
                                    cupti=profiler == "cupti")
            rt.timeline.stream_to(stream)
        bar = Progress(sum(count_ops(prog) for _, prog in threads), progress)
        for (name, prog), (where, _) in zip(threads, program_paths(workload)):
            sim.start_cpu(rt.thread(name, run_program(prog, rt, bar, where, name)))
        t0 = time.perf_counter()
        sim.run()
        wall = time.perf_counter() - t0
        rt.timeline.release_end_waits()
        if bounded:
            stream.finish(sim.now_ns)
            records = None
            if out:
                out.commit()
        else:
            rt.cupti_submitted()
            records = finish_records(header, rt.marks, rt.records, sim.now_ns)
            if timeline:
                write_jsonl(records, timeline)
    return RunResult(records, dict(sim.stats), wall, workload, params, mc, rt.blocked_launches,
                     sim.backend.name, digest,
                     stream_names={s.id: name for name, s in rt.streams.items()})


class _ProcessActivity:
    """The engines' activity (``CoSim.activity``) of a run of several processes: each kernel
    or copy goes to the timeline of the process whose channel dispatched it; the runlist
    scheduler's context switches become ``ctxsw`` records."""

    def __init__(self, runtimes):
        self.by_channel = {ch.id: rt.timeline for rt in runtimes for ch in rt.umd.channels}
        self.names = {rt.process.tsg: rt.process.name for rt in runtimes}
        self.switches = []
        self._out = None                # (start ns, TSG) of the switch under way

    def dispatched(self, job, now_ns):
        self.by_channel[job.key[0]].dispatched(job, now_ns)

    def done(self, job):
        self.by_channel[job.key[0]].done(job)

    def context_switch(self, tsg, run, t_ns):
        if not run:
            self._out = (t_ns, tsg)
        elif self._out is not None:
            start, out = self._out
            self._out = None
            self.switches.append({"kind": "ctxsw", "start": start, "end": t_ns,
                                  "pid_out": self.names.get(out, str(out)),
                                  "pid_in": self.names.get(tsg, str(tsg))})


def _simulate_processes(workload, params, mc, *, vcd, jumps, progress, backend, profiler,
                        bounded, timeline, compute):
    """:func:`simulate` for a workload of several processes: one CUDA context (channels, TSG)
    and one CPU thread each. The records are kept and merged at the end, each with its
    ``pid`` (a bounded run gets the same JSONL and figures, but its memory is not bounded)."""
    procs = workload["processes"]
    mcs = [p.get("max_connections") or mc for p in procs]
    sim = CoSim(params, mcs[0], vcd=vcd, jumps=jumps, backend=backend, profiler=profiler,
                compute=compute)
    runtimes, base = [], 0
    for tsg, (p, m) in enumerate(zip(procs, mcs)):
        runtimes.append(Runtime(sim, Process(p["name"], tsg, base, m),
                                threads=[name for name, _ in threads_of(p)]))
        base += m + 2
    activity = _ProcessActivity(runtimes)
    sim.activity = activity
    header = timeline_header(workload, params, mc, profiler,
                             processes=[{"name": p["name"], "max_connections": m}
                                        for p, m in zip(procs, mcs)])
    bar = Progress(sum(count_ops(prog) for p in procs for _, prog in threads_of(p)), progress)
    paths = iter(program_paths(workload))
    for p, rt in zip(procs, runtimes):
        for name, prog in threads_of(p):
            where, _ = next(paths)
            sim.start_cpu(rt.thread(name, run_program(prog, rt, bar, where, name)))
    t0 = time.perf_counter()
    sim.run()
    wall = time.perf_counter() - t0
    for rt in runtimes:
        rt.timeline.release_end_waits()
    body, marks = [], []
    for rt in runtimes:
        rt.cupti_submitted()
        pid = rt.process.name
        body.extend(dict(r, pid=pid) for r in rt.records)
        marks.extend(dict(r, pid=pid) for r in rt.marks)
    records = finish_records(header, marks, body + activity.switches, sim.now_ns)
    digest = None
    if bounded:
        digest = TimelineDigest()
        for r in records:
            digest.add(r)
        if timeline:
            with OutputFile(timeline) as out:
                for r in records:
                    out.write(jsonl_line(r))
                out.commit()
        records = None
    elif timeline:
        write_jsonl(records, timeline)
    blocked = sum(rt.blocked_launches for rt in runtimes)
    return RunResult(records, dict(sim.stats), wall, workload, params, mc, blocked,
                     sim.backend.name, digest,
                     stream_names={s.id: name for rt in runtimes
                                   for name, s in rt.streams.items()})
