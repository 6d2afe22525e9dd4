"""Runlist scheduler, which context the front end serves and when it switches:
:class:`RunlistScheduler`."""

from amaranth import Module, Signal, Cat, Const, Mux
from amaranth.lib import wiring, stream, data
from amaranth.lib.wiring import In, Out

from .bits import lowest_set
from .config import FrontEndConfig
from .layouts import RunlistState, context_switch_layout

__all__ = ["RunlistScheduler", "NEVER"]

#: ``wake_at`` when no deadline is set
NEVER = (1 << 64) - 1


class RunlistScheduler(wiring.Component):
    """Runlist scheduler: which context (TSG) the front end serves, and when it switches.

    The runlist is the KMD's channel table: every channel belongs to a TSG (``channel_tsg``,
    one per CUDA context, that is one per process: ``tsg_mask``). One TSG is served at a time: only its
    channels are ``served`` (the PBDMAs load nothing else) and only its work runs on the
    engines. The active TSG keeps the front end until its timeslice (``timeslice`` ns) has run
    out while another TSG has work, or until it has no work left while another has. Then the
    scheduler switches: the engines are told to preempt the old TSG (``context`` with ``run``
    0), nothing is served for ``switch_time`` ns (the context is saved and the next one
    loaded), ``preempt_time`` ns more when the old TSG still had work (a timeslice ran out:
    its work in flight is preempted and its state saved, which a TSG that ran dry does not
    need), and the next TSG with work, in round-robin order of TSG ids, becomes active with a
    fresh timeslice (``context`` with ``run`` 1). A timeslice counts only while another TSG has
    work (before that, it starts afresh every cycle). A TSG has work while one of its channels
    has GPFIFO entries not decoded, a method to replay, a parked acquire or a release waiting
    (``busy``), or while its work is in flight on the engines (``tsg_in_flight``).

    Both timers are deadlines on ``now``, not counters: nothing changes while one runs, so a
    harness may jump time up to ``wake_at``, the next deadline.

    Timing: a switch starts the cycle after its condition holds (the ``context`` record is
    offered then, held until taken); the new TSG is served from the first cycle at or after the
    switch's deadline once the first record has been taken.

    Parameters
    ----------
    cfg : FrontEndConfig
        Sizes: ``channels``, ``tsgs``.

    Attributes
    ----------
    tsg_mask : In(data.ArrayLayout(cfg.channels, cfg.tsgs))
        The channels of each TSG (MMIO ``ChannelReg.TSG``).
    busy : In(cfg.channels)
        Channels with work in the front end (see above).
    tsg_in_flight : In(cfg.tsgs)
        TSGs with work in flight on the engines.
    timeslice : In(32)
        ns a TSG may run while another has work (0: switch whenever another has work).
    switch_time : In(32)
        ns a switch between TSGs takes.
    preempt_time : In(32)
        ns a switch takes more when the TSG switched out still has work.
    now : In(64)
        The current time in ns.
    served : Out(cfg.channels)
        Channels of the active TSG, while no switch is under way.
    active : Out(cfg.tsg_bits)
        The TSG being served (or switched to).
    state : Out(RunlistState)
        RUN or SWITCH.
    context : Out(stream.Signature(context_switch_layout(cfg)))
        To the engines: a TSG stops (``run`` 0) or starts (``run`` 1). Held until taken.
    wake_at : Out(64)
        The next deadline in ns (end of the switch, or of the timeslice while another TSG has
        work); ``NEVER`` when none.
    quiescent : Out(1)
        Nothing to do until an input changes or ``now`` reaches ``wake_at``.
    """

    def __init__(self, cfg):
        if not isinstance(cfg, FrontEndConfig):
            raise TypeError(f"RunlistScheduler: cfg must be a FrontEndConfig, "
                            f"not {type(cfg).__name__}")
        self.cfg = cfg
        n, tb = cfg.channels, cfg.tsg_bits
        super().__init__({
            "tsg_mask": In(data.ArrayLayout(n, cfg.tsgs)),
            "busy": In(n),
            "tsg_in_flight": In(cfg.tsgs),
            "timeslice": In(32),
            "switch_time": In(32),
            "preempt_time": In(32),
            "now": In(64),
            "served": Out(n),
            "active": Out(tb),
            "state": Out(RunlistState),
            "context": Out(stream.Signature(context_switch_layout(cfg))),
            "wake_at": Out(64),
            "quiescent": Out(1),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        n, t, tb = cfg.channels, cfg.tsgs, cfg.tsg_bits

        active = Signal(tb)
        target = Signal(tb)
        state = Signal(RunlistState)
        slice_end = Signal(64)
        switch_end = Signal(64)
        ctx = self.context
        m.d.comb += [self.active.eq(active), self.state.eq(state)]

        # TSGs with work, and the others' in round-robin order after the active one
        tsg_busy = Signal(t)
        for g in range(t):
            m.d.comb += tsg_busy[g].eq((self.busy & self.tsg_mask[g]).any()
                                       | self.tsg_in_flight[g])
        others = Signal(t)
        m.d.comb += others.eq(tsg_busy & ~(Const(1, t) << active)[:t])
        # rotate so that the TSG after the active one comes first, pick the lowest, unrotate
        rotated = Signal(2 * t)
        m.d.comb += rotated.eq(Cat(others, others) >> (active + 1))
        offset = Signal(tb + 1)
        m.d.comb += offset.eq(lowest_set(rotated[:t], tb) + active + 1)
        nxt = Signal(tb)
        m.d.comb += nxt.eq(Mux(offset >= t, offset - t, offset))

        active_busy = tsg_busy.bit_select(active, 1)
        # the timeslice runs only while another TSG has work: until then it starts afresh
        armed = Signal()
        with m.If((state == RunlistState.RUN) & (~armed | ~others.any())):
            m.d.sync += [slice_end.eq(self.now + self.timeslice), armed.eq(1)]
        want = Signal()
        m.d.comb += want.eq((state == RunlistState.RUN) & others.any()
                            & (~active_busy | (armed & (self.now >= slice_end))))
        with m.If(ctx.ready):
            m.d.sync += ctx.valid.eq(0)
        with m.Switch(state):
            with m.Case(RunlistState.RUN):
                with m.If(want & ~ctx.valid):
                    m.d.sync += [state.eq(RunlistState.SWITCH), target.eq(nxt),
                                 switch_end.eq(self.now + self.switch_time
                                               + Mux(active_busy, self.preempt_time, 0)),
                                 ctx.valid.eq(1), ctx.payload.tsg.eq(active),
                                 ctx.payload.run.eq(0)]
            with m.Case(RunlistState.SWITCH):
                with m.If((self.now >= switch_end) & ~ctx.valid):
                    m.d.sync += [state.eq(RunlistState.RUN), active.eq(target),
                                 slice_end.eq(self.now + self.timeslice),
                                 ctx.valid.eq(1), ctx.payload.tsg.eq(target),
                                 ctx.payload.run.eq(1)]

        running = state == RunlistState.RUN
        m.d.comb += self.served.eq(Mux(running, self.tsg_mask.as_value().word_select(active, n),
                                       0))
        with m.If(~running):
            m.d.comb += self.wake_at.eq(switch_end)
        with m.Elif(others.any() & active_busy):
            m.d.comb += self.wake_at.eq(slice_end)
        with m.Else():
            m.d.comb += self.wake_at.eq(NEVER)
        m.d.comb += self.quiescent.eq(~ctx.valid & ~want
                                      & ~(~running & (self.now >= switch_end)))
        return m
