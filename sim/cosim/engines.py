"""Behavioural back end: the compute work distributor with its SMs, and the copy engines.

Compute: a dispatched kernel becomes eligible ``launch_latency_ns`` later. The work
distributor places one block every ``block_dispatch_ns`` onto an SM that has room (threads and
blocks per SM), up to ``max_resident_kernels`` kernels at once. When a slot frees, blocks of
the highest-priority eligible kernel go first, otherwise kernels in arrival order; running
blocks are never preempted. A block runs ``block_ns + block_overhead_ns``; the kernel ends
``kernel_end_ns`` after its last block, and only then is its completion reported.

Copy: one engine per direction (H2D, D2H, D2D), each a FIFO; a copy takes
``copy_latency_ns + bytes / bandwidth``.
"""

from collections import deque
from dataclasses import dataclass

from gpufe.sim.cosim.events import ps


@dataclass
class Kernel:
    key: object                 # whatever the harness uses to find it again
    blocks: int
    threads: int                # per block
    block_ns: float
    priority: int = 0           # greater = more urgent (from the stream)
    arrival: int = 0            # ps, eligible from
    order: int = 0
    placed: int = 0
    done: int = 0
    start: int = None           # ps, first block placed
    end: int = None
    graph: bool = False         # launched by the graph walker
    release: tuple = None       # (syncpoint, value) set as it completes (its launch's release)


class ComputeEngine:
    def __init__(self, params, events, on_complete, profiled=False):
        self.p = params
        self.profiled = profiled             # CUPTI is tracing kernels
        self.ev = events
        self.on_complete = on_complete       # on_complete(kernel) at its end
        self.free_threads = [params.max_threads_per_sm] * params.sms
        self.free_blocks = [params.max_blocks_per_sm] * params.sms
        self.waiting = []                    # eligible kernels with blocks left to place
        self.resident = 0
        self.dispatcher_free = 0             # ps
        self._sm = 0
        self._order = 0
        self._scheduled = False
        self.max_concurrent = 0
        self.running = 0

    def launch(self, kernel, graph=False):
        """A graph node's launch state was prepared at instantiation: it becomes eligible
        after ``graph_launch_latency_ns`` instead of ``launch_latency_ns``."""
        kernel.order = self._order
        kernel.graph = graph
        self._order += 1
        latency = self.p.graph_launch_latency_ns if graph else self.p.launch_latency_ns
        self.ev.after(ps(latency), self._eligible, kernel)

    def _eligible(self, kernel):
        kernel.arrival = self.ev.now
        self.waiting.append(kernel)
        self._schedule()

    def _schedule(self):
        if not self._scheduled and self.waiting:
            self._scheduled = True
            self.ev.at(max(self.ev.now, self.dispatcher_free), self._place)

    def _pick(self):
        """Next kernel to place a block of: priority first, then arrival order. A kernel
        that has no block resident yet counts against the resident-kernel limit."""
        best = None
        for k in self.waiting:
            if k.placed == 0 and self.resident >= self.p.max_resident_kernels:
                continue
            if best is None or (k.priority, -k.order) > (best.priority, -best.order):
                best = k
        return best

    def _find_sm(self, threads):
        n = self.p.sms
        for i in range(n):
            sm = (self._sm + i) % n
            if self.free_threads[sm] >= threads and self.free_blocks[sm] >= 1:
                self._sm = (sm + 1) % n
                return sm
        return None

    def _place(self):
        self._scheduled = False
        k = self._pick()
        if k is None:
            return
        sm = self._find_sm(k.threads)
        if sm is None:
            return                           # a block end will call us again
        now = self.ev.now
        self.free_threads[sm] -= k.threads
        self.free_blocks[sm] -= 1
        if k.placed == 0:
            k.start = now
            self.resident += 1
            self.running += 1
            self.max_concurrent = max(self.max_concurrent, self.running)
        k.placed += 1
        if k.placed == k.blocks:
            self.waiting.remove(k)
        self.ev.after(ps(k.block_ns + self.p.block_overhead_ns), self._block_done, k, sm)
        self.dispatcher_free = now + ps(self.p.block_dispatch_ns)
        self._schedule()

    def _block_done(self, k, sm):
        self.free_threads[sm] += k.threads
        self.free_blocks[sm] += 1
        k.done += 1
        if k.done == k.blocks:
            self.resident -= 1
            end = self.p.kernel_end_ns
            if self.profiled:
                end += self.p.cupti_graph_kernel_ns if k.graph else self.p.cupti_kernel_ns
            self.ev.after(ps(end), self._kernel_done, k)
        self._schedule()

    def _kernel_done(self, k):
        k.end = self.ev.now
        self.running -= 1
        self.on_complete(k)


@dataclass
class Copy:
    key: object
    kind: str                   # "h2d", "d2h", "d2d"
    nbytes: int
    start: int = None
    end: int = None


class CopyEngines:
    def __init__(self, params, events, on_complete):
        self.p = params
        self.ev = events
        self.on_complete = on_complete
        self.queues = {k: deque() for k in ("h2d", "d2h", "d2d")}
        self.busy = {k: False for k in self.queues}

    def bandwidth(self, kind):
        return {"h2d": self.p.h2d_bytes_per_ns, "d2h": self.p.d2h_bytes_per_ns,
                "d2d": self.p.d2d_bytes_per_ns}[kind]

    def launch(self, copy):
        self.queues[copy.kind].append(copy)
        self._next(copy.kind)

    def _next(self, kind):
        if self.busy[kind] or not self.queues[kind]:
            return
        c = self.queues[kind].popleft()
        self.busy[kind] = True
        c.start = self.ev.now + ps(self.p.copy_latency_ns)
        c.end = c.start + ps(c.nbytes / self.bandwidth(kind))
        self.ev.at(c.end, self._done, c)

    def _done(self, c):
        self.busy[c.kind] = False
        self.on_complete(c)
        self._next(c.kind)
