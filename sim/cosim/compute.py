"""The compute work distributor, computed in aggregate: cost per kernel and wave, not per block.

Same model, decision for decision, as the per-block reference
(:class:`gpufe.sim.cosim.engines.BlockComputeEngine`, whose docstring states it): one block
placed every ``block_dispatch_ns`` onto the first SM at or after a round-robin pointer that
has room, the highest-priority eligible kernel first, blocks never preempted by blocks, PDL,
prologues, device-side graph launches and context switches. It gives the same timeline, byte
for byte; ``tests/sim/cosim/test_compute.py`` compares the two on random programs.

How it avoids an event per block:

- **Chunks.** From the work distributor's next placement, the blocks of the picked kernel that
  it places back to back (one every ``block_dispatch_ns``) are computed at once: their SMs
  (round-robin over the SMs with room, in laps), their start and end times. A chunk holds
  until the next block ends, or beyond it as long as no placement has had to skip a full SM
  (an SM freed later only matters to a placement that skipped it).
- **Waves.** When the SMs are full for the picked kernel and a run of blocks of the same
  size ends one every ``block_dispatch_ns``, every ending block's SM is the only one with room
  as the next placement comes: the next wave takes the same SMs at the same spacing, as one
  chunk.
- **Runs of ends.** The blocks of a chunk end as arrays (times, SMs), kept in one heap by
  their next end; they are taken in bulk (their SMs freed with one ``bincount``) whenever the
  engine catches up, and only matter one by one where the distributor waits for room.
- **Lazy catching up.** The engine keeps its state at the last time something asked
  (a kernel becoming eligible, a launch, a context switch, one of its own events) and catches
  up from there (:meth:`ComputeEngine._advance`), in the reference's order: events ordered by
  (time, time scheduled at), a block's end before a placement at the same time. It schedules
  events only where something goes out: a kernel's completion (as of its last block's
  placement, where the reference's block-end event was scheduled), a device-side launch, a
  dependent's launch (as of the placement that completes its primary's trigger), and the end
  of each chunk.

Requires ``0 < block_dispatch_ns`` smaller than the block overhead and every launch latency
(the order of same-time events above depends on it); :func:`aggregate_applies` says whether a
parameter set qualifies, and the harness uses the reference otherwise.
"""

import heapq

import numpy as np

from gpufe.sim.cosim.engines import ComputeRules, Waiting
from gpufe.sim.cosim.events import ps

_INF = 1 << 62
_NEVER = (_INF, _INF)
_ENDS_FIRST = object()       # no plan yet: block ends come before the next placement


def aggregate_applies(params):
    """Whether :class:`ComputeEngine` reproduces the reference under ``params``: a block's
    end, a kernel's eligibility and a placement due at the same picosecond are ordered by
    when they were scheduled, which needs the dispatch step shorter than every delay that
    schedules one of them."""
    d = params.block_dispatch_ns
    return d > 0 and all(d < v for v in (params.block_overhead_ns, params.launch_latency_ns,
                                         params.graph_launch_latency_ns,
                                         params.pdl_launch_ns))


class _Run:
    """Blocks of one kernel in the order they end: ``ends`` and ``ins`` (the time each
    block's end was scheduled at: its placement, or its release from a dependency wait) in
    ps, their ``sms`` and placement ``tokens``; ``pos`` is the first that has not ended,
    ``n`` the number held. Blocks of the same kernel that end later are appended (the arrays
    grow by doubling), so that a kernel's waves stay one run."""

    __slots__ = ("k", "ends", "ins", "sms", "tokens", "pos", "n")

    def __init__(self, k, ends, ins, sms, tokens):
        self.k, self.ends, self.ins, self.sms, self.tokens = k, ends, ins, sms, tokens
        self.pos, self.n = 0, len(ends)

    def last_key(self):
        i = self.n - 1
        return (int(self.ends[i]), int(self.ins[i]))

    def append(self, ends, ins, sms, tokens):
        n, m = self.n, len(ends)
        if n + m > len(self.ends):
            size = max(2 * (n + m), 16)
            for name in ("ends", "ins", "sms", "tokens"):
                old = getattr(self, name)
                new = np.empty(size, np.int64)
                new[:n] = old[:n]
                setattr(self, name, new)
        self.ends[n:n + m] = ends
        self.ins[n:n + m] = ins
        self.sms[n:n + m] = sms
        self.tokens[n:n + m] = tokens
        self.n = n + m

    def count_until(self, bound, inclusive):
        """Blocks from ``pos`` on whose (end, scheduled) key is before ``bound``."""
        lo = self.pos
        if lo + 1 == self.n:                   # a single block left: no search
            k = (self.ends[lo], self.ins[lo])
            return int(k <= bound if inclusive else k < bound)
        return _count_keys(self.ends[lo:self.n], self.ins[lo:self.n], bound, inclusive)


