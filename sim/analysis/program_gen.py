"""Seeded random CUDA-like programs for the ordering fuzzer (``bench/ordering_fuzz.py``).

``generate(seed)`` returns a workload dict that ``gpufe.sim.host.workload.parse_workload`` accepts and
that is valid CUDA. Every op of the workload format, mixed:

- streams with priorities, events with and without timing, kernels of various grids, blocks
  and block times, copies of every kind, event records and cross-stream waits (on events
  recorded or not yet recorded), host synchronisations and queries, host sleeps, marks,
  barriers, repeats;
- PDL: kernels launched with ``pdl`` (a trigger, a prologue) here and there, and chains of
  them in streams and in captured graphs (programmatic edges);
- CUDA graphs captured with fork and join across several streams (origin stream records a
  fork event, other streams wait on it and join, work and events between them, every joined
  stream joined back to the origin through an event), then instantiated and launched,
  several times and into various streams; conditional nodes (WHILE and IF, on a captured
  graph or on one made by ``graph_create``); device graph launches (a graph instantiated for
  device launch that may tail-launch itself, launched from another graph's kernel
  fire-and-forget or as a tail launch, and from the host);
- graph updates: ``graph_exec_set_params`` (every kernel node or a list of them),
  ``graph_exec_update`` from a twin (a graph captured alike, with other block times) or from
  itself, ``graph_exec_destroy`` and a new instantiation, ``graph_upload``; between launches
  and while launches are queued behind a gate kernel, device graphs included (updated, then
  uploaded or launched from the host, before their launcher's next launch);
- now and then a program that fills a channel's GPFIFO ring behind a long gate kernel so
  that kickoffs block;
- host threads (:func:`_threaded`): shared streams that every thread calls every kind of
  call on (launches, PDL launches, copies, records, waits, graph launches and uploads, host
  waits), private streams, events and graphs per thread;
- processes (:func:`_processes`): 1 to 4 CUDA contexts, each a program or threads, meeting
  at ``global:`` barriers, with long PDL chains that outlast a time slice.

Rules kept so that every program is valid: events are referenced only after their
``event_create``; events recorded inside a capture are private to it (never used outside);
no host synchronisation, query or graph launch while a capture is open (threads: captures
happen while the other threads wait at a barrier); every stream that joined a capture is
joined back before ``stream_end_capture``; captures, stream and event creation never sit
inside a ``repeat`` (their names must be unique); a graph instantiated for device launch is
never destroyed nor instantiated again (graphs launch it from the device); an update comes
from a graph of the same topology. Threads: a thread records only its own events and uses
another's only after a barrier that follows its last record of it (no event read races a
record); graphs are a thread's own.

The same seed gives the same program.
"""

import copy
import random

KINDS = ("h2d", "d2h", "d2d")
PRIORITIES = (0, 0, 0, 0, -1, -1, -2, -3, -5)
#: a GPFIFO ring of 1,024 entries holds 1,023 kickoffs (and the FIFO some more): more than
#: that behind a gate blocks
FILL_LAUNCHES = 1100
#: block times a graph's kernels are set to by updates
UPDATE_NS = (0, 500, 2000, 3000, 20000, 50000)
#: the front end's channels, which processes share (max_connections + 2 each)
HW_CHANNELS = 160


