"""Behavioural back end: the compute work distributor with its SMs, and the copy engines.

Launch: the front end hands an engine only the address of the work's descriptor (a launch
descriptor, as the compute front end reads a QMD, or a copy descriptor); the engines read and
decode it from host memory as they take the work (:class:`DescriptorReader`), with the layouts
of ``rtl/layouts.py``. A graph node's per-launch fields come from its graph's launch queue. A
stream's descriptor goes back to the driver's pool once read: the driver may reuse it from
then on.

Compute: a dispatched kernel becomes eligible ``launch_latency_ns`` later. The work
distributor places one block every ``block_dispatch_ns`` onto an SM that has room (threads and
blocks per SM), up to ``max_resident_kernels`` kernels at once. When a slot frees, blocks of
the highest-priority eligible kernel go first, otherwise kernels in arrival order; running
blocks are never preempted. Turning to another kernel while the one it places has blocks
left (a kernel of greater priority takes the next free slot) costs the distributor
``dispatch_switch_ns`` before that kernel's block, and as much again as it goes back to the
kernel it left: a wave of a low-priority kernel refills that much later each time a
high-priority kernel cuts in (probe sm_placement: a high-priority kernel starts 0.47 us
after a freed slot, a low-priority load's next block 0.22 us after one when nothing cuts in),
so the load's blocks out of step with the wave drift into it unless the high-priority chain
keeps using them. A block runs ``block_ns + block_overhead_ns``; the kernel ends
``kernel_end_ns`` after its last block, and only then is its completion reported.

Programmatic dependent launch: a kernel launched with PDL names its primary (the kernel
before it in its stream, or its programmatic predecessor in a graph). The work distributor
holds it until the primary triggers, that is once every block of the primary has called the
trigger (``trigger_ns`` after it starts) or exited, and makes it eligible
``pdl_launch_ns`` after that (or after its own launch latency, if later). A block runs its
prologue, then waits in cudaGridDependencySynchronize until ``pdl_flush_ns`` (and
``cupti_flush_ns`` under CUPTI) after the primary's last block exits, then its ``block_ns``;
the block's own overhead follows its code. A primary that has completed by the time the
dependent arrives holds nothing. A context switch that preempts a kernel's blocks before its
trigger (or exit) takes back what was computed of it: its dependents wait for its trigger as
its preempted blocks, resumed, time it again (each triggering ``trigger_ns`` after it resumes,
or as it exits), so a dependent never runs ahead of a primary switched out.

Device graph launch: a kernel whose descriptor says it holds device-side cudaGraphLaunch
code calls it in block 0 as the block starts, in its first ``dgl_count`` runs after a host
launch (a fire-and-forget launch's run counts afresh, a tail launch's run goes on counting
down): the call takes
``device_launch_call_ns`` (fire-and-forget, plus ``cupti_device_launch_ns`` under CUPTI) or
``tail_launch_call_ns`` (tail) of the block's time, and as it returns the launch goes to the
front end (``on_device_launch``). A kernel of a stream that holds such code becomes eligible
``device_runtime_start_ns`` later (the device runtime's set-up; a graph's host launch pays it
in the graph walker).

Copy: one engine per direction (H2D, D2H, D2D), each a FIFO; a copy takes
``copy_latency_ns + bytes / bandwidth``.
"""

import functools
from collections import deque
from dataclasses import dataclass

from gpufe.rtl.layouts import (LaunchDescriptor, LAUNCH_DESCRIPTOR_DWORDS, CopyDescriptor,
                               COPY_DESCRIPTOR_DWORDS, CopyKind, GraphLaunchQueue,
                               GRAPH_LAUNCH_QUEUE_DWORDS, GraphLaunchRecord,
                               GRAPH_LAUNCH_RECORD_DWORDS, DEVICE_LAUNCH_QUEUE, struct_fields)
from gpufe.sim.cosim.events import ps


def decode(layout, dwords):
    """A flat struct's fields from its dwords (lowest first): ``{name: int}``, reserved
    (``_``) fields left out, signed fields sign-extended."""
    within, across, signs = _decode_table(layout)
    out = {name: (dwords[i] >> shift) & mask for name, i, shift, mask in within}
    for name, i, n, shift, mask in across:
        value = dwords[i] | dwords[i + 1] << 32
        for k in range(2, n):
            value |= dwords[i + k] << (32 * k)
        out[name] = (value >> shift) & mask
    for name, sign in signs:
        if out[name] & sign:
            out[name] -= sign << 1
    return out


