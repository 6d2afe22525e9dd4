"""Random programs for the compute engine, run on the aggregate engine and its per-block
reference and compared outcome for outcome.

A program is a GPU (SMs, threads and blocks per SM, resident-kernel limit) and a list of
kernel launches at given times: grids from 1 to 100,000 blocks, block sizes that fill SMs
unevenly, several priorities, block times that tie, PDL chains with triggers and prologues,
device-side graph launches, and context switches of two TSGs. The outcome is everything the
engine lets out: each completion (time and order), each device-side launch, and every kernel's
start, end, dependency-wait return, trigger and exit, and the most kernels running at once.

    outcome(program, BlockComputeEngine) == outcome(program, ComputeEngine)

``bench/compute_fuzz.py`` runs thousands; ``tests/sim/cosim/test_compute.py`` a few hundred.
"""

import random
from dataclasses import dataclass, field

from gpufe.sim.cosim.engines import Kernel
from gpufe.sim.cosim.events import EventQueue, ps


@dataclass
class Program:
    seed: int
    overrides: dict
    profiled: bool
    launches: list = field(default_factory=list)   # (ns, kernel spec dict)
    switches: list = field(default_factory=list)   # (ns, tsg, run)


def random_program(seed, big=True):
    """Program ``seed``; ``big``: some grids up to 100,000 blocks."""
    rng = random.Random(seed)
    sms = rng.choice([1, 2, 3, 4, 8, 16, 33, 132])
    overrides = {
        "sms": sms,
        "max_threads_per_sm": rng.choice([1024, 2048]),
        "max_blocks_per_sm": rng.choice([1, 2, 3, 8, 16, 32]),
        "max_resident_kernels": rng.choice([1, 2, 3, 8, 128]),
        "block_dispatch_ns": rng.choice([0.6, 0.6, 1.0, 2.5]),
        "launch_latency_ns": rng.choice([543.0, 100.0, 3.0]),
        "graph_launch_latency_ns": rng.choice([86.0, 5.0]),
        "block_overhead_ns": rng.choice([385.7, 10.0, 4.0]),
        "kernel_end_ns": rng.choice([60.0, 0.0, 7.3]),
    }
    p = Program(seed, overrides, profiled=rng.random() < 0.2)
    n = rng.randint(1, 12)
    t = 0.0
    block_times = [rng.choice([0, 1000, 2000, 137.5, 10.0]) for _ in range(3)]
    streams = rng.randint(1, 4)
    last_of_stream = {}
    for i in range(n):
        t += rng.choice([0.0, 0.3, 1.0, 50.0, 600.0, 3000.0, rng.uniform(0, 20000)])
        r = rng.random()
        if big and r < 0.08:
            blocks = rng.randint(10_000, 100_000)
        elif r < 0.4:
            blocks = rng.randint(1, 8)
        elif r < 0.8:
            blocks = rng.randint(8, 600)
        else:
            blocks = rng.randint(600, 5000)
        threads = rng.choice([32, 64, 128, 128, 256, 384, 512, 1024])
        stream = rng.randrange(streams)
        spec = {"order": i, "blocks": blocks, "threads": threads,
                "block_ns": rng.choice(block_times + [rng.uniform(0, 3000)]),
                "priority": rng.choice([0, 0, 0, 1, 2]), "stream": stream,
                "tsg": rng.choice([0, 0, 0, 1]), "graph": rng.random() < 0.15,
                "release": (stream, i)}
        q = rng.random()
        if q < 0.25 and stream in last_of_stream:
            spec["primary"] = last_of_stream[stream]          # PDL on the kernel before
        if q < 0.35:
            spec["trigger_ps"] = rng.choice([None, 0, ps(200), ps(5000)])
            spec["prologue_ps"] = rng.choice([0, 0, ps(50), ps(900)])
        if rng.random() < 0.08:
            spec["dgl"] = (rng.random() < 0.3, rng.choice([0, 1, 2]), 0x1000)
        last_of_stream[stream] = spec["release"]
        p.launches.append((t, spec))
    if rng.random() < 0.25:
        ts = sorted(rng.uniform(0, max(t, 1.0) + 20000) for _ in range(2 * rng.randint(1, 2)))
        tsg = 0 if rng.random() < 0.5 else 1
        for j, s in enumerate(ts):
            p.switches.append((s, tsg, j % 2 == 1))
    # (drawn last: the programs above are those of the seeds before it was)
    p.overrides["dispatch_switch_ns"] = rng.choice([210.0, 0.0, 5.0, 1000.0])
    return p


def _kernel(spec):
    k = Kernel(("c", spec["order"], 0, 0), spec["blocks"], spec["threads"], spec["block_ns"],
               priority=spec["priority"], release=spec["release"],
               trigger_ps=spec.get("trigger_ps"), prologue_ps=spec.get("prologue_ps", 0),
               dgl=spec.get("dgl"), descriptor=0x100 * (spec["order"] + 1),
               launch={"correlation_id": spec["order"], "graph_id": spec["order"] + 1})
    k.tsg = spec["tsg"]
    return k


def outcome(program, engine_class, params):
    """Everything ``engine_class`` lets out on ``program``: a tuple to compare."""
    p = params.with_overrides(**program.overrides)
    ev = EventQueue()
    log = []
    eng = engine_class(p, ev, lambda k: log.append(("done", k.key[1], ev.now)),
                       profiled=program.profiled)
    eng.on_device_launch = lambda k: log.append(("dgl", k.key[1], ev.now))
    kernels = []
    inputs = [(ps(t), 0, i, "launch", spec) for i, (t, spec) in enumerate(program.launches)]
    inputs += [(ps(t), 1, i, "switch", (tsg, run))
               for i, (t, tsg, run) in enumerate(program.switches)]
    inputs.sort(key=lambda x: x[:3])
    for t, _, _, what, arg in inputs:
        # as the harness calls the engine: once every event due by then has run
        ev.run_due(t)
        ev.now = max(ev.now, t)
        if what == "launch":
            k = _kernel(arg)
            k.graph = arg["graph"]
            kernels.append(k)
            eng.launch(k, graph=arg["graph"], primary_key=arg.get("primary"))
        else:
            eng.context_switch(*arg)
    while ev.next_time() is not None:
        ev.run_due(ev.next_time())
    fields = tuple((k.key[1], k.start, k.end, k.placed, k.done, k.sync, k.trigger_at,
                    k.exit_at, k.graph_launched) for k in kernels)
    return tuple(log), fields, eng.max_concurrent
