"""An independent reference of CUDA's ordering rules: a happens-before model of a workload,
checked against a timeline.

This module shares no code with the host driver model (``sim.runtime``) nor with the rest
of the co-simulation: it imports only the standard library. It reads a workload as
``gpufe.sim.host.workload.parse_workload`` returns it and a timeline as a list of record dicts in the
reference-trace schema (``gpufe.sim.run.simulate(...).records``).

The rules, as CUDA states them:

- stream order: each piece of work on a stream runs after the work issued to that stream
  before it (in program order, one CPU thread);
- ``event_record`` captures everything issued to the stream before it, the stream's waits
  included, so orderings pass through events transitively;
- ``stream_wait_event`` orders all later work of the stream after the work captured by the
  event's latest record before the wait (an event never recorded: no ordering);
- host synchronisations (``stream_synchronize``, ``event_synchronize``, a successful
  ``event_query``, ``device_synchronize``) return only after the work they wait for has
  ended; work issued after them is later in CPU order, and no work starts before the API
  call that issued it;
- a graph launch runs its nodes in dependency order and as one unit of its stream (its root
  nodes after the stream's earlier work, the stream's later work after all of its nodes);
  each launch of an executable graph is ordered behind the previous launch of the same
  executable (``cudaGraphLaunch``: "only one instance of graphExec may be executing at a
  time");
- a conditional node (``graph_add_conditional``) runs its body ``iterations`` times, each run
  after the one before has ended (its first after the node's predecessors), and the node's
  successors after the last run (its body's nodes are numbered after the graph's own in the
  records' ``graph_node``; their runs are told apart by start);
- stream capture: work issued to a capturing stream (and to streams that joined the capture
  by waiting on an event recorded in it) becomes graph nodes instead of running; event
  records and waits inside the capture become the graph's edges;
- host threads (``threads``): each thread's calls are made in its program's order; calls of
  different threads reach the streams and events in the order they returned (the driver
  serialises calls that overlap: a stream's lock is held to the call's end), which the
  timeline tells (each runtime record carries its thread's name, ``tid``). A host wait
  pushes its fence (or reads its event) somewhere inside its call: it waits at least for
  what was issued by calls that returned before it began. An event read (a wait, a host
  wait, a query) that overlaps a record of that event by another thread may see either
  record: it orders nothing (a race the program left open);
- priorities never break an ordering; copies of every kind are stream work like kernels;
- device graph launch: a kernel node holding ``device_graph_launch`` code (count N > 0) calls
  it in its first N runs after a launch from the host (a fire-and-forget launch's run counts
  afresh; a tail launch's run goes on counting). A fire-and-forget launch runs the graph as
  a child: its root nodes start after the launching kernel starts, and the launching run is
  complete (its stream goes on, the next launch of its executable graph starts) only after
  the child's nodes have ended. A tail launch runs the graph after the launching run and its
  children have ended, in the stream's place (tail launches made in one run: in node order,
  each after the one before). Device-launched nodes carry the ``corr`` of the host launch
  they descend from and ``device_launched``; their runs of one node are told apart by start;
  kernels of a stream may hold the code but not call it (count 0);
- programmatic dependent launch: a kernel launched with ``pdl`` whose stream's latest work is
  a kernel (issued right before it, with no event wait between) may start before that kernel
  (its primary) ends, but not before the primary triggers: every block of it has called
  cudaTriggerProgrammaticLaunchCompletion (``trigger_ns`` after it starts) or exited, which is
  no sooner than the primary's start plus min(``trigger_ns``, ``prologue_ns`` + ``block_ns``);
  its blocks' work after cudaGridDependencySynchronize (the record's ``sync``) begins after
  the primary's blocks have all exited (its ``exit``), and it ends after the primary ends.
  Captured, that dependency is a programmatic edge of the graph, with the same rule. Work
  after a PDL kernel in its stream (and non-PDL work) is ordered after it as usual; a context
  switch between time slices changes none of this;
- a kernel's parameters: its blocks run ``block_ns`` after their dependency wait (``sync``)
  or, without one, ``prologue_ns`` + ``block_ns`` after its start, so a kernel record lasts
  at least that long (``params``). A graph launch takes the executable graph's parameters as
  they are at its call (``graph_exec_set_params`` and ``graph_exec_update`` change them for
  the launches that follow; launches already queued keep theirs; ``graph_exec_destroy`` and a
  new ``graph_instantiate`` make a new executable graph, not ordered with the old one's
  launches). A graph instantiated for device launch is seen by the device as of its latest
  upload or host launch (``graph_upload``, ``graph_launch``) in the launching stream's order
  (or its instantiation): a device launch made by a run of a host launch in stream T takes the
  parameters of the latest such upload or launch issued to T before that host launch, or of
  any one issued to another stream (not ordered with it), whichever the device read;
- ``graph_upload`` (cudaGraphUpload): "ordered behind both any previous work in hStream and
  any previous launches of graphExec", so the stream's later work is after the sinks of the
  executable graph's latest launch (``graph-upload``);
- processes (``processes``): each is a CUDA context of its own, with its own names and
  correlation ids (records carry its ``pid``); no ordering between processes but barriers
  (``global:`` names), and a time slice's end never reorders a process's work;
- barriers: every call a thread makes after a barrier starts after every call the other
  threads of the meeting made before it has returned (a name used again is a new meeting;
  ``global:`` names meet every thread of every process).

How the program maps onto the timeline: every API call makes one ``runtime`` record (one CPU
thread: sorted by start, then ``corr``, they are in program order) except ``event_query``,
which makes one per query until the event is done (the ``sync`` record of each query names
its event, which splits adjacent queries); ``mark`` and ``host_sleep`` make none. A kernel
or copy record carries the ``corr`` of the call that issued it; the records of a graph
launch all carry the launch's ``corr`` and ``graph_node`` = (graph id << 32) | node index,
the node index being the capture order.

What is checked (each one an "ordering checked"): for every piece of work, ``end`` after
``start``, ``start`` after its API call's start, and ``start`` after the ``end`` of each of
its immediate happens-before predecessors; for every host synchronisation, its runtime
record's ``end`` after the ``end`` of every piece of work it waits for (its immediate
frontier); the CPU's calls in order, each thread's; a PDL kernel's start after its
primary's start and earliest trigger, its ``sync`` after the primary's ``exit`` (or its
earliest code end), its end after the primary's; a device-launched child's start after its
launching kernel's call (``graph_launched``); every kernel's length (``params``); at every
barrier meeting, each thread's next call after the others' last. Immediate predecessors are
kept as a frontier per stream (the latest work of each stream that reaches here; older work
of the same stream is before it by stream order), so the checks are complete by
transitivity (A before B before C, with B.start <= B.end) without checking every pair.

Each ordering checked counts towards op families (:data:`FAMILIES`): the family of its rule,
those of the work it involves (a graph's node, a conditional node's body, a device-launched
run, an updated executable graph, a stream of some priority) and of the program (several
host threads, several processes), so that a run can say how much of each it exercised.
"""

from dataclasses import dataclass, field

