"""A deterministic event queue in integer picoseconds.

Everything outside the RTL (CPU thread, PCIe, host memory, engines) schedules callbacks here.
Ties are broken by insertion order, so the same inputs always give the same order.
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

    def at(self, time_ps, callback, *args):
        if time_ps < self.now:
            time_ps = self.now
        heapq.heappush(self._heap, (time_ps, self._seq, callback, args))
        self._seq += 1

    def after(self, delay_ps, callback, *args):
        self.at(self.now + delay_ps, callback, *args)

    def next_time(self):
        return self._heap[0][0] if self._heap else None

    def run_due(self, until_ps):
        """Run every callback due at or before ``until_ps``; advances ``now``."""
        ran = False
        while self._heap and self._heap[0][0] <= until_ps:
            t, _, cb, args = heapq.heappop(self._heap)
            self.now = max(self.now, t)
            cb(*args)
            ran = True
        self.now = max(self.now, until_ps)
        return ran

    def __len__(self):
        return len(self._heap)
