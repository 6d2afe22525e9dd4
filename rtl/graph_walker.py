"""Graph walker, running an instantiated CUDA graph in the front end without the host:
:class:`GraphWalker`."""

from amaranth import Module, Signal, Mux
from amaranth.lib import wiring, stream, data, enum
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .config import FrontEndConfig
from .layouts import (GraphNode, GraphEdge, GraphNodeKind, GRAPH_NODE_DWORDS, COPY_FLAG_DESCRIPTOR,
                      GRAPH_HANDOVER_BITS,
                      ErrorCause, ADDR_BITS, dma_read_request_layout, dma_read_response_layout,
                      launch_record_layout, copy_record_layout, completion_layout,
                      graph_launch_layout)
from .fetcher import fault_layout

__all__ = ["GraphWalker", "WalkerState", "CompletionState", "CondState", "node_entry_layout",
           "edge_entry_layout", "tail_launch_layout"]


#: hand-overs a walker holds between reading them and queueing their branches (more are read
#: once one is queued)
BRANCH_SETUPS = 4


class WalkerState(enum.Enum, shape=3):
    """State of the walker: loading a table, queueing its roots, running, reporting; queueing
    the roots of branches the host has just handed over."""
    IDLE = 0
    LOAD_NODES = 1
    LOAD_EDGES = 2
    ROOTS = 3
    RUN = 4
    DONE = 5
    BRANCHES = 6


class CondState(enum.Enum, shape=3):
    """State of the conditional node being run: none, waiting for an iteration's set-up,
    queueing its body's roots, its body running, its completion to report."""
    IDLE = 0
    WAIT = 1
    SCAN = 2
    RUN = 3
    FINISH = 4


class CompletionState(enum.Enum, shape=3):
    """State of the completion path: reading a completed node, then walking its edges."""
    IDLE = 0
    NODE = 1
    EDGE_ADDR = 2
    EDGE = 3
    UPDATE = 4


def node_entry_layout(cfg):
    """A node as the walker holds it on chip (a :class:`~gpufe.rtl.layouts.GraphNode` without
    its padding; the successor index narrowed to ``cfg.edge_bits``)."""
    return data.StructLayout({"kind": GraphNodeKind, "pred_count": 14, "succ_count": 16,
                              "succ_first": cfg.edge_bits, "descriptor": 32,
                              "programmatic": 1, "body": 1, "iterations": 24})


def tail_launch_layout(cfg):
    """A tail launch the running graph's kernels made: the graph's table and node count."""
    return data.StructLayout({"table": ADDR_BITS, "nodes": cfg.node_bits + 1})


def edge_entry_layout(cfg):
    """An edge as the walker holds it (a :class:`~gpufe.rtl.layouts.GraphEdge`, the successor
    narrowed to ``cfg.node_bits``)."""
    return data.StructLayout({"node": cfg.node_bits, "programmatic": 1})