#: op -> the CUDA runtime call it is (the record's name without its ``_vNNNN`` suffix)
API = {
    "stream_create": "cudaStreamCreateWithPriority",
    "event_create": "cudaEventCreateWithFlags",
    "launch_kernel": "cudaLaunchKernel",
    "memcpy_async": "cudaMemcpyAsync",
    "event_record": "cudaEventRecord",
    "stream_wait_event": "cudaStreamWaitEvent",
    "stream_synchronize": "cudaStreamSynchronize",
    "event_synchronize": "cudaEventSynchronize",
    "event_query": "cudaEventQuery",
    "device_synchronize": "cudaDeviceSynchronize",
    "stream_begin_capture": "cudaStreamBeginCapture",
    "stream_end_capture": "cudaStreamEndCapture",
    "graph_instantiate": "cudaGraphInstantiate",
    "graph_launch": "cudaGraphLaunch",
    "graph_exec_set_params": "cudaGraphExecKernelNodeSetParams",
    "graph_exec_update": "cudaGraphExecUpdate",
    "graph_exec_destroy": "cudaGraphExecDestroy",
    "graph_upload": "cudaGraphUpload",
    "graph_create": "cudaGraphCreate",
    "graph_add_conditional": "cudaGraphAddNode",
}

def api_of(op):
    """The runtime call an op makes: a PDL launch is cudaLaunchKernelEx's (a launch
    attribute)."""
    if op["op"] == "launch_kernel" and op.get("pdl"):
        return "cudaLaunchKernelExC"
    return API[op["op"]]


#: ops that are no API call (no runtime record)
NOT_API = ("mark", "host_sleep", "barrier")

HOST_SYNCS = ("stream_synchronize", "event_synchronize", "event_query", "device_synchronize")

#: a rule -> the op family its orderings count towards
RULE_FAMILY = {"stream": "stream", "event-wait": "event", "graph-edge": "graph",
               "graph-in-stream": "graph", "graph-exec-serial": "graph",
               "conditional-iteration": "conditional", "programmatic": "pdl",
               "device-launch": "device-launch", "tail-launch": "device-launch",
               "graph-upload": "graph-upload", "host-sync": "host-sync", "cpu-order": "cpu",
               "record": "work", "issue-order": "work", "params": "params",
               "barrier": "barrier", "mapping": "mapping"}

#: the op families orderings are counted in (a check counts in each that it involves):
#: its rule's, ``graph`` (a graph's nodes), ``conditional`` (a conditional node's body),
#: ``device-launch`` (device-launched runs), ``graph-update`` (a launch of an executable
#: graph after SetParams or Update, or a device graph seen in several versions), ``priority``
#: (work of a stream of some priority), ``threads`` (a program of several host threads),
#: ``cross-thread`` (an ordering between two threads' calls), ``processes`` (a workload of
#: processes)
FAMILIES = ("work", "cpu", "stream", "event", "host-sync", "graph", "conditional",
            "device-launch", "pdl", "params", "graph-update", "graph-upload", "barrier",
            "priority", "threads", "cross-thread", "processes", "mapping")


class InvalidProgram(ValueError):
    """The program is not valid CUDA (or its ordering is undefined): nothing to check."""


# -- the happens-before model of a program ------------------------------------------------------


@dataclass(frozen=True)
class Edge:
    """Why one piece of work (or a host wait) is after another."""
    rule: str                        # stream, event-wait, graph-edge, graph-in-stream, ...
    hops: tuple = ()                 # the events the ordering went through, oldest first
    origin: str = None               # through events: the rule it began with

    def describe(self):
        names = {"stream": "stream order", "event-wait": "event wait",
                 "graph-edge": "graph dependency", "graph-in-stream": "graph launch in stream "
                 "order", "graph-exec-serial": "launches of one executable graph in order",
                 "conditional-iteration": "a conditional node's body runs one after another",
                 "programmatic": "programmatic dependent launch (PDL)",
                 "device-launch": "a fire-and-forget device graph launch (its child starts "
                                  "after the launching kernel's call)",
                 "tail-launch": "a tail launch (after the launching graph's run)",
                 "graph-upload": "a graph upload (behind the executable graph's previous "
                                 "launch, the stream's later work behind it)"}
        text = names.get(self.rule, self.rule)
        if self.hops:
            text += " via " + " -> ".join(self.hops)
        if self.origin not in (None, "stream", self.rule):
            text += f", after {names.get(self.origin, self.origin)}"
        return text


@dataclass
class Call:
    """One API call of the program (repeats unrolled)."""
    index: int
    op: dict
    path: str                        # e.g. program[3]#2.body[1]: iteration 2 of a repeat
    records: list = field(default_factory=list)     # its runtime records (queries: several)
    thread: str = None               # its host thread (programs of several)
    # an event read that a record of the event by another thread overlaps: it may see either
    racy: bool = False
    n_records: int = None            # SetParams: its records (one a node), once known

    @property
    def kind(self):
        return self.op["op"]

    def describe(self):
        o = self.op
        args = [f"{k}={o[k]}" for k in ("stream", "event", "graph", "kernel", "kind", "bytes")
                if k in o]
        return f"{o['op']}({', '.join(args)}) at {self.path}"


@dataclass
class Work:
    """One piece of device work: a kernel or a copy, alone or as a graph node."""
    index: int
    kind: str                        # "kernel" or "memcpy"
    label: str                       # kernel name or "memcpy h2d" ...
    call: Call                       # the launch / memcpy / graph launch call
    stream: str
    seq: int                         # position of its issuing op among the stream's work
    node: int = None                 # graph node index (graph launches)
    preds: dict = field(default_factory=dict)       # Work -> Edge (immediate predecessors)
    iteration: int = None            # a conditional node's body: its run (of ``runs``)
    runs: int = 1
    record: dict = None
    device: bool = False             # a node of a device-launched run
    # a kernel's parameters (_Kernel labels): one, or those of every version of a device
    # graph the device may have read
    labels: list = None
    tags: set = field(default_factory=set)          # op families it belongs to

    def __hash__(self):
        return self.index

    def __eq__(self, other):
        return self is other

    @property
    def cls(self):
        """Its kind for violation classes: kernel or copy, alone or as a graph node."""
        return ("graph-" if self.node is not None else "") + (
            "copy" if self.kind == "memcpy" else "kernel")

    def describe(self):
        where = f"node {self.node} of " if self.node is not None else ""
        text = f"{self.label} ({where}{self.call.describe()}, stream {self.stream}"
        if self.record is not None:
            text += f", corr {self.record.get('corr')}"
        return text + ")"


