"""The user-mode driver (UMD): which channel a stream's work goes on, push buffers, kickoff.

- Channels: ``max_connections`` compute channels (CUDA_DEVICE_MAX_CONNECTIONS) and two copy
  channels, one for H2D and one for D2H copies, from the process's first channel on, all in
  its TSG (the KMD's channel table). Each has a GPFIFO ring and a push buffer in
  host memory; the KMD sets its context up when it is created, before the program runs.
- Streams on channels: the i-th stream created goes on compute channel i mod
  ``max_connections`` (round robin). A kernel launch stays on its stream's channel unless
  another stream has launched a kernel there since this stream's own latest launch; then it
  goes, and the stream with it, to the round robin's next channel (ordered behind the
  stream's earlier work by its syncpoint, as any work on another channel is). With no more
  streams than channels nothing moves. With more, breadth-first launches whose number a
  round is no multiple of the channels spread every stream over two or more channels, while
  launches in a row into one stream, or rounds of a multiple of the channels, keep stream
  mod channels (probe ``channel_choice``, CUPTI's channel of every kernel on the H200: 24
  streams on 16 connections launched breadth first alternate kernel by kernel between two
  channels, three streams to a pair, as the rule gives; 16 to 64 streams on 8 breadth or
  depth first stay on stream mod 8; 12 host threads' streams on 8 connections: 93% of the
  launches with no other stream's launch on the channel since stay, 75% of those with one
  move, and the rule run on that trace's launch order keeps 55% of a stream's kernels on the
  channel of the one before, the H200 64%). A stream's CUDA priority does not reach its
  channel: it travels in each launch descriptor to the compute work distributor, the one
  place the H200 applies it (probe ``third_recording``: a high-priority chain among 16 busy
  channels is served at the same period as the others); every channel stays at the front
  end's least priority level.
  H2D and D2H copies go to their copy channel, D2D copies to the stream's own compute channel.
- Kickoff: the commands of ``kickoff_batch`` API calls on a channel go out as one GPFIFO entry
  and one doorbell (1: every call at once); synchronizing calls, host sleeps and the end of
  the program flush every channel. A kickoff that finds the channel's ring or push buffer full
  blocks the calling thread until the GPU has read enough. As it kicks a launch off, the UMD
  writes the time into its launch descriptor (CUPTI's "submitted").
- Memory: descriptor blocks come from the pool the engines give them back to once they have
  read them; copy destinations from a bump allocator over device memory.
"""

from collections import deque
from dataclasses import dataclass, field

from gpufe.rtl.layouts import DEVICE_MEMORY_BASE, DEVICE_ALLOC_ALIGN
from gpufe.sim.cosim.hostmem import SegmentRing
from gpufe.sim.host.encode import gp_entry, submitted_update


@dataclass
class Channel:
    id: int
    kind: str                       # "compute", "h2d", "d2h"
    ring_base: int
    ring_entries: int
    pb_bytes: int
    put: int = 0
    outstanding: int = 0            # GPFIFO entries the GPU has not decoded to their end
    pb_used: int = 0
    # (PushBuffer, launch descriptor address or None) of calls not kicked off yet
    pending: list = field(default_factory=list)
    pb_ring: SegmentRing = None     # the push buffer in host memory, segments carved from it
    last_launcher: object = None    # the stream of the latest kernel launched here
    get: int = 0                    # the last GP_GET the front end reported
    # push-buffer bytes of each entry kicked off and not yet decoded, oldest first
    kicked: deque = field(default_factory=deque)