class GraphWalker(wiring.Component):
    """Graph walker: runs an instantiated CUDA graph in the front end, without the host.

    A graph launch from the CP names a node table in device-visible memory
    (:class:`~gpufe.rtl.layouts.GraphNode` records, then the edge list). The walker loads the
    table by DMA into on-chip node and edge memories (skipped when the same table is already
    loaded: a replay costs no fetch), queues the root nodes, and from then on:

    - dispatch: pops a ready node, reads its entry, offers a compute (or copy) record tagged
      ``graph`` with the node index; at most ``graph_inflight_max`` nodes are out at once;
    - completion: for a completed node, walks its successors, one edge every three cycles,
      decrementing each one's pending-predecessor count; a successor whose count reaches zero
      is ready. Pending counts carry the launch's epoch, so a new launch needs no reset pass.
    - programmatic edges (PDL): a kernel node whose entry says it has programmatic successors
      goes through the same walk once the engine has taken it, resolving only those edges
      (its completion resolves only the others): the compute work distributor holds such a
      successor until its predecessor triggers. Completions go first.
    - conditional nodes: a ready conditional node is not dispatched; the walker runs its body
      (the table's nodes marked ``body``) ``iterations`` times: each iteration waits
      ``cond_start`` ns and ``cond_record`` ns per body node (a deadline on ``now``; the
      product taken once, as the node is dispatched), then queues the body's roots (one node
      read a cycle) and walks the body with an epoch of its own; once every body node has completed,
      the next iteration begins, or the conditional node completes (its successors walked as
      any node's). One conditional node runs at a time (the driver refuses a graph with more
      than one, or a body that holds one).

    Device graph launch: a kernel's tail launch (``tail``) is queued with the run that
    dispatched it; once every node of the run has completed (and every fire-and-forget launch
    its kernels made, counted by ``child_launched`` and ``child_done``), the walker runs the
    queued tail launches one after another, ``tail_start`` ns after the run before each
    completes, on the same channel and sequence number, their nodes' records marked ``tail``.
    A front end has a second walker (``device``) that runs the fire-and-forget launches, each
    ``device_start`` ns after it arrives, its records marked ``dwalk``; its launches'
    completions go to the first walker's ``child_done``. A host launch of a graph that holds
    device-runtime code (``device_runtime``) takes ``runtime_start`` ns more to set up.

    Branches: the driver hands a host launch's branches to the device one after another (on
    the H100 of probe graph_branches, 0.64-1.22 us apart unprofiled; under CUPTI each after
    its own nodes' records). The walker queues only the roots of branch 0 as the launch
    starts; while a branch is held it reads the launch's hand-over count (one dword after the
    table's edges, the launch's ``handover`` subtracted) every ``branch_poll`` ns, and
    ``graph_prepare`` + ``graph_start`` ns after a read finds branches handed over (their own
    set-up) queues their roots (dispatch and completion walks pause for those cycles). A device launch's branches, and a graph of one branch, are all handed over
    at once. A read of the count that fails hands over every branch.

    When every node has completed the walker reports the launch's own completion (channel,
    seq, and the launch's own release if it has one), which releases whatever the channel
    posted behind the graph. Graph launches queue (``graph_queue``) and run one at a time. A
    launch of 0 nodes completes at once. One of more
    than ``graph_nodes_max`` nodes, a DMA error on its table, or a last node whose successors
    run past ``graph_edges_max`` faults the channel (``ErrorCause.GRAPH``) and completes the
    launch.

    Timing: a launch's set-up on the device (the same for a graph of one node or a thousand)
    has two parts, configuration registers: ``graph_prepare`` ns from the cycle the launch
    reaches the head of the queue (it runs while the walker still runs the launch before),
    then ``graph_start`` ns once the walker has taken it (the table load runs meanwhile):
    its first node is dispatched no earlier than that, a deadline on ``now`` (``wake_at``).
    Completion of a node to dispatch of a successor takes about six cycles; at most one node
    is dispatched every three cycles. The table loads with one DMA
    read of up to ``dma_burst`` dwords in flight at a time.

    Parameters
    ----------
    cfg : FrontEndConfig
        Sizes: ``graph_nodes_max``, ``graph_edges_max``, ``graph_inflight_max`` and
        ``graph_queue`` (each at least 1; ``graph_queue`` also the tail launches held), and
        ``dma_burst``, and the record widths.
    device : bool
        The device-launch walker: launches are fire-and-forget device launches.

    Attributes
    ----------
    launch : In(stream.Signature(graph_launch_layout(cfg)))
        Graph launches from the CP: channel, sequence number, table address, node count. Ready
        while the launch queue has room.
    dma_req : Out(stream.Signature(dma_read_request_layout(cfg, 1)))
        DMA reads of the node table, ``tag`` 1. Held until taken.
    dma_resp : In(stream.Signature(dma_read_response_layout(cfg, 1)))
        The dwords read, as :class:`~gpufe.rtl.fetcher.DmaFetcher`'s port contract says.
        Always ready.
    compute : Out(stream.Signature(launch_record_layout(cfg)))
        Kernel nodes: the launch's channel and sequence number, ``graph`` set, ``node`` the
        node's index, the node's launch descriptor. Held until taken.
    copy : Out(stream.Signature(copy_record_layout(cfg)))
        Copy nodes, likewise, with ``src`` the copy descriptor's address and ``flags``
        ``COPY_FLAG_DESCRIPTOR``. Held until taken.
    node_done : In(stream.Signature(completion_layout(cfg)))
        Completions of graph nodes (``node`` is looked at). Ready while the completion queue
        (``graph_inflight_max`` deep) has room.
    graph_done : Out(stream.Signature(completion_layout(cfg)))
        The launch's completion (channel, sequence number), once every node completed. Held
        until taken.
    fault : Out(stream.Signature(fault_layout(cfg)))
        Valid for one cycle: the launch's channel, cause ``GRAPH``. ``ready`` is not looked at.
    tail : In(stream.Signature(tail_launch_layout(cfg)))
        Tail launches made by the running graph's kernels. Ready while their queue has room.
    child_launched : In(1)
        A fire-and-forget launch made by the running graph's kernels was accepted (its run
        waits for it).
    child_done : In(stream.Signature(completion_layout(cfg)))
        A fire-and-forget launch completed. Always ready.
    graph_prepare : In(16)
        ns of a launch's set-up from its reaching the head of the launch queue.
    graph_start : In(16)
        ns from taking a launch (and its ``graph_prepare`` done) to its first node's
        dispatch.
    device_start, tail_start, runtime_start : In(16)
        ns from taking a fire-and-forget launch (``device`` walker) to its first dispatch; from
        a run's completion to its tail launch's first dispatch; added to ``graph_start`` for a
        launch of a graph that holds device-runtime code.
    cond_start : In(16)
        ns from a conditional node's iteration's start to its body's roots queued.
    cond_record : In(16)
        ns each body node adds to that (a profiler records the body's kernels one by one
        as the body is launched; 0 unprofiled).
    branch_poll : In(16)
        ns between two reads of a launch's hand-over count while one of its branches is
        held.
    now : In(64)
        The current time in ns (``graph_start`` is a deadline on it).
    wake_at : Out(64)
        The deadline the walker waits for (all ones when it waits for none).
    state : Out(WalkerState)
        State of the walker.
    quiescent : Out(1)
        Waiting only for node completions, DMA data, a launch or ``wake_at``.
    """

    def __init__(self, cfg, *, device=False):
        if not isinstance(cfg, FrontEndConfig):
            raise TypeError(f"GraphWalker: cfg must be a FrontEndConfig, not {type(cfg).__name__}")
        for field in ("graph_nodes_max", "graph_edges_max", "graph_inflight_max", "graph_queue"):
            if getattr(cfg, field) < 1:
                raise ValueError(f"GraphWalker: cfg.{field} must be at least 1, "
                                 f"not {getattr(cfg, field)}")
        self.cfg = cfg
        self.device = device
        super().__init__({
            "launch": In(stream.Signature(graph_launch_layout(cfg))),
            "dma_req": Out(stream.Signature(dma_read_request_layout(cfg, 1))),
            "dma_resp": In(stream.Signature(dma_read_response_layout(cfg, 1))),
            "compute": Out(stream.Signature(launch_record_layout(cfg))),
            "copy": Out(stream.Signature(copy_record_layout(cfg))),
            "node_done": In(stream.Signature(completion_layout(cfg))),
            "graph_done": Out(stream.Signature(completion_layout(cfg))),
            "fault": Out(stream.Signature(fault_layout(cfg))),
            "tail": In(stream.Signature(tail_launch_layout(cfg))),
            "child_launched": In(1),
            "child_done": In(stream.Signature(completion_layout(cfg))),
            "graph_prepare": In(16),
            "graph_start": In(16),
            "cond_start": In(16),
            "cond_record": In(16),
            "branch_poll": In(16),
            "device_start": In(16),
            "tail_start": In(16),
            "runtime_start": In(16),
            "now": In(64),
            "wake_at": Out(64),
            "state": Out(WalkerState),
            "quiescent": Out(1),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        nb, eb = cfg.node_bits, cfg.edge_bits
        entry_layout = node_entry_layout(cfg)

        m.submodules.queue = queue = SyncFIFOBuffered(
            width=graph_launch_layout(cfg).size, depth=cfg.graph_queue)
        m.submodules.tails = tails = SyncFIFOBuffered(width=tail_launch_layout(cfg).size,
                                                      depth=cfg.graph_queue)
        m.submodules.ready = ready = SyncFIFOBuffered(width=nb, depth=cfg.graph_nodes_max)
        m.submodules.done = done = SyncFIFOBuffered(width=nb, depth=cfg.graph_inflight_max)
        # dispatched nodes whose programmatic edges are still to walk
        m.submodules.launched = launched = SyncFIFOBuffered(width=nb,
                                                            depth=cfg.graph_inflight_max)
        m.submodules.nodes = nodes = Memory(shape=entry_layout, depth=cfg.graph_nodes_max,
                                            init=[])
        m.submodules.edges = edges = Memory(shape=edge_entry_layout(cfg),
                                            depth=cfg.graph_edges_max, init=[])
        root_layout = data.StructLayout({"node": nb, "branch": GraphNode.as_shape()["branch"].shape})
        m.submodules.roots = roots = Memory(shape=root_layout, depth=cfg.graph_nodes_max, init=[])
        m.submodules.pending = pending = Memory(
            shape=data.StructLayout({"count": 14, "epoch": 8, "body": 1}),
            depth=cfg.graph_nodes_max,
            init=[])
        node_wp, edge_wp, root_wp, pend_wp = (nodes.write_port(), edges.write_port(),
                                              roots.write_port(), pending.write_port())
        node_dispatch = nodes.read_port()        # dispatch: the popped node
        node_scan = nodes.read_port()            # a conditional node's body: its roots
        node_succ = nodes.read_port()            # completion: the completed node
        node_pred = nodes.read_port()            # completion: a successor's predecessor count
        edge_rp = edges.read_port()
        root_rp = roots.read_port()
        pend_rp = pending.read_port(transparent_for=(pend_wp,))

        # launch queue in, completions in
        m.d.comb += [queue.w_en.eq(self.launch.valid), queue.w_data.eq(self.launch.payload),
                     self.launch.ready.eq(queue.w_rdy),
                     done.w_en.eq(self.node_done.valid), done.w_data.eq(self.node_done.payload.node),
                     self.node_done.ready.eq(done.w_rdy)]
        head = data.View(graph_launch_layout(cfg), queue.r_data)
        # when the queue's head became the head: its set-up's first part runs from then
        head_seen = Signal()
        head_since = Signal(64)
        m.d.sync += head_seen.eq(queue.r_rdy & ~queue.r_en)
        with m.If(queue.r_rdy & ~head_seen):
            m.d.sync += head_since.eq(self.now)
        head_at = Mux(head_seen, head_since, self.now)
        m.d.comb += [tails.w_en.eq(self.tail.valid), tails.w_data.eq(self.tail.payload),
                     self.tail.ready.eq(tails.w_rdy), self.child_done.ready.eq(1)]
        tail_head = data.View(tail_launch_layout(cfg), tails.r_data)
        cur_tail = Signal()             # the running launch is a tail launch
        children = Signal(16)           # fire-and-forget launches of the run not yet complete
        m.d.sync += children.eq(children + self.child_launched - self.child_done.valid)

        state = Signal(WalkerState)
        m.d.comb += self.state.eq(state)
        cur = Signal(graph_launch_layout(cfg))       # the running launch
        loaded_table = Signal(ADDR_BITS)
        loaded_nodes = Signal(nb + 1)
        loaded = Signal()
        epoch = Signal(8)
        n_roots = Signal(nb + 1)
        n_edges = Signal(eb + 1)
        edges_over = Signal()           # a node loaded so far has successors past the memory
        done_count = Signal(nb + 1)
        n_body = Signal(nb + 1)         # the loaded table's body nodes (not the launch's own)
        # branches: the loaded table's last, the launch's queued, the count last read (handed
        # over), the first branch a root scan queues; the hand-overs read and not queued yet,
        # each with the time its set-up is done
        bb = root_layout["branch"].shape
        last_branch = Signal(bb)
        released = Signal(bb)
        seen = Signal(bb)
        scan_from = Signal(bb + 1)
        poll_at = Signal(64)
        handover_layout = data.StructLayout({"count": bb, "at": 64})
        m.submodules.handovers = handovers = SyncFIFOBuffered(
            width=handover_layout.size, depth=BRANCH_SETUPS)
        ho_head = data.View(handover_layout, handovers.r_data)
        ho_new = data.View(handover_layout, handovers.w_data)
        inflight = Signal(range(cfg.graph_inflight_max + 1))

        # -- table load: one DMA read in flight, bursts of dma_burst dwords --
        fetch_addr = Signal(ADDR_BITS)
        fetch_left = Signal(32)              # dwords still to request
        in_flight_read = Signal()
        word = Signal(range(GRAPH_NODE_DWORDS))
        node_words = Signal(GRAPH_NODE_DWORDS * 32)
        load_index = Signal(max(nb, eb) + 1)
        req = self.dma_req
        m.d.comb += [req.payload.tag.eq(1), self.dma_resp.ready.eq(1)]
        with m.If(req.valid & req.ready):
            m.d.sync += [req.valid.eq(0), in_flight_read.eq(1)]
        burst = Mux(fetch_left < cfg.dma_burst, fetch_left, cfg.dma_burst)
        loading = (state == WalkerState.LOAD_NODES) | (state == WalkerState.LOAD_EDGES)
        with m.If(loading & ~req.valid & ~in_flight_read & (fetch_left != 0)):
            m.d.sync += [req.valid.eq(1), req.payload.address.eq(fetch_addr),
                         req.payload.count.eq(burst), fetch_addr.eq(fetch_addr + (burst << 2)),
                         fetch_left.eq(fetch_left - burst)]
        rsp = self.dma_resp
        with m.If(rsp.valid & rsp.payload.last):
            m.d.sync += in_flight_read.eq(0)

        def fault(cause):
            m.d.comb += [self.fault.valid.eq(1), self.fault.payload.channel.eq(cur.channel),
                         self.fault.payload.cause.eq(cause)]
            m.d.sync += [loaded.eq(0), state.eq(WalkerState.DONE)]

        assembled = GraphNode(Signal(GRAPH_NODE_DWORDS * 32))
        m.d.comb += assembled.as_value().eq(node_words | (rsp.payload.data << 96))
        loaded_edge = GraphEdge(rsp.payload.data)
        m.d.comb += [
            node_wp.addr.eq(load_index), node_wp.data.kind.eq(assembled.kind),
            node_wp.data.pred_count.eq(assembled.pred_count),
            node_wp.data.succ_count.eq(assembled.succ_count),
            node_wp.data.succ_first.eq(assembled.succ_first),
            node_wp.data.descriptor.eq(assembled.descriptor),
            node_wp.data.programmatic.eq(assembled.programmatic),
            node_wp.data.body.eq(assembled.body),
            node_wp.data.iterations.eq(assembled.iterations),
            root_wp.addr.eq(n_roots), root_wp.data.node.eq(load_index),
            root_wp.data.branch.eq(assembled.branch),
            edge_wp.addr.eq(load_index), edge_wp.data.node.eq(loaded_edge.node),
            edge_wp.data.programmatic.eq(loaded_edge.programmatic),
        ]
        succ_end = assembled.succ_first + assembled.succ_count

        # -- dispatch: from the launch's start deadline on --
        start_at = Signal(64, name="graph_start_at")
        starting = Signal()
        cstate_c = Signal(CondState)    # the conditional node's state
        cond_at = Signal(64)            # its iteration's set-up deadline
        cond_waiting = (cstate_c == CondState.WAIT) & (self.now < cond_at)
        m.d.comb += starting.eq((state != WalkerState.IDLE) & (self.now < start_at))
        # a branch held: read the launch's hand-over count (the dword after the edges) every
        # branch_poll ns, from the launch's start on
        holding = (state == WalkerState.RUN) & (released < last_branch)
        poll_due = (holding & (seen < last_branch) & handovers.w_rdy & ~req.valid
                    & ~in_flight_read)
        with m.If(poll_due & (self.now >= poll_at)):
            m.d.sync += [req.valid.eq(1), req.payload.count.eq(1),
                         req.payload.address.eq(cur.table + (cur.nodes << 4) + (n_edges << 2))]
        handed = (rsp.payload.data[:GRAPH_HANDOVER_BITS] - cur.handover)[:GRAPH_HANDOVER_BITS]
        with m.If(rsp.valid & (state == WalkerState.RUN)):
            m.d.sync += poll_at.eq(self.now + self.branch_poll)
            # handed over since the last read: their roots are queued after a launch's set-up
            # (both parts), as each branch's own submission reaches the device; a count that
            # cannot be read hands over every branch
            got = Mux(rsp.payload.error | (handed > last_branch), last_branch, handed)
            with m.If(got > seen):
                m.d.comb += [handovers.w_en.eq(1), ho_new.count.eq(got),
                             ho_new.at.eq(self.now + self.graph_prepare + self.graph_start)]
                m.d.sync += seen.eq(got)
        poll_waiting = poll_due & (self.now < poll_at)
        branch_waiting = (state == WalkerState.RUN) & handovers.r_rdy & (self.now < ho_head.at)
        never = (1 << 64) - 1
        cond_wake = Mux(cond_waiting, cond_at, never)
        branch_wake = Mux(branch_waiting, ho_head.at, never)
        poll_wake = Mux(poll_waiting & (poll_at < branch_wake), poll_at, branch_wake)
        other_wake = Mux(poll_wake < cond_wake, poll_wake, cond_wake)
        m.d.comb += self.wake_at.eq(Mux(starting & (start_at < other_wake), start_at, other_wake))
        d_busy = Signal()            # a node entry is being read
        cr, yr = self.compute, self.copy
        with m.If(cr.valid & cr.ready):
            m.d.sync += cr.valid.eq(0)
        with m.If(yr.valid & yr.ready):
            m.d.sync += yr.valid.eq(0)
        d_node = Signal(nb)
        offer_prog = Signal()        # the kernel node offered has programmatic successors
        offered = cr.valid | yr.valid
        taken = (cr.valid & cr.ready) | (yr.valid & yr.ready)
        m.d.comb += [launched.w_en.eq(cr.valid & cr.ready & offer_prog),
                     launched.w_data.eq(cr.payload.node)]
        can_pop = ((state == WalkerState.RUN) & ready.r_rdy & ~d_busy & ~offered
                   & (inflight < cfg.graph_inflight_max) & ~starting)
        m.d.comb += [node_dispatch.addr.eq(ready.r_data), ready.r_en.eq(can_pop)]
        with m.If(can_pop):
            m.d.sync += [d_busy.eq(1), d_node.eq(ready.r_data)]
        cond_node = Signal(nb)
        cond_first = Signal(nb)
        cond_count = Signal(nb + 1)
        cond_left = Signal(24)
        # an iteration's set-up: cond_start, and cond_record for each body node (the product
        # taken once, as the node is dispatched)
        cond_gap = Signal(16 + nb + 1)
        cond_gap_now = (self.cond_start
                        + self.cond_record * node_dispatch.data.descriptor[16:][:nb + 1])
        with m.If(d_busy):
            e = node_dispatch.data
            m.d.sync += d_busy.eq(0)
            with m.If(e.kind == GraphNodeKind.CONDITIONAL):
                # not dispatched: its body runs here, iterations times
                m.d.sync += [cond_node.eq(d_node), cond_first.eq(e.descriptor[:16]),
                             cond_count.eq(e.descriptor[16:]), cond_left.eq(e.iterations),
                             cond_gap.eq(cond_gap_now), cond_at.eq(self.now + cond_gap_now),
                             cstate_c.eq(Mux((e.iterations == 0) | (e.descriptor[16:] == 0),
                                             CondState.FINISH, CondState.WAIT))]
            with m.Elif(e.kind == GraphNodeKind.COPY):
                m.d.sync += [yr.valid.eq(1), yr.payload.channel.eq(cur.channel),
                             yr.payload.seq.eq(cur.seq), yr.payload.node.eq(d_node),
                             yr.payload.dwalk.eq(int(self.device)),
                             yr.payload.tail.eq(cur_tail),
                             yr.payload.graph.eq(1), yr.payload.src.eq(e.descriptor << 8),
                             yr.payload.flags.eq(COPY_FLAG_DESCRIPTOR)]
            with m.Else():
                m.d.sync += [cr.valid.eq(1), cr.payload.channel.eq(cur.channel),
                             cr.payload.seq.eq(cur.seq), cr.payload.node.eq(d_node),
                             cr.payload.dwalk.eq(int(self.device)),
                             cr.payload.tail.eq(cur_tail),
                             cr.payload.graph.eq(1), cr.payload.descriptor.eq(e.descriptor << 8),
                             offer_prog.eq(e.programmatic)]

        # -- completion: walk the successors --
        cstate = Signal(CompletionState)
        c_first = Signal(eb + 1)
        c_left = Signal(16)
        succ = Signal(nb)
        c_prog = Signal()            # walking a dispatch's programmatic edges, not a completion
        e_prog = Signal()            # the edge being walked is programmatic
        body_epoch = Signal(8)       # the conditional node's body: its iteration's epoch
        body_done = Signal(nb + 1)   # and its nodes completed in this iteration
        # (no new walk while a conditional node's body roots are being queued: they share the
        # ready queue's write port)
        # a hand-over whose set-up is done: its branch's roots are queued first (the root scan
        # shares the ready queue's write port, so no walk starts in the cycle it begins)
        branch_go = ((state == WalkerState.RUN) & handovers.r_rdy & (self.now >= ho_head.at)
                     & (cstate == CompletionState.IDLE) & (cstate_c != CondState.SCAN))
        idle_run = ((cstate == CompletionState.IDLE) & (state == WalkerState.RUN)
                    & (cstate_c != CondState.SCAN) & ~branch_go)
        popping_done = idle_run & done.r_rdy
        taking_cond = idle_run & ~done.r_rdy & (cstate_c == CondState.FINISH)
        popping_launched = idle_run & ~done.r_rdy & (cstate_c != CondState.FINISH) & launched.r_rdy
        m.d.comb += [done.r_en.eq(popping_done), launched.r_en.eq(popping_launched),
                     node_succ.addr.eq(Mux(popping_done, done.r_data,
                                           Mux(taking_cond, cond_node, launched.r_data))),
                     edge_rp.addr.eq(c_first), pend_rp.addr.eq(edge_rp.data.node),
                     node_pred.addr.eq(edge_rp.data.node)]
        m.d.sync += inflight.eq(inflight + taken - popping_done)
        with m.Switch(cstate):
            with m.Case(CompletionState.IDLE):
                with m.If(popping_done | taking_cond):
                    m.d.sync += [cstate.eq(CompletionState.NODE), c_prog.eq(0)]
                with m.If(taking_cond):
                    m.d.sync += cstate_c.eq(CondState.IDLE)
                with m.If(popping_launched):
                    m.d.sync += [cstate.eq(CompletionState.NODE), c_prog.eq(1)]
            with m.Case(CompletionState.NODE):
                m.d.sync += [c_first.eq(node_succ.data.succ_first),
                             c_left.eq(node_succ.data.succ_count)]
                with m.If(~c_prog & node_succ.data.body):
                    m.d.sync += body_done.eq(body_done + 1)
                with m.Elif(~c_prog):
                    m.d.sync += done_count.eq(done_count + 1)
                with m.If(node_succ.data.succ_count == 0):
                    m.d.sync += cstate.eq(CompletionState.IDLE)
                with m.Else():
                    m.d.sync += cstate.eq(CompletionState.EDGE_ADDR)
            with m.Case(CompletionState.EDGE_ADDR):
                # edge_rp.addr = c_first this cycle; the successor's index arrives next cycle
                m.d.sync += cstate.eq(CompletionState.EDGE)
            with m.Case(CompletionState.EDGE):
                m.d.sync += [succ.eq(edge_rp.data.node), e_prog.eq(edge_rp.data.programmatic),
                             cstate.eq(CompletionState.UPDATE)]
            with m.Case(CompletionState.UPDATE):
                p = pend_rp.data
                # a body node's count belongs to its conditional node's iteration
                # (the body's epochs and the launches' are counted apart: an entry says which)
                is_body = node_pred.data.body
                ep = Mux(is_body, body_epoch, epoch)
                count = Mux((p.epoch == ep) & (p.body == is_body), p.count,
                            node_pred.data.pred_count)
                # a completion resolves the ordinary edges, a dispatch the programmatic ones
                with m.If(e_prog == c_prog):
                    m.d.comb += [pend_wp.addr.eq(succ), pend_wp.en.eq(1),
                                 pend_wp.data.count.eq(count - 1), pend_wp.data.epoch.eq(ep),
                                 pend_wp.data.body.eq(is_body)]
                    with m.If(count == 1):
                        m.d.comb += [ready.w_en.eq(1), ready.w_data.eq(succ)]
                m.d.sync += [c_first.eq(c_first + 1), c_left.eq(c_left - 1)]
                with m.If(c_left == 1):
                    m.d.sync += cstate.eq(CompletionState.IDLE)
                with m.Else():
                    m.d.sync += cstate.eq(CompletionState.EDGE_ADDR)
        # the pending-count read must address the successor during EDGE -> UPDATE: hold it
        with m.If(cstate == CompletionState.UPDATE):
            m.d.comb += [pend_rp.addr.eq(succ), node_pred.addr.eq(succ)]

        # -- a conditional node: its body's iterations --
        scan_index = Signal(nb + 1)
        scan_valid = Signal()
        m.d.comb += node_scan.addr.eq(cond_first + scan_index)
        with m.Switch(cstate_c):
            with m.Case(CondState.WAIT):
                with m.If((self.now >= cond_at) & (cstate == CompletionState.IDLE)
                          & (state != WalkerState.BRANCHES) & ~branch_go):
                    m.d.sync += [cstate_c.eq(CondState.SCAN), scan_index.eq(0),
                                 scan_valid.eq(0), body_epoch.eq(body_epoch + 1),
                                 body_done.eq(0)]
            with m.Case(CondState.SCAN):
                # node_scan reads scan_index; its data is valid the next cycle
                m.d.sync += [scan_valid.eq(1), scan_index.eq(scan_index + 1)]
                with m.If(scan_valid & (node_scan.data.pred_count == 0)):
                    m.d.comb += [ready.w_en.eq(1), ready.w_data.eq(cond_first + scan_index - 1)]
                with m.If(scan_index == cond_count):
                    m.d.sync += cstate_c.eq(CondState.RUN)
            with m.Case(CondState.RUN):
                with m.If((body_done == cond_count) & (cstate == CompletionState.IDLE)):
                    with m.If(cond_left > 1):
                        m.d.sync += [cond_left.eq(cond_left - 1), cstate_c.eq(CondState.WAIT),
                                     cond_at.eq(self.now + cond_gap)]
                    with m.Else():
                        m.d.sync += cstate_c.eq(CondState.FINISH)

        # -- the walker's own FSM --
        gd = self.graph_done
        with m.If(gd.valid & gd.ready):
            m.d.sync += gd.valid.eq(0)
        root_index = Signal(nb + 1)
        root_valid = Signal()
        m.d.comb += root_rp.addr.eq(root_index)

        def begin(table, n, channel, set_up, handed_over):
            """Start a launch (taken from the queue, or a tail launch): its table loaded
            unless it is the one on chip, its first dispatch ``set_up`` ns from now; its
            branches all ``handed_over`` (a device launch), or only the first."""
            every = (1 << bb) - 1 if handed_over else 0
            m.d.sync += [done_count.eq(0), epoch.eq(epoch + 1),
                         start_at.eq(self.now + set_up), cstate_c.eq(CondState.IDLE),
                         released.eq(every), seen.eq(every), scan_from.eq(0), poll_at.eq(0)]
            with m.If((n > cfg.graph_nodes_max) | (n == 0)):
                m.d.sync += state.eq(WalkerState.DONE)
                m.d.comb += [self.fault.valid.eq(n != 0),
                             self.fault.payload.channel.eq(channel),
                             self.fault.payload.cause.eq(ErrorCause.GRAPH)]
            with m.Elif(loaded & (table == loaded_table) & (n == loaded_nodes)):
                m.d.sync += [state.eq(WalkerState.ROOTS), root_index.eq(0), root_valid.eq(0)]
            with m.Else():
                m.d.sync += [state.eq(WalkerState.LOAD_NODES), loaded.eq(0),
                             fetch_addr.eq(table), fetch_left.eq(n * GRAPH_NODE_DWORDS),
                             load_index.eq(0), word.eq(0), n_roots.eq(0), n_edges.eq(0),
                             node_words.eq(0), edges_over.eq(0), n_body.eq(0),
                             last_branch.eq(0)]
        with m.Switch(state):
            with m.Case(WalkerState.IDLE):
                with m.If(queue.r_rdy & ~gd.valid):
                    m.d.comb += queue.r_en.eq(1)
                    if self.device:
                        set_up = self.device_start
                    else:
                        prepared = head_at + self.graph_prepare
                        set_up = (Mux(prepared > self.now, prepared - self.now, 0)
                                  + self.graph_start
                                  + Mux(head.device_runtime, self.runtime_start, 0))
                    m.d.sync += [cur.eq(head), cur_tail.eq(0)]
                    begin(head.table, head.nodes, head.channel, set_up, self.device)
            with m.Case(WalkerState.LOAD_NODES):
                with m.If(rsp.valid):
                    with m.If(rsp.payload.error):
                        fault(ErrorCause.GRAPH)
                    with m.Elif(word == GRAPH_NODE_DWORDS - 1):
                        # its pending count too: an entry no epoch to come matches, so that
                        # what another table left there is never taken for this one's
                        m.d.comb += [node_wp.en.eq(1), pend_wp.addr.eq(load_index),
                                     pend_wp.en.eq(1), pend_wp.data.count.eq(0),
                                     pend_wp.data.epoch.eq(Mux(assembled.body, body_epoch,
                                                               epoch - 1)),
                                     pend_wp.data.body.eq(assembled.body)]
                        with m.If((assembled.pred_count == 0) & ~assembled.body):
                            m.d.comb += root_wp.en.eq(1)
                            m.d.sync += n_roots.eq(n_roots + 1)
                            with m.If(assembled.branch > last_branch):
                                m.d.sync += last_branch.eq(assembled.branch)
                        with m.If(assembled.body):
                            m.d.sync += n_body.eq(n_body + 1)
                        with m.If(succ_end > n_edges):
                            m.d.sync += n_edges.eq(succ_end)
                        # any node's successors past the edge memory: the graph is too large
                        with m.If(succ_end > cfg.graph_edges_max):
                            m.d.sync += edges_over.eq(1)
                        m.d.sync += [word.eq(0), node_words.eq(0),
                                     load_index.eq(load_index + 1)]
                        with m.If(load_index + 1 == cur.nodes):
                            m.d.sync += load_index.eq(0)
                            with m.If((succ_end > cfg.graph_edges_max) | edges_over):
                                fault(ErrorCause.GRAPH)
                            with m.Elif((succ_end == 0) & (n_edges == 0)):
                                m.d.sync += [state.eq(WalkerState.ROOTS), root_index.eq(0),
                                             root_valid.eq(0), loaded.eq(1),
                                             loaded_table.eq(cur.table),
                                             loaded_nodes.eq(cur.nodes)]
                            with m.Else():
                                edges_total = Mux(succ_end > n_edges, succ_end, n_edges)
                                m.d.sync += [state.eq(WalkerState.LOAD_EDGES),
                                             n_edges.eq(edges_total),
                                             fetch_addr.eq(cur.table + cur.nodes * 16),
                                             fetch_left.eq(edges_total)]
                    with m.Else():
                        m.d.sync += [word.eq(word + 1),
                                     node_words.eq(node_words
                                                   | (rsp.payload.data << (word * 32)))]
            with m.Case(WalkerState.LOAD_EDGES):
                with m.If(rsp.valid):
                    with m.If(rsp.payload.error):
                        fault(ErrorCause.GRAPH)
                    with m.Else():
                        m.d.comb += edge_wp.en.eq(1)
                        m.d.sync += load_index.eq(load_index + 1)
                        with m.If(load_index + 1 == n_edges):
                            m.d.sync += [state.eq(WalkerState.ROOTS), root_index.eq(0),
                                         root_valid.eq(0), loaded.eq(1),
                                         loaded_table.eq(cur.table), loaded_nodes.eq(cur.nodes)]
            with m.Case(WalkerState.ROOTS, WalkerState.BRANCHES):
                # root_rp reads root_index; its data is valid the next cycle. The roots of
                # the branches from scan_from to released are queued
                m.d.sync += [root_valid.eq(1), root_index.eq(root_index + 1)]
                b = root_rp.data.branch
                with m.If(root_valid & (b >= scan_from) & (b <= released)):
                    m.d.comb += [ready.w_en.eq(1), ready.w_data.eq(root_rp.data.node)]
                with m.If(root_index == n_roots):
                    m.d.sync += state.eq(WalkerState.RUN)
            with m.Case(WalkerState.RUN):
                with m.If((done_count == cur.nodes - n_body) & (cstate == CompletionState.IDLE)
                          & (children == 0)):
                    with m.If(tails.r_rdy):
                        # its tail launch runs next, in its place
                        m.d.comb += tails.r_en.eq(1)
                        m.d.sync += [cur.table.eq(tail_head.table),
                                     cur.nodes.eq(tail_head.nodes), cur_tail.eq(1)]
                        begin(tail_head.table, tail_head.nodes, cur.channel, self.tail_start, True)
                    with m.Else():
                        m.d.sync += state.eq(WalkerState.DONE)
                with m.If(branch_go):
                    m.d.comb += handovers.r_en.eq(1)
                    m.d.sync += [state.eq(WalkerState.BRANCHES), scan_from.eq(released + 1),
                                 released.eq(ho_head.count), root_index.eq(0),
                                 root_valid.eq(0)]
            with m.Case(WalkerState.DONE):
                with m.If(tails.r_rdy):
                    # a faulted run's tail launches are dropped with it
                    m.d.comb += tails.r_en.eq(1)
                with m.Else():
                    m.d.sync += [gd.valid.eq(1), gd.payload.channel.eq(cur.channel),
                                 gd.payload.seq.eq(cur.seq),
                                 gd.payload.dwalk.eq(int(self.device)),
                                 gd.payload.release.eq(cur.release),
                                 gd.payload.index.eq(cur.index),
                                 gd.payload.value.eq(cur.value),
                                 state.eq(WalkerState.IDLE)]

        # quiet: waiting only for completions or DMA data (FIFO levels count entries that
        # have not reached the FIFO's output register yet); a ready node held back by the
        # in-flight cap waits for a completion too (a long PDL chain of more nodes than the
        # cap kept the loop stepping every cycle of every kernel past it)
        m.d.comb += self.quiescent.eq(
            ((state == WalkerState.IDLE) & (queue.level == 0) & ~gd.valid)
            | ((state == WalkerState.RUN)
               & ((ready.level == 0) | starting | (inflight == cfg.graph_inflight_max))
               & (done.level == 0)
               & (launched.level == 0)
               & ((cstate_c == CondState.IDLE) | cond_waiting
                  | ((cstate_c == CondState.RUN) & (body_done != cond_count)))
               & ~d_busy & ~offered & (cstate == CompletionState.IDLE)
               & ((done_count != cur.nodes - n_body) | (children != 0))
               # a branch held: waiting for the next read of the count, or its data
               # (a hand-over read is not quiet until its set-up deadline is the wake-up:
               # the FIFO's level counts it before its output register shows it)
               & ((handovers.level == 0) | branch_waiting)
               & ~(poll_due & (self.now >= poll_at))
               & ~req.valid & ~rsp.valid)
            | (loading & in_flight_read & ~req.valid & ~rsp.valid))
        with m.If(queue.r_rdy & ~head_seen):
            # a new head of the queue: the cycle it is stamped must not be jumped over
            m.d.comb += self.quiescent.eq(0)
        return m