class Frontier:
    """The work a stream (or an event record) is ordered after, kept as its latest work per
    issuing stream: stream -> (seq, {Work: Edge}). Older work of a stream is before its later
    work (stream order), so only the latest needs checking."""

    def __init__(self):
        self.latest = {}

    def copy(self):
        f = Frontier()
        f.latest = {k: (s, dict(w)) for k, (s, w) in self.latest.items()}
        return f

    def add(self, work, edge):
        cur = self.latest.get(work.stream)
        if cur is None or cur[0] < work.seq:
            self.latest[work.stream] = (work.seq, {work: edge})
        elif cur[0] == work.seq:
            cur[1].setdefault(work, edge)

    def merge(self, other, hop=None):
        for _, works in other.latest.values():
            for w, e in works.items():
                if hop is not None:
                    e = Edge("event-wait", e.hops + (hop,), e.origin or e.rule)
                self.add(w, e)

    def items(self):
        for _, works in self.latest.values():
            yield from works.items()

    def __len__(self):
        return sum(len(w) for _, w in self.latest.values())


@dataclass
class HostWait:
    call: Call
    waited: dict                     # Work -> Edge


@dataclass
class _Capture:
    origin: str
    # (kind, label, deps, programmatic deps); a conditional node's label is
    # ("cond", body nodes, runs)
    nodes: list = field(default_factory=list)
    frontier: dict = field(default_factory=dict)    # stream -> set of node indices
    active: bool = True


class _Kernel(str):
    """A kernel's label: its name, with its parameters (work per block, trigger, prologue,
    PDL) and its device-side cudaGraphLaunch code if it holds any (the graph it launches,
    whether as a tail launch, its calls per run; ``dgl``: it holds the code)."""
    def __new__(cls, name, block_ns=0, trigger_ns=None, prologue_ns=0, pdl=False, dgl=None):
        obj = super().__new__(cls, name)
        obj.block_ns, obj.trigger_ns = block_ns or 0, trigger_ns
        obj.prologue_ns, obj.pdl, obj.dgl = prologue_ns or 0, bool(pdl), dgl
        obj.target = dgl["graph"] if dgl else None
        obj.tail = bool(dgl) and dgl["mode"] == "tail"
        obj.count = dgl.get("count", 1) if dgl else 0
        return obj

    def replace(self, **changes):
        kw = dict(block_ns=self.block_ns, trigger_ns=self.trigger_ns,
                  prologue_ns=self.prologue_ns, pdl=self.pdl, dgl=self.dgl)
        kw.update(changes)
        return _Kernel(str(self), **kw)

    @property
    def shape(self):
        """What decides the works a run makes of it and how they are told apart."""
        return (str(self), self.target, self.tail, self.count)

    @property
    def params(self):
        return (self.block_ns, self.trigger_ns, self.prologue_ns)

    def trigger_bound(self):
        """ns after the kernel's start before which it cannot have triggered: block 0
        triggers ``trigger_ns`` after it starts or as its code ends (after its prologue and
        its ``block_ns``), whichever is first."""
        code = self.prologue_ns + self.block_ns
        return code if self.trigger_ns is None else min(self.trigger_ns, code)


def _shape(nodes):
    """A graph's nodes without their parameters: what two versions of an executable graph
    must share for its runs to be the same works."""
    out = []
    for kind, label, deps, prog in nodes:
        if kind == "conditional":
            out.append((kind, label[2], _shape(label[1]), deps, prog))
        else:
            out.append((kind, label.shape if isinstance(label, _Kernel) else str(label),
                        deps, prog))
    return tuple(out)


def _topology(nodes):
    """cudaGraphExecUpdate's condition: nodes of the same kinds and edges, a conditional
    node's kind of body (its runs) and its body's topology."""
    return tuple((kind, deps, prog) + ((label[2], _topology(label[1]))
                                       if kind == "conditional" else ())
                 for kind, label, deps, prog in nodes)


def _flat(nodes):
    """The nodes of a graph's table: its own, then its conditional node's body."""
    out = list(nodes)
    for kind, label, _, _ in nodes:
        if kind == "conditional":
            out += list(label[1])
    return out


@dataclass
class _Exec:
    graph: list                      # nodes, as _Capture.nodes
    last_sinks: list = None          # Works of its latest launch's sink nodes
    device: bool = False             # instantiated for device launch
    targets: dict = field(default_factory=dict)     # node -> the _Exec it launches
    name: str = ""
    updated: bool = False            # its parameters were set or updated
    # a device graph's versions as the device may see them: (call index, stream or None for
    # the instantiation, nodes), one per instantiation, upload and host launch
    versions: list = field(default_factory=list)


@dataclass
class _Stream:
    name: str
    frontier: Frontier = field(default_factory=Frontier)
    seq: int = 0
    priority: int = 0
    capture: _Capture = None
    # the stream's latest work when it is a kernel with nothing issued or waited for since
    # (what a PDL launch depends on programmatically), in a capture its node index
    last_kernel: object = None


@dataclass
class Program:
    calls: list
    works: list
    waits: list


def expand(program, where="program", barriers=None, _out=None):
    """The program's API calls in CPU order (repeats unrolled), as Calls without indices.
    ``barriers``: a list that gets ``(calls before it, name)`` of each barrier the program
    reaches, in order."""
    out = [] if _out is None else _out
    for i, op in enumerate(program):
        here = f"{where}[{i}]"
        if op["op"] == "repeat":
            for n in range(op["count"]):
                it = f"#{n}" if op["count"] > 1 else ""
                expand(op["body"], f"{here}{it}.body", barriers, out)
        elif op["op"] == "barrier":
            if barriers is not None:
                barriers.append((len(out), op["name"]))
        elif op["op"] not in NOT_API:
            out.append(Call(0, op, here))
    return out