class Umd:
    def __init__(self, cosim, kmd, process):
        self.sim = cosim
        self.p = cosim.p
        self.kmd = kmd
        self.process = process
        mc, base = process.max_connections, process.channel_base
        if base + mc + 2 > cosim.cfg.channels:
            raise ValueError(f"process {process.name!r}: max_connections {mc} needs channels "
                             f"{base}..{base + mc + 1}; the front end has {cosim.cfg.channels} "
                             f"(parameter hw_channels)")
        self.compute_channels = [self._make_channel(base + i, "compute") for i in range(mc)]
        self.copy_channels = {"h2d": self._make_channel(base + mc, "h2d"),
                              "d2h": self._make_channel(base + mc + 1, "d2h")}
        self._next_device_address = DEVICE_MEMORY_BASE
        self._next_compute = 0          # the round robin over the compute channels

    def _make_channel(self, cid, kind):
        entries = self.p.gpfifo_entries
        base = self.sim.mem.alloc(8 * entries)
        ch = Channel(cid, kind, base, entries, self.p.pushbuffer_bytes,
                     pb_ring=SegmentRing(self.sim.mem, self.p.pushbuffer_bytes))
        self.kmd.create_channel(cid, base, entries)
        self.sim.retire_hooks[cid] = lambda get, t, ch=ch: self._retired(ch, get, t)
        if self.process.tsg:
            self.kmd.assign_tsg(cid, self.process.tsg)
        return ch

    @property
    def channels(self):
        return self.compute_channels + list(self.copy_channels.values())

    # -- which channel -----------------------------------------------------------------------------

    def _round_robin(self):
        ch = self.compute_channels[self._next_compute]
        self._next_compute = (self._next_compute + 1) % len(self.compute_channels)
        return ch

    def stream_channel(self):
        """The compute channel of a stream being created: the round robin's next."""
        return self._round_robin()

    def launch_channel(self, stream, launched):
        """The compute channel of ``stream``'s next kernel launch (``launched``: it has
        launched one before): its channel, unless another stream has launched there since its
        own latest launch; then the round robin's next. The caller moves the stream there once
        the launch is ordered behind its earlier work."""
        ch = stream.channel
        if launched and ch.last_launcher is not None and ch.last_launcher is not stream:
            ch = self._round_robin()
        ch.last_launcher = stream
        return ch

    def copy_channel(self, kind, stream):
        return self.copy_channels.get(kind, stream.channel)

    # -- memory -----------------------------------------------------------------------------------

    def take_descriptor(self):
        """A descriptor block; the engine that reads it gives it back."""
        return self.sim.descriptors.take()

    def device_alloc(self, nbytes):
        a = self._next_device_address
        self._next_device_address += max(DEVICE_ALLOC_ALIGN, -(-nbytes // DEVICE_ALLOC_ALIGN)
                                         * DEVICE_ALLOC_ALIGN)
        return a

    # -- commands and kickoff ----------------------------------------------------------------------

    def queue(self, ch, pb, descriptor=None):
        """Commands for the channel's next kickoff (``descriptor``: the launch's, which gets
        its submitted time then)."""
        ch.pending.append((pb, descriptor))

    def submit(self, ch, pb, descriptor=None):
        """Queue commands on a channel; kick off when the policy says so. Returns whether the
        CPU had to wait for space."""
        self.queue(ch, pb, descriptor)
        if len(ch.pending) >= self.p.kickoff_batch:
            return (yield from self.kickoff(ch))
        return False

    def flush_all(self, cost=None):
        for ch in self.channels:
            if ch.pending:
                yield ("cpu", self.p.kickoff_ns if cost is None else cost)
                yield from self.kickoff(ch)

    def kickoff(self, ch):
        """One GPFIFO entry for everything queued on the channel, then the doorbell; block
        while the ring or the push buffer is full."""
        if not ch.pending:
            return False      # another host thread's kickoff took what was queued
        # taken now: what other host threads queue while this one waits is theirs to kick off
        items, ch.pending = ch.pending, []
        mem = self.sim.mem
        words = [w for pb, _ in items for w in pb.words]
        nbytes = 4 * len(words)
        full = lambda: (ch.outstanding >= ch.ring_entries - 1
                        or ch.pb_used + nbytes > ch.pb_bytes)
        blocked = full()
        while full():         # (another thread woken by the same space may take it first)
            yield ("wait", lambda: not full(),
                   f"a kickoff on channel {ch.id} waiting for GPFIFO or push-buffer space")
        seg = ch.pb_ring.place(nbytes)      # fits: at most pb_bytes are in flight
        mem.write_dwords(seg, words)
        entry = gp_entry(seg, len(words))
        mem.write_dwords(ch.ring_base + 8 * ch.put, [entry & 0xFFFFFFFF, entry >> 32])
        ch.put = (ch.put + 1) % ch.ring_entries
        ch.outstanding += 1
        ch.pb_used += nbytes
        offset, submitted = submitted_update(self.sim.now_ns)
        for _, descriptor in items:
            if descriptor is not None:
                mem.write_dwords(descriptor + offset, submitted)
        ch.kicked.append(nbytes)
        self.kmd.ring_doorbell(ch.id, ch.put)
        return blocked

    def _retired(self, ch, get, t_ps):
        """The front end moved the channel's GP_GET to ``get``: the entries before it are
        decoded, their ring slots and push-buffer segments free once the update is visible
        (``t_ps``)."""
        n = (get - ch.get) % ch.ring_entries
        ch.get = get
        if n:
            self.sim.ev.at(max(t_ps, self.sim.ev.now), self._free, ch,
                           [ch.kicked.popleft() for _ in range(n)])

    def _free(self, ch, sizes):
        for nbytes in sizes:
            ch.outstanding -= 1
            ch.pb_used -= nbytes
            ch.pb_ring.release()
        self.sim.poke_cpu()