class _Gen:
    def __init__(self, seed, connections, tag=""):
        self.r = random.Random(f"gpufe-ordering/{seed}{tag}")
        # PDL attributes, conditional nodes, device graph launches and graph updates come
        # from generators of their own
        self.r_pdl = random.Random(f"gpufe-ordering-pdl/{seed}{tag}")
        self.r_cond = random.Random(f"gpufe-ordering-cond/{seed}{tag}")
        self.n_cond = 0
        self.r_dl = random.Random(f"gpufe-ordering-devlaunch/{seed}{tag}")
        self.r_upd = random.Random(f"gpufe-ordering-update/{seed}{tag}")
        self.mc = self.r.choice(list(connections)) if connections else self.r.randint(1, 32)
        self.streams = []
        self.events = []             # normal events (never recorded inside a capture)
        self.graphs = []             # instantiated graphs
        self.n_graphs = 0
        self.n_kernels = 0
        self.n_capture_events = 0
        self.kernel_nodes = {}       # graph -> indices of its own kernel nodes
        self.twins = {}              # graph -> graphs of its topology (update sources)
        self.device = set()          # graphs instantiated for device launch
        self.prefix = ""             # of graph names (threads: graphs are per thread)

    # -- single ops -------------------------------------------------------------------------------

    def kernel(self, stream, block_ns=None):
        r = self.r
        self.n_kernels += 1
        grid = r.choice([[1], [1], [2], [r.randint(1, 16)], [132], [264], [r.randint(1, 300)],
                         [4, 4], [8, 2, 2]])
        block = r.choice([[32], [32], [64], [128], [256], [512], [1024], [16, 16], [8, 8, 4]])
        if block_ns is None:
            x = r.random()
            block_ns = 0 if x < 0.3 else r.randint(1, 2000) if x < 0.65 else \
                r.randint(2000, 30000)
        op = {"op": "launch_kernel", "stream": stream, "kernel": f"k{self.n_kernels}",
              "grid": grid, "block": block, "block_ns": block_ns}
        p = self.r_pdl
        if p.random() < 0.3:
            op["pdl"] = True
            if p.random() < 0.5:
                op["trigger_ns"] = p.choice([0, 100, 1000, 5000])
            if p.random() < 0.3:
                op["prologue_ns"] = p.choice([50, 500, 3000])
        return op

    def copy(self, stream, kind=None):
        r = self.r
        size = r.choice([4, 256, 4096, 65536, 65536, 262144, r.randint(1, 1 << 20)])
        return {"op": "memcpy_async", "stream": stream, "kind": kind or r.choice(KINDS),
                "bytes": size}

    def work(self, stream):
        return self.kernel(stream) if self.r.random() < 0.7 else self.copy(stream)

    def record(self, stream=None, event=None):
        return {"op": "event_record", "event": event or self.r.choice(self.events),
                "stream": stream or self.r.choice(self.streams)}

    def wait(self, stream=None, event=None):
        return {"op": "stream_wait_event", "stream": stream or self.r.choice(self.streams),
                "event": event or self.r.choice(self.events)}

    def host_sync(self):
        r = self.r
        kind = r.choice(["stream_synchronize", "stream_synchronize", "event_synchronize",
                         "event_synchronize", "event_query", "event_query",
                         "device_synchronize"])
        if kind == "stream_synchronize":
            return {"op": kind, "stream": r.choice(self.streams)}
        if kind == "device_synchronize":
            return {"op": kind}
        return {"op": kind, "event": r.choice(self.events)}

    def graph_launch(self):
        return {"op": "graph_launch", "graph": self.r.choice(self.graphs),
                "stream": self.r.choice(self.streams)}

    def long_work(self, stream):
        """Work that is likely still running when the next few calls reach the GPU."""
        r = self.r
        if r.random() < 0.25:
            return dict(self.copy(stream), bytes=r.randint(1 << 19, 1 << 21))
        return self.kernel(stream, block_ns=r.randint(10000, 40000))

    def gate(self, stream, lo=20000, hi=120000):
        """A kernel of one block that holds its stream while the next calls are made."""
        self.n_kernels += 1
        return {"op": "launch_kernel", "stream": stream, "kernel": f"gate{self.n_kernels}",
                "grid": [1], "block": [32], "block_ns": self.r_upd.randint(lo, hi)}

    def pdl_chain(self, stream, long=False):
        """A kernel and 1 to 4 PDL kernels behind it (each its predecessor's dependent), with
        triggers and prologues; ``long``: blocks of 0.3 to 3 ms (past a time slice)."""
        p = self.r_pdl
        ops = []
        for i in range(p.randint(2, 5)):
            self.n_kernels += 1
            op = {"op": "launch_kernel", "stream": stream, "kernel": f"kp{self.n_kernels}",
                  "grid": [p.choice([1, 2, 8, 132, 264])], "block": [p.choice([32, 128, 256])],
                  "block_ns": p.randint(300_000, 3_000_000) if long else
                  p.choice([0, 200, 1000, 5000, 20000])}
            if i or p.random() < 0.3:
                op["pdl"] = True
            if p.random() < 0.5:
                op["trigger_ns"] = p.choice([0, 100, 1000, 5000]) if not long else \
                    p.choice([0, 100_000, 1_000_000])
            if p.random() < 0.4:
                op["prologue_ns"] = p.choice([50, 500, 3000])
            ops.append(op)
        return ops

    def motif(self):
        """A few ops that make an ordering the GPU could easily break: long work, then
        something on another stream that must wait for it, through events (one or two),
        a graph launch or a host synchronisation."""
        r = self.r
        if len(self.streams) < 2:
            return [self.long_work(self.streams[0]), self.work(self.streams[0])]
        a, b, c = (r.sample(self.streams, 3) if len(self.streams) > 2
                   else r.sample(self.streams, 2) + [self.streams[0]])
        e1, e2 = r.choice(self.events), r.choice(self.events)
        first = (self.graph_launch_into(a) if self.graphs and r.random() < 0.25
                 else self.long_work(a))
        ops = [first, self.record(a, e1)]
        x = r.random()
        if x < 0.45:
            ops += [self.wait(b, e1), self.work(b)]
        elif x < 0.7 and e1 != e2:
            # through a second event recorded on a stream with no work of its own since
            ops += [self.wait(b, e1), self.record(b, e2), self.wait(c, e2), self.work(c)]
        elif x < 0.85:
            # a host synchronisation on a stream whose only pending item is a wait
            ops += [self.wait(b, e1), {"op": "stream_synchronize", "stream": b}]
        elif self.graphs:
            ops += [self.wait(b, e1), self.graph_launch_into(b)]
        else:
            ops += [self.wait(b, e1), self.work(b), self.work(b)]
        return ops

    def update_ops(self, g=None, destroy=True):
        """An update of an executable graph: new work for all its kernels or some (SetParams),
        the parameters of a twin or its own captured ones (Update), or destroyed and
        instantiated again (never a device graph: graphs launch it from the device)."""
        u = self.r_upd
        g = g or u.choice(self.graphs)
        whats = ["set", "set", "set", "update"]
        if destroy and g not in self.device:
            whats.append("destroy")
        what = u.choice(whats)
        if what == "set":
            op = {"op": "graph_exec_set_params", "graph": g, "nodes": "all"}
            kernels = self.kernel_nodes.get(g, [])
            if kernels and u.random() < 0.5:
                op["nodes"] = sorted(u.sample(kernels, u.randint(1, len(kernels))))
            if u.random() < 0.85:
                op["block_ns"] = u.choice(UPDATE_NS)
            return [op]
        if what == "update":
            return [{"op": "graph_exec_update", "graph": g,
                     "from": u.choice([g] + self.twins.get(g, []) * 2)}]
        return [{"op": "graph_exec_destroy", "graph": g}, {"op": "graph_instantiate", "graph": g}]

    def graph_update(self):
        return self.update_ops()

    def queued_update(self):
        """A graph launched behind a gate kernel (still queued when the next calls are made),
        updated, perhaps uploaded, and launched again: the first launch keeps the old
        parameters, the next one takes the new."""
        u = self.r_upd
        g = u.choice(self.graphs)
        s = u.choice(self.streams)
        ops = [self.gate(s), {"op": "graph_launch", "graph": g, "stream": s}]
        if u.random() < 0.3:
            ops.append({"op": "graph_launch", "graph": g, "stream": u.choice(self.streams)})
        ops += self.update_ops(g)
        if u.random() < 0.4:
            ops.append({"op": "graph_upload", "graph": g,
                        "stream": s if u.random() < 0.7 else u.choice(self.streams)})
        ops.append({"op": "graph_launch", "graph": g,
                    "stream": s if u.random() < 0.6 else u.choice(self.streams)})
        return ops

    def graph_launch_into(self, stream):
        return {"op": "graph_launch", "graph": self.r.choice(self.graphs), "stream": stream}

    def simple(self):
        """One op that is legal anywhere outside a capture."""
        r = self.r
        choices = [("work", 40), ("record", 14), ("wait", 14), ("sync", 6), ("sleep", 2),
                   ("mark", 1), ("barrier", 1)]
        if self.graphs:
            choices += [("graph", 5), ("instantiate", 1), ("upload", 2)]
        what = r.choices([c for c, _ in choices], [w for _, w in choices])[0]
        if what == "work":
            return self.work(r.choice(self.streams))
        if what == "record":
            return self.record()
        if what == "wait":
            return self.wait()
        if what == "sync":
            return self.host_sync()
        if what == "sleep":
            return {"op": "host_sleep", "ns": r.choice([100, 1000, 5000, 20000])}
        if what == "mark":
            return {"op": "mark", "what": r.choice(["rep_begin", "rep_end", "here"])}
        if what == "barrier":
            # one thread: it flushes what is queued and meets itself
            return {"op": "barrier", "name": "a"}
        if what == "instantiate":
            # a new executable graph: its launches are not ordered with the older one's
            # (a device graph is not instantiated again: graphs launch it from the device)
            plain = [g for g in self.graphs if g not in self.device]
            if plain:
                return {"op": "graph_instantiate", "graph": r.choice(plain)}
            return self.graph_launch()
        if what == "upload":
            return {"op": "graph_upload", "graph": r.choice(self.graphs),
                    "stream": r.choice(self.streams)}
        return self.graph_launch()

    # -- compound ops -----------------------------------------------------------------------------

    def repeat(self, depth=0):
        r = self.r
        body = []
        for _ in range(r.randint(1, 5)):
            x = r.random()
            if depth == 0 and x < 0.1:
                body.append(self.repeat(depth + 1))
            elif x < 0.25:
                body += self.motif()
            else:
                body.append(self.simple())
        return {"op": "repeat", "count": r.randint(2, 5), "body": body}

    def new_graph(self):
        self.n_graphs += 1
        return f"{self.prefix}g{self.n_graphs}"

    def twin(self, ops, graph):
        """The ops that made ``graph`` (its capture, events, conditional node and its body)
        again, for a twin of its topology: the graphs and events they make renamed, each
        kernel's block time drawn anew (a copy's size too): a graph ``graph_exec_update``
        may take the parameters of."""
        u = self.r_upd
        name = f"{graph}t{len(self.twins.get(graph, []))}"
        rename = {graph: name}
        for op in ops:
            if op["op"] == "event_create":
                rename[op["name"]] = f"{name}_{op['name']}"
            elif op["op"] in ("stream_end_capture", "graph_create") and op["graph"] != graph:
                rename[op["graph"]] = f"{name}_{op['graph']}"
        out = []
        for op in ops:
            op = copy.deepcopy(op)
            for key in ("graph", "event", "name", "body"):
                if isinstance(op.get(key), str) and op[key] in rename:
                    op[key] = rename[op[key]]
            if op["op"] == "launch_kernel" and u.random() < 0.7:
                op["block_ns"] = u.choice(UPDATE_NS)
            if op["op"] == "memcpy_async" and u.random() < 0.5:
                op["bytes"] = u.choice([4, 4096, 262144])
            out.append(op)
        self.twins.setdefault(graph, []).append(name)
        return out

    def capture(self):
        """A capture with fork and join across streams, its instantiation and launches."""
        r = self.r
        graph = self.new_graph()
        origin = r.choice(self.streams)
        cap_events = []

        def cap_event():
            self.n_capture_events += 1
            name = f"{graph}_e{len(cap_events)}"
            cap_events.append(name)
            return name

        body = [{"op": "stream_begin_capture", "stream": origin}]
        members = [origin]
        outsiders = [s for s in self.streams if s != origin]
        if r.random() < 0.7:
            body.append(self.work(origin))
        # fork: other streams join through an event recorded on the origin
        helpers = r.sample(outsiders, min(len(outsiders), r.choice([0, 1, 1, 2, 2, 3, 4])))
        if helpers:
            fork = cap_event()
            body.append(self.record(origin, fork))
            for h in helpers:
                body.append(self.wait(h, fork))
                members.append(h)
        for _ in range(r.randint(1, 8)):
            x = r.random()
            if x < 0.6:
                body.append(self.work(r.choice(members)))
            elif x < 0.8 and len(members) > 1:
                # an edge between two members through an event recorded in the capture
                a, b = r.sample(members, 2)
                e = cap_event()
                body += [self.record(a, e), self.wait(b, e)]
            elif x < 0.9:
                # a stream joins mid-capture by waiting on an event recorded in it
                rest = [s for s in self.streams if s not in members]
                if rest:
                    a, b = r.choice(members), r.choice(rest)
                    e = cap_event()
                    body += [self.record(a, e), self.wait(b, e)]
                    members.append(b)
            else:
                # ordinary work on a stream outside the capture meanwhile
                rest = [s for s in self.streams if s not in members]
                if rest:
                    body.append(self.work(r.choice(rest)))
        if self.r_pdl.random() < 0.25:
            # a PDL chain: programmatic edges
            body += self.pdl_chain(self.r_pdl.choice(members))
        if not any(op["op"] in ("launch_kernel", "memcpy_async") and op["stream"] in members
                   for op in body):
            body.append(self.work(origin))
        # join every member back into the origin
        for m in members[1:]:
            if r.random() < 0.5:
                body.append(self.work(m))
            e = cap_event()
            body += [self.record(m, e), self.wait(origin, e)]
        if r.random() < 0.5:
            body.append(self.work(origin))
        body.append({"op": "stream_end_capture", "stream": origin, "graph": graph})
        creates = [{"op": "event_create", "name": e, "timing": r.random() < 0.5}
                   for e in cap_events]
        cond = self.conditional(graph, origin)
        self.kernel_nodes[graph] = _kernel_nodes(body, origin)
        made = creates + body + cond
        if self.r_upd.random() < 0.35:
            made += self.twin(creates + body + cond, graph)
        tail = [{"op": "graph_instantiate", "graph": graph}]
        self.graphs.append(graph)
        for _ in range(r.choice([0, 1, 1, 2, 3])):
            tail.append(self.graph_launch())
        return made + tail

    def conditional(self, graph, stream):
        """Sometimes: a body captured on ``stream`` (a few kernels, some with PDL) and a
        conditional node running it appended to ``graph`` (which may be made empty here by
        graph_create instead of captured: then ``graph`` is the name to make)."""
        c = self.r_cond
        if c.random() >= 0.25:
            return []
        self.n_cond += 1
        body = f"{graph}_body"
        ops = [{"op": "stream_begin_capture", "stream": stream}]
        for i in range(c.randint(1, 3)):
            op = {"op": "launch_kernel", "stream": stream, "kernel": f"kc{self.n_cond}_{i}",
                  "grid": [c.choice([1, 2, 132, 300])], "block": [c.choice([32, 256])],
                  "block_ns": c.choice([0, 500, 3000, 20000])}
            if i and c.random() < 0.3:
                op["pdl"] = True
            ops.append(op)
        ops.append({"op": "stream_end_capture", "stream": stream, "graph": body})
        kind = c.choice(["while", "while", "if"])
        ops.append({"op": "graph_add_conditional", "graph": graph, "kind": kind, "body": body,
                    "iterations": c.randint(0, 1) if kind == "if" else c.randint(0, 5)})
        return ops

    def conditional_graph(self):
        """A graph made empty (graph_create) whose only node is a conditional node (and
        sometimes a twin of it, whose body has other block times, to update it from)."""
        graph = self.new_graph()
        ops = self.conditional(graph, self.r.choice(self.streams))
        if not ops:
            self.n_graphs -= 1
            return []
        ops = [{"op": "graph_create", "graph": graph}] + ops
        self.kernel_nodes[graph] = []
        if self.r_upd.random() < 0.5:
            ops += self.twin(ops, graph)
        ops.append({"op": "graph_instantiate", "graph": graph})
        self.graphs.append(graph)
        ops.append(self.graph_launch())
        if self.r_upd.random() < 0.5:
            ops += self.queued_update_of(graph)
        return ops

    def queued_update_of(self, g):
        keep = self.graphs
        self.graphs = [g]
        try:
            return self.queued_update()
        finally:
            self.graphs = keep

    def device_launches(self):
        """A graph D instantiated for device launch (a few kernels, the last one sometimes
        tail-launching D again, up to 4 times), and a graph L whose kernels launch D
        (fire-and-forget or as a tail launch; count 0 sometimes: the code only); each
        launched from the host a few times, between them D's parameters set or updated (from
        a twin) and uploaded (in the launcher's stream mostly) or D launched from the host,
        sometimes while L's launch waits behind a gate; and a stream kernel holding the code
        unused."""
        c = self.r_dl
        d, l = self.new_graph(), self.new_graph()
        s = c.choice(self.streams)

        def kernel(name, dgl=None):
            op = {"op": "launch_kernel", "stream": s, "kernel": name,
                  "grid": [c.choice([1, 2, 132, 300])], "block": [c.choice([32, 256])],
                  "block_ns": c.choice([0, 500, 3000, 20000])}
            if dgl is not None:
                op["device_graph_launch"] = dgl
            return op

        n = c.randint(1, 3)
        cap_d = [{"op": "stream_begin_capture", "stream": s}]
        cap_d += [kernel(f"{d}_k{i}") for i in range(n - 1)]
        loop = c.random() < 0.5
        cap_d.append(kernel(f"{d}_k{n - 1}", {"graph": d, "mode": "tail",
                                              "count": c.randint(0, 4)} if loop else None))
        cap_d.append({"op": "stream_end_capture", "stream": s, "graph": d})
        ops = list(cap_d)
        self.kernel_nodes[d] = list(range(n))
        if self.r_upd.random() < 0.4:
            ops += self.twin(cap_d, d)
        ops += [{"op": "graph_instantiate", "graph": d, "device_launch": True},
                {"op": "stream_begin_capture", "stream": s}]
        m = c.randint(1, 3)
        at = c.randrange(m)
        for i in range(m):
            dgl = None
            if i == at:
                dgl = {"graph": d, "mode": c.choice(["fire_and_forget", "fire_and_forget",
                                                      "tail"]),
                       "count": c.choice([1, 1, 1, 0])}
            ops.append(kernel(f"{l}_k{i}", dgl))
        self.kernel_nodes[l] = list(range(m))
        ops += [{"op": "stream_end_capture", "stream": s, "graph": l},
                {"op": "graph_instantiate", "graph": l}]
        self.graphs += [d, l]
        self.device.add(d)
        u = self.r_upd
        home = c.choice(self.streams)            # where L is launched mostly
        for _ in range(c.randint(1, 4)):
            x = u.random()
            if x < 0.3:
                ops += self.update_ops(d, destroy=False)
            elif x < 0.45:
                ops += self.update_ops(l)
            elif x < 0.6:
                ops.append({"op": "graph_upload", "graph": d,
                            "stream": home if u.random() < 0.7 else c.choice(self.streams)})
            elif x < 0.7:
                ops.append(self.gate(home))
            if c.random() < 0.2:
                ops.append({"op": "graph_launch", "graph": d, "stream": c.choice(self.streams)})
            ops.append({"op": "graph_launch", "graph": l,
                        "stream": home if u.random() < 0.7 else c.choice(self.streams)})
        if c.random() < 0.3:
            ops.append(dict(kernel(f"{d}_host"), stream=c.choice(self.streams),
                            device_graph_launch={"graph": d, "mode": "tail", "count": 0}))
        return ops

    def fill(self):
        """A long gate kernel and more launches behind it than the GPFIFO ring holds, so that
        kickoffs block until the GPU reads on."""
        r = self.r
        i = r.randrange(len(self.streams))
        s = self.streams[i]
        ops = [self.kernel(s, block_ns=r.choice([8_000_000, 10_000_000]))]
        if r.random() < 0.5:
            ops.append(self.record(s))
        body = [{"op": "launch_kernel", "stream": s, "kernel": "k_fill", "grid": [1],
                 "block": [32], "block_ns": 0}]
        # now and then the flood alternates with a stream that shares the channel (streams
        # go round robin onto the connections) or with another stream's wait
        sharing = self.streams[i + self.mc::self.mc] + self.streams[i % self.mc:i:self.mc]
        x = r.random()
        if x < 0.2 and sharing:
            body.append(dict(body[0], stream=r.choice(sharing)))
        elif x < 0.3:
            body.append(self.wait(r.choice(self.streams)))
        ops.append({"op": "repeat", "count": FILL_LAUNCHES // len(body) + 1, "body": body})
        # (not a query: it would spin for the whole gate)
        ops.append({"op": "device_synchronize"})
        return ops

    # -- the program ------------------------------------------------------------------------------

    def program(self, steps=(8, 60), fill=True, long_pdl=False):
        r = self.r
        n_streams = r.choice([1, 2, 2, 3, 3, 4, 4, 5, 6, 8, r.randint(2, 12)])
        prog = []
        for i in range(n_streams):
            name = f"s{i}"
            self.streams.append(name)
            prog.append({"op": "stream_create", "name": name, "priority": r.choice(PRIORITIES)})
        for i in range(r.randint(1, 6)):
            name = f"e{i}"
            self.events.append(name)
            prog.append({"op": "event_create", "name": name, "timing": r.random() < 0.5})
        fill_at = r.randint(0, 10) if fill and r.random() < 0.04 else None
        late_events = len(self.events)
        for step in range(r.randint(*steps)):
            if step == fill_at:
                prog += self.fill()
                continue
            x = r.random()
            if x < 0.1:
                prog += self.capture()
            elif x < 0.18:
                prog.append(self.repeat())
            elif x < 0.3:
                prog += self.motif()
            elif x < 0.33 and self.graphs:
                prog += self.graph_update()
            elif x < 0.32:
                name = f"e{late_events}"
                late_events += 1
                self.events.append(name)
                prog.append({"op": "event_create", "name": name, "timing": r.random() < 0.5})
            else:
                u = self.r_upd.random()
                if u < 0.04 and self.graphs:
                    prog += self.queued_update()
                elif u < 0.08:
                    prog += self.pdl_chain(r.choice(self.streams), long=long_pdl)
                else:
                    prog.append(self.simple())
        if self.r_cond.random() < 0.3:
            prog += self.conditional_graph()
        if self.r_dl.random() < 0.3:
            prog += self.device_launches()
        if r.random() < 0.8:
            prog.append({"op": "device_synchronize"})
        return prog


def _kernel_nodes(body, origin):
    """The indices of the kernel nodes a capture's ops make (in capture order): work on the
    origin stream and on the streams that joined it (by waiting on an event recorded in it)."""
    members, recorded, out, n = {origin}, set(), [], 0
    for op in body:
        k = op["op"]
        if k == "event_record" and op["stream"] in members:
            recorded.add(op["event"])
        elif k == "stream_wait_event" and op["event"] in recorded:
            members.add(op["stream"])
        elif k in ("launch_kernel", "memcpy_async") and op["stream"] in members:
            if k == "launch_kernel":
                out.append(n)
            n += 1
    return out


def _threaded(g, r, phases=None, steps=(2, 12)):
    """Host threads (2 to 4, and a main thread that creates everything first): shared
    streams, which every thread makes every kind of call on (launches, PDL launches, copies,
    records and waits of its own events, graph launches and uploads, host waits), and
    streams, events and graphs of each thread's own, captured by the main thread while the
    others wait (captures with fork and join, conditional and device-launched graphs, twins
    to update from), which it launches, updates and uploads; it waits for the other threads'
    events only in the last phase, after every thread has recorded its last. Phases end at
    barriers. Returns the threads and the names of the barriers every thread meets (in
    order), after which a ``global:`` barrier may go."""
    n = r.randint(2, 4)
    shared = [f"sh{i}" for i in range(r.randint(1, 3))]
    main = [{"op": "stream_create", "name": x, "priority": r.choice(PRIORITIES)} for x in shared]
    own, graphs = {}, {}
    for t in range(n):
        own[t] = ([f"t{t}s{i}" for i in range(r.randint(1, 3))],
                  [f"t{t}e{i}" for i in range(r.randint(1, 3))])
        main += [{"op": "stream_create", "name": x, "priority": r.choice(PRIORITIES)}
                 for x in own[t][0]]
        main += [{"op": "event_create", "name": e, "timing": r.random() < 0.5}
                 for e in own[t][1]]
    # each thread's graphs, made by the main thread (alone: the others wait at "setup")
    for t in range(n):
        g.streams, g.events, g.graphs = list(own[t][0]), list(own[t][1]), []
        g.prefix = f"t{t}"
        for _ in range(r.choice([0, 1, 1, 2])):
            main += g.capture()
        if g.r_cond.random() < 0.25:
            main += g.conditional_graph()
        if g.r_dl.random() < 0.25:
            main += g.device_launches()
        graphs[t] = list(g.graphs)
    phases = phases or r.randint(2, 4)
    progs = {t: [{"op": "barrier", "name": "setup"}] for t in range(n)}
    main.append({"op": "barrier", "name": "setup"})
    met = ["setup"]
    for ph in range(phases):
        last = ph == phases - 1
        for t in range(n):
            g.streams, g.events, g.graphs = list(own[t][0]), list(own[t][1]), graphs[t]
            mine = own[t][0]
            anyst = mine + shared
            others = [e for u in range(n) if u != t for e in own[u][1]]
            for _ in range(r.randint(*steps)):
                x = r.random()
                if x < 0.2:
                    progs[t].append(g.kernel(r.choice(shared)))
                elif x < 0.3:
                    progs[t].append(g.copy(r.choice(shared), r.choice(["d2d", "d2d", "h2d"])))
                elif x < 0.45:
                    progs[t].append(g.work(r.choice(mine)))
                elif x < 0.55 and not last:
                    progs[t].append(g.record(r.choice(anyst)))
                elif x < 0.65:
                    progs[t].append(g.wait(r.choice(anyst), event=r.choice(others)
                                           if last and others else None))
                elif x < 0.72:
                    op = g.host_sync()
                    if op["op"] == "device_synchronize":
                        # (it waits for the shared streams, which other threads feed meanwhile)
                        op = {"op": "stream_synchronize", "stream": r.choice(anyst)}
                    elif op["op"] == "stream_synchronize":
                        op["stream"] = r.choice(anyst)
                    elif last and others and r.random() < 0.5:
                        op["event"] = r.choice(others)
                    progs[t].append(op)
                elif x < 0.8 and g.graphs:
                    u = r.random()
                    gr = r.choice(g.graphs)
                    if u < 0.5:
                        progs[t].append({"op": "graph_launch", "graph": gr,
                                         "stream": r.choice(anyst)})
                    elif u < 0.7:
                        progs[t].append({"op": "graph_upload", "graph": gr,
                                         "stream": r.choice(anyst)})
                    else:
                        progs[t] += g.update_ops(gr)
                elif x < 0.84 and g.graphs:
                    g.streams = anyst
                    progs[t] += g.queued_update()
                    g.streams = list(mine)
                elif x < 0.9:
                    progs[t] += g.pdl_chain(r.choice(anyst))
                else:
                    progs[t].append({"op": "repeat", "count": r.randint(2, 5),
                                     "body": [g.work(r.choice(anyst))
                                              for _ in range(r.randint(1, 3))]})
            progs[t].append({"op": "barrier", "name": f"phase{ph}"})
        main.append({"op": "barrier", "name": f"phase{ph}"})
        met.append(f"phase{ph}")
    main.append({"op": "device_synchronize"})
    threads = [{"name": "main", "program": main}]
    threads += [{"name": f"t{t}", "program": progs[t]} for t in range(n)]
    return threads, met


def _with_global_barriers(threads, met, names, r):
    """``threads`` with ``global:`` barriers ``names`` (in order), each right after a barrier
    every thread of the process meets (so that no thread waits at one while another of its
    process waits at the other)."""
    at = sorted(r.choice(met) for _ in names)
    order = {b: i for i, b in enumerate(met)}
    at.sort(key=order.get)
    for t in threads:
        prog, out, k = t["program"], [], 0
        for op in prog:
            out.append(op)
            if op["op"] == "barrier":
                while k < len(at) and at[k] == op["name"]:
                    out.append({"op": "barrier", "name": names[k]})
                    k += 1
        t["program"] = out
    return threads


def _program_with_global_barriers(prog, names, r):
    """A program of one thread with ``global:`` barriers ``names`` (in order) at places of its
    top level outside any capture."""
    open_, spots = 0, []
    for i, op in enumerate(prog):
        if op["op"] == "stream_begin_capture":
            open_ += 1
        elif op["op"] == "stream_end_capture":
            open_ -= 1
        if open_ == 0:
            spots.append(i + 1)
    at = sorted(r.choice(spots) for _ in names)
    out, k = [], 0
    for i, op in enumerate(prog):
        while k < len(at) and at[k] == i:
            out.append({"op": "barrier", "name": names[k]})
            k += 1
        out.append(op)
    out += [{"op": "barrier", "name": n} for n in names[k:]]
    return out


def _processes(seed, connections, r):
    """1 to 4 processes (CUDA contexts, each with its own channels and time slice), each a
    program (smaller than a lone one's, with long PDL chains now and then, which a time
    slice's end preempts) or host threads, all meeting at a few ``global:`` barriers."""
    n = r.choice([1, 2, 2, 3, 3, 4])
    names = [f"global:gb{k}" for k in range(r.randint(0, 3))]
    procs = []
    for i in range(n):
        g = _Gen(seed, connections, tag=f"/p{i}")
        p = {"name": f"p{i}", "max_connections": g.mc}
        if r.random() < 0.3:
            threads, met = _threaded(g, random.Random(f"gpufe-ordering-threads/{seed}/p{i}"),
                                     phases=r.randint(1, 2), steps=(2, 6))
            p["threads"] = _with_global_barriers(threads, met, names, r)
        else:
            prog = g.program(steps=(5, 25), fill=False, long_pdl=r.random() < 0.5)
            p["program"] = _program_with_global_barriers(prog, names, r)
        procs.append(p)
    assert sum(p["max_connections"] + 2 for p in procs) <= HW_CHANNELS
    return procs


def generate(seed, connections=None, shape=None):
    """A random valid program (a workload dict) from ``seed`` (an int or a string);
    ``max_connections`` is drawn from ``connections`` (default 1..32). ``shape``: "program"
    (one thread), "threads" or "processes"; drawn by default (about 60%, 20%, 20%)."""
    g = _Gen(seed, connections)
    w = {"name": f"fuzz_{seed}", "max_connections": g.mc,
         "description": f"ordering fuzzer program, seed {seed!r}"}
    t = random.Random(f"gpufe-ordering-threads/{seed}")
    if shape is None:
        x = random.Random(f"gpufe-ordering-shape/{seed}").random()
        shape = "threads" if x < 0.2 else "processes" if x < 0.4 else "program"
    if shape == "threads":
        w["threads"], _ = _threaded(g, t)
    elif shape == "processes":
        w["processes"] = _processes(seed, connections, t)
    else:
        w["program"] = g.program()
    return w
