"""Seeded random CUDA-like programs for the ordering fuzzer (``bench/ordering_fuzz.py``).

``generate(seed)`` returns a workload dict that ``gpufe.sim.host.workload.parse_workload`` accepts and
that is valid CUDA: streams with priorities, events with and without timing, kernels of
various grids, blocks and block times, copies of every kind, event records and cross-stream
waits (on events recorded or not yet recorded), host synchronisations and queries, host
sleeps, marks, repeats, CUDA graphs captured with fork and join across several streams
(origin stream records a fork event, other streams wait on it and join, work and events
between them, every joined stream joined back to the origin through an event) then
instantiated and launched, several times and into various streams, device graph launches
(a graph instantiated for device launch that may tail-launch itself, launched from another
graph's kernel fire-and-forget or as a tail launch, and from the host), and now and then a
program that fills a channel's GPFIFO ring behind a long gate kernel so that kickoffs block.

Rules kept so that every program is valid: events are referenced only after their
``event_create``; events recorded inside a capture are private to it (never used outside);
no host synchronisation, query or graph launch while a capture is open; every stream that
joined a capture is joined back before ``stream_end_capture``; captures, stream and event
creation never sit inside a ``repeat`` (their names must be unique).

The same seed gives the same program.
"""

import random

KINDS = ("h2d", "d2h", "d2d")
PRIORITIES = (0, 0, 0, 0, -1, -1, -2, -3, -5)
#: a GPFIFO ring of 1,024 entries holds 1,023 kickoffs (and the FIFO some more): more than
#: that behind a gate blocks
FILL_LAUNCHES = 1100