def analyse(workload, calls=None):
    """The happens-before structure of a workload: its calls, its pieces of work with their
    immediate predecessors, and its host waits. Raises InvalidProgram for what CUDA refuses
    (or leaves undefined). ``calls``: the calls in the order they were issued, when that is
    not the program's (host threads: the timeline's order of their calls)."""
    if calls is None:
        calls = expand(workload["program"])
    for i, c in enumerate(calls):
        c.index = i
    streams, events, graphs, execs = {}, {}, {}, {}
    works, waits = [], []

    def bad(call, why):
        raise InvalidProgram(f"{call.describe()}: {why}")

    def stream(call):
        try:
            return streams[call.op["stream"]]
        except KeyError:
            bad(call, "unknown stream")

    def event(call):
        if call.op["event"] not in events:
            bad(call, "unknown event")
        return call.op["event"]

    def capturing():
        return sorted(s.name for s in streams.values() if s.capture is not None)

    def new_work(call, s, kind, label, node=None, device=False, labels=None, x=None):
        w = Work(len(works), kind, str(label), call, s.name, s.seq, node, device=device)
        if isinstance(label, _Kernel):
            w.labels = labels or [label]
        if node is not None:
            w.tags.add("graph")
        if device:
            w.tags.add("device-launch")
        if x is not None and (x.updated or len({lb.params for lb in w.labels or ()}) > 1):
            w.tags.add("graph-update")
        if s.priority:
            w.tags.add("priority")
        works.append(w)
        return w

    def targets_of(call, x, nodes):
        """node -> the executable graph each kernel of ``nodes`` launches from the device
        (refused as CUDA and the model refuse them)."""
        out = {}
        for i, (kind, label, _, _) in enumerate(nodes):
            if not (isinstance(label, _Kernel) and label.count):
                continue
            if x.device and not label.tail:
                bad(call, "a graph for device launch whose kernels launch graphs "
                          "fire-and-forget (not modelled)")
            t = x if label.target == x.name else execs.get(label.target)
            if t is None or not t.device:
                bad(call, f"kernel {label} launches graph {label.target} from the device, "
                          f"which is not instantiated for device launch")
            out[i] = t
        return out

    def device_versions(x, index, stream, call):
        """The versions of device graph ``x`` that a device launch made by the run of host
        launch ``index`` (in stream ``stream``) may read: the latest upload or host launch
        issued to the stream before it (or the instantiation), and any issued to another
        stream (before or after it: not ordered with it). Those issued after it are known
        once the program has been read (:func:`settle`)."""
        vs = x.versions
        i0 = max(i for i, (c, st, _) in enumerate(vs) if c <= index and st in (None, stream))
        out = [vs[i0]] + [v for v in vs[i0 + 1:] if v[1] != stream] + \
            [v for v in vs[1:i0] if v[1] not in (None, stream)]
        base = out[0][2]
        if any(_shape(v[2]) != _shape(base) for v in out[1:]):
            bad(call, f"a device launch of graph {x.name} may read versions of it that differ "
                      f"in more than parameters (kernels, device launches)")
        return base, [v[2] for v in out]

    pending = []                      # device-launched works: (work, graph, call, stream, path)

    def settle():
        """Device-launched works: their parameters as any version of their graph that the
        device may have read, uploads and launches issued later included."""
        for w, x, call, stream, path in pending:
            _, versions = device_versions(x, call.index, stream, call)
            labels = []
            for v in versions:
                node = v[path[0]]
                labels.append(node[1] if len(path) == 1 else node[1][1][path[1]][1])
            if w.kind == "kernel":
                w.labels = labels
                if len({lb.params for lb in labels}) > 1:
                    w.tags.add("graph-update")

    def run_graph(call, s, x, root_preds, device, calls_left, tail_run):
        """Works of one run of executable graph ``x`` (its roots after ``root_preds``), with
        its fire-and-forget children; its sinks (children's included) and the tail launches
        its kernels made, in node order."""
        nodes, versions = (device_versions(x, call.index, s.name, call) if device
                           else (x.graph, None))
        # each node's completion: the work that stands for it (a conditional node: its
        # body's last run's sinks, or what it followed if the body never runs)
        exits, has_succ, first = {}, set(), len(nodes)
        children, tails = [], []
        for i, (kind, label, deps, prog) in enumerate(nodes):
            if deps:
                preds = {w: Edge("programmatic" if d in prog else "graph-edge")
                         for d in sorted(deps) for w in exits[d]}
                has_succ.update(deps)
            else:
                preds = dict(root_preds)
            if kind != "conditional":
                labels = [v[i][1] for v in versions] if versions else None
                w = new_work(call, s, kind, label, node=i, device=device, labels=labels, x=x)
                if device:
                    pending.append((w, x, call, s.name, (i,)))
                w.preds = preds
                exits[i] = [w]
                if isinstance(label, _Kernel) and label.count:
                    key = (id(x), i)
                    left = calls_left.get(key, label.count) if tail_run else label.count
                    calls_left[key] = max(left - 1, 0)
                    if left:
                        t = x.targets[i]
                        if label.tail:
                            tails.append(t)
                        else:
                            children += run_chain(call, s, t, {w: Edge("device-launch")},
                                                  True, calls_left)
                continue
            _, body, runs = label
            for it in range(runs):
                # the body's nodes are numbered after the graph's own (the table's order)
                bw = [new_work(call, s, bk, bl, node=first + j, device=device, x=x,
                               labels=[v[i][1][1][j][1] for v in versions] if versions
                               else None)
                      for j, (bk, bl, _, _) in enumerate(body)]
                body_succ = set()
                for j, (_, _, bdeps, bprog) in enumerate(body):
                    bw[j].iteration, bw[j].runs = it, runs
                    bw[j].tags.add("conditional")
                    if device:
                        pending.append((bw[j], x, call, s.name, (i, j)))
                    if bdeps:
                        bw[j].preds = {bw[d]: Edge("programmatic" if d in bprog
                                                   else "graph-edge")
                                       for d in sorted(bdeps)}
                        body_succ.update(bdeps)
                    else:
                        bw[j].preds = dict(preds)
                preds = {bw[j]: Edge("conditional-iteration") for j in range(len(body))
                         if j not in body_succ}
            exits[i] = list(preds)
            first += len(body)
        sinks = [w for i in range(len(nodes)) if i not in has_succ for w in exits[i]]
        return sinks + children, tails

    def run_chain(call, s, x, root_preds, device, calls_left):
        """A run of ``x`` and then the tail launches it makes (and they make), one after
        another, each after the run before it: the last run's sinks."""
        sinks, tails = run_graph(call, s, x, root_preds, device, calls_left, False)
        while tails:
            t = tails.pop(0)
            sinks, more = run_graph(call, s, t, {w: Edge("tail-launch") for w in sinks},
                                    True, calls_left, True)
            tails += more
        return sinks

    for call in calls:
        op, k = call.op, call.kind
        if k == "stream_create":
            if op["name"] in streams:
                bad(call, "the stream exists")
            streams[op["name"]] = _Stream(op["name"], priority=op.get("priority") or 0)
        elif k == "event_create":
            if op["name"] in events:
                bad(call, "the event exists")
            events[op["name"]] = None                 # never recorded
        elif k in ("launch_kernel", "memcpy_async"):
            s = stream(call)
            kind = "kernel" if k == "launch_kernel" else "memcpy"
            label = op["kernel"] if k == "launch_kernel" else f"memcpy {op['kind']}"
            pdl = k == "launch_kernel" and op.get("pdl") and s.last_kernel is not None
            dgl = op.get("device_graph_launch") if k == "launch_kernel" else None
            if k == "launch_kernel":
                label = _Kernel(label, op.get("block_ns"), op.get("trigger_ns"),
                                op.get("prologue_ns"), op.get("pdl"), dgl)
            if s.capture is not None:
                cap = s.capture
                deps = frozenset(cap.frontier[s.name])
                prog = deps if pdl and deps == {s.last_kernel} else frozenset()
                cap.nodes.append((kind, label, deps, prog))
                cap.frontier[s.name] = {len(cap.nodes) - 1}
                s.last_kernel = len(cap.nodes) - 1 if kind == "kernel" else None
                continue
            if dgl is not None and dgl["count"]:
                bad(call, "device-side cudaGraphLaunch from a kernel launched into a stream "
                          "(CUDA launches graphs from the device only from graphs' kernels)")
            s.seq += 1
            w = new_work(call, s, kind, label)
            w.preds = dict(s.frontier.items())
            if pdl and s.last_kernel in w.preds:
                w.preds[s.last_kernel] = Edge("programmatic")
            s.frontier = Frontier()
            s.frontier.add(w, Edge("stream"))
            s.last_kernel = w if kind == "kernel" else None
        elif k == "event_record":
            s, e = stream(call), event(call)
            if s.capture is not None:
                events[e] = ("capture", s.capture, frozenset(s.capture.frontier[s.name]), call)
            else:
                events[e] = ("real", s.frontier.copy(), call)
            s.last_kernel = None
        elif k == "stream_wait_event":
            s, e = stream(call), event(call)
            state = events[e]
            s.last_kernel = None
            if state is not None and state[0] == "capture":
                cap, nodes = state[1], state[2]
                if not cap.active:
                    bad(call, f"event {e} was last recorded in a capture that has ended")
                if s.capture is None:
                    s.capture = cap                   # the stream joins the capture
                    cap.frontier[s.name] = set(nodes)
                elif s.capture is cap:
                    cap.frontier[s.name] |= nodes
                else:
                    bad(call, "the stream captures another graph (isolation)")
            elif s.capture is not None:
                bad(call, f"the stream is capturing and event {e} was not recorded in that "
                          f"capture (isolation)")
            elif state is not None and not call.racy:
                hop = f"event {e} (recorded at {state[2].path}, waited at {call.path})"
                s.frontier.merge(state[1], hop)
        elif k in HOST_SYNCS:
            if capturing():
                bad(call, f"a host synchronisation while stream {capturing()[0]} captures")
            if k == "stream_synchronize":
                waited = dict(stream(call).frontier.items())
            elif k == "device_synchronize":
                f = Frontier()
                for s in streams.values():
                    f.merge(s.frontier)
                waited = dict(f.items())
            else:
                state = events[event(call)]
                if state is not None and state[0] == "capture":
                    bad(call, f"event {op['event']} was last recorded in a capture")
                # (a record by another thread that overlaps it: either one)
                waited = {} if state is None or call.racy else dict(state[1].items())
            waits.append(HostWait(call, waited))
        elif k == "stream_begin_capture":
            s = stream(call)
            if s.capture is not None:
                bad(call, "the stream is already capturing")
            s.capture = _Capture(s.name, frontier={s.name: set()})
            s.last_kernel = None
        elif k == "stream_end_capture":
            s = stream(call)
            cap = s.capture
            if cap is None or cap.origin != s.name:
                bad(call, "the stream did not begin a capture")
            if op["graph"] in graphs:
                bad(call, "the graph exists")
            reach, todo = set(), list(cap.frontier[s.name])
            while todo:
                n = todo.pop()
                if n not in reach:
                    reach.add(n)
                    todo.extend(cap.nodes[n][2])
            for name, front in cap.frontier.items():
                if not front <= reach:
                    bad(call, f"stream {name} joined the capture and was not joined back")
            # a capture that issued no work gives an empty graph (legal; its launch is a no-op)
            cap.active = False
            for st in streams.values():
                if st.capture is cap:
                    st.capture = None
                    st.last_kernel = None
            graphs[op["graph"]] = list(cap.nodes)
        elif k == "graph_instantiate":
            if op["graph"] not in graphs:
                bad(call, "unknown graph")
            x = _Exec(list(graphs[op["graph"]]), device=bool(op.get("device_launch")),
                      name=op["graph"])
            for kind, label, _, _ in x.graph:
                if kind == "conditional" and any(isinstance(b[1], _Kernel) and b[1].count
                                                 for b in label[1]):
                    bad(call, "a conditional node's body launches graphs from the device "
                              "(not modelled)")
            x.targets = targets_of(call, x, x.graph)
            if x.device:
                x.versions = [(call.index, None, list(x.graph))]
            execs[op["graph"]] = x
        elif k == "graph_create":
            if op["graph"] in graphs:
                bad(call, "the graph exists")
            graphs[op["graph"]] = []
        elif k == "graph_add_conditional":
            g, body = graphs.get(op["graph"]), graphs.get(op["body"])
            if g is None or body is None or g is body:
                bad(call, "unknown graph or body")
            has_succ = {d for _, _, deps, _ in g for d in deps}
            sinks = frozenset(i for i in range(len(g)) if i not in has_succ)
            g.append(("conditional", ("cond", list(body), op["iterations"]), sinks,
                      frozenset()))
        elif k in ("graph_exec_set_params", "graph_exec_update", "graph_exec_destroy"):
            # parameters change for the launches that follow (those queued keep theirs), not
            # the order; destroyed, the executable graph launches no more
            x = execs.get(op["graph"])
            if x is None:
                bad(call, "the graph has no executable graph")
            if k == "graph_exec_set_params":
                nodes = op.get("nodes", "all")
                index = [i for i, n in enumerate(x.graph) if n[0] == "kernel"] \
                    if nodes == "all" else list(nodes)
                for i in index:
                    if not 0 <= i < len(x.graph) or x.graph[i][0] != "kernel":
                        bad(call, f"node {i} is no kernel node of the graph")
                call.n_records = len(index)
                if op.get("block_ns") is not None:
                    new = list(x.graph)
                    for i in index:
                        kind, label, deps, prog = new[i]
                        new[i] = (kind, label.replace(block_ns=op["block_ns"]), deps, prog)
                    x.graph = new
                x.updated = True
            elif k == "graph_exec_update":
                src = graphs.get(op["from"])
                if src is None or _topology(src) != _topology(x.graph):
                    bad(call, "the graphs' topologies differ")
                for (kind, a, _, _), (_, b, _, _) in zip(_flat(x.graph), _flat(src)):
                    if kind == "memcpy" and str(a) != str(b):
                        bad(call, "a copy node's kind cannot change")
                    if kind == "kernel" and a.dgl is None and b.dgl is not None:
                        bad(call, "a kernel node cannot take up device-side launches")
                targets = targets_of(call, x, src)
                if any(i in x.targets and x.targets[i] is not t for i, t in targets.items()):
                    bad(call, "a device launch's graph instantiated again since (not "
                              "modelled)")
                x.graph, x.targets, x.updated = list(src), targets, True
            else:
                if any(x in e.targets.values() for e in execs.values() if e is not x):
                    bad(call, "an executable graph that other graphs launch from the device")
                del execs[op["graph"]]
        elif k == "graph_upload":
            # behind the stream's earlier work and the executable graph's previous launch:
            # the stream's later work is too; a device graph's version from here on
            s = stream(call)
            x = execs.get(op["graph"])
            if x is None:
                bad(call, "the graph has no executable graph")
            if s.capture is not None:
                bad(call, "a graph uploaded into a capturing stream")
            if x.device:
                x.versions.append((call.index, s.name, list(x.graph)))
            for w in x.last_sinks or ():
                s.frontier.add(w, Edge("graph-upload"))
            s.last_kernel = None
        elif k == "graph_launch":
            s = stream(call)
            x = execs.get(op["graph"])
            if x is None:
                bad(call, "the graph was not instantiated")
            if s.capture is not None:
                bad(call, "a graph launched into a capturing stream (child graphs)")
            if x.device:
                x.versions.append((call.index, s.name, list(x.graph)))
            s.seq += 1
            roots = {p: (Edge("graph-in-stream") if e.rule == "stream" else e)
                     for p, e in s.frontier.items()}
            for p in x.last_sinks or ():
                roots.setdefault(p, Edge("graph-exec-serial"))
            first_work = len(works)
            # (its tail launches run in the stream's place)
            sinks = run_chain(call, s, x, roots, False, {})
            # device-launched runs of one node are told apart by start
            runs = {}
            for w in works[first_work:]:
                if w.device:
                    runs.setdefault((w.node, w.label), []).append(w)
            for group in runs.values():
                for it, w in enumerate(group):
                    w.iteration, w.runs = it, len(group)
            x.last_sinks = sinks
            s.frontier = Frontier()
            for w in sinks:
                s.frontier.add(w, Edge("graph-in-stream"))
            s.last_kernel = None
        else:
            bad(call, f"unknown op {k!r}")
    settle()
    return Program(calls, works, waits)