@functools.cache
def _decode_table(layout):
    """Fields within one dword: (name, dword, shift, mask); fields across several: (name,
    first dword, dwords, shift, mask); signed fields: (name, sign bit)."""
    within, across, signs = [], [], []
    for name, (offset, width, signed) in struct_fields(layout).items():
        if name[0] == "_":
            continue
        i, shift = divmod(offset, 32)
        n = (shift + width + 31) // 32
        if n == 1:
            within.append((name, i, shift, (1 << width) - 1))
        else:
            across.append((name, i, n, shift, (1 << width) - 1))
        if signed:
            signs.append((name, 1 << (width - 1)))
    return tuple(within), tuple(across), tuple(signs)


_COPY_KIND_NAMES = {k.value: k.name.lower() for k in CopyKind}


def _byte_offset(layout, name):
    offset, width, _ = struct_fields(layout)[name]
    assert offset % 32 == 0 and width in (32, 64)
    return offset // 8


_QUEUE_HEAD = _byte_offset(GraphLaunchQueue, "head")
_QUEUE_LEFT = _byte_offset(GraphLaunchQueue, "left")
_RECORD_NEXT = _byte_offset(GraphLaunchRecord, "next")


@dataclass
class Kernel:
    key: object                 # (channel, seq, node, graph) of its dispatch: its completion
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
    launch: dict = None         # its decoded descriptor (and graph launch): the activity record
    dispatched: int = None      # ns, when the front end dispatched it
    tsg: int = 0                # the context (process) it belongs to
    saved: list = None          # each of its blocks preempted by a context switch: ps left,
    #                             or Waiting (in its dependency wait: ComputeRules._saved)
    # PDL (ps): each block's trigger after its start (None: as it exits), its prologue
    trigger_ps: int = None
    prologue_ps: int = 0
    primary: object = None      # the live kernel whose trigger and exit it waits for
    pdl: bool = False           # launched with a programmatic dependency
    trigger_at: int = None      # every block has triggered (known once all are placed)
    exit_at: int = None         # every block's code has ended
    sync: int = None            # block 0's cudaGridDependencySynchronize returned (stamped)
    _timed: int = 0             # blocks whose trigger and exit are known
    _trig_max: int = 0
    _exit_max: int = 0
    dependents: list = None     # (kernel, earliest eligible) held until it triggers
    gds_waiting: list = None    # its dependents' blocks waiting for its exit
    # the dependents its trigger released (their eligibility still to come is revoked if a
    # context switch preempts it before it triggers), and the count of such revocations
    _released: list = None
    _pdl_epoch: int = 0
    # device graph launch
    descriptor: int = 0         # its launch descriptor's address
    device: bool = False        # a node of a device-launched run (its launch queue not read)
    dwalk: bool = False         # dispatched by the device-launch walker
    tail_run: bool = False      # a node of a tail launch's run
    dgl: tuple = None           # (tail?, calls per run, DeviceGraph address): holds the code
    graph_launched: int = None  # ps, block 0's device-side cudaGraphLaunch call returned
    # the aggregate engine's (compute.py): the latest (end, scheduled at) of its blocks, how
    # many have no end yet, and its run that later ends are appended to
    _last: tuple = (-1, -1)
    _pending: int = 0
    _tail: object = None
    # the distributor left it for a kernel of greater priority with blocks still to place:
    # going back to it costs a switch (ComputeRules._switches)
    interrupted: bool = False

    @property
    def stamped(self):
        """A kernel whose blocks report their dependency wait (PDL, a trigger or a
        prologue): its record carries ``sync`` (block 0's wait returned) and ``exit`` (its
        last block's code ended)."""
        return self.pdl or self.trigger_ps is not None or self.prologue_ps > 0


@dataclass(frozen=True)
class Waiting:
    """A preempted block of a PDL kernel whose code had not begun: the prologue it has left
    (ps) before its dependency wait, which it takes again as it resumes."""
    prologue_ps: int


