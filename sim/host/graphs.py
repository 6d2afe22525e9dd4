"""Stream capture and CUDA graphs, as the driver keeps and lays them out.

- Capture: work issued to a capturing stream becomes a node instead of running; its
  dependencies are the capturing stream's frontier (the nodes its latest work left), which an
  event recorded in the capture carries to another stream that waits on it (that stream joins
  the capture). The capture ends on its origin stream, once every stream that joined has been
  joined back.
- Instantiation writes the graph into device-visible memory, ahead of any launch: a
  descriptor per node (a launch descriptor, or a copy descriptor with the copy's destination
  allocated now), the node table the front end's graph walker loads (``GraphNode`` records,
  then the edges) and the graph's launch queue (``GraphLaunchQueue``).
- Updates (``cudaGraphExecKernelNodeSetParams``, ``cudaGraphExecUpdate``) change the
  parameters the executable graph holds, a conditional node's body's too; its next launch
  (or upload) writes the changed nodes' descriptors and a new node table (a launch still in
  flight reads the old ones). A graph instantiated for device launch is found by the device
  through its ``DeviceGraph`` record: the upload points it at the new table by commands in
  the stream, behind the stream's earlier work, so that device launches of a launch queued
  before the update (its tail launches, a launcher's fire-and-forget ones) keep the old.
- Device graph launch: an executable graph instantiated for device launch gets a
  ``DeviceGraph`` record (its table and node count: what its cudaGraphExec_t leads the
  device runtime to), which kernels holding device-side cudaGraphLaunch code name in their
  descriptors, with the launch's mode and how many times they call it.
- A launch pushes the table's address, the release its completion sets and ``GRAPH_LAUNCH``
  (with the node count, and whether the graph holds device-runtime code) on the stream's
  channel, and appends a launch record to the launch queue: the per-launch fields of its
  nodes (correlation id, stream, priority), which the engines read as they take them.
  CUDA orders each launch of an executable graph behind its previous launch, whatever the
  streams: it acquires the release that follows the previous one.
"""

from dataclasses import dataclass, field, replace

from gpufe.rtl.layouts import (Method, DESCRIPTOR_ALIGN, HOST_COPY_BUFFER,
                               GRAPH_LAUNCH_DEVICE_RUNTIME, DeviceGraph, DEVICE_LAUNCH_QUEUE,
                               GraphNode, GRAPH_HANDOVER_SHIFT, GRAPH_HANDOVER_BITS)
from gpufe.sim.host.encode import (launch_descriptor, copy_descriptor, encode_graph_node,
                                   encode_graph_edge, graph_launch_queue, graph_launch_record,
                                   graph_launch_link, device_graph, field_update)
from gpufe.sim.host.streams import acquire


@dataclass
class GraphNodeSpec:
    kind: str                       # "kernel" or "copy"
    deps: frozenset
    name: str = ""
    grid: tuple = (1, 1, 1)
    block: tuple = (1, 1, 1)
    block_ns: float = 0
    copy_kind: str = ""
    nbytes: int = 0
    # PDL: the dependencies that are programmatic edges (a captured PDL launch's on the kernel
    # before it in its stream), each block's trigger time (None: as it exits), its prologue
    prog: frozenset = frozenset()
    trigger_ns: float = None
    prologue_ns: float = 0
    # a conditional node ("conditional"): WHILE or IF, its body's nodes, its runs per launch
    cond_kind: str = ""
    body: list = None
    iterations: int = 0
    # device graph launch: the kernel holds device-side cudaGraphLaunch code, (graph name,
    # tail launch?, calls per run)
    dgl: tuple = None
    # the capture stream it was issued to ("": not captured); not a parameter of the node
    lane: str = field(default="", compare=False)