# -- the timeline against it --------------------------------------------------------------------


def _api_name(rec):
    return rec.get("name", "").split("_v")[0]


def _span(rec):
    return f"[{rec.get('start')}, {rec.get('end')}] ns"


class _Checker:
    def __init__(self):
        self.violations = []
        self.checked = 0
        self.context = set()          # the families of the program being checked
        self.families = {}            # family -> [orderings checked, violations]

    def _families(self, rule, fams):
        return sorted({RULE_FAMILY.get(rule, rule), *fams} | self.context)

    def violation(self, rule, cls, message, fams=(), **extra):
        fams = self._families(rule, fams)
        for f in fams:
            self.families.setdefault(f, [0, 0])[1] += 1
        self.violations.append({"rule": rule, "class": cls, "message": message,
                                "families": fams, **extra})

    def after(self, rule, cls, later_t, earlier_t, message, fams=(), **extra):
        """One ordering: ``earlier_t`` <= ``later_t``; it counts towards the families of its
        rule, ``fams`` and the program's."""
        self.checked += 1
        for f in self._families(rule, fams):
            self.families.setdefault(f, [0, 0])[0] += 1
        if later_t is None or earlier_t is None or later_t < earlier_t:
            early = None if later_t is None or earlier_t is None else earlier_t - later_t
            self.violation(rule, cls, message + (f" ({early} ns too early)" if early else ""),
                           fams, early_ns=early, **extra)


