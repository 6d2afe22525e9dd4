"""The launch travels as bytes: the engines decode the descriptors the driver's encoder wrote
into host memory (as the GPU reads a QMD), and the co-simulation keeps no per-launch table of
the driver's Python objects."""

import pytest

from gpufe.rtl.layouts import (DESCRIPTOR_ALIGN, HOST_COPY_BUFFER, DEVICE_MEMORY_BASE,
                               COPY_KINDS, GraphLaunchQueue, GRAPH_LAUNCH_QUEUE_DWORDS)
from gpufe.sim.cosim.engines import DescriptorReader, Kernel, Copy, decode
from gpufe.sim.cosim.harness import CoSim
from gpufe.sim.cosim.hostmem import HostMemory, BlockPool
from gpufe.sim.host.encode import (launch_descriptor, copy_descriptor, submitted_update,
                                   graph_launch_queue, graph_launch_record, graph_launch_link)
from gpufe.sim.analysis.timeline import finish_record
from gpufe.sim.host.runtime import Runtime
from gpufe.sim.host.workload import run_program
from tests.sim.workloads import streams, launch, workload


@pytest.fixture
def reader():
    mem = HostMemory()
    return DescriptorReader(mem, BlockPool(mem, DESCRIPTOR_ALIGN, DESCRIPTOR_ALIGN))


def test_the_compute_engine_decodes_a_launch_descriptor_from_host_memory(reader):
    mem, pool = reader.mem, reader.pool
    desc = pool.take()
    mem.write_dwords(desc, launch_descriptor(
        grid=(3, 2, 1), block=(64, 2, 1), block_ns=1234.5, kernel_id=7, priority=-2,
        release=(5, 9), correlation_id=4242, stream_id=14, queued_ns=10**12 + 3))
    offset, words = submitted_update(10**12 + 2000)       # the UMD's kickoff
    mem.write_dwords(desc + offset, words)
    k = reader.kernel(desc, (1, 17, 0, 0), graph=False)
    assert isinstance(k, Kernel) and k.key == (1, 17, 0, 0)
    assert (k.blocks, k.threads, k.block_ns, k.priority, k.release) == (6, 128, 1234.5, 2, (5, 9))
    d = k.launch
    assert (d["kernel_id"], d["correlation_id"], d["stream_id"], d["queued_ns"],
            d["submitted_ns"], d["graph_id"]) == (7, 4242, 14, 10**12 + 3, 10**12 + 2000, 0)
    assert [d["grid_x"], d["grid_y"], d["grid_z"], d["block_x"], d["block_y"]] == [3, 2, 1, 64, 2]
    # read, then given back to the driver's pool: the next launch may reuse the block
    assert pool.in_use == 0 and pool.take() == desc
    # a launch without a release carries none
    mem.write_dwords(desc, launch_descriptor())
    assert reader.kernel(desc, (0, 0, 0, 0), graph=False).release is None


def test_a_copy_engine_decodes_a_copy_descriptor_from_host_memory(reader):
    mem, pool = reader.mem, reader.pool
    desc = pool.take()
    dst = DEVICE_MEMORY_BASE + 0x1000
    mem.write_dwords(desc, copy_descriptor(HOST_COPY_BUFFER, dst, 65536, "d2h",
                                           correlation_id=77, stream_id=15))
    c = reader.copy(desc, (9, 3, 0, 0), graph=False)
    assert isinstance(c, Copy) and (c.kind, c.nbytes) == ("d2h", 65536)
    assert (c.launch["src"], c.launch["dst"], c.launch["kind"], c.launch["correlation_id"],
            c.launch["stream_id"]) == (HOST_COPY_BUFFER, dst, COPY_KINDS["d2h"], 77, 15)
    assert pool.in_use == 0


def test_graph_nodes_take_their_launch_from_the_graph_s_launch_queue(reader):
    """Two nodes per launch, three launches queued: each node dispatch gets its launch's
    correlation id, stream and priority, in queue order; a launch's record goes back to the
    pool once the next launch has begun."""
    mem, pool = reader.mem, reader.pool
    queue = mem.alloc(DESCRIPTOR_ALIGN, align=DESCRIPTOR_ALIGN)
    empty = pool.take()
    mem.write_dwords(empty, graph_launch_record(0, 0, 0))
    mem.write_dwords(queue, graph_launch_queue(empty, 2))
    kernel_node = mem.alloc(DESCRIPTOR_ALIGN, align=DESCRIPTOR_ALIGN)
    mem.write_dwords(kernel_node, launch_descriptor(block_ns=100, kernel_id=3, graph_id=4,
                                                    graph_launches=queue))
    copy_node = mem.alloc(DESCRIPTOR_ALIGN, align=DESCRIPTOR_ALIGN)
    mem.write_dwords(copy_node, copy_descriptor(HOST_COPY_BUFFER, DEVICE_MEMORY_BASE, 256,
                                                "h2d", graph_id=4, graph_launches=queue))
    tail = empty
    for corr, stream, priority in ((500, 13, 0), (501, 14, -1), (502, 13, 0)):
        record = pool.take()
        mem.write_dwords(record, graph_launch_record(corr, stream, priority))
        offset, link = graph_launch_link(record)
        mem.write_dwords(tail + offset, link)
        tail = record
    seen = []
    for i in range(6):
        node = kernel_node if i % 2 == 0 else copy_node
        job = (reader.kernel if node == kernel_node else reader.copy)(node, (0, 0, i % 2, 1),
                                                                      graph=True)
        d = job.launch
        seen.append((d["correlation_id"], d["stream_id"], d["graph_id"]))
        if isinstance(job, Kernel):
            assert job.priority == -job.launch["priority"] and job.release is None
    assert seen == [(500, 13, 4), (500, 13, 4), (501, 14, 4), (501, 14, 4), (502, 13, 4),
                    (502, 13, 4)]
    # the empty record and the first two launches' records are back; the last is the head
    assert pool.in_use == 1
    q = decode(GraphLaunchQueue, mem.read_dwords(queue, GRAPH_LAUNCH_QUEUE_DWORDS))
    assert (q["head"], q["left"]) == (tail, 0)
    with pytest.raises(RuntimeError, match="no launch of it is queued"):
        reader.kernel(kernel_node, (0, 0, 0, 1), graph=True)