@dataclass
class Capture:
    origin: object                  # the stream that began it
    nodes: list = field(default_factory=list)       # GraphNodeSpec, in capture order
    frontier: dict = field(default_factory=dict)    # stream name -> set of node indices
    ended: bool = False

    def add(self, stream, spec, pdl=False):
        """A node for work issued to capturing ``stream`` (a name), after its frontier.
        ``pdl``: a PDL kernel launch, whose dependency on a kernel node that is the stream's
        whole frontier becomes a programmatic edge, as CUDA captures it."""
        spec.deps = frozenset(self.frontier[stream])
        spec.lane = stream
        if pdl and spec.kind == "kernel" and len(spec.deps) == 1:
            (d,) = spec.deps
            if self.nodes[d].kind == "kernel":
                spec.prog = spec.deps
        self.nodes.append(spec)
        self.frontier[stream] = {len(self.nodes) - 1}

    def unjoined(self):
        """A stream that joined the capture but whose work was not joined back into the
        origin stream, or None."""
        reach, todo = set(), list(self.frontier[self.origin.name])
        while todo:
            n = todo.pop()
            if n not in reach:
                reach.add(n)
                todo.extend(self.nodes[n].deps)
        return next((name for name, front in self.frontier.items() if not front <= reach), None)


@dataclass
class GraphExec:
    graph_id: int
    table: int                      # node table address in device-visible memory
    queue: int                      # its GraphLaunchQueue
    tail: int                       # the launch record last queued (at first the empty one)
    # (syncpoint, value) released behind the latest launch: CUDA orders each launch of an
    # executable graph behind its previous launch, whatever the streams
    last_launch: tuple = None
    nodes: list = field(default_factory=list)        # GraphNodeSpec: the parameters it holds
    # each node's descriptor address, the graph's own nodes then its conditional node's body
    # (None for the conditional node)
    descriptors: list = field(default_factory=list)
    uploaded: bool = False          # launched once (its first launch uploads it)
    # nodes updated since the last launch or upload, as indices of the table
    # (:func:`table_nodes`: the graph's own nodes, then its conditional node's body)
    changed: set = field(default_factory=set)
    # instantiated for device launch: its DeviceGraph record's address (else 0)
    handle: int = 0
    # the streams in whose order the record was pointed at the current table (None: all of
    # them, written at instantiation, ahead of any work): a host launch or upload in another
    # stream points it again in its own order (CUDA's launch uploads the graph as needed),
    # so that the device launches of its runs see this version
    pointed_in: set = None
    # a kernel node's device-side launch as its descriptor holds it: node -> (tail?, count,
    # DeviceGraph address) or None
    device_launch_of: object = None
    # some kernel of the graph (or of its conditional node's body) holds device-side
    # cudaGraphLaunch code
    device_runtime: bool = False
    # its branches (:func:`plan_branches`): each table node's (0 but for a root of a later
    # branch) and the nodes of each; the hand-over count's dword (0: one branch) and the
    # count written last (modulo 2**GRAPH_HANDOVER_BITS)
    branch_of: list = None
    branch_nodes: tuple = (0,)
    handover: int = 0
    handed: int = 0


def holds_device_runtime(nodes):
    """Whether some kernel of ``nodes`` (or of a conditional node's body) holds device-side
    cudaGraphLaunch code."""
    return any(n.dgl is not None for n, _ in table_nodes(nodes)[0])


@dataclass
class Graph:
    name: str
    nodes: list
    executable: GraphExec = None


def successors(nodes):
    succs = [[] for _ in nodes]
    for i, node in enumerate(nodes):
        for d in sorted(node.deps):
            succs[d].append(i)
    return succs


def table_nodes(nodes):
    """The nodes of a graph's table: its own, then each conditional node's body (deps
    shifted to their places, marked ``body``); [(spec, body?)], and for each conditional
    node its body's (first, count)."""
    flat = [(n, False) for n in nodes]
    bodies = {}
    for i, n in enumerate(nodes):
        if n.kind == "conditional":
            first = len(flat)
            flat += [(replace(b, deps=frozenset(d + first for d in b.deps),
                              prog=frozenset(d + first for d in b.prog)), True)
                     for b in n.body]
            bodies[i] = (first, len(n.body))
    return flat, bodies


def dispatches_per_launch(nodes):
    """The kernels and copies the engines take each launch: the graph's own, and each
    conditional node's body as many times as it runs."""
    out = 0
    for n in nodes:
        if n.kind == "conditional":
            out += n.iterations * dispatches_per_launch(n.body)
        else:
            out += 1
    return out