def _map_calls(calls, records, chk, tid=None):
    """Give every call its runtime records (host threads: those of thread ``tid``); False if
    the timeline does not match."""
    runtime = sorted((r for r in records if r.get("kind") == "runtime"
                      and (tid is None or r.get("tid") == tid)),
                     key=lambda r: (r["start"], r.get("corr", 0)))
    sync_event = {r.get("corr"): r.get("event") for r in records if r.get("kind") == "sync"}
    i, c = 0, 0
    while c < len(calls):
        call = calls[c]
        if call.kind == "graph_exec_set_params":
            # one call (and record) a kernel node: none for a graph without kernels; a run
            # of them shares the run of records as their node counts say (the analysis's,
            # or a list's length; one "all" whose count is unknown takes the rest)
            run = [call]
            while c + len(run) < len(calls) and \
                    calls[c + len(run)].kind == "graph_exec_set_params":
                run.append(calls[c + len(run)])
            recs = []
            while i < len(runtime) and _api_name(runtime[i]) == API[call.kind]:
                recs.append(runtime[i])
                i += 1
            counts = [q.n_records if q.n_records is not None else
                      len(q.op["nodes"]) if isinstance(q.op.get("nodes"), list) else None
                      for q in run]
            unknown = [j for j, n in enumerate(counts) if n is None]
            if len(unknown) == 1:
                counts[unknown[0]] = len(recs) - sum(n for n in counts if n is not None)
            if len(unknown) > 1 or sum(counts) != len(recs) or min(counts) < 0:
                chk.violation("mapping", "mapping", f"{call.describe()}: {len(run)} SetParams "
                              f"calls do not match the {len(recs)} records there")
                return False
            for q, n in zip(run, counts):
                q.records, recs = recs[:n], recs[n:]
            c += len(run)
            continue
        if call.kind != "event_query":
            want = api_of(call.op)
            if i >= len(runtime) or _api_name(runtime[i]) != want:
                got = "nothing" if i >= len(runtime) else \
                    f"{runtime[i].get('name')} (corr {runtime[i].get('corr')})"
                chk.violation("mapping", "mapping", f"{call.describe()}: expected a "
                              f"{want} runtime record, found {got}")
                return False
            call.records = [runtime[i]]
            i, c = i + 1, c + 1
            continue
        # a run of queries: the run of query records, split where the queried event changes
        run = [calls[c]]
        while c + len(run) < len(calls) and calls[c + len(run)].kind == "event_query":
            run.append(calls[c + len(run)])
        recs = []
        while i < len(runtime) and _api_name(runtime[i]) == API["event_query"]:
            recs.append(runtime[i])
            i += 1
        groups = []                   # (event, [ops]) and (event id, [records]) alike
        for q in run:
            if groups and groups[-1][0] == q.op["event"]:
                groups[-1][1].append(q)
            else:
                groups.append((q.op["event"], [q]))
        rgroups = []
        for r in recs:
            ev = sync_event.get(r.get("corr"), "?")
            if len(groups) > 1 and rgroups and rgroups[-1][0] == ev:
                rgroups[-1][1].append(r)
            elif len(groups) == 1 and rgroups:
                rgroups[-1][1].append(r)
            else:
                rgroups.append((ev, [r]))
        if len(rgroups) != len(groups) or any(len(rs) < len(qs) for (_, qs), (_, rs)
                                              in zip(groups, rgroups)):
            chk.violation("mapping", "mapping", f"{run[0].describe()}: {len(run)} event "
                          f"queries do not match the {len(recs)} cudaEventQuery records there")
            return False
        for (_, qs), (_, rs) in zip(groups, rgroups):
            # the same event queried again: it is done, so the later queries succeed at once
            cut = len(rs) - (len(qs) - 1)
            qs[0].records = rs[:cut]
            for q, r in zip(qs[1:], rs[cut:]):
                q.records = [r]
        c += len(run)
    if i != len(runtime):
        chk.violation("mapping", "mapping", f"{len(runtime) - i} runtime records after the "
                      f"program's last call (first: {runtime[i].get('name')})")
        return False
    return True