class ComputeRules:
    """What both compute engines share: a kernel's launch (its latency, its PDL primary), the
    choice of the next kernel to place, block 0's device-side launch call and a kernel's
    completion."""

    def __init__(self, params, events, on_complete, profiled=False):
        self.p = params
        self.profiled = profiled             # CUPTI is tracing kernels
        # a primary's exit -> its dependents' cudaGridDependencySynchronize returns
        self.pdl_flush_ns = params.pdl_flush_ns + (params.cupti_flush_ns if profiled else 0.0)
        self.ev = events
        self.on_complete = on_complete       # on_complete(kernel) at its end
        self.waiting = []                    # eligible kernels with blocks left to place
        self.resident = 0
        self.dispatcher_free = 0             # ps
        self._sm = 0
        self._order = 0
        self.max_concurrent = 0
        self.running = 0
        self.paused = set()                  # TSGs switched out: their work waits
        self._token = 0
        self._primaries = {}                 # primary key -> live kernel (PDL)
        self.on_device_launch = None         # on_device_launch(kernel): its call returned
        self._calls_left = {}                # (graph, node) -> (host launch, launches left)
        self._current = None                 # the kernel the distributor is set up to place
        self._switch = ps(params.dispatch_switch_ns)

    def _launching(self, kernel):
        """Called first by :meth:`launch` (the aggregate engine catches up)."""

    def launch(self, kernel, graph=False, primary_key=None):
        """A graph node's launch state was prepared at instantiation: it becomes eligible
        after ``graph_launch_latency_ns`` instead of ``launch_latency_ns``. ``primary_key``:
        the key (:meth:`primary_key`) of the kernel a PDL launch depends on."""
        self._launching(kernel)
        kernel.order = self._order
        kernel.graph = graph
        self._order += 1
        latency = self.p.graph_launch_latency_ns if graph else self.p.launch_latency_ns
        if kernel.dgl is not None and not graph:
            latency += (self.p.device_runtime_start_ns
                        + self.p.cupti_device_runtime_ns(self.profiled))
        own = self.primary_key(kernel)
        if own is not None:
            self._primaries[own] = kernel
        if primary_key is not None:
            kernel.pdl = True
            kernel.primary = primary = self._primaries.get(primary_key)
            if primary is not None:
                earliest = self.ev.now + ps(latency)
                if primary.trigger_at is None:
                    if primary.dependents is None:
                        primary.dependents = []
                    primary.dependents.append((kernel, earliest))
                else:
                    # released as its trigger's time comes (taken back if a context switch
                    # preempts the primary before)
                    primary._released = (primary._released or []) + [(kernel, earliest)]
                    self.ev.at(max(earliest, self._released_at(primary)),
                               self._pdl_release, kernel, primary, primary._pdl_epoch)
                return
        self.ev.after(ps(latency), self._eligible, kernel)

    @staticmethod
    def primary_key(kernel):
        """How a PDL launch names ``kernel`` as its primary: a graph node by its launch and
        node index, a stream kernel by its release."""
        if kernel.graph:
            return kernel.key[:3] + kernel.key[4:]
        return kernel.release

    def _pick(self):
        """Next kernel to place a block of: priority first, then arrival order, among those
        of running contexts. A kernel that has no block resident yet counts against the
        resident-kernel limit."""
        best = None
        for k in self.waiting:
            if k.tsg in self.paused:
                continue
            if k.placed == 0 and self.resident >= self.p.max_resident_kernels:
                continue
            if best is None or (k.priority, -k.order) > (best.priority, -best.order):
                best = k
        return best

    def _left_unplaced(self, c):
        """Whether the distributor, set up for ``c``, would leave blocks of it unplaced (of a
        running context: a context switched out is not left by the distributor's choice)."""
        return (c is not None and c.tsg not in self.paused
                and (c.placed < c.blocks or bool(c.saved)))

    def _switches(self, k):
        """Whether the next placement, of a block of ``k``, first costs the distributor a
        switch (``dispatch_switch_ns``): it is set up for another kernel that still has
        blocks to place (``k``, picked first, is of greater priority), or ``k`` is a kernel
        it so left (going back to it)."""
        c = self._current
        if c is k or not self._switch:
            return False
        return k.interrupted or self._left_unplaced(c)

    def _switch_to(self, k):
        """The distributor sets up for ``k``: the kernel it leaves with blocks to place is
        gone back to at a switch's cost."""
        c = self._current
        if c is not k and self._left_unplaced(c):
            c.interrupted = True
        k.interrupted = False
        self._current = k

    def _device_launch_call(self, k, now):
        """Block 0 of ``k`` starts at ``now``: its device-side cudaGraphLaunch call, if this
        run makes one (ps it takes, else 0). The launch goes out as the call returns
        (scheduled as of ``now``)."""
        tail, count, _ = k.dgl
        # counted per host launch (its correlation id, which device-launched runs carry)
        corr = k.launch["correlation_id"]
        left = count
        # per node of its graph, not per descriptor: an update between the runs of a tail
        # chain gives the node a new descriptor, and the chain goes on counting
        node = (k.launch["graph_id"], k.key[2])
        if k.tail_run:
            last = self._calls_left.get(node)
            if last is not None and last[0] == corr:
                left = last[1]
        self._calls_left[node] = (corr, max(left - 1, 0))
        if left == 0:
            return 0
        call = self.p.tail_launch_call_ns if tail else self.p.device_launch_call_ns
        if self.profiled and not tail:
            call += self.p.cupti_device_launch_ns
        k.graph_launched = now + ps(call)
        self.ev.at_as_of(k.graph_launched, now, self.on_device_launch, k)
        return ps(call)

    def _release_dependents(self, k, schedule):
        """``k``'s trigger is known: its held dependents become eligible ``pdl_launch_ns``
        after it (``schedule(time, callback, *args)``), unless a context switch takes the
        trigger back first (:meth:`_preempted`)."""
        k._released = k.dependents
        for d, earliest in k.dependents or ():
            schedule(max(earliest, self._released_at(k)), self._pdl_release, d, k, k._pdl_epoch)
        k.dependents = None

    def end_ns(self, k):
        """From ``k``'s last block's end to its completion (ns): ``kernel_end_ns``, and under
        CUPTI the time its end record takes (``cupti_graph_kernel_ns`` for a graph's node,
        ``cupti_kernel_ns`` for a stream's). A node of a device-launched run makes no record:
        CUPTI does not see those kernels (on the H200 under CUPTI, a device-launched graph's
        kernels start 0.80 us apart where a host-launched one's, the same kernels, start
        1.06 us apart; 0.77 us without CUPTI)."""
        end = self.p.kernel_end_ns
        if self.profiled and not k.device:
            end += self.p.cupti_graph_kernel_ns if k.graph else self.p.cupti_kernel_ns
        return end

    def _released_at(self, k):
        """When ``k``'s trigger lets its dependents go (ps): ``pdl_launch_ns`` after it. A
        stream kernel that never calls the trigger triggers as its grid completes; under
        CUPTI that completion comes after CUPTI's end timestamp of it is written
        (``cupti_kernel_ns``; the same order as ``cupti_release_ns``), so its dependents go
        that much later, a stream's kernel and a graph's node alike (the H200 under CUPTI,
        5 and 50 us primaries: exit to the dependent's start 0.20 us longer in a stream,
        0.19 in a graph; the dependent starts 0.10 us after a stream primary's recorded end,
        0.06 us before a graph node's, whose record takes longer: ``cupti_graph_kernel_ns``).
        An explicit trigger is the blocks' own and does not wait for the record; a
        device-launched node makes none."""
        at = k.trigger_at + ps(self.p.pdl_launch_ns)
        if self.profiled and k.trigger_ps is None and not k.device:
            at += ps(self.p.cupti_kernel_ns)
        return at

    def _pdl_release(self, d, k, epoch):
        if k._pdl_epoch == epoch:
            self._eligible(d)

    def _preempted(self, k, count, now):
        """``count`` of ``k``'s blocks are preempted at ``now``: they will be timed again as
        they resume; a trigger or exit still to come is not known any more (the dependents
        it released are held again)."""
        k._timed -= count
        if k.sync is not None and k.sync > now:
            k.sync = None                    # stamped again as its blocks are timed again
        if k.trigger_at is not None and k.trigger_at > now:
            k._pdl_epoch += 1
            k.dependents = (k._released or []) + (k.dependents or [])
            k._released = None
            k.trigger_at = None
        if k.exit_at is not None and k.exit_at > now:
            k.exit_at = None

    def _saved(self, k, end, now):
        """What a block of ``k`` preempted at ``now`` (its end due at ``end``) keeps: the ps it
        has left; or, for a PDL kernel's block whose code had not begun (in its prologue or
        its dependency wait), :class:`Waiting` with the prologue left (the time to its code,
        at most the prologue): it resumes in its wait, against its primary's exit as known
        then (the primary, of the same stream and context, was switched out too, and exits
        later than the wait had been timed for)."""
        if k.primary is not None:
            code = end - ps(self.p.block_overhead_ns) - ps(k.block_ns)
            if code > now:
                return Waiting(min(code - now, k.prologue_ps))
        return end - now

    def _finish(self, k):
        """``k`` completes now: its completion goes out."""
        k.end = self.ev.now
        self.running -= 1
        own = self.primary_key(k)
        if own is not None and self._primaries.get(own) is k:
            del self._primaries[own]
        k.primary = None
        if self.profiled and not k.graph and self.p.cupti_release_ns:
            # CUPTI writes the kernel's end timestamp before its completion goes out
            self.ev.after(ps(self.p.cupti_release_ns), self.on_complete, k)
        else:
            self.on_complete(k)