def _write_descriptor(umd, node, graph_id, queue, kernel_id, device_launch_of):
    """A node's descriptor, written at a new address: that address (None for a conditional
    node)."""
    if node.kind == "conditional":
        return None
    mem = umd.sim.mem
    d = mem.alloc(DESCRIPTOR_ALIGN, align=DESCRIPTOR_ALIGN)
    if node.kind == "kernel":
        primary = min(node.prog) if node.prog else None
        mem.write_dwords(d, launch_descriptor(node.grid, node.block, node.block_ns,
                                              kernel_id(node.name), graph_id=graph_id,
                                              graph_launches=queue, pdl_primary=primary,
                                              trigger_ns=node.trigger_ns,
                                              prologue_ns=node.prologue_ns,
                                              device_graph_launch=device_launch_of(node)))
    else:
        mem.write_dwords(d, copy_descriptor(HOST_COPY_BUFFER, umd.device_alloc(node.nbytes),
                                            node.nbytes, node.copy_kind, graph_id=graph_id,
                                            graph_launches=queue))
    return d


#: the branches a launch hands over one by one, at most (GraphNode's ``branch``: later roots
#: are handed over with the last)
MAX_BRANCHES = 1 << GraphNode.as_shape()["branch"].shape


def plan_branches(nodes, device_launch=False):
    """How a launch of the graph of ``nodes`` is handed to the device, branch by branch: the
    branch of each table node (a root's: the capture stream it was issued to, numbered in the
    order their first roots were captured; 0 for every other node), and the number of nodes
    of each branch (a node not a root: its lane's branch, else its first dependency's). One
    branch (all 0) for a graph not captured from streams, one with a conditional node, or one
    instantiated for device launch (the device runtime takes it whole)."""
    def single():
        # every table node in branch 0 (a conditional node's body included)
        size = len(table_nodes(nodes)[0])
        return [0] * size, (size,)

    if (device_launch or any(n.kind == "conditional" for n in nodes)
            or any(not n.lane for n in nodes)):
        return single()
    lanes, of = {}, []
    for n in nodes:
        if not n.deps:
            b = lanes.setdefault(n.lane, min(len(lanes), MAX_BRANCHES - 1))
        else:
            b = lanes.get(n.lane, of[min(n.deps)])
        of.append(b)
    if len(set(of)) < 2:
        return single()
    counts = [0] * (max(of) + 1)
    for b in of:
        counts[b] += 1
    return [b if not n.deps else 0 for n, b in zip(nodes, of)], tuple(counts)


def _write_table(mem, nodes, descriptors, branch_of=None, handed=0):
    """The node table the graph walker loads (GraphNode records, then the edges; each
    conditional node's body after the graph's own nodes), and for a graph of several
    branches (``branch_of``, :func:`plan_branches`) the hand-over count after the edges,
    ``handed``: (its address, the count's or 0)."""
    flat, bodies = table_nodes(nodes)
    specs = [n for n, _ in flat]
    succs = successors(specs)
    n_edges = sum(len(x) for x in succs)
    branched = branch_of is not None and any(branch_of)
    table = mem.alloc(16 * len(specs) + 4 * n_edges + 4 * branched, align=DESCRIPTOR_ALIGN)
    first = 0
    words = []
    for i, (node, body) in enumerate(flat):
        programmatic = any(i in specs[j].prog for j in succs[i])
        words += encode_graph_node(node.kind, len(node.deps), len(succs[i]), first,
                                   bodies.get(i, descriptors[i]), programmatic, body=body,
                                   iterations=node.iterations,
                                   branch=branch_of[i] if branched else 0)
        first += len(succs[i])
    nodes = specs
    words += [encode_graph_edge(j, i in nodes[j].prog) for i, x in enumerate(succs) for j in x]
    if branched:
        words.append(handed)
    mem.write_dwords(table, words)
    return table, (table + 16 * len(specs) + 4 * n_edges) if branched else 0