def _map_work(prog, records, chk):
    by_corr = {}
    for r in records:
        if r.get("kind") in ("kernel", "memcpy"):
            by_corr.setdefault(r.get("corr"), []).append(r)
    claimed = set()
    for w in prog.works:
        corr = w.call.records[0].get("corr")
        claimed.add(corr)
        mine = by_corr.get(corr, [])
        if w.node is not None:
            mine = [r for r in mine if (r.get("graph_node") or 0) & 0xFFFFFFFF == w.node
                    and bool(r.get("device_launched")) == w.device]
            if w.device and w.kind == "kernel":
                mine = [r for r in mine if r.get("name") == w.label]
        if w.iteration is not None and len(mine) == w.runs:
            # a conditional node's body node: one record a run, the runs in order
            mine = [sorted(mine, key=lambda r: (r.get("start") or 0))[w.iteration]]
        if len(mine) != 1 or mine[0].get("kind") != w.kind:
            found = ", ".join(f"{r.get('kind')} {_span(r)}" for r in mine) or "none"
            # (a device-launched run: the versions of its graph the device may have read)
            versions = len(w.labels or ()) if w.device else 1
            chk.violation("mapping", "missing-work",
                          f"{w.describe()}: expected one {w.kind} record with corr {corr}"
                          + (f" (of {w.runs} runs)" if w.runs > 1 else "") +
                          f", found {found} (work that never ran, or ran twice)"
                          + (f"; its graph may have been read in {versions} versions"
                             if versions > 1 else ""), w.tags, versions=versions)
            continue
        w.record = mine[0]
    for corr, rs in sorted(by_corr.items(), key=lambda x: str(x[0])):
        if corr not in claimed:
            chk.violation("mapping", "unexpected-work",
                          f"{len(rs)} {rs[0].get('kind')} record(s) with corr {corr} that no "
                          f"launch of the program made (captured work that ran?)")


def _check_programmatic(chk, cls, w, p, edge, fams):
    """A PDL kernel ``w`` against its primary ``p``: it starts after p starts and after p can
    have triggered (:meth:`_Kernel.trigger_bound`), its dependency wait returns after p's
    blocks exited (``sync`` and ``exit``; a primary without ``exit``: after p's block 0 can
    have ended its code; a record without ``sync``: its end after p's end is all that can be
    told), it ends after p ends."""
    r, q = w.record, p.record
    checks = [("start", "start", q.get("start")), ("end", "end", q.get("end"))]
    if p.labels and q.get("start") is not None:
        trig = int(min(lb.trigger_bound() for lb in p.labels))
        if trig > 0:
            checks.append(("start", "trigger", q["start"] + trig))
    if "sync" in r:
        if "exit" in q:
            checks.append(("sync", "exit", q["exit"]))
        elif p.labels and q.get("start") is not None:
            code = int(min(lb.prologue_ns + lb.block_ns for lb in p.labels))
            if code > 0:
                checks.append(("sync", "code end", q["start"] + code))
    for mine, theirs, t in checks:
        what = "its earliest trigger" if theirs == "trigger" else \
            "block 0's earliest code end" if theirs == "code end" else theirs
        chk.after(edge.rule, f"{cls}:{mine}" + (":trigger" if theirs == "trigger" else ""),
                  r.get(mine), t,
                  f"{w.describe()}'s {mine} at {r.get(mine)} ns is before {p.describe()}'s "
                  f"{what} at {t} ns; ordered by {edge.describe()}", fams,
                  after=w.describe(), before=p.describe(), edge=edge.describe())


def _check_params(chk, w):
    """A kernel lasts at least its blocks' work: ``block_ns`` after its dependency wait
    (``sync``), which is ``prologue_ns`` after its start, or without one ``prologue_ns`` +
    ``block_ns`` after its start (the least of the versions it may have run with)."""
    r = w.record
    if w.kind != "kernel" or not w.labels or r.get("start") is None:
        return
    block = int(min(lb.block_ns for lb in w.labels))
    prologue = int(min(lb.prologue_ns for lb in w.labels))
    versions = sorted({lb.block_ns for lb in w.labels})
    said = f"block_ns {versions[0]}" if len(versions) == 1 else \
        f"block_ns one of {versions}"
    cls = f"params:{w.cls}" + (":updated" if "graph-update" in w.tags else "")
    if "sync" in r:
        if prologue > 0:
            chk.after("params", cls + ":prologue", r["sync"], r["start"] + prologue,
                      f"{w.describe()}'s dependency wait returns at {r['sync']} ns, before "
                      f"its start at {r['start']} ns and its prologue of {prologue} ns",
                      w.tags, after=w.describe())
        if block > 0:
            chk.after("params", cls, r.get("end"), r["sync"] + block,
                      f"{w.describe()} ends at {r.get('end')} ns, before its dependency wait "
                      f"(at {r['sync']} ns) and its {said}", w.tags, after=w.describe())
    elif block + prologue > 0:
        chk.after("params", cls, r.get("end"), r["start"] + block + prologue,
                  f"{w.describe()} ends at {r.get('end')} ns, before its start at "
                  f"{r['start']} ns and its {said}"
                  + (f" after a prologue of {prologue} ns" if prologue else ""), w.tags,
                  after=w.describe())


def _issue_order(per_thread):
    """Every thread's calls in one order: as they returned (their last record's end, then
    correlation id): calls of two threads that overlap in time were serialised by the
    driver, whose locks they hold to their end; a host wait as it began (its fence is
    pushed, its event read, somewhere inside it: it waits for what calls that returned
    before it began issued, and perhaps more); a call without a record (SetParams on a
    graph without kernels) as the next call of its thread that has one begins (after the
    barrier that may stand between)."""
    keyed = []
    for t, calls in enumerate(per_thread):
        nxt = None
        keys = []
        for n in range(len(calls) - 1, -1, -1):
            call = calls[n]
            if call.records:
                if call.kind in HOST_SYNCS:
                    r = call.records[0]
                    key = (r["start"], r.get("corr", 0), t, n)
                else:
                    r = call.records[-1]
                    key = (r["end"], r.get("corr", 0), t, n)
                nxt = call.records[0]["start"]
            else:
                key = (float("inf") if nxt is None else nxt, -1, t, n)
            keys.append((key, call))
        keyed += keys[::-1]
    keyed.sort(key=lambda kc: kc[0])
    out = [c for _, c in keyed]
    for i, c in enumerate(out):
        c.index = i
    return out


def _mark_races(per_thread):
    """Event reads (a wait, a host wait, queries) that a record of the same event by another
    thread overlaps in time: they may see either record (``Call.racy``)."""
    recorded = {}
    for t, calls in enumerate(per_thread):
        for c in calls:
            if c.kind == "event_record" and c.records:
                recorded.setdefault(c.op["event"], []).append(
                    (t, c.records[0]["start"], c.records[-1]["end"]))
    for t, calls in enumerate(per_thread):
        for c in calls:
            if c.kind in ("stream_wait_event", "event_synchronize", "event_query") and \
                    c.records:
                start, end = c.records[0]["start"], c.records[-1]["end"]
                c.racy = any(u != t and e >= start and s <= end
                             for u, s, e in recorded.get(c.op["event"], ()))


def check(workload, records):
    """Every ordering of ``workload`` that the timeline ``records`` breaks.

    Returns ``(violations, checked)``: a list of dicts (``rule``, ``class``, ``message``,
    ``families``; ``early_ns`` where an ordering is broken by a time) and the number of
    orderings checked. Raises InvalidProgram for a program that is not valid CUDA."""
    violations, checked, _ = check_families(workload, records)
    return violations, checked


