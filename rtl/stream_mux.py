"""Two valid/ready sources onto one sink: :class:`StreamMux`."""

from amaranth import Module, Signal, Mux, Shape
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out

__all__ = ["StreamMux"]


class StreamMux(wiring.Component):
    """Two valid/ready sources onto one sink, alternating when both have something.

    The choice changes only on a cycle where the chosen source is not offering a payload or its
    payload is being taken, so a payload, once offered, stays on the output until taken.

    Timing: the chosen source reaches ``out`` combinationally (no register on the data path),
    one payload a cycle; with both sources offering, they take turns cycle by cycle. A source
    that is not the chosen one waits at least one cycle for the choice to turn to it.

    Parameters
    ----------
    layout : shape-castable
        Shape of the payload of all three streams (a width, a :class:`~amaranth.hdl.Shape`, a
        data layout, an enum...).

    Attributes
    ----------
    a : In(stream.Signature(layout))
        First source; chosen after reset.
    b : In(stream.Signature(layout))
        Second source.
    out : Out(stream.Signature(layout))
        The sink: the chosen source's ``valid`` and ``payload``; its ``ready`` goes back to the
        chosen source only.
    """

    def __init__(self, layout):
        try:
            Shape.cast(layout)
        except (TypeError, ValueError) as e:
            raise TypeError(f"StreamMux: layout must be a shape (a width, a Shape, a data "
                            f"layout...), not {layout!r}") from e
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