class _Gen:
    def __init__(self, seed, connections):
        self.r = random.Random(f"gpufe-ordering/{seed}")
        # PDL attributes come from a generator of their own: the programs' other ops stay as
        # the seeds gave them before PDL
        self.r_pdl = random.Random(f"gpufe-ordering-pdl/{seed}")
        # and conditional nodes theirs
        self.r_cond = random.Random(f"gpufe-ordering-cond/{seed}")
        self.n_cond = 0
        # and device graph launches theirs
        self.r_dl = random.Random(f"gpufe-ordering-devlaunch/{seed}")
        self.mc = self.r.choice(list(connections)) if connections else self.r.randint(1, 32)
        self.streams = []
        self.events = []             # normal events (never recorded inside a capture)
        self.graphs = []             # instantiated graphs
        self.n_graphs = 0
        self.n_kernels = 0
        self.n_capture_events = 0

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

    def copy(self, stream):
        r = self.r
        size = r.choice([4, 256, 4096, 65536, 65536, 262144, r.randint(1, 1 << 20)])
        return {"op": "memcpy_async", "stream": stream, "kind": r.choice(KINDS), "bytes": size}

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

    def graph_update(self):
        """An update of an executable graph: new work for its kernels, an update from itself
        (the same topology), or destroyed and instantiated again."""
        r = self.r
        g = r.choice(self.graphs)
        what = r.choice(["set", "set", "update", "destroy"])
        if what == "set":
            op = {"op": "graph_exec_set_params", "graph": g, "nodes": "all"}
            if r.random() < 0.8:
                op["block_ns"] = r.choice([0, 2000, 20000])
            return [op]
        if what == "update":
            return [{"op": "graph_exec_update", "graph": g, "from": g}]
        return [{"op": "graph_exec_destroy", "graph": g}, {"op": "graph_instantiate", "graph": g}]

    def graph_launch_into(self, stream):
        return {"op": "graph_launch", "graph": self.r.choice(self.graphs), "stream": stream}

    def simple(self):
        """One op that is legal anywhere outside a capture."""
        r = self.r
        choices = [("work", 40), ("record", 14), ("wait", 14), ("sync", 6), ("sleep", 2),
                   ("mark", 1), ("barrier", 1)]
        if self.graphs:
            choices += [("graph", 5), ("instantiate", 1)]
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
            return {"op": "barrier", "name": r.choice(["a", "global:b"])}
        if what == "instantiate":
            # a new executable graph: its launches are not ordered with the older one's
            return {"op": "graph_instantiate", "graph": r.choice(self.graphs)}
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

    def capture(self):
        """A capture with fork and join across streams, its instantiation and launches."""
        r = self.r
        self.n_graphs += 1
        graph = f"g{self.n_graphs}"
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
        tail = self.conditional(graph, origin) + [{"op": "graph_instantiate", "graph": graph}]
        self.graphs.append(graph)
        for _ in range(r.choice([0, 1, 1, 2, 3])):
            tail.append(self.graph_launch())
        return creates + body + tail

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
        """A graph made empty (graph_create) whose only node is a conditional node."""
        self.n_graphs += 1
        graph = f"g{self.n_graphs}"
        ops = self.conditional(graph, self.r.choice(self.streams))
        if not ops:
            self.n_graphs -= 1
            return []
        ops = [{"op": "graph_create", "graph": graph}] + ops
        ops.append({"op": "graph_instantiate", "graph": graph})
        self.graphs.append(graph)
        return ops + [self.graph_launch()]

    def device_launches(self):
        """A graph D instantiated for device launch (a few kernels, the last one sometimes
        tail-launching D again, up to 4 times), and a graph L whose kernels launch D
        (fire-and-forget or as a tail launch; count 0 sometimes: the code only); each
        launched from the host a few times, and a stream kernel holding the code unused."""
        c = self.r_dl
        self.n_graphs += 2
        d, l = f"g{self.n_graphs - 1}", f"g{self.n_graphs}"
        s = c.choice(self.streams)

        def kernel(name, dgl=None):
            op = {"op": "launch_kernel", "stream": s, "kernel": name,
                  "grid": [c.choice([1, 2, 132, 300])], "block": [c.choice([32, 256])],
                  "block_ns": c.choice([0, 500, 3000, 20000])}
            if dgl is not None:
                op["device_graph_launch"] = dgl
            return op

        n = c.randint(1, 3)
        ops = [{"op": "stream_begin_capture", "stream": s}]
        ops += [kernel(f"{d}_k{i}") for i in range(n - 1)]
        loop = c.random() < 0.5
        ops.append(kernel(f"{d}_k{n - 1}", {"graph": d, "mode": "tail",
                                            "count": c.randint(0, 4)} if loop else None))
        ops += [{"op": "stream_end_capture", "stream": s, "graph": d},
                {"op": "graph_instantiate", "graph": d, "device_launch": True},
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
        ops += [{"op": "stream_end_capture", "stream": s, "graph": l},
                {"op": "graph_instantiate", "graph": l}]
        self.graphs += [d, l]
        for _ in range(c.randint(1, 4)):
            ops.append({"op": "graph_launch", "graph": c.choice([l, l, d]),
                        "stream": c.choice(self.streams)})
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

    def program(self):
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
        fill_at = r.randint(0, 10) if r.random() < 0.04 else None
        late_events = len(self.events)
        for step in range(r.randint(8, 60)):
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
                prog.append(self.simple())
        if self.r_cond.random() < 0.3:
            prog += self.conditional_graph()
        if self.r_dl.random() < 0.3:
            prog += self.device_launches()
        if r.random() < 0.8:
            prog.append({"op": "device_synchronize"})
        return prog


def _threaded(g, r):
    """Host threads (2 to 4, and a main thread that creates everything first): each thread
    has streams and events of its own, which it uses as a single-threaded program does
    (work, records, waits, host waits, event queries), and launches kernels on the shared
    streams too (whose order between threads is the driver's: their locks); it waits for
    the other threads' events only in the last phase, after every thread has recorded its
    last. Phases end at barriers."""
    n = r.randint(2, 4)
    shared = [f"sh{i}" for i in range(r.randint(1, 2))]
    main = [{"op": "stream_create", "name": x, "priority": r.choice(PRIORITIES)} for x in shared]
    own = {}
    for t in range(n):
        own[t] = ([f"t{t}s{i}" for i in range(r.randint(1, 3))],
                  [f"t{t}e{i}" for i in range(r.randint(1, 3))])
        main += [{"op": "stream_create", "name": x, "priority": r.choice(PRIORITIES)}
                 for x in own[t][0]]
        main += [{"op": "event_create", "name": e, "timing": r.random() < 0.5}
                 for e in own[t][1]]
    phases = r.randint(2, 4)
    progs = {t: [{"op": "barrier", "name": "setup"}] for t in range(n)}
    main.append({"op": "barrier", "name": "setup"})
    for ph in range(phases):
        last = ph == phases - 1
        for t in range(n):
            g.streams, g.events = own[t]
            others = [e for u in range(n) if u != t for e in own[u][1]]
            for _ in range(r.randint(2, 12)):
                x = r.random()
                if x < 0.25:
                    progs[t].append(g.kernel(r.choice(shared)))
                elif x < 0.55:
                    progs[t].append(g.work(r.choice(g.streams)))
                elif x < 0.7 and not last:
                    progs[t].append(g.record())
                elif x < 0.8:
                    progs[t].append(g.wait(event=r.choice(others) if last and others
                                           else None))
                elif x < 0.9:
                    op = g.host_sync()
                    if op["op"] == "device_synchronize":
                        # (it waits for the shared streams, which other threads feed meanwhile)
                        op = {"op": "stream_synchronize", "stream": r.choice(g.streams)}
                    progs[t].append(op)
                else:
                    progs[t].append({"op": "repeat", "count": r.randint(2, 5),
                                     "body": [g.work(r.choice(g.streams))
                                              for _ in range(r.randint(1, 3))]})
            progs[t].append({"op": "barrier", "name": f"phase{ph}"})
        main.append({"op": "barrier", "name": f"phase{ph}"})
    main.append({"op": "device_synchronize"})
    threads = [{"name": "main", "program": main}]
    threads += [{"name": f"t{t}", "program": progs[t]} for t in range(n)]
    return threads


def generate(seed, connections=None):
    """A random valid program (a workload dict) from ``seed`` (an int or a string);
    ``max_connections`` is drawn from ``connections`` (default 1..32). One in eight is
    several host threads (:func:`_threaded`, drawn with a generator of its own: the other
    seeds' programs stay as they were)."""
    g = _Gen(seed, connections)
    w = {"name": f"fuzz_{seed}", "max_connections": g.mc,
         "description": f"ordering fuzzer program, seed {seed!r}"}
    t = random.Random(f"gpufe-ordering-threads/{seed}")
    if t.random() < 0.125:
        w["threads"] = _threaded(g, t)
    else:
        w["program"] = g.program()
    return w