def check_families(workload, records):
    """:func:`check`, and the orderings checked and violations per op family:
    ``(violations, checked, {family: [checked, violations]})``."""
    chk = _Checker()
    procs = workload.get("processes")
    meetings = []                     # (process, thread, calls, barriers) of every thread
    for j, p in enumerate(procs or [workload]):
        pid = p["name"] if procs else None
        recs = records if not procs else [r for r in records if r.get("pid") == pid]
        chk.context = {"processes"} if procs else set()
        _check_process(p, recs, chk, pid, f"processes[{j}]." if procs else "", meetings)
    chk.context = {"processes"} if procs else set()
    _check_barriers(meetings, chk)
    return chk.violations, chk.checked, chk.families


def _check_process(p, records, chk, pid, base, meetings):
    """The orderings of one process (a workload of one, or one of ``processes``): its
    program's or its threads' calls, their work and their waits."""
    threads = p.get("threads")
    if threads:
        # host threads: each thread's calls are its program's, in order; they reach the
        # streams in the order they were issued, which the timeline tells
        chk.context.add("threads")
        per_thread = []
        for i, t in enumerate(threads):
            marks = []
            calls = expand(t["program"], f"{base}threads[{i}].program", marks)
            for c in calls:
                c.thread = t["name"]
            per_thread.append(calls)
            meetings.append((pid, t["name"], calls, marks))
        if any(c.kind == "graph_exec_set_params" for calls in per_thread for c in calls):
            # their node counts, for the records (in the threads' order: graphs made by a
            # thread that another one uses first leave them unknown)
            try:
                analyse(p, [c for calls in per_thread for c in calls])
            except InvalidProgram:
                pass
        for calls, t in zip(per_thread, threads):
            if not _map_calls(calls, records, chk, tid=t["name"]):
                return
        _mark_races(per_thread)
        prog = analyse(p, _issue_order(per_thread))
    else:
        marks = []
        prog = analyse(p, expand(p["program"], f"{base}program", marks))
        meetings.append((pid, None, prog.calls, marks))
        if not _map_calls(prog.calls, records, chk):
            return
        per_thread = [prog.calls]
    _map_work(prog, records, chk)
    # CPU order: in each thread, each call after the previous one has returned
    for calls in per_thread:
        prev = None
        for call in calls:
            for r in call.records:
                if prev is not None:
                    chk.after("cpu-order", "cpu-order", r["start"], prev["end"],
                              f"{call.describe()} starts at {r['start']} ns, before the "
                              f"previous call of its thread returns at {prev['end']} ns")
                prev = r
    for w in prog.works:
        r = w.record
        if r is None:
            continue
        chk.after("record", "record", r.get("end"), r.get("start"),
                  f"{w.describe()} ends before it starts: {_span(r)}", w.tags)
        call_start = w.call.records[0]["start"]
        chk.after("issue-order", f"issue-order:{w.cls}", r.get("start"), call_start,
                  f"{w.describe()} starts at {r.get('start')} ns, before its API call starts "
                  f"at {call_start} ns", w.tags, after=w.describe(), before=w.call.describe())
        _check_params(chk, w)
        for p, edge in w.preds.items():
            if p.record is None:
                continue
            depth = len(edge.hops)
            cls = f"{edge.rule}:{p.cls}->{w.cls}" + (":transitive" if depth > 1 else "")
            fams = w.tags | p.tags
            if w.call.thread != p.call.thread:
                fams = fams | {"cross-thread"}
            if edge.rule == "programmatic":
                _check_programmatic(chk, cls, w, p, edge, fams)
                continue
            if edge.rule == "device-launch":
                # after block 0's device-side cudaGraphLaunch returned (as it starts, if the
                # record does not say)
                t = p.record.get("graph_launched", p.record.get("start"))
                chk.after(edge.rule, cls, r.get("start"), t,
                          f"{w.describe()} starts at {r.get('start')} ns, before "
                          f"{p.describe()}, which launched its graph, made the call at "
                          f"{t} ns", fams, after=w.describe(), before=p.describe(),
                          edge=edge.describe())
                continue
            chk.after(edge.rule, cls, r.get("start"), p.record.get("end"),
                      f"{w.describe()} starts at {r.get('start')} ns, before "
                      f"{p.describe()} ends at {p.record.get('end')} ns; ordered by "
                      f"{edge.describe()}", fams, after=w.describe(), before=p.describe(),
                      edge=edge.describe(), origin=edge.origin or edge.rule,
                      later_pdl=bool(w.node is None and w.labels and w.labels[0].pdl))
    for hw in prog.waits:
        r = hw.call.records[-1]       # a query: the one that succeeded
        for p, edge in hw.waited.items():
            if p.record is None:
                continue
            via = "via-event" if edge.hops else "direct"
            cls = f"host-sync:{hw.call.kind}:{p.cls}:{via}" + (
                ":transitive" if len(edge.hops) > 1 else "")
            fams = p.tags | ({"cross-thread"} if hw.call.thread != p.call.thread else set())
            chk.after("host-sync", cls, r["end"], p.record.get("end"),
                      f"{hw.call.describe()} returns at {r['end']} ns, before "
                      f"{p.describe()} ends at {p.record.get('end')} ns; waited for by "
                      f"{edge.describe()}", fams, after=hw.call.describe(),
                      before=p.describe(), edge=edge.describe(),
                      origin=edge.origin or edge.rule)


def _check_barriers(meetings, chk):
    """Every meeting at a barrier: each thread's first call after it starts after each other
    thread's last call before it (since its previous barrier) has returned."""
    arrivals = {}                     # barrier key -> {thread: [calls before each arrival]}
    for t, (pid, _, _, marks) in enumerate(meetings):
        for pos, name in marks:
            key = ("global:", name) if name.startswith("global:") else (pid, name)
            arrivals.setdefault(key, {}).setdefault(t, []).append(pos)
    for key, by_thread in arrivals.items():
        members = [t for t, m in enumerate(meetings) if key[0] == "global:" or m[0] == key[0]]
        if len(members) < 2:
            continue
        meets = min(len(by_thread.get(t, ())) for t in members)
        for k in range(meets):
            before, after = {}, {}
            for t in members:
                calls, marks = meetings[t][2], meetings[t][3]
                pos = by_thread[t][k]
                since = max((q for q, _ in marks if q < pos), default=0)
                before[t] = next((c for c in reversed(calls[since:pos]) if c.records), None)
                after[t] = next((c for c in calls[pos:] if c.records), None)
            for u in members:
                a = after[u]
                if a is None:
                    continue
                for t in members:
                    b = before[t]
                    if t == u or b is None:
                        continue
                    fams = {"cross-thread"} | ({"processes"} if meetings[t][0] !=
                                               meetings[u][0] else set())
                    start, end = a.records[0]["start"], b.records[-1]["end"]
                    chk.after("barrier", "barrier" + (":global" if key[0] == "global:"
                                                      else ""), start, end,
                              f"{a.describe()} starts at {start} ns, before {b.describe()} "
                              f"returns at {end} ns; both met at barrier {key[1]} "
                              f"(meeting {k})", fams, after=a.describe(), before=b.describe())