class BlockComputeEngine(ComputeRules):
    """The compute engine block by block: an event per block placement and per block end.
    The reference for :class:`gpufe.sim.cosim.compute.ComputeEngine`, which computes the same
    decisions in aggregate; the co-simulation uses it where that one does not apply
    (``compute.aggregate_applies``) or when asked to (``CoSim(compute="blocks")``)."""

    def __init__(self, params, events, on_complete, profiled=False):
        super().__init__(params, events, on_complete, profiled)
        self.free_threads = [params.max_threads_per_sm] * params.sms
        self.free_blocks = [params.max_blocks_per_sm] * params.sms
        self._scheduled = False
        self._live = {}                      # block token -> (kernel, SM, end ps)

    def _eligible(self, kernel):
        kernel.arrival = self.ev.now
        self.waiting.append(kernel)
        self._schedule()

    def _schedule(self):
        if not self._scheduled and self.waiting:
            self._scheduled = True
            self.ev.at(max(self.ev.now, self.dispatcher_free), self._place)

    def context_switch(self, tsg, run):
        """The front end's runlist scheduler switches contexts: TSG ``tsg`` stops (``run``
        False: its blocks on the SMs are preempted, each keeping the time it has left, and
        leave the SMs to the next context) or starts again (its preempted blocks go back
        first, then the rest)."""
        if run:
            self.paused.discard(tsg)
            self._schedule()
            return
        self.paused.add(tsg)
        now = self.ev.now
        taken = {}
        for token, (k, sm, end) in list(self._live.items()):
            if k.tsg != tsg or end is None:
                continue                     # (a block in its dependency wait stays)
            del self._live[token]
            self.free_threads[sm] += k.threads
            self.free_blocks[sm] += 1
            if k.saved is None:
                k.saved = []
            k.saved.append(self._saved(k, end, now))
            taken.setdefault(id(k), [k, 0])[1] += 1
            if k not in self.waiting:
                self.waiting.append(k)
        for k, count in taken.values():
            self._preempted(k, count, now)

    def _find_sm(self, threads):
        n = self.p.sms
        for i in range(n):
            sm = (self._sm + i) % n
            if self.free_threads[sm] >= threads and self.free_blocks[sm] >= 1:
                self._sm = (sm + 1) % n
                return sm
        return None

    def _has_room(self, threads):
        return any(t >= threads and b >= 1 for t, b in zip(self.free_threads, self.free_blocks))

    def _place(self):
        self._scheduled = False
        k = self._pick()
        if k is None:
            return
        if self._switches(k):
            if not self._has_room(k.threads):
                return                       # a block end will call us again
            # the distributor sets up for k first; it places once that is done
            self._switch_to(k)
            self.dispatcher_free = self.ev.now + self._switch
            self._schedule()
            return
        sm = self._find_sm(k.threads)
        if sm is None:
            return                           # a block end will call us again
        self._current = k
        now = self.ev.now
        self.free_threads[sm] -= k.threads
        self.free_blocks[sm] -= 1
        resumed = bool(k.saved)
        call = 0
        lead = None                          # ps from its placement to its dependency wait
        if resumed:
            duration = k.saved.pop(0)       # a preempted block resumes where it stopped
            if isinstance(duration, Waiting):
                resumed, lead = False, duration.prologue_ps
        else:
            if k.placed == 0:
                k.start = now
                self.resident += 1
                self.running += 1
                self.max_concurrent = max(self.max_concurrent, self.running)
                if k.dgl is not None and k.dgl[1]:
                    call = self._device_launch_call(k, now)
            k.placed += 1
            duration = ps(k.block_ns + self.p.block_overhead_ns) + call
        if lead is None:
            lead = k.prologue_ps + call
        if k.placed == k.blocks and not k.saved:
            self.waiting.remove(k)
        self._token += 1
        token = self._token
        if resumed or (k.primary is None and k.prologue_ps == 0):
            self._live[token] = (k, sm, now + duration)
            self.ev.after(duration, self._block_done, k, sm, token)
            if not resumed:
                self._block_timed(k, now, now, now + ps(k.block_ns) + call)
            else:
                # timed again: its code ends what it had left less the block's overhead
                self._block_timed(k, now, now, now + duration - ps(self.p.block_overhead_ns))
        elif k.primary is not None and k.primary.exit_at is None:
            # in cudaGridDependencySynchronize until the primary's exit is known
            self._live[token] = (k, sm, None)
            if k.primary.gds_waiting is None:
                k.primary.gds_waiting = []
            k.primary.gds_waiting.append((k, sm, token, now, lead))
        else:
            self._run_block(k, sm, token, now, lead)
        self.dispatcher_free = now + ps(self.p.block_dispatch_ns)
        self._schedule()

    def _run_block(self, k, sm, token, placed, lead):
        """A block of a PDL kernel (or one with a prologue), placed at ``placed``: its code
        from its dependency wait on, ``lead`` ps after it is placed (its prologue, and block
        0's device-side launch call), once the primary's exit is known."""
        synced = placed + lead
        if k.primary is not None:
            synced = max(synced, k.primary.exit_at + ps(self.pdl_flush_ns))
        code_end = synced + ps(k.block_ns)
        end = code_end + ps(self.p.block_overhead_ns)
        self._live[token] = (k, sm, end)
        self.ev.at(end, self._block_done, k, sm, token)
        self._block_timed(k, placed, synced, code_end)

    def _block_timed(self, k, placed, synced, code_end):
        """A block's trigger and exit are known: the kernel's, once all its blocks' are; then
        its held dependents become eligible and its waiting dependents' blocks run on."""
        if k.sync is None and k.stamped:
            k.sync = synced
        trig = code_end if k.trigger_ps is None else min(placed + k.trigger_ps, code_end)
        if trig > k._trig_max:
            k._trig_max = trig
        if code_end > k._exit_max:
            k._exit_max = code_end
        k._timed += 1
        if k._timed < k.blocks:
            return
        k.trigger_at, k.exit_at = k._trig_max, k._exit_max
        self._release_dependents(k, self.ev.at)
        for d, sm, token, placed_at, lead in k.gds_waiting or ():
            if token in self._live:
                self._run_block(d, sm, token, placed_at, lead)
        k.gds_waiting = None

    def _block_done(self, k, sm, token):
        if self._live.pop(token, None) is None:
            return                           # preempted: it ends after its context resumes
        self.free_threads[sm] += k.threads
        self.free_blocks[sm] += 1
        k.done += 1
        if k.done == k.blocks:
            self.resident -= 1
            self.ev.after(ps(self.end_ns(k)), self._kernel_done, k)
        self._schedule()

    def _kernel_done(self, k):
        self._finish(k)