def instantiate(umd, graph, graph_id, kernel_id, device_launch_of=lambda node: None,
                handle=0):
    """Write ``graph`` into memory (see the module's docstring); its GraphExec.
    ``kernel_id(name)``: the kernel function's id in the driver's function table;
    ``device_launch_of(node)``: a kernel node's device-side launch for its descriptor;
    ``handle``: the DeviceGraph record of a graph instantiated for device launch (0: not)."""
    mem = umd.sim.mem
    queue = mem.alloc(DESCRIPTOR_ALIGN, align=DESCRIPTOR_ALIGN)
    per_launch = dispatches_per_launch(graph.nodes)
    empty = umd.take_descriptor()
    mem.write_dwords(empty, graph_launch_record(0, 0, 0))
    mem.write_dwords(queue, graph_launch_queue(empty, per_launch))
    if handle:
        # its device launches' queue, which the device runtime appends to
        first = umd.take_descriptor()
        mem.write_dwords(first, graph_launch_record(0, 0, 0))
        mem.write_dwords(queue + DEVICE_LAUNCH_QUEUE, graph_launch_queue(first, per_launch))
        mem.write_dwords(handle, device_graph(0, 0, queue + DEVICE_LAUNCH_QUEUE, first))
    descriptors = [_write_descriptor(umd, node, graph_id, queue, kernel_id, device_launch_of)
                   for node, _ in table_nodes(graph.nodes)[0]]
    branch_of, branch_nodes = plan_branches(graph.nodes, device_launch=bool(handle))
    table, handover = _write_table(mem, graph.nodes, descriptors, branch_of)
    x = GraphExec(graph_id, table, queue, tail=empty, nodes=list(graph.nodes),
                  descriptors=descriptors, handle=handle, device_launch_of=device_launch_of,
                  device_runtime=holds_device_runtime(graph.nodes), branch_of=branch_of,
                  branch_nodes=branch_nodes, handover=handover)
    _write_handle(mem, x)
    return x


def _write_handle(mem, x):
    """The DeviceGraph record of ``x`` (if instantiated for device launch): its table now."""
    if x.handle:
        for name, value in (("table", x.table), ("nodes", len(x.descriptors))):
            offset, words = field_update(DeviceGraph, name, value)
            mem.write_dwords(x.handle + offset, words)


def changed_nodes(a, b):
    """The table indices (:func:`table_nodes`) whose node differs between two graphs of the
    same topology: a conditional node's body's nodes included."""
    return {i for i, ((x, _), (y, _)) in enumerate(zip(table_nodes(a)[0], table_nodes(b)[0]))
            if x != y}


def update_refused(a, b):
    """Why cudaGraphExecUpdate refuses to give an executable graph of nodes ``a`` the
    parameters of ``b`` (same topology), beyond the topology: a copy node's kind (its memory
    types) cannot change, nor can a kernel that makes no device-side graph launch become
    one that does (a function that did not use the device runtime); None if it may."""
    for i, ((x, _), (y, _)) in enumerate(zip(table_nodes(a)[0], table_nodes(b)[0])):
        if x.kind == "copy" and x.copy_kind != y.copy_kind:
            return (f"node {i} copies {y.copy_kind}, not {x.copy_kind} (a copy node's memory "
                    f"types cannot change)")
        if x.kind == "kernel" and x.dgl is None and y.dgl is not None:
            return (f"node {i}'s kernel launches graph {y.dgl[0]!r} from the device, which the "
                    f"instantiated kernel does not (a kernel node cannot take up the device "
                    f"runtime)")
    return None


def same_topology(a, b):
    """Whether two graphs' node lists have the same kinds and edges (cudaGraphExecUpdate's
    condition, as far as the model's nodes go); the first difference, or None."""
    if len(a) != len(b):
        return f"{len(b)} nodes, not {len(a)}"
    for i, (x, y) in enumerate(zip(a, b)):
        if x.kind != y.kind:
            return f"node {i} is a {y.kind} node, not a {x.kind} node"
        if x.deps != y.deps:
            return f"node {i} depends on nodes {sorted(y.deps)}, not {sorted(x.deps)}"
        if x.prog != y.prog:
            return f"node {i}'s programmatic edges differ"
        if x.kind == "conditional":
            if (x.cond_kind, x.iterations) != (y.cond_kind, y.iterations):
                return f"node {i} is another conditional node"
            inner = same_topology(x.body, y.body)
            if inner is not None:
                return f"node {i}'s body: {inner}"
    return None


