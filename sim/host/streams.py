"""How the UMD orders work: one syncpoint counter per stream (DESIGN.md section 2).

- Each piece of a stream's work releases the stream's syncpoint (value = the stream's work
  count) and the next piece of the same stream acquires it first, so kernels of one stream are
  ordered and kernels of two streams sharing a channel are not. A kernel carries its release
  in its launch descriptor (as a QMD's release fields: the counter is set as the kernel
  completes, and the channel goes on meanwhile); a copy's is a release behind it.
- An event record is a piece of the stream's work too: its own release (the event's host
  semaphore, with its time stamp for a timing event), then the stream's syncpoint, so that a
  wait for the event waits for that release, as on the GPU (a waiter starts after it, not as
  the work before it ends). It captures the stream's frontier: its syncpoint, and whatever
  the stream waited for since (so a dependency passes on through any number of events).
  ``stream_wait_event`` acquires every syncpoint of that frontier on the
  waiting stream's channel, and the stream's next work on another channel (a copy channel)
  acquires them again, since channel order does not reach there.
- Every piece of a stream's work also reaches the stream's tracking semaphore in host memory
  (a kernel's as a QMD's second release; a copy's, event record's or graph launch's as a
  RELEASE_WFI just before its syncpoint's, so that the stream's next work, which waits for
  the syncpoint, cannot write it first): a host wait polls it. Each is a reduction IMAX,
  which never lowers it: a RELEASE_WFI on a channel that other streams share waits for
  their work too, and the stream's next work (a copy on another channel, a kernel whose QMD
  release goes out at its end) may have raised it meanwhile. One whose stream has waited
  for an event since its latest work pushes a release of the stream's host semaphore behind
  the stream (a fence), and polls that.
"""

from dataclasses import dataclass, field

from gpufe.rtl.layouts import SemOp
from gpufe.sim.host.encode import PushBuffer, syncpoint_address


@dataclass
class Stream:
    name: str
    id: int
    priority: int                   # CUDA: 0 least, negative greater
    channel: object                 # its compute channel (umd.Channel; a launch may move it)
    syncpoint: int
    work: int = 0                   # releases of its syncpoint so far
    last_channel: object = None     # channel of its latest work
    capture: object = None          # the capture (graphs.Capture) it takes part in, if any
    host_sem: int = 0
    host_value: int = 0
    # host memory its work's releases also reach (the stream's tracking semaphore, which a
    # host wait polls; a kernel's as a QMD's second release)
    tracking: int = 0
    # syncpoint -> value acquired by stream_wait_event since the stream's latest work, on its
    # compute channel: later work on that channel is behind them in channel order, work on
    # a copy channel acquires them again; the stream's next release stands for them
    waits: dict = field(default_factory=dict)
    # PDL: the stream's latest op was a kernel launch (captured or not), with nothing else
    # issued to it or waited for since: a programmatic launch now depends on that kernel
    after_kernel: bool = False
    # its latest work is a graph launch on ``last_channel``, nothing waited for since: the
    # graph walker runs that channel's launches one after another, so the next launch there
    # needs no acquire (its set-up starts while the one before runs)
    after_graph: bool = False
    lock: object = None             # the driver's lock on it (runtime.DriverLock)
    launched: bool = False          # a kernel has been launched into it (not captured)


def acquire(cfg, pb, syncpoint, value):
    pb.sem_acquire(syncpoint_address(cfg, syncpoint), value, SemOp.ACQ_CIRC_GEQ)


def order_after_stream(cfg, pb, stream, ch, behind=0, graph=False):
    """Acquire the stream's syncpoint when its latest work may still run, and, on a channel
    other than the stream's own, what the stream has waited for since (on its own channel
    those acquires are already ahead in the channel). ``behind``: acquire the completion of
    the work that many releases back instead (a PDL launch, which the compute work
    distributor orders behind its primary itself). ``graph``: for a graph launch, which
    needs none behind a graph launch of the stream on the same channel."""
    if graph and stream.after_graph and not stream.waits and stream.last_channel is ch:
        return
    if stream.work > behind:
        acquire(cfg, pb, stream.syncpoint, stream.work - behind)
    if ch is not stream.channel:
        for sp, value in sorted(stream.waits.items()):
            acquire(cfg, pb, sp, value)


def pdl_primary(stream, ch):
    """The release value of the kernel a programmatic launch on ``stream`` (to channel
    ``ch``) depends on: the stream's latest op when that was a kernel launch (nothing else
    issued to the stream, nor waited for, since), on the same channel; else None (the launch
    is ordered as any other)."""
    if stream.after_kernel and not stream.waits and stream.last_channel is ch:
        return stream.work
    return None


def stream_frontier(stream):
    """Syncpoint -> value: everything issued to the stream so far, waits included."""
    deps = dict(stream.waits)
    if stream.work:
        deps[stream.syncpoint] = stream.work
    return deps


def release_on_completion(stream, ch):
    """A kernel's own release of its stream's syncpoint, (syncpoint, value), for its launch
    descriptor: set by the engine as the kernel completes; no channel release waits for it,
    so the channel runs on."""
    stream.work += 1
    stream.last_channel = ch
    stream.waits = {}
    stream.after_graph = False
    return (stream.syncpoint, stream.work)


def release_stream(cfg, pb, stream, ch):
    """The stream's tracking semaphore in host memory released behind the work just pushed
    (RELEASE_WFI), then its syncpoint."""
    stream.work += 1
    stream.last_channel = ch
    stream.waits = {}
    stream.after_graph = False
    # the tracking semaphore first: the stream's next work, perhaps on another channel, waits
    # for the syncpoint, so its own tracking release cannot land before this one
    pb.sem_release_max(stream.tracking, stream.work, wfi=True)
    pb.sem_release(syncpoint_address(cfg, stream.syncpoint), stream.work, wfi=False)


def host_wait(cfg, stream):
    """What a host wait for the stream polls, ``(address, value, fence)``: the tracking
    semaphore when the stream has waited for nothing since its latest work (``fence`` None:
    nothing to push), else its host semaphore behind a fence (:func:`host_fence`) to push
    first; None when there is nothing to wait for."""
    if stream.work and not stream.waits:
        return stream.tracking, stream.work, None
    pb = host_fence(cfg, stream)
    return None if pb is None else (stream.host_sem, stream.host_value, pb)


def host_fence(cfg, stream):
    """Commands that write the stream's host semaphore once its work, and what it waits for,
    is done; None when there is nothing to wait for."""
    if stream.work == 0 and not stream.waits:
        return None
    stream.host_value += 1
    pb = PushBuffer()
    order_after_stream(cfg, pb, stream, stream.channel)
    pb.sem_release(stream.host_sem, stream.host_value, wfi=False)
    return pb