@dataclass
class Copy:
    key: object
    kind: str                   # "h2d", "d2h", "d2d"
    nbytes: int
    start: int = None
    end: int = None
    launch: dict = None         # its decoded copy descriptor (and graph launch)
    dispatched: int = None
    device: bool = False        # a node of a device-launched run


class DescriptorReader:
    """What the engines read from host memory as they take work from the front end.

    ``pool``: the driver's pool of descriptor blocks (``BlockPool``): a stream's descriptor,
    and a graph launch's record once the launch after it has begun, are given back to it
    after they are read, never before."""

    def __init__(self, mem, pool):
        self.mem = mem
        self.pool = pool

    def kernel(self, address, key, graph, device=False):
        """The kernel a compute dispatch launches: its launch descriptor at ``address``.
        ``device``: a node of a device-launched run, whose per-launch fields (those of the
        run that launched it) come from its graph's device launch queue."""
        d = decode(LaunchDescriptor, self.mem.read_dwords(address, LAUNCH_DESCRIPTOR_DWORDS))
        self._per_launch(d, address, graph, device)
        release = (d["release_index"], d["release_value"]) if d["release_enable"] else None
        return Kernel(key, d["grid_x"] * d["grid_y"] * d["grid_z"],
                      d["block_x"] * d["block_y"] * d["block_z"], d["block_ps"] / 1000,
                      priority=-d["priority"], release=release, launch=d,
                      trigger_ps=d["trigger_ps"] if d["trigger_enable"] else None,
                      prologue_ps=d["prologue_ps"], descriptor=address, device=device,
                      dgl=(d["dgl_tail"], d["dgl_count"], d["dgl_graph"])
                      if d["device_runtime"] else None)

    def _per_launch(self, d, address, graph, device):
        """A descriptor's per-launch fields: a graph node's from its launch queue (a
        device-launched run's from its device launch queue), a stream's own (its block goes
        back to the driver)."""
        if graph:
            queue = d["graph_launches"] << 8
            d.update(self._graph_launch(queue + DEVICE_LAUNCH_QUEUE if device else queue))
        else:
            self.pool.give(address)

    @staticmethod
    def primary_key(kernel):
        """The key (``BlockComputeEngine.primary_key``) of the kernel a PDL launch depends on, or
        None."""
        d = kernel.launch
        if not d["pdl"]:
            return None
        if kernel.key[3]:
            return kernel.key[:2] + (d["pdl_primary"],) + kernel.key[4:]
        return (d["release_index"], d["pdl_primary"])

    def copy(self, address, key, graph, device=False):
        """The copy a copy dispatch starts: its copy descriptor at ``address`` (the record's
        source offset, with ``COPY_FLAG_DESCRIPTOR``); ``device`` as for :meth:`kernel`."""
        d = decode(CopyDescriptor, self.mem.read_dwords(address, COPY_DESCRIPTOR_DWORDS))
        self._per_launch(d, address, graph, device)
        kind = _COPY_KIND_NAMES.get(d["kind"])
        if kind is None:
            raise ValueError(f"copy descriptor at {address:#x}: unknown kind {d['kind']}")
        return Copy(key, kind, d["length"], launch=d, device=device)

    def _graph_launch(self, queue):
        """The per-launch fields of the graph launch a node dispatch belongs to: the head of
        the graph's launch queue at ``queue``, advanced first when the head launch has had
        all its nodes dispatched."""
        mem = self.mem
        q = decode(GraphLaunchQueue, mem.read_dwords(queue, GRAPH_LAUNCH_QUEUE_DWORDS))
        head, left = q["head"], q["left"]
        if left == 0:
            nxt = mem.read64(head + _RECORD_NEXT)
            if nxt == 0:
                raise RuntimeError(f"a node of the graph whose launch queue is at {queue:#x} "
                                   f"was dispatched, but no launch of it is queued")
            self.pool.give(head)        # the launch before it has had all its nodes
            head, left = nxt, q["nodes"]
            mem.write64(queue + _QUEUE_HEAD, head)
        mem.write_dword(queue + _QUEUE_LEFT, left - 1)
        r = decode(GraphLaunchRecord, mem.read_dwords(head, GRAPH_LAUNCH_RECORD_DWORDS))
        return {"correlation_id": r["correlation_id"], "stream_id": r["stream_id"],
                "priority": r["priority"]}


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
