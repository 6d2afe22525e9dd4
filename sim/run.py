"""Run a workload through the co-simulation and collect its timeline."""

from dataclasses import dataclass
import sys
import time

from .cosim import CoSim
from .runtime import Runtime
from .timeline import finish_records
from .workload import run_program, count_ops


@dataclass
class RunResult:
    records: list
    stats: dict
    wall_s: float
    workload: dict
    params: object
    max_connections: int
    blocked_launches: int
    backend: str = "pysim"


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


def simulate(workload, params, max_connections=None, *, vcd=None, jumps=True,
             progress=False, backend="pysim", profiler="off"):
    mc = max_connections or workload.get("max_connections") or params.max_connections
    sim = CoSim(params, mc, vcd=vcd, jumps=jumps, backend=backend, profiler=profiler)
    rt = Runtime(sim)
    bar = Progress(count_ops(workload["program"]), progress)
    sim.start_cpu(run_program(workload["program"], rt, bar))
    t0 = time.perf_counter()
    sim.run()
    wall = time.perf_counter() - t0
    header = {"kind": "meta", "what": "header", "t": 0, "scenario": workload["name"],
              "device": params.device, "sms": params.sms, "driver": "gpufe",
              "runtime": "gpufe", "max_connections": mc,
              "params": {"params": params.name, "profiler": profiler}, "model": True}
    rt.cupti_submitted()
    records = finish_records(header, rt.marks, rt.records, sim.now_ns)
    return RunResult(records, dict(sim.stats), wall, workload, params, mc, rt.blocked_launches,
                     sim.backend.name)
