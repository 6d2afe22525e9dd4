"""The graph walker inside FrontEnd: a node table in host memory, one GRAPH_LAUNCH."""

import pytest

from gpufe.rtl.config import SMALL
from gpufe.rtl.layouts import (Method, ChannelReg, ChannelState, ErrorCause, GlobalReg,
                               HOST_MEMORY_BASE)
from gpufe.sim.host.encode import (PushBuffer, launch_descriptor, encode_graph_node,
                                   encode_graph_edge, syncpoint_address, device_graph)
from gpufe.sim.testbench.frontend import FrontEndBench
from tests.helpers import mmio_channel, mmio_global


def put_graph(b, deps, block_ns=100, prog=(), dgl=None, kernel_base=100, handle=None):
    """Write a graph (deps[i]: predecessors of node i; ``prog``: the (i, j) edges that are
    programmatic; ``dgl``: node -> its device-side launch (tail?, count, DeviceGraph
    address)) and its kernels (ids from ``kernel_base``); return the table. ``handle``: the
    graph's own DeviceGraph record, written too."""
    n = len(deps)
    succs = [[j for j in range(n) if i in deps[j]] for i in range(n)]
    words, first = [], 0
    for i in range(n):
        d = b.put_descriptor(launch_descriptor(block_ns=block_ns, kernel_id=kernel_base + i,
                                               device_graph_launch=(dgl or {}).get(i)))
        words += encode_graph_node("kernel", len(deps[i]), len(succs[i]), first, d,
                                   any((i, j) in prog for j in succs[i]))
        first += len(succs[i])
    words += [encode_graph_edge(j, (i, j) in prog) for i, s in enumerate(succs) for j in s]
    table = b.mem.alloc(4 * len(words), align=256)
    b.mem.write_dwords(table, words)
    if handle is not None:
        b.mem.write_dwords(handle, device_graph(table, n, 0, 0))
    return table


def assert_graph_fault_on_channel_0_only(b):
    """Channel 0 is in ERROR with the GRAPH cause; channel 1's kernel 7 ran all the same."""
    word = b.mmio_read(mmio_channel(0, ChannelReg.STATE))
    assert (ChannelState(word & 0xF), ErrorCause(word >> 4)) == (ChannelState.ERROR,
                                                                 ErrorCause.GRAPH)
    assert [r["kernel_id"] for _, k, r in b.log.dispatches] == [7]


def graph_launch(pb, table, nodes):
    return pb.incr(Method.GRAPH_TABLE_LO, table & 0xFFFFFFFF, table >> 32) \
             .immd(Method.GRAPH_LAUNCH, nodes)


def test_chain_runs_in_order_and_releases_after_the_last_node():
    b = FrontEndBench(SMALL)
    b.setup_channel(0)
    table = put_graph(b, [set(), {0}, {1}, {2}])
    sp = syncpoint_address(SMALL, 0)
    b.submit(0, graph_launch(PushBuffer(), table, 4).sem_release(sp, 1))
    b.run_until_idle()
    graph = [(t, r) for t, kind, r in b.log.dispatches if r["graph"]]
    assert [r["kernel_id"] for _, r in graph] == [100, 101, 102, 103]
    # each node is dispatched only after its predecessor completed, a few cycles later
    for (t0, r0), (t1, r1) in zip(graph, graph[1:]):
        assert t1 > t0 + 100
    assert b.peek(b.dut.syncpoint.counter_data[0]) == 1      # released when the graph finished
    # a second launch of the same table reuses what is loaded: no more DMA of the table
    reads = len(b.log.dma_reads)
    b.submit(0, graph_launch(PushBuffer(), table, 4).sem_release(sp, 2))
    b.run_until_idle()
    assert len([1 for _, k, r in b.log.dispatches if r["graph"]]) == 8
    walker_tag = 1 << SMALL.pbdma_bits          # DMA tags: the PBDMA, the top bit the walker
    assert any(tag == walker_tag for _, _, _, tag in b.log.dma_reads[:reads])
    assert not any(tag == walker_tag for _, _, _, tag in b.log.dma_reads[reads:])
    assert b.peek(b.dut.syncpoint.counter_data[0]) == 2