class _Plan:
    """The distributor's next chunk: ``n`` blocks of ``k`` placed at ``times`` on ``sms``,
    each placement scheduled at ``ins`` (the one before it, or what woke the distributor);
    ``wave``: the run whose next blocks end one before each placement after the first (and
    before the first too, ``ends_first``), each on the SM the placement takes; ``resumed``: a
    preempted block resuming."""

    __slots__ = ("k", "n", "sms", "times", "ins", "wave", "ends_first", "resumed", "dry",
                 "switch")

    def __init__(self):
        self.dry = False
        self.switch = False

    def count_until(self, bound, d):
        """Placements of the chunk at or before ``bound``."""
        if self.n == 1:
            return 1
        if self.wave is None:                  # back to back: no search
            return _count_chain(int(self.times[0]), int(self.ins[0]), d, self.n, bound, True)
        return min(self.n, _count_keys(self.times, self.ins, bound, True))

    def key(self, i):
        return (int(self.times[i]), int(self.ins[i]))


def _calls(k):
    """``k``'s next block is its block 0 and makes a device-side launch call."""
    return k.placed == 0 and k.dgl is not None and k.dgl[1]


def _next_head(runs, r):
    """Run ``r``, the heap's head, has had blocks end: its next block's key in its place.
    A run all of whose blocks have ended leaves the heap, and its kernel lets go of it
    (``_tail``: an ended run takes no more blocks): a kernel and its run refer to one
    another, and the run's collector is paused (``CoSim.run``), so the cycle would
    otherwise outlive them both, one per kernel, to the run's end (issue 41)."""
    if r.pos < r.n:
        heapq.heapreplace(runs, (int(r.ends[r.pos]), int(r.ins[r.pos]), runs[0][2], r))
    else:
        heapq.heappop(runs)
        if r.k._tail is r:
            r.k._tail = None


def _count_keys(times, ins, bound, inclusive):
    """How many of the (time, scheduled at) keys, in increasing order, come before
    ``bound`` (or at it, ``inclusive``)."""
    bt, bi = bound
    a = int(np.searchsorted(times, bt, "left"))
    b = int(np.searchsorted(times, bt, "right"))
    if a < b:                                  # keys at bt: by the time scheduled at
        a += int(np.searchsorted(ins[a:b], bi, "right" if inclusive else "left"))
    return a