def apply_changes(umd, x, kernel_id):
    """Before a launch or upload: the nodes updated since the last one get new descriptors
    and the executable graph a new node table (a launch in flight keeps reading the old
    ones). Returns the writes, ``[(address, dword)]``, that point its DeviceGraph record at
    the new table (a graph instantiated for device launch; else none): for the caller to push
    in stream order."""
    if not x.changed:
        return []
    flat = table_nodes(x.nodes)[0]
    for i in sorted(x.changed):
        x.descriptors[i] = _write_descriptor(umd, flat[i][0], x.graph_id, x.queue, kernel_id,
                                             x.device_launch_of)
    x.table, x.handover = _write_table(umd.sim.mem, x.nodes, x.descriptors, x.branch_of,
                                       x.handed)
    x.device_runtime = holds_device_runtime(x.nodes)
    x.changed.clear()
    x.pointed_in = set()
    return handle_writes(x)


def handle_writes(x):
    """``[(address, dword)]`` that point the DeviceGraph record of ``x`` (if instantiated
    for device launch) at its current table."""
    writes = []
    if x.handle:
        for name, value in (("table", x.table), ("nodes", len(x.descriptors))):
            offset, words = field_update(DeviceGraph, name, value)
            writes += [(x.handle + offset + 4 * k, w) for k, w in enumerate(words)]
    return writes


def writes_for(umd, x, kernel_id, stream):
    """Before a host launch or upload of ``x`` on ``stream``: :func:`apply_changes`, or, for a
    device graph whose record was pointed at the current table in other streams' order only,
    the writes that point it again in this one's. Returns the writes to push."""
    writes = apply_changes(umd, x, kernel_id)
    if x.handle and x.pointed_in is not None and stream.name not in x.pointed_in:
        writes = writes or handle_writes(x)
        x.pointed_in.add(stream.name)
    return writes


def push_launch(cfg, pb, x, nodes, stream, release, writes=()):
    """The commands of one launch of ``x`` (of ``nodes`` nodes) on ``stream``'s channel,
    after what orders it behind the stream; behind its previous launch too. ``release``:
    (syncpoint, value) its completion sets, as a kernel's does (no channel release waits
    for it: the launch after it reaches the walker's queue while it runs); then the
    stream's tracking semaphore, released behind it (RELEASE_WFI). ``writes``: (address,
    dword) pairs written first, once all that is done (:func:`apply_changes`)."""
    if x.last_launch is not None and x.last_launch[0] != stream.syncpoint:
        acquire(cfg, pb, *x.last_launch)
    for address, word in writes:
        pb.sem_release(address, word, wfi=False)
    pb.incr(Method.GRAPH_TABLE_LO, x.table & 0xFFFFFFFF, x.table >> 32)
    pb.incr(Method.GRAPH_RELEASE_INDEX, release[0] | 1 << 31, release[1] & 0xFFFFFFFF)
    if x.handover:
        # several branches: the count the hand-overs start from
        pb.incr(Method.GRAPH_LAUNCH, nodes | x.handed << GRAPH_HANDOVER_SHIFT
                | (GRAPH_LAUNCH_DEVICE_RUNTIME if x.device_runtime else 0))
    elif x.device_runtime:
        pb.incr(Method.GRAPH_LAUNCH, nodes | GRAPH_LAUNCH_DEVICE_RUNTIME)
    elif nodes < (1 << 13):
        pb.immd(Method.GRAPH_LAUNCH, nodes)
    else:
        pb.incr(Method.GRAPH_LAUNCH, nodes)
    pb.sem_release_max(stream.tracking, release[1], wfi=True)


def hand_over(mem, x, word):
    """The driver hands the next branch of a launch of ``x`` to the device: the hand-over
    count, one more, in ``word`` (the count of the table that launch was pushed with) and in
    the executable's current table's, if another thread's call has written a new table
    meanwhile (a launch on the new one starts from the count as it is)."""
    x.handed = (x.handed + 1) % (1 << GRAPH_HANDOVER_BITS)
    for address in sorted({word, x.handover}):
        mem.write_dwords(address, [x.handed])


def queue_launch(umd, x, correlation_id, stream):
    """Append a launch of ``x`` to its launch queue (before the launch is kicked off)."""
    mem = umd.sim.mem
    record = umd.take_descriptor()
    mem.write_dwords(record, graph_launch_record(correlation_id, stream.id, stream.priority))
    offset, link = graph_launch_link(record)
    mem.write_dwords(x.tail + offset, link)
    x.tail = record