def _graph_dispatches(nodes, graph_start):
    """For two launches of a chain of ``nodes`` with GRAPH_START = ``graph_start``: the
    cycles of each launch's node dispatches, from its submission."""
    b = FrontEndBench(SMALL)
    b.mmio_write(mmio_global(GlobalReg.GRAPH_START), graph_start)
    b.setup_channel(0)
    table = put_graph(b, [set()] + [{i} for i in range(nodes - 1)])
    out = []
    for _ in range(2):
        b.run_until_idle()
        t0 = b.cycle
        b.submit(0, graph_launch(PushBuffer(), table, nodes))
        b.run_until_idle()
        out.append([t - t0 for t, _, r in b.log.dispatches if r["graph"]][-nodes:])
    return out


def test_a_launch_waits_graph_start_ns_before_its_first_node_whatever_its_size():
    for nodes in (1, 4):
        (load0, cached0), (load1, cached1) = (_graph_dispatches(nodes, 0),
                                              _graph_dispatches(nodes, 300))
        # a launch whose table is loaded waits the set-up, counted from the cycle the walker
        # takes the launch (its own four cycles to the first offer run under it); the first
        # launch's table load runs under it too
        assert cached1[0] - cached0[0] == 300 - 4
        assert 0 < load1[0] - load0[0] < 300
        # the other nodes follow as before
        for base, held in ((load0, load1), (cached0, cached1)):
            assert [t - held[0] for t in held] == [t - base[0] for t in base]


def test_fork_join_runs_branches_together_and_joins_after_both():
    b = FrontEndBench(SMALL)
    b.setup_channel(0)
    # 0 -> (1, 2) -> 3; branch 2 is long
    deps = [set(), {0}, {0}, {1, 2}]
    table = put_graph(b, deps)
    b.submit(0, graph_launch(PushBuffer(), table, 4))
    b.run_until_idle()
    disp = {r["node"]: t for t, kind, r in b.log.dispatches if r["graph"]}
    assert abs(disp[1] - disp[2]) < 10                  # both branches at once
    assert disp[3] > max(disp[1], disp[2]) + 100        # the join after both


def test_a_programmatic_edge_is_resolved_as_its_node_is_dispatched():
    b = FrontEndBench(SMALL)
    b.setup_channel(0)
    # 0 -(programmatic)-> 1 -> 2, and 0 -> 3: node 1 goes out behind node 0's dispatch, the
    # others behind their predecessors' completions; the launch completes after all four
    table = put_graph(b, [set(), {0}, {1}, {0}], block_ns=200, prog={(0, 1)})
    sp = syncpoint_address(SMALL, 0)
    b.submit(0, graph_launch(PushBuffer(), table, 4).sem_release(sp, 1))
    b.run_until_idle()
    disp = {r["node"]: t for t, kind, r in b.log.dispatches if r["graph"]}
    assert 0 < disp[1] - disp[0] < 20
    assert disp[3] > disp[0] + 200 and disp[2] > disp[1] + 200
    done = [t for t, kind, ch, seq in b.log.completions]
    assert len(done) == 4
    assert b.peek(b.dut.syncpoint.counter_data[0]) == 1
    # a second launch of the same table: the pending counts of the new epoch hold
    b.submit(0, graph_launch(PushBuffer(), table, 4).sem_release(sp, 2))
    b.run_until_idle()
    again = [(t, r["node"]) for t, kind, r in b.log.dispatches if r["graph"]][4:]
    assert [n for _, n in again][:2] == [0, 1] and again[1][0] - again[0][0] < 20
    assert b.peek(b.dut.syncpoint.counter_data[0]) == 2


def put_conditional_graph(b, runs=3):
    """node 0 -> conditional node 1 (body: nodes 3 -> 4, ``runs`` runs) -> node 2: the
    table."""
    words, descs = [], [b.put_descriptor(launch_descriptor(block_ns=100, kernel_id=100 + i))
                        for i in range(5)]
    words += encode_graph_node("kernel", 0, 1, 0, descs[0])
    words += encode_graph_node("conditional", 1, 1, 1, (3, 2), iterations=runs)
    words += encode_graph_node("kernel", 1, 0, 2, descs[2])
    words += encode_graph_node("kernel", 0, 1, 2, descs[3], body=True)
    words += encode_graph_node("kernel", 1, 0, 3, descs[4], body=True)
    words += [encode_graph_edge(1), encode_graph_edge(2), encode_graph_edge(4)]
    table = b.mem.alloc(4 * len(words), align=256)
    b.mem.write_dwords(table, words)
    return table


