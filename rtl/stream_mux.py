"""Two valid/ready sources onto one sink, alternating when both have something.

The choice changes only on a cycle where the chosen source is not offering a payload or its
payload is being taken, so a payload, once offered, stays on the output until taken.
"""

from amaranth import Module, Signal, Mux
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out


class StreamMux(wiring.Component):
    def __init__(self, layout):
        super().__init__({
            "a": In(stream.Signature(layout)),
            "b": In(stream.Signature(layout)),
            "out": Out(stream.Signature(layout)),
        })

    def elaborate(self, platform):
        m = Module()
        sel_b = Signal()
        a, b, o = self.a, self.b, self.out
        m.d.comb += [
            o.valid.eq(Mux(sel_b, b.valid, a.valid)),
            o.payload.eq(Mux(sel_b, b.payload, a.payload)),
            a.ready.eq(~sel_b & o.ready),
            b.ready.eq(sel_b & o.ready),
        ]
        # free: the chosen source offers nothing, or what it offers is taken now
        with m.If(~o.valid | o.ready):
            with m.If(sel_b & a.valid):
                m.d.sync += sel_b.eq(0)
            with m.Elif(~sel_b & b.valid):
                m.d.sync += sel_b.eq(1)
        return m