def _run(params, program, max_connections):
    sim = CoSim(params, max_connections)
    rt = Runtime(sim)
    sim.start_cpu(run_program(workload(program)["program"], rt))
    sim.run()
    return sim, rt


def test_the_co_simulation_keeps_no_per_launch_tables(params):
    """Kernels, copies and graph launches through the RTL: what a dispatch refers to is read
    from host memory, so the co-simulation has no table of the driver's objects, and every
    stream descriptor and graph launch record is back in the pool at the end (each graph
    keeps its queue's head)."""
    program = (streams("a", "b") + [launch("a", 500), launch("b", 200, kernel="k_other")]
               + [{"op": "memcpy_async", "stream": "a", "kind": k, "bytes": 4096}
                  for k in ("h2d", "d2h", "d2d")]
               + [{"op": "stream_begin_capture", "stream": "b"}, launch("b", 300),
                  {"op": "memcpy_async", "stream": "b", "kind": "h2d", "bytes": 512},
                  {"op": "stream_end_capture", "stream": "b", "graph": "g"},
                  {"op": "graph_instantiate", "graph": "g"}]
               + [{"op": "graph_launch", "graph": "g", "stream": s} for s in "abab"]
               + [{"op": "device_synchronize"}])
    sim, rt = _run(params, program, 2)
    for name in ("launches", "copy_jobs", "graph_launches", "jobs"):
        assert not hasattr(sim, name)
    assert sim.descriptors.in_use == 1
    # its only containers: counters, the DMA response's and MMIO write's field offsets, the
    # channels' GP_GET hooks, the CPU threads, their barriers, the KMD's channel table, the streams'
    # tracking semaphores and the profiler's time-stamp buffer watched (per thread, barrier,
    # channel, stream and process, not per launch); the driver's entries in flight are all
    # retired
    tables = {k for k, v in vars(sim).items() if isinstance(v, (dict, list, set, tuple))}
    assert tables <= {"stats", "_resp_offsets", "_mmio_fields", "retire_hooks", "_threads",
                      "barriers", "channel_tsg", "_tracking", "write_hooks"}
    assert len(sim.write_hooks) <= 1
    assert len(sim._threads) == 1 and len(sim.channel_tsg) <= len(rt.umd.channels)
    assert len(sim._tracking) == len(rt.streams)
    assert len(sim.retire_hooks) == len(rt.umd.channels)
    assert not any(ch.kicked for ch in rt.umd.channels)
    recs = rt.records
    work = [r for r in recs if r["kind"] in ("kernel", "memcpy")]
    assert len(work) == 2 + 3 + 4 * 2
    calls = {r["corr"]: r["name"] for r in recs if r["kind"] == "runtime"}
    for r in work:                      # each activity record names the call it came from
        graph = r["graph_id"] != 0
        assert calls[r["corr"]].startswith("cudaGraphLaunch" if graph else
                                           "cudaLaunchKernel" if r["kind"] == "kernel"
                                           else "cudaMemcpyAsync")
    graph_corrs = sorted({r["corr"] for r in work if r["graph_id"]})
    assert len(graph_corrs) == 4
    assert [r["stream"] for r in sorted(work, key=lambda r: r["corr"]) if r["graph_id"]] == \
        [13, 13, 14, 14, 13, 13, 14, 14]
    assert [r["copy_kind"] for r in work if r["kind"] == "memcpy" and not r["graph_id"]] == \
        [COPY_KINDS[k] for k in ("h2d", "d2h", "d2d")]


def test_a_reused_descriptor_block_does_not_change_the_kernel_it_described(params):
    """Descriptor blocks are recycled as soon as the engine has read them: with two kernels
    of different lengths alternating, far more launches than blocks, every kernel still runs
    its own length under its own name."""
    program = streams("s", "t") + [
        {"op": "repeat", "count": 60, "body": [launch("s", 2000, kernel="k_long"),
                                               launch("t", 500, kernel="k_short")]},
        {"op": "device_synchronize"}]
    sim, rt = _run(params, program, 2)
    ks = [finish_record(r) for r in rt.records if r["kind"] == "kernel"]
    assert len(ks) == 120 and sim.descriptors.allocated <= 8
    blocks = params.block_overhead_ns + params.kernel_end_ns
    for k in ks:
        ns = 2000 if k["name"] == "k_long" else 500
        assert k["stream"] == (13 if k["name"] == "k_long" else 14)
        assert k["end"] - k["start"] == pytest.approx(ns + blocks, abs=2)