def test_a_conditional_node_runs_its_body_iterations_times_then_its_successors():
    b = FrontEndBench(SMALL)
    b.mmio_write(mmio_global(GlobalReg.COND_START), 300)
    b.setup_channel(0)
    table = put_conditional_graph(b)
    sp = syncpoint_address(SMALL, 0)
    for launch in (1, 2):             # the second launch: the table loaded, new epochs
        b.submit(0, graph_launch(PushBuffer(), table, 5).sem_release(sp, launch))
        b.run_until_idle()
        disp = [(t, r["kernel_id"]) for t, _, r in b.log.dispatches if r["graph"]][-8:]
        assert [k for _, k in disp] == [100, 103, 104, 103, 104, 103, 104, 102]
        times = [t for t, _ in disp]
        # each run of the body starts cond_start after the node became ready or the run
        # before ended; the node's successor goes once the last run has ended
        for t0, t1 in ((times[0], times[1]), (times[2], times[3]), (times[4], times[5])):
            assert t1 - t0 > 300 + 100
        assert times[7] - times[6] > 100
        assert b.peek(b.dut.syncpoint.counter_data[0]) == launch


def test_cond_record_adds_its_time_per_body_node_to_each_run():
    """COND_RECORD (a profiler's record of each body kernel) lengthens every run's set-up by
    its value times the body's nodes: the table's body has two."""
    gaps = {}
    for record in (0, 250):
        b = FrontEndBench(SMALL)
        b.mmio_write(mmio_global(GlobalReg.COND_START), 300)
        b.mmio_write(mmio_global(GlobalReg.COND_RECORD), record)
        b.setup_channel(0)
        table = put_conditional_graph(b)
        b.submit(0, graph_launch(PushBuffer(), table, 5))
        b.run_until_idle()
        times = [t for t, _, r in b.log.dispatches if r["graph"]][-8:]
        gaps[record] = [times[3] - times[2], times[5] - times[4]]
    for plain, recorded in zip(gaps[0], gaps[250]):
        assert recorded - plain == pytest.approx(2 * 250, abs=2)


def test_pending_counts_of_another_table_are_never_taken_for_this_ones():
    """A body node's pending count, left by a table where that node is an ordinary one at an
    epoch that the body's count reaches later, is not taken for the body's (nor the reverse):
    each entry says whose it is, and a table's load clears its entries."""
    b = FrontEndBench(SMALL)
    b.setup_channel(0)
    cond = put_conditional_graph(b, runs=1)
    chain = put_graph(b, [set(), {0}, {1}, {2}, {3}])
    sp = syncpoint_address(SMALL, 0)
    # the chain's node 4, written at launch epoch 3, is the body's node 4 when the body's own
    # epoch comes to 3 (its third run)
    for i, table in enumerate([cond, cond, chain, cond, chain, cond]):
        b.submit(0, graph_launch(PushBuffer(), table, 5).sem_release(sp, i + 1))
        b.run_until_idle()
        assert b.peek(b.dut.syncpoint.counter_data[0]) == i + 1, f"launch {i} did not finish"


def test_graph_too_large_faults_its_channel_only():
    b = FrontEndBench(SMALL)
    b.setup_channel(0)
    b.setup_channel(1)
    b.submit(0, graph_launch(PushBuffer(), HOST_MEMORY_BASE, SMALL.graph_nodes_max + 1))
    b.submit(1, PushBuffer().launch(b.put_descriptor(launch_descriptor(kernel_id=7))))
    b.run_until_idle()
    assert_graph_fault_on_channel_0_only(b)


def test_successors_past_the_edge_memory_fault_whichever_node_has_them():
    # node 0 claims successors at the end of the edge memory and past it; the last node's
    # are in range: the walker must still refuse the table
    b = FrontEndBench(SMALL)
    b.setup_channel(0)
    b.setup_channel(1)
    d = b.put_descriptor(launch_descriptor(block_ns=100, kernel_id=100))
    words = (encode_graph_node("kernel", 0, 2, SMALL.graph_edges_max - 1, d)
             + encode_graph_node("kernel", 1, 0, 0, d) + [1, 1])
    table = b.mem.alloc(4 * len(words) + 4 * SMALL.graph_edges_max, align=256)
    b.mem.write_dwords(table, words)
    b.submit(0, graph_launch(PushBuffer(), table, 2))
    b.submit(1, PushBuffer().launch(b.put_descriptor(launch_descriptor(kernel_id=7))))
    b.run_until_idle()
    assert_graph_fault_on_channel_0_only(b)


