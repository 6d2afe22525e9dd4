"""Memory that does not grow with a run: push-buffer segments and launch descriptors are
recycled, and the bounded mode streams the timeline out (the same bytes and the same summary
as the list of records)."""

import pathlib
import random

import pytest

import gpufe.sim.run
from gpufe.sim.cosim.harness import CoSim
from gpufe.sim.cosim.hostmem import HostMemory, SegmentRing, BlockPool
from gpufe.sim.params import load
from gpufe.sim.run import simulate
from gpufe.sim.host.runtime import Runtime
from gpufe.sim.analysis.summary import print_summary
from gpufe.sim.analysis.timeline import write_jsonl, summary
from gpufe.sim.host.workload import load_workload, parse_workload, run_program

EXAMPLES = pathlib.Path(__file__).parents[2] / "examples"


# -- host memory ------------------------------------------------------------------------------


def test_segment_ring_keeps_segments_contiguous_and_apart():
    """Under the UMD's rule (at most ``capacity`` bytes in flight), every segment fits in
    the ring, whole, without touching a segment the GPU has not read."""
    rng = random.Random(3)
    mem = HostMemory()
    cap = 1000
    ring = SegmentRing(mem, cap)
    live, used, wrapped = [], 0, 0
    for _ in range(20000):
        if live and (rng.random() < 0.5 or used > cap - 8):
            a, n = live.pop(0)
            ring.release()
            used -= n
            continue
        n = 4 * rng.randrange(1, min(60, (cap - used) // 4) + 1)
        a = ring.place(n)
        assert ring.base <= a and a + n <= ring.base + 2 * cap and a % 4 == 0
        assert mem.mapped(a, n)
        for b, m in live:
            assert a + n <= b or b + m <= a, "overlaps a segment not yet read"
        wrapped += a == ring.base and bool(live)
        live.append((a, n))
        used += n
    assert wrapped > 50


def test_segment_ring_refuses_more_than_its_capacity():
    ring = SegmentRing(HostMemory(), 64)
    ring.place(64)
    with pytest.raises(RuntimeError):
        ring.place(64)


def test_lazy_regions_match_a_dict_and_grow_only_as_written():
    rng = random.Random(7)
    mem, ref = HostMemory(), {}
    flat = mem.alloc(64)
    lazy = [mem.alloc(4096, align=4096, lazy=True) for _ in range(3)]
    assert all(mem.mapped(a, 4096) for a in lazy) and not mem.mapped(lazy[0] + 4092, 8)
    assert mem.footprint() == 16                       # the lazy regions hold nothing yet
    mem.write_dwords(lazy[1] + 400, [1, 2, 3])
    assert mem.footprint() == 16 + 103                 # up to the highest dword written
    ref.update({lazy[1] + 400: 1, lazy[1] + 404: 2, lazy[1] + 408: 3})
    for _ in range(3000):
        base = rng.choice(lazy + [flat])
        a = base + 4 * rng.randrange(1030) + (2 if rng.random() < 0.05 else 0)
        op = rng.randrange(4)
        if op == 0:
            ds = [rng.getrandbits(36) for _ in range(rng.randrange(1, 9))]
            mem.write_dwords(a, ds)
            ref.update({a + 4 * k: d & 0xFFFFFFFF for k, d in enumerate(ds)})
        elif op == 1:
            v = rng.getrandbits(64)
            mem.write64(a, v)
            ref[a], ref[a + 4] = v & 0xFFFFFFFF, v >> 32
        elif op == 2:
            n = rng.randrange(1, 9)
            assert mem.read_dwords(a, n) == [ref.get(a + 4 * k, 0) for k in range(n)]
        else:
            assert mem.read_dword(a) == ref.get(a, 0)
    for a, v in ref.items():
        assert mem.read_dword(a) == v


def test_block_pool_hands_back_what_it_was_given():
    mem = HostMemory()
    pool = BlockPool(mem, 256, 256)
    a, b = pool.take(), pool.take()
    pool.give(a)
    assert pool.take() == a and pool.allocated == 2 and b % 256 == 0


def _launches(n, streams=2, copies=True):
    names = [f"s{i}" for i in range(streams)]
    body = [{"op": "launch_kernel", "stream": s, "kernel": "k", "block_ns": 50000}
            for s in names]
    if copies:
        body.append({"op": "memcpy_async", "stream": names[0], "kind": "h2d", "bytes": 4096})
    program = ([{"op": "stream_create", "name": s} for s in names]
               + [{"op": "repeat", "count": n, "body": body}, {"op": "device_synchronize"}])
    return parse_workload({"name": f"launches_{n}", "program": program}, "test")


def _host_memory_after(n, params, copies):
    sim = CoSim(params, 8, backend="compiled")
    rt = Runtime(sim)
    sim.start_cpu(run_program(_launches(n, copies=copies)["program"], rt))
    sim.run()
    assert sim.descriptors.in_use == 0
    assert all(not ch.pb_used and not ch.outstanding and not ch.kicked
               for ch in rt.compute_channels + list(rt.copy_channels.values()))
    return sim.mem.footprint(), sim.descriptors.allocated, rt.blocked_launches


@pytest.mark.parametrize("copies", [False, True])
def test_host_memory_does_not_grow_with_launches(copies):
    """Segments come from each channel's ring and descriptors from a pool: after the rings
    have wrapped, ten times the launches use no more host memory (a small push buffer, so
    that the rings wrap and kickoffs wait for space)."""
    params = load("h200").with_overrides(pushbuffer_bytes=2048)
    small, descs_small, _ = _host_memory_after(150, params, copies)
    big, descs_big, blocked = _host_memory_after(1500, params, copies)
    assert blocked > 0 or copies     # with copies, the copy's kickoffs are the ones that wait
    assert big == small and descs_big == descs_small
    assert small < 70_000            # dwords: rings of 2 x 2 KiB, GPFIFOs, a few descriptors


# -- the bounded mode: a streamed timeline ------------------------------------------------------


STREAMED = ["chain_stream_gate", "copies", "events_timing", "graph_fork_join",
            "graph_chain_100", "host_sync", "hyperq_c1_s8", "xstream"]


def _summary_lines(result):
    result.wall_s = 1.0
    lines = []
    print_summary(result, out=lines.append)
    return lines


@pytest.mark.parametrize("profiler", ["off", "cupti"])
@pytest.mark.parametrize("name", STREAMED)
def test_bounded_mode_gives_the_same_timeline_and_summary(name, profiler, tmp_path):
    w = load_workload(EXAMPLES / f"{name}.json")
    params = load("h200")
    full = simulate(w, params, backend="compiled", profiler=profiler)
    write_jsonl(full.records, tmp_path / "list.jsonl")
    streamed = simulate(w, params, backend="compiled", profiler=profiler, bounded=True,
                        timeline=tmp_path / "stream.jsonl")
    assert streamed.records is None
    assert (tmp_path / "stream.jsonl").read_bytes() == (tmp_path / "list.jsonl").read_bytes()
    assert streamed.digest.summary() == summary(full.records)
    assert _summary_lines(streamed) == _summary_lines(full)


@pytest.mark.parametrize("profiler", ["off", "cupti"])
def test_bounded_mode_holds_only_what_is_in_flight(monkeypatch, profiler):
    """Records go out as the run goes: with the CPU the slower side (the GPU keeps up), a
    handful are held at any time, however long the run."""
    streams = []

    class Watched(gpufe.sim.run.TimelineStream):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            streams.append(self)
    monkeypatch.setattr(gpufe.sim.run, "TimelineStream", Watched)
    program = [{"op": "stream_create", "name": "s"}, {"op": "stream_create", "name": "t"},
               {"op": "repeat", "count": 1000, "body": [
                   {"op": "launch_kernel", "stream": "s", "kernel": "k"},
                   {"op": "launch_kernel", "stream": "t", "kernel": "k", "block_ns": 1000}]},
               {"op": "device_synchronize"}]
    w = parse_workload({"name": "held", "program": program}, "test")
    r = simulate(w, load("h200"), backend="compiled", profiler=profiler, bounded=True)
    (stream,) = streams
    # 2 stream_create, 2000 x (kernel, launch), the sync record and its runtime record
    assert r.digest.metrics()["kernels"] == 2000 and stream.emitted == 2 + 4000 + 2
    assert stream.peak_held < 20
