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
  timeline tells (each runtime record carries its thread's name, ``tid``);
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
  (its primary) ends, but not before it starts; its blocks' work after
  cudaGridDependencySynchronize (the record's ``sync``) begins after the primary's blocks
  have all exited (its ``exit``), and it ends after the primary ends. Captured, that
  dependency is a programmatic edge of the graph, with the same rule. Work after a PDL
  kernel in its stream is ordered after it as usual.

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
frontier); the CPU's calls in order. Immediate predecessors are kept as a frontier per
stream (the latest work of each stream that reaches here; older work of the same stream is
before it by stream order), so the checks are complete by transitivity (A before B before
C, with B.start <= B.end) without checking every pair.
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


class InvalidProgram(ValueError):
    """The program is not valid CUDA (or its ordering is undefined): nothing to check."""


# -- the happens-before model of a program ------------------------------------------------------


@dataclass(frozen=True)
class Edge:
    """Why one piece of work (or a host wait) is after another."""
    rule: str                        # stream, event-wait, graph-edge, graph-in-stream, ...
    hops: tuple = ()                 # the events the ordering went through, oldest first

    def describe(self):
        names = {"stream": "stream order", "event-wait": "event wait",
                 "graph-edge": "graph dependency", "graph-in-stream": "graph launch in stream "
                 "order", "graph-exec-serial": "launches of one executable graph in order",
                 "conditional-iteration": "a conditional node's body runs one after another",
                 "programmatic": "programmatic dependent launch (PDL)",
                 "device-launch": "a fire-and-forget device graph launch (its child starts "
                                  "after the launching kernel starts)",
                 "tail-launch": "a tail launch (after the launching graph's run)"}
        text = names.get(self.rule, self.rule)
        if self.hops:
            text += " via " + " -> ".join(self.hops)
        return text


@dataclass
class Call:
    """One API call of the program (repeats unrolled)."""
    index: int
    op: dict
    path: str                        # e.g. program[3]#2.body[1]: iteration 2 of a repeat
    records: list = field(default_factory=list)     # its runtime records (queries: several)

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
                    e = Edge("event-wait", e.hops + (hop,))
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


class _Launching(str):
    """A kernel node's label that holds device-side cudaGraphLaunch code: its name, with the
    graph it launches, whether as a tail launch, and its calls per run."""
    def __new__(cls, name, graph, tail, count):
        obj = super().__new__(cls, name)
        obj.target, obj.tail, obj.count = graph, tail, count
        return obj


@dataclass
class _Exec:
    graph: list                      # nodes, as _Capture.nodes
    last_sinks: list = None          # Works of its latest launch's sink nodes
    device: bool = False             # instantiated for device launch
    targets: dict = field(default_factory=dict)     # node -> the _Exec it launches


@dataclass
class _Stream:
    name: str
    frontier: Frontier = field(default_factory=Frontier)
    seq: int = 0
    capture: _Capture = None
    # the stream's latest work when it is a kernel with nothing issued or waited for since
    # (what a PDL launch depends on programmatically), in a capture its node index
    last_kernel: object = None


@dataclass
class Program:
    calls: list
    works: list
    waits: list


def expand(program, where="program"):
    """The program's API calls in CPU order (repeats unrolled), as Calls without indices."""
    out = []
    for i, op in enumerate(program):
        here = f"{where}[{i}]"
        if op["op"] == "repeat":
            for n in range(op["count"]):
                it = f"#{n}" if op["count"] > 1 else ""
                out += expand(op["body"], f"{here}{it}.body")
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

    def new_work(call, s, kind, label, node=None, device=False):
        w = Work(len(works), kind, str(label), call, s.name, s.seq, node, device=device)
        works.append(w)
        return w

    def run_graph(call, s, x, root_preds, device, calls_left, tail_run):
        """Works of one run of executable graph ``x`` (its roots after ``root_preds``), with
        its fire-and-forget children; its sinks (children's included) and the tail launches
        its kernels made, in node order."""
        nodes = x.graph
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
                w = new_work(call, s, kind, label, node=i, device=device)
                w.preds = preds
                exits[i] = [w]
                if isinstance(label, _Launching) and label.count:
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
                bw = [new_work(call, s, bk, bl, node=first + j, device=device)
                      for j, (bk, bl, _, _) in enumerate(body)]
                body_succ = set()
                for j, (_, _, bdeps, bprog) in enumerate(body):
                    bw[j].iteration, bw[j].runs = it, runs
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
            streams[op["name"]] = _Stream(op["name"])
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
            if dgl is not None:
                label = _Launching(label, dgl["graph"], dgl["mode"] == "tail", dgl["count"])
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
            elif state is not None:
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
                waited = {} if state is None else dict(state[1].items())
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
            x = _Exec(list(graphs[op["graph"]]), device=bool(op.get("device_launch")))
            flat = [(i, n) for i, n in enumerate(x.graph)]
            for i, (kind, label, _, _) in flat:
                if kind == "conditional" and any(isinstance(b[1], _Launching) and b[1].count
                                                 for b in label[1]):
                    bad(call, "a conditional node's body launches graphs from the device "
                              "(not modelled)")
                if not (isinstance(label, _Launching) and label.count):
                    continue
                if x.device and not label.tail:
                    bad(call, "a graph for device launch whose kernels launch graphs "
                              "fire-and-forget (not modelled)")
                t = x if label.target == op["graph"] else execs.get(label.target)
                if t is None or not t.device:
                    bad(call, f"kernel {label} launches graph {label.target} from the device, "
                              f"which is not instantiated for device launch")
                x.targets[i] = t
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
        elif k in ("graph_exec_set_params", "graph_exec_update", "graph_exec_destroy",
                   "graph_upload"):
            # parameters change, not the order: the executable graph must exist (and an
            # update come from a graph of its topology); destroyed, it launches no more
            x = execs.get(op["graph"])
            if x is None:
                bad(call, "the graph has no executable graph")
            if k == "graph_exec_update":
                src = graphs.get(op["from"])
                if src is None or [(kind, deps, prog) for kind, _, deps, prog in src] != \
                        [(kind, deps, prog) for kind, _, deps, prog in x.graph]:
                    bad(call, "the graphs' topologies differ")
            if k == "graph_exec_destroy":
                del execs[op["graph"]]
        elif k == "graph_launch":
            s = stream(call)
            x = execs.get(op["graph"])
            if x is None:
                bad(call, "the graph was not instantiated")
            if s.capture is not None:
                bad(call, "a graph launched into a capturing stream (child graphs)")
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

    def violation(self, rule, cls, message, **extra):
        self.violations.append({"rule": rule, "class": cls, "message": message, **extra})

    def after(self, rule, cls, later_t, earlier_t, message, **extra):
        """One ordering: ``earlier_t`` <= ``later_t``."""
        self.checked += 1
        if later_t is None or earlier_t is None or later_t < earlier_t:
            early = None if later_t is None or earlier_t is None else earlier_t - later_t
            self.violation(rule, cls, message + (f" ({early} ns too early)" if early else ""),
                           early_ns=early, **extra)


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
            # one call (and record) a kernel node: none for a graph without kernels
            call.records = []
            while i < len(runtime) and _api_name(runtime[i]) == API[call.kind]:
                call.records.append(runtime[i])
                i += 1
            c += 1
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
            chk.violation("mapping", "missing-work",
                          f"{w.describe()}: expected one {w.kind} record with corr {corr}, "
                          f"found {found} (work that never ran, or ran twice)")
            continue
        w.record = mine[0]
    for corr, rs in sorted(by_corr.items(), key=lambda x: str(x[0])):
        if corr not in claimed:
            chk.violation("mapping", "unexpected-work",
                          f"{len(rs)} {rs[0].get('kind')} record(s) with corr {corr} that no "
                          f"launch of the program made (captured work that ran?)")


def _check_programmatic(chk, cls, w, p, edge):
    """A PDL kernel ``w`` against its primary ``p``: it starts after p starts, its dependency
    wait returns after p's blocks exited (``sync`` and ``exit``; a record without them: its
    end after p's end is all that can be told), it ends after p ends."""
    r, q = w.record, p.record
    pairs = [("start", "start"), ("end", "end")]
    if "sync" in r and "exit" in q:
        pairs.append(("sync", "exit"))
    for mine, theirs in pairs:
        chk.after(edge.rule, f"{cls}:{mine}", r.get(mine), q.get(theirs),
                  f"{w.describe()}'s {mine} at {r.get(mine)} ns is before {p.describe()}'s "
                  f"{theirs} at {q.get(theirs)} ns; ordered by {edge.describe()}",
                  after=w.describe(), before=p.describe(), edge=edge.describe())


def _issue_order(per_thread):
    """Every thread's calls in one order: as they returned (their last record's end, then
    correlation id): calls of two threads that overlap in time were serialised by the
    driver, whose locks they hold to their end; a call without a record (SetParams on a
    graph without kernels) right behind the call before it in its thread."""
    keyed = []
    for t, calls in enumerate(per_thread):
        key = (-1, 0, t, 0)
        for n, call in enumerate(calls):
            if call.records:
                r = call.records[-1]
                key = (r["end"], r.get("corr", 0), t, n)
            else:
                key = key[:3] + (n,)
            keyed.append((key, call))
    keyed.sort(key=lambda kc: kc[0])
    out = [c for _, c in keyed]
    for i, c in enumerate(out):
        c.index = i
    return out


def check(workload, records):
    """Every ordering of ``workload`` that the timeline ``records`` breaks.

    Returns ``(violations, checked)``: a list of dicts (``rule``, ``class``, ``message``;
    ``early_ns`` where an ordering is broken by a time) and the number of orderings checked.
    Raises InvalidProgram for a program that is not valid CUDA."""
    chk = _Checker()
    if workload.get("threads"):
        # host threads: each thread's calls are its program's, in order; they reach the
        # streams in the order they were issued, which the timeline tells
        per_thread = []
        for i, t in enumerate(workload["threads"]):
            calls = expand(t["program"], f"threads[{i}].program")
            if not _map_calls(calls, records, chk, tid=t["name"]):
                return chk.violations, chk.checked
            per_thread.append(calls)
        prog = analyse(workload, _issue_order(per_thread))
    else:
        prog = analyse(workload)
        if not _map_calls(prog.calls, records, chk):
            return chk.violations, chk.checked
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
                  f"{w.describe()} ends before it starts: {_span(r)}")
        call_start = w.call.records[0]["start"]
        chk.after("issue-order", f"issue-order:{w.cls}", r.get("start"), call_start,
                  f"{w.describe()} starts at {r.get('start')} ns, before its API call starts "
                  f"at {call_start} ns", after=w.describe(), before=w.call.describe())
        for p, edge in w.preds.items():
            if p.record is None:
                continue
            depth = len(edge.hops)
            cls = f"{edge.rule}:{p.cls}->{w.cls}" + (":transitive" if depth > 1 else "")
            if edge.rule == "programmatic":
                _check_programmatic(chk, cls, w, p, edge)
                continue
            if edge.rule == "device-launch":
                chk.after(edge.rule, cls, r.get("start"), p.record.get("start"),
                          f"{w.describe()} starts at {r.get('start')} ns, before "
                          f"{p.describe()}, which launched its graph, starts at "
                          f"{p.record.get('start')} ns", after=w.describe(),
                          before=p.describe(), edge=edge.describe())
                continue
            chk.after(edge.rule, cls, r.get("start"), p.record.get("end"),
                      f"{w.describe()} starts at {r.get('start')} ns, before "
                      f"{p.describe()} ends at {p.record.get('end')} ns; ordered by "
                      f"{edge.describe()}", after=w.describe(), before=p.describe(),
                      edge=edge.describe())
    for hw in prog.waits:
        r = hw.call.records[-1]       # a query: the one that succeeded
        for p, edge in hw.waited.items():
            if p.record is None:
                continue
            via = "via-event" if edge.hops else "direct"
            cls = f"host-sync:{hw.call.kind}:{p.cls}:{via}" + (
                ":transitive" if len(edge.hops) > 1 else "")
            chk.after(f"host-sync", cls, r["end"], p.record.get("end"),
                      f"{hw.call.describe()} returns at {r['end']} ns, before "
                      f"{p.describe()} ends at {p.record.get('end')} ns; waited for by "
                      f"{edge.describe()}", after=hw.call.describe(), before=p.describe(),
                      edge=edge.describe())
    return chk.violations, chk.checked