def _count_chain(x, ins0, d, n, bound, inclusive):
    """:func:`_count_keys` for ``n`` placements back to back (:func:`_chain`), without the
    arrays: the first at ``x`` scheduled at ``ins0``, the j-th at ``x + j d`` scheduled at
    ``x + (j - 1) d``."""
    def before(key):
        return key <= bound if inclusive else key < bound
    if not before((x, ins0)):
        return 0
    bt = bound[0]
    if bt >= _INF:
        return n
    j = min((bt - x) // d, n - 1)              # the last placement at or before bt
    if j >= 1 and not before((x + j * d, x + (j - 1) * d)):
        j -= 1                                 # at bt but scheduled after the bound
    return 1 + max(j, 0)


def _chain(x, ins0, d, n):
    """Times and keys of ``n`` placements back to back from ``x`` (the first scheduled at
    ``ins0``, each next one at the one before)."""
    if n == 1:
        return np.array([x], np.int64), np.array([ins0], np.int64)
    times = x + d * np.arange(n, dtype=np.int64)
    ins = np.empty(n, np.int64)
    ins[0] = ins0
    ins[1:] = times[:-1]
    return times, ins


class ComputeEngine(ComputeRules):
    """The compute engine of :mod:`gpufe.sim.cosim.engines`, block placement in aggregate
    (module docstring); same constructor, ``launch``, ``context_switch``, ``primary_key``,
    ``on_device_launch`` and ``max_concurrent``."""

    def __init__(self, params, events, on_complete, profiled=False):
        if not aggregate_applies(params):
            raise ValueError("the aggregate compute engine needs 0 < block_dispatch_ns < "
                             "block_overhead_ns and every launch latency")
        super().__init__(params, events, on_complete, profiled)
        self.S = params.sms
        self.ft = np.full(self.S, params.max_threads_per_sm, np.int64)   # free threads
        self.fb = np.full(self.S, params.max_blocks_per_sm, np.int64)    # free block slots
        self._arange = np.arange(self.S, dtype=np.int64)
        self._out = 0                        # blocks on the SMs
        self._arange_cache = np.arange(1024, dtype=np.int64)
        self.d = ps(params.block_dispatch_ns)
        self._runs = []                      # heap: (end, scheduled at, uid, run)
        self._uid = 0
        self._disp = None                    # (time, scheduled at) of the next placement
        self._version = 0                    # bumped by every change of state
        self._plan = None
        self._plan_version = -1
        self._step_at = None                 # the distributor's pending step
        # ps, once
        self._overhead = ps(params.block_overhead_ns)
        self._flush = ps(self.pdl_flush_ns)
        self._pdl_launch = ps(params.pdl_launch_ns)

    # -- entry points -------------------------------------------------------------------------

    def _launching(self, kernel):
        self._catch_up_to_now()
        kernel._last, kernel._pending, kernel._tail = (-1, -1), kernel.blocks, None

    def context_switch(self, tsg, run):
        """As the reference's: TSG ``tsg`` stops (its blocks on the SMs are preempted, each
        keeping the time it has left) or starts again."""
        self._catch_up_to_now()
        self._version += 1
        if run:
            self.paused.discard(tsg)
            self._wake(self.ev.now)
            self._attend()
            return
        self.paused.add(tsg)
        now = self.ev.now
        keep, taken = [], []
        for entry in self._runs:
            r = entry[3]
            (taken if r.k.tsg == tsg else keep).append(entry)
        if not taken:
            return
        # preempted in the order they were placed (the reference's live-block order)
        blocks = []
        for _, _, _, r in taken:
            for i in range(r.pos, r.n):
                blocks.append((int(r.tokens[i]), r.k, int(r.sms[i]), int(r.ends[i])))
        blocks.sort(key=lambda b: b[0])
        for _, _, _, r in taken:
            r.k._tail = None
        self._out -= len(blocks)
        counts = {}
        for _, k, sm, end in blocks:
            self.ft[sm] += k.threads
            self.fb[sm] += 1
            if k.saved is None:
                k.saved = []
            k.saved.append(self._saved(k, end, now))
            k._pending += 1
            counts.setdefault(id(k), [k, 0])[1] += 1
            if k not in self.waiting:
                self.waiting.append(k)
        for k, count in counts.values():
            self._preempted(k, count, now)
        heapq.heapify(keep)
        self._runs = keep
        self._attend()

    # -- the engine's own events -----------------------------------------------------------------

    def _eligible(self, kernel):
        self._catch_up(self.ev.key)
        kernel.arrival = self.ev.now
        self.waiting.append(kernel)
        self._version += 1
        self._wake(self.ev.now)
        self._attend()

    def _step(self):
        key = self.ev.key
        if key == self._step_at:
            self._step_at = None
        self._catch_up(key)
        self._attend()

    def _kernel_done(self, k):
        # before a placement due with it: the reference scheduled this one first (in the
        # block end that woke that placement)
        self._catch_up(self.ev.key, inclusive=False)
        self._finish(k)
        self._attend()

    def _catch_up_to_now(self):
        """Called from outside any of the engine's events (the harness, after every event due
        by now has run)."""
        self._catch_up((self.ev.now, _INF))

    def _catch_up(self, bound, inclusive=True):
        if not inclusive:
            bound = (bound[0], bound[1] - 1)  # keys are integers: before it, not at it
        self._advance(bound)

    # -- the distributor ------------------------------------------------------------------------

    def _wake(self, t):
        """A kernel arrived, a block ended or a context resumed at ``t``: an idle
        distributor with work waiting places next at ``t`` (or when it is free)."""
        if self._disp is None and self.waiting:
            self._disp = (max(t, self.dispatcher_free), t)
            self._version += 1

    def _limited(self, k):
        """While ``k`` places, another kernel waits only because of the resident-kernel
        limit (a completion may let it take the next placement)."""
        if self.resident + (k.placed == 0) < self.p.max_resident_kernels:
            return False
        return any(o.placed == 0 and o is not k and o.tsg not in self.paused
                   for o in self.waiting)

    def _advance(self, bound):
        """Everything the distributor and the SMs do up to ``bound`` (a (time, scheduled at)
        key, inclusive), in the reference's order."""
        runs = self._runs
        while True:
            f = (runs[0][0], runs[0][1]) if runs else _NEVER
            p = self._disp
            if p is not None and (p < f or (p <= bound and self._wave_resumes(p, f))):
                if p > bound:
                    return
                self._place(bound, f)
            else:
                if f > bound:
                    return
                if p is None and self.waiting:
                    self._end_one()            # each end wakes the distributor
                else:
                    self._end_until(min(bound, p) if p is not None else bound)

    def _end_until(self, bound):
        """Every block end up to ``bound`` (inclusive), in bulk: nothing places meanwhile."""
        runs = self._runs
        done = []
        while runs and (runs[0][0], runs[0][1]) <= bound:
            r = runs[0][3]
            m = r.count_until(bound, True)
            self._take_ends(r, m, done)
            _next_head(runs, r)
        self._version += 1
        for key, k in sorted(done, key=lambda x: x[0]):
            self._complete(k, key)

    def _end_one(self):
        """The next block end while the distributor waits: it wakes it."""
        runs = self._runs
        r = runs[0][3]
        t = int(r.ends[r.pos])
        done = []
        self._take_ends(r, 1, done)
        _next_head(runs, r)
        self._version += 1
        for key, k in done:
            self._complete(k, key)
        self._wake(t)

    def _take_ends(self, r, m, done, free=True):
        """``m`` blocks of run ``r`` end: their SMs are free again (``free``), and a kernel
        whose last block it was completes (appended to ``done`` with its key)."""
        if m <= 0:
            return
        a = r.pos
        k = r.k
        if free:
            self._out -= m
            if m == 1:
                s = r.sms[a]
                self.ft[s] += k.threads
                self.fb[s] += 1
            else:
                c = np.bincount(r.sms[a:a + m], minlength=self.S)
                self.ft += c * k.threads
                self.fb += c
        r.pos = a + m
        k.done += m
        if k.done == k.blocks:
            # (the latest of all its ends: runs taken in bulk are not taken in time order)
            done.append((k._last, k))

    def _complete(self, k, key):
        """``k``'s last block ended (key: its end, scheduled at): its completion goes out
        ``kernel_end_ns`` later, scheduled as of that end."""
        self.resident -= 1
        self.ev.at_as_of(key[0] + ps(self.end_ns(k)), key[0], self._kernel_done, k)

    # -- planning a chunk ---------------------------------------------------------------------------

    def _wave_resumes(self, p, f):
        """The next end (``f``, before the placement ``p``) is the first of a wave's."""
        plan = self._plan_at(p, f)
        return plan is not None and plan is not _ENDS_FIRST and plan.ends_first

    def _plan_at(self, p, f):
        """The chunk from placement key ``p`` (the distributor's next), with block ends
        from ``f`` on not yet taken; None: the placement finds nothing to place (no kernel,
        or no room for the picked one); ``_ENDS_FIRST``: ends come first (``f`` before
        ``p``) and no wave takes them."""
        if self._plan_version == self._version:
            return self._plan
        self._plan = plan = self._make_plan(p, f)
        self._plan_version = self._version
        return plan

    def _make_plan(self, p, f):
        k = self._pick()
        if k is None:
            return None if p < f else _ENDS_FIRST
        x, ins0 = p
        plan = _Plan()
        plan.k, plan.wave, plan.resumed, plan.ends_first = k, None, False, False
        if self._switches(k):
            # the distributor sets up for k first (once the ends before it are taken, if k
            # has room then), and places from the step after
            if f <= p:
                return _ENDS_FIRST
            if self._first_with_room(k.threads) is None:
                return None
            plan.switch, plan.n = True, 1
            plan.times, plan.ins = _chain(x, ins0, self.d, 1)
            return plan
        if p < f and k.blocks - k.placed == 1 and not k.saved:
            # a kernel's last block (a one-block kernel's only one): the first SM with room
            sm = self._first_with_room(k.threads)
            if sm is None:
                return None
            plan.n, plan.sms = 1, np.array([sm], np.int64)
            plan.times, plan.ins = _chain(x, ins0, self.d, 1)
            return plan
        if f <= p:
            return self._plan_after_ends(plan, k, x, ins0, f, self._room(k))
        if k.saved:
            sm = self._first_with_room(k.threads)
            if sm is None:
                return None
            plan.n, plan.sms, plan.resumed = 1, np.array([sm], np.int64), True
            plan.times, plan.ins = _chain(x, ins0, self.d, 1)
            return plan
        left = k.blocks - k.placed
        if self._out == 0:
            # every SM empty, each with room for as many (no array: the common case of a
            # kernel arriving at an idle GPU)
            cap = None
            total = self.S * min(self.p.max_threads_per_sm // k.threads,
                                 self.p.max_blocks_per_sm)
        else:
            cap = self._room(k)
            total = int(cap.sum())
        if total == 0:
            return None
        block0_call = _calls(k)
        if total == 1 and not block0_call and self._wave(plan, k, x, ins0, f, left,
                                                         self._room(k) if cap is None else cap):
            return plan
        n = min(left, total)
        if block0_call:
            n = 1                              # its call goes out: a step right after
        sms, skip = self._sequence(cap, n)
        before = _count_chain(x, ins0, self.d, n, min(f, self._own_end(k, x)), False)
        valid = before if self._limited(k) else max(before, skip)
        plan.n = n = max(1, min(n, valid))
        plan.sms = sms[:n]
        plan.times, plan.ins = _chain(x, ins0, self.d, n)
        return plan

    def _plan_after_ends(self, plan, k, x, ins0, f, cap):
        """The chunk from ``p`` when block ends come before it (``f``): a wave resuming (an
        end frees the one SM the placement at p takes; ``ends_first``, placed as it is), or
        else, for the step at its end only (``dry``: placed only once those ends are taken),
        the placements that skip no full SM: an end makes room, so it changes none of them.
        ``_ENDS_FIRST`` if neither."""
        left = k.blocks - k.placed
        total = int(cap.sum())
        if k.saved:
            return _ENDS_FIRST
        if total == 0:
            return plan if self._wave(plan, k, x, ins0, f, left, None) else _ENDS_FIRST
        if self._limited(k):                   # (an end may let another kernel in)
            return _ENDS_FIRST
        n = 1 if _calls(k) else min(left, total)
        sms, skip = self._sequence(cap, n)
        if skip == 0:
            return _ENDS_FIRST
        plan.n, plan.sms, plan.dry = skip, sms[:skip], True
        plan.times, plan.ins = _chain(x, ins0, self.d, skip)
        return plan

    def _own_end(self, k, x):
        """A key no later than the first end of a block of ``k`` placed at ``x`` or after:
        a chunk's own blocks free SMs too."""
        return (x + ps(k.block_ns) + self._overhead - 1, -1)

    def _arange_n(self, n):
        if n > len(self._arange_cache):
            self._arange_cache = np.arange(max(n, 2 * len(self._arange_cache)), dtype=np.int64)
        return self._arange_cache[:n]

    def _first_with_room(self, threads):
        """The SM the reference's search from the pointer finds for one block."""
        S, ft, fb = self.S, self.ft, self.fb
        for i in range(S):
            sm = (self._sm + i) % S
            if ft[sm] >= threads and fb[sm] >= 1:
                return sm
        return None

    def _room(self, k):
        """How many blocks of ``k`` each SM has room for."""
        return np.minimum(self.ft // k.threads, self.fb)

    def _sequence(self, cap, n):
        """The SMs of ``n`` placements from the pointer (laps over the SMs with room), and
        the first placement that skips a full SM (``n`` if none does); ``cap`` may be None
        while every SM is empty."""
        ptr, S = self._sm, self.S
        if self._out == 0:                     # every SM empty: round robin, no skip
            return (ptr + self._arange_n(n)) % S, n
        order = np.concatenate((self._arange[ptr:], self._arange[:ptr])) if ptr else self._arange
        c = cap[order]
        has = c > 0
        laps = -(-n // int(np.count_nonzero(has)))
        while int(np.minimum(c, laps).sum()) < n:
            laps += 1
        if laps == 1:
            seq = order[has][:n]
        else:
            # lap by lap, each SM with room left once a lap, in the pointer's order
            _, cols = np.nonzero(c[None, :] > np.arange(laps)[:, None])
            seq = order[cols[:n]]
        expected = np.empty(n, np.int64)
        expected[0] = ptr
        expected[1:] = seq[:-1] + 1
        expected[1:] %= S
        skips = np.flatnonzero(seq != expected)
        return seq, (int(skips[0]) if len(skips) else n)

    def _wave(self, plan, k, x, ins0, f, left, cap):
        """A wave: the SMs are full for ``k`` but one, which the placement at ``x`` takes;
        the next run of ends (head of the heap, blocks of the same size, at least a dispatch
        step apart) then frees one SM before each next placement, and only that one: each
        is refilled as it ends. Fills ``plan``; False if no wave applies."""
        runs = self._runs
        first = cap is None                    # the first placement's SM ends just before it
        if not runs or left < 1 + (not first):
            return False
        r = runs[0][3]
        # (a run of k's own blocks completes nothing while k has blocks left to place)
        if r.k.threads != k.threads or (r.k is not k and self._limited(k)):
            return False
        d = self.d
        a = r.pos
        if first:
            f2 = min(((e[0], e[1]) for e in runs[1:3]), default=_NEVER)
            if r.count_until((x, ins0), True) != 1 or f2 <= (x, ins0):
                return False                   # one end, of this run, before p
            a += 1
        ends = np.asarray(r.ends[a:min(r.n, a + left - 1)])
        if not len(ends) or int(ends[0]) < x + d or _calls(k):
            if first:                          # a wave of one: the placement at p alone
                plan.wave, plan.n, plan.ends_first = r, 1, True
                plan.sms = r.sms[a - 1:a]
                plan.times, plan.ins = _chain(x, ins0, d, 1)
                return True
            return False
        prev = np.empty(len(ends), np.int64)
        prev[0] = x
        prev[1:] = ends[:-1]
        gaps = ends - prev
        short = np.flatnonzero(gaps < d)
        m = int(short[0]) if len(short) else len(ends)
        # a placement one step after the one before was scheduled by it; a later one by the
        # end that woke the distributor (the placement a step after the last found no room)
        ins = np.where(gaps[:m] == d, prev[:m], ends[:m])
        # each end before its placement (as the reference orders them) ...
        early = np.flatnonzero(np.asarray(r.ins[a:a + m]) >= ins)
        if len(early):
            m = int(early[0])
        # ... and no other run's end before a placement (it would free another SM)
        f2 = min(((e[0], e[1]) for e in runs[1:3]), default=_NEVER)
        m = min(m, _count_keys(ends[:m], ins[:m], min(f2, self._own_end(k, x)), False))
        if m < 1 and not first:
            return False
        m = max(m, 0)
        plan.wave, plan.n, plan.ends_first = r, m + 1, first
        sm0 = r.sms[a - 1:a] if first else [int(np.flatnonzero(cap)[0])]
        plan.sms = np.concatenate((sm0, r.sms[a:a + m]))
        plan.times = np.concatenate(([x], ends[:m]))
        plan.ins = np.concatenate(([ins0], ins[:m]))
        return True

    # -- placing -----------------------------------------------------------------------------------

    def _place(self, bound, f):
        plan = self._plan_at(self._disp, f)
        assert plan is None or not plan.dry  # (made with ends before it not taken)
        if plan is None:
            self._disp = None                  # idle until an end, an arrival or a resume
            self._version += 1
            return
        self._apply(plan, plan.count_until(bound, self.d))

    def _apply(self, plan, n):
        k, d = plan.k, self.d
        if plan.switch:
            x = int(plan.times[0])
            self._version += 1
            self._plan = None
            self._switch_to(k)
            self.dispatcher_free = x + self._switch
            self._disp = (x + self._switch, x)
            return
        self._current = k
        sms = plan.sms[:n]
        times = plan.times[:n]
        x = int(times[0])
        self._version += 1
        self._plan = None
        t = k.threads
        if plan.wave is not None:
            # the wave's ends come one before each placement after the first (and the first,
            # ends_first), on the same SM: those SMs stay full; only a first placement that
            # no end precedes takes room
            if not plan.ends_first:
                s = int(sms[0])
                self.ft[s] -= t
                self.fb[s] -= 1
            done = []
            r = plan.wave
            runs = self._runs
            assert runs[0][3] is r             # the plan was made from this state
            self._take_ends(r, n - 1 + plan.ends_first, done, free=False)
            _next_head(runs, r)
            for key, kk in done:
                self._complete(kk, key)
        elif n == 1:
            s = int(sms[0])
            self.ft[s] -= t
            self.fb[s] -= 1
        else:
            c = np.bincount(sms, minlength=self.S)
            self.ft -= c * t
            self.fb -= c
        # on the SMs now: n placed, less the wave's ends that made room for them
        self._out += 1 if plan.wave is not None and not plan.ends_first else \
            (0 if plan.wave is not None else n)
        tokens = [self._token + 1] if n == 1 else self._token + 1 + self._arange_n(n)
        self._token += n
        last = int(times[-1])
        saved = k.saved.pop(0) if plan.resumed else None
        if isinstance(saved, Waiting):
            # back in its dependency wait, as a block placed now with what is left of its
            # prologue (its lead: block 0's device-side call's place)
            self._start_blocks(k, times, sms, tokens, saved.prologue_ps - k.prologue_ps)
        elif plan.resumed:
            duration = saved
            end = x + duration
            self._add_run(k, np.array([end], np.int64), np.array([x], np.int64), sms, tokens)
            # timed again, as the reference does
            code = end - self._overhead
            trig = code if k.trigger_ps is None else min(x + k.trigger_ps, code)
            self._timed(k, x, trig, code, 1, x)
        else:
            call = 0
            if k.placed == 0:
                k.start = x
                self.resident += 1
                self.running += 1
                self.max_concurrent = max(self.max_concurrent, self.running)
                if k.dgl is not None and k.dgl[1]:
                    call = self._device_launch_call(k, x)
            k.placed += n
            self._start_blocks(k, times, sms, tokens, call)
        if k.placed == k.blocks and not k.saved:
            self.waiting.remove(k)
        self._sm = (int(sms[-1]) + 1) % self.S
        self.dispatcher_free = last + d
        self._disp = (last + d, last) if self.waiting else None
        self._check_complete_known(k)

    def _start_blocks(self, k, times, sms, tokens, call):
        """Blocks of ``k`` placed at ``times``: they run (their ends known), or wait in
        cudaGridDependencySynchronize for their primary's exit. ``call``: ps added to block
        0's lead to its wait (its device-side launch call; for a block resumed in its wait,
        the prologue it has left less the whole prologue)."""
        if k.primary is None and k.prologue_ps == 0 and len(times) == 1:
            # one block (most kernels' only one), in Python integers: no arrays to build
            t0 = int(times[0])
            code = t0 + ps(k.block_ns) + call
            self._add_run(k, [t0 + ps(k.block_ns + self.p.block_overhead_ns) + call], [t0],
                          [int(sms[0])], tokens)
            trig = code if k.trigger_ps is None else min(t0 + k.trigger_ps, code)
            self._timed(k, t0, trig, code, 1, t0)
        elif k.primary is None and k.prologue_ps == 0:
            # (rounded as the reference rounds them)
            code = times + ps(k.block_ns)
            ends = times + ps(k.block_ns + self.p.block_overhead_ns)
            if call:
                code[0] += call
                ends[0] += call
            self._runs_of(k, ends, times, sms, tokens)
            self._timed_blocks(k, times, times, code, int(times[-1]))
        elif k.primary is not None and k.primary.exit_at is None:
            if k.primary.gds_waiting is None:
                k.primary.gds_waiting = []
            k.primary.gds_waiting.append((k, times, sms, tokens, call))
        else:
            self._run_blocks(k, times, sms, tokens, call, None)

    def _run_blocks(self, k, placed, sms, tokens, call, moment):
        """Blocks of a PDL kernel (or one with a prologue) run from their prologue on, their
        primary's exit known: as they are placed (``moment`` None) or, having waited, at
        ``moment`` (when their ends are scheduled)."""
        synced = placed + k.prologue_ps
        if call:
            synced = synced.copy()
            synced[0] += call
        if k.primary is not None:
            synced = np.maximum(synced, k.primary.exit_at + self._flush)
        code = synced + ps(k.block_ns)
        if moment is None:
            ins, moment = placed, int(placed[-1])
        else:
            ins = np.full(len(placed), moment, np.int64)
        self._runs_of(k, code + self._overhead, ins, sms, tokens)
        self._timed_blocks(k, placed, synced, code, moment)

    def _runs_of(self, k, ends, ins, sms, tokens):
        """Runs for blocks whose ends are sorted but for a late first block (its device-side
        launch call)."""
        if len(ends) > 1 and ends[0] > ends[1]:
            self._add_run(k, ends[:1], ins[:1], sms[:1], tokens[:1])
            ends, ins, sms, tokens = ends[1:], ins[1:], sms[1:], tokens[1:]
        self._add_run(k, ends, ins, sms, tokens)

    def _add_run(self, k, ends, ins, sms, tokens):
        last = (int(ends[-1]), int(ins[-1]))
        if last > k._last:
            k._last = last
        k._pending -= len(ends)
        tail = k._tail
        if (tail is not None and tail.pos < tail.n
                and (int(ends[0]), int(ins[0])) > tail.last_key()):
            tail.append(ends, ins, sms, tokens)     # still in the heap, its head unchanged
            return
        r = _Run(k, ends, ins, sms, tokens)   # (a run reallocates before it appends)
        k._tail = r
        self._uid += 1
        heapq.heappush(self._runs, (int(ends[0]), int(ins[0]), self._uid, r))

    def _check_complete_known(self, k):
        """Every block of ``k`` has a known end: its completion's step, at its last end."""
        if k._pending == 0 and k.done < k.blocks:
            t, ins = k._last
            self.ev.at_as_of(t, ins, self._step)

    def _timed_blocks(self, k, placed, synced, code, moment):
        """:meth:`_timed` for blocks as arrays (placed, dependency wait returned, code
        ended)."""
        ex = int(code.max())
        trig = ex if k.trigger_ps is None else int(np.minimum(placed + k.trigger_ps, code).max())
        self._timed(k, int(synced[0]), trig, ex, len(placed), moment)

    def _timed(self, k, synced, trig, ex, count, moment):
        """``count`` blocks' triggers and exits are known (the first one's dependency wait
        returned at ``synced``, the latest trigger and code end); once all of ``k``'s are (at
        ``moment``), its held dependents become eligible and its waiting dependents' blocks
        run on."""
        if k.sync is None and k.stamped:
            k.sync = synced
        if trig > k._trig_max:
            k._trig_max = trig
        if ex > k._exit_max:
            k._exit_max = ex
        k._timed += count
        if k._timed < k.blocks:
            return
        k.trigger_at, k.exit_at = k._trig_max, k._exit_max
        self._release_dependents(
            k, lambda t, fn, *args: self.ev.at_as_of(t, moment, fn, *args))
        for dep, times, sms, tokens, call in k.gds_waiting or ():
            self._run_blocks(dep, times, sms, tokens, call, moment)
            self._check_complete_known(dep)
        k.gds_waiting = None

    # -- when to look again ---------------------------------------------------------------------

    def _attend(self):
        """Schedule a step where the distributor's next chunk ends (so that what it places
        goes out in time), or where the next block end wakes a waiting distributor."""
        runs = self._runs
        f = (runs[0][0], runs[0][1]) if runs else _NEVER
        p = self._disp
        if p is not None:
            plan = self._plan_at(p, f)
            if plan is None or plan is _ENDS_FIRST or _calls(plan.k):
                key = p                        # (a block 0's device-side launch goes out)
            else:
                key = plan.key(plan.n - 1)
        elif self.waiting and runs:
            key = f
        else:
            return
        if self._step_at is None or key < self._step_at:
            self._step_at = key
            self.ev.at_as_of(key[0], key[1], self._step)