def test_a_tail_launch_runs_in_its_graphs_place_after_it_then_the_channel_goes_on():
    """A graph whose last kernel tail-launches the graph itself twice: three runs per host
    launch, each TAIL_START after the run before completed, the release after the last."""
    b = FrontEndBench(SMALL)
    b.mmio_write(mmio_global(GlobalReg.TAIL_START), 300)
    b.setup_channel(0)
    handle = b.mem.alloc(16, align=256)
    table = put_graph(b, [set(), {0}], dgl={1: (True, 2, handle)}, handle=handle)
    sp = syncpoint_address(SMALL, 0)
    for launch in (1, 2):               # the second host launch counts its calls afresh
        b.submit(0, graph_launch(PushBuffer(), table, 2).sem_release(sp, launch))
        b.run_until_idle()
        runs = [(t, r) for t, _, r in b.log.dispatches if r["graph"]][-6:]
        assert [r["kernel_id"] for _, r in runs] == [100, 101] * 3
        assert [r["tail"] for _, r in runs] == [0, 0, 1, 1, 1, 1]
        assert not any(r["dwalk"] for _, r in runs)
        done = [t for t, kind, ch, seq in b.log.completions][-6:]
        for k in (2, 4):                # a run's first node: TAIL_START after the last ended
            assert 300 < runs[k][0] - done[k - 1] < 340
        assert b.peek(b.dut.syncpoint.counter_data[0]) == launch
    assert len(b.log.device_launches) == 4


def test_a_fire_and_forget_launch_runs_beside_its_graph_which_waits_for_it():
    """Node 0 of a host-launched graph launches graph G fire-and-forget as it starts: G runs
    on the device-launch walker while node 0 still runs, DEVICE_START after the call; the
    launching graph completes (and its channel's release follows) only after G has."""
    b = FrontEndBench(SMALL)
    b.mmio_write(mmio_global(GlobalReg.DEVICE_START), 200)
    b.setup_channel(0)
    handle = b.mem.alloc(16, align=256)
    put_graph(b, [set(), {0}, {1}], block_ns=400, kernel_base=200, handle=handle)
    parent = put_graph(b, [set()], block_ns=600, dgl={0: (False, 1, handle)})
    sp = syncpoint_address(SMALL, 0)
    after = b.put_descriptor(launch_descriptor(kernel_id=7))
    b.submit(0, graph_launch(PushBuffer(), parent, 1).sem_release(sp, 1)
             .sem_acquire(sp, 1).launch(after))
    b.run_until_idle()
    disp = [(t, r) for t, _, r in b.log.dispatches]
    assert [r["kernel_id"] for _, r in disp] == [100, 200, 201, 202, 7]
    assert [r["dwalk"] for _, r in disp] == [0, 1, 1, 1, 0]
    (called, _), = b.log.device_launches
    done = [t for t, kind, ch, seq in b.log.completions]
    assert 200 < disp[1][0] - called < 240 and disp[1][0] < done[0]   # node 0 still runs
    # the graph completed after G's last node: only then did the channel go on
    assert done[0] < done[3] < disp[4][0]
    assert b.peek(b.dut.syncpoint.counter_data[0]) == 1


def test_a_queued_launch_is_prepared_while_the_one_before_runs_and_completes_its_release():
    """Two launches of a one-node graph back to back on a channel, each carrying its own
    release (GRAPH_RELEASE_INDEX/VALUE): the first starts GRAPH_PREPARE + GRAPH_START after
    it is taken; the second, prepared while the first ran, GRAPH_START after the first
    completes; each completion sets the syncpoint to its value."""
    b = FrontEndBench(SMALL)
    b.mmio_write(mmio_global(GlobalReg.GRAPH_PREPARE), 500)
    b.mmio_write(mmio_global(GlobalReg.GRAPH_START), 100)
    b.setup_channel(0)
    table = put_graph(b, [set()], block_ns=2000)
    pb = PushBuffer()
    for value in (1, 2):
        pb.incr(Method.GRAPH_TABLE_LO, table & 0xFFFFFFFF, table >> 32)
        pb.incr(Method.GRAPH_RELEASE_INDEX, 3 | 1 << 31, value)
        pb.immd(Method.GRAPH_LAUNCH, 1)
    t0 = b.cycle
    b.submit(0, pb)
    b.run_until_idle()
    (d1, _, _), (d2, _, _) = b.log.dispatches
    done = [t for t, kind, ch, seq in b.log.completions]
    assert 600 <= d1 - t0 < 700              # doorbell, fetch, decode, then the set-up
    assert 100 <= d2 - done[0] < 120         # the second one was prepared meanwhile
    assert b.peek(b.dut.syncpoint.counter_data[3]) == 2
