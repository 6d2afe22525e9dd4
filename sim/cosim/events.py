"""A deterministic event queue in integer picoseconds.

Everything outside the RTL (CPU thread, PCIe, host memory, engines) schedules callbacks here.
Events due at the same time run in the order they were scheduled: by the time they were
scheduled at, then by insertion order, so the same inputs always give the same order.

An event may also be scheduled *as of* an earlier time (:meth:`EventQueue.at_as_of`): it then
runs among the events due with it as if it had been scheduled at that time. The compute
engine computes a kernel's blocks in aggregate and schedules what comes of them (a kernel's
completion, a dependent's launch) where its per-block reference would have, from the block
placement that causes it.
"""

import heapq

PS_PER_NS = 1000


def ps(ns):
    """Nanoseconds (int or float) to integer picoseconds."""
    return int(round(ns * PS_PER_NS))


class EventQueue:
    def __init__(self):
        self._heap = []
        self._seq = 0
        self.now = 0            # ps
        self.key = (0, 0)       # (due, scheduled at) of the event running now

    def at(self, time_ps, callback, *args):
        now = self.now
        if time_ps < now:
            time_ps = now
        # (due, scheduled at, insertion order): since ``now`` never goes back, the same order
        # as (due, insertion order) for every event scheduled at its own time
        heapq.heappush(self._heap, (time_ps, now, self._seq, callback, args))
        self._seq += 1

    def at_as_of(self, time_ps, scheduled_ps, callback, *args):
        """``callback`` due at ``time_ps``, ordered among the events due with it as if it
        had been scheduled at ``scheduled_ps`` (no later than now)."""
        if time_ps < self.now:
            time_ps = self.now
        heapq.heappush(self._heap, (time_ps, scheduled_ps, self._seq, callback, args))
        self._seq += 1

    def after(self, delay_ps, callback, *args):
        self.at(self.now + delay_ps, callback, *args)

    def next_time(self):
        return self._heap[0][0] if self._heap else None

    def run_due(self, until_ps):
        """Run every callback due at or before ``until_ps``; advances ``now``."""
        ran = False
        heap = self._heap
        while heap and heap[0][0] <= until_ps:
            t, scheduled, _, cb, args = heapq.heappop(heap)
            if t > self.now:
                self.now = t
            self.key = (t, scheduled)
            cb(*args)
            ran = True
        self.now = max(self.now, until_ps)
        return ran

    def __len__(self):
        return len(self._heap)
