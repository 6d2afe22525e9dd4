"""Simulation backends for the FrontEnd: the harness's narrow interface to the RTL.

The harness never drives the clock itself. It queues inputs with the cycle they are due at,
and asks the backend to run until something needs the host:

- ``push(port, cycle, payload)``: an input transfer on stream ``port`` (``"mmio"``,
  ``"dma_read_resp"``, ``"compute_done"``, ``"copy_done"``); due entries are offered one a
  cycle, in order, and leave their queue when the RTL takes them;
- ``push_packed(port, cycles, values)``: several at once, payloads already packed into ints
  (with ``offsets(port)``, the bit offset of each payload field);
- ``offers()``: at a ``"transfer"`` stop, the output streams offering a transfer;
- ``quiet``: the RTL was idle and took no input at the last cycle it ran, so its state cannot
  change until an input is due (what lets the harness run engine events ahead of it);
- ``write_ready_from(cycle)``: the DMA write port is busy before ``cycle``;
- ``serve_dma_reads(mem, latency_ps, step_ps)``: answer DMA read requests from ``mem``
  without stopping, if the backend can (the compiled loop mirrors host memory); False: it
  stops at each and the harness answers;
- ``wake()``: while ``quiet``, the RTL's own next timer deadline in ns (``WAKE_NEVER``: none):
  its state changes then even with no input;
- ``run(until)``: runs cycles (from the current one) until an output transfer is offered
  (a DMA read or write, a compute or copy dispatch: returns ``"transfer"`` before that
  cycle's clock edge, with the payloads readable by ``get``), until cycle ``until`` is
  reached (``"until"``), or, with ``until`` None, until the RTL is idle with nothing queued
  (``"idle"``). The next ``run`` first lets the offered transfers happen.
- While the RTL is idle and no input is due, time jumps to the next due input, the RTL's own
  next timer deadline (its ``wake_at`` output, in ns), or ``until`` (``jumps=False`` clocks
  every cycle; the results are the same).

Every cycle: ``now`` = cycle * cycle_ps // 1000 ns; due inputs are offered; outputs settle;
an offered output stops the run; the clock edge; taken inputs leave their queues.

:class:`PysimBackend` is Amaranth's Python simulator; :class:`gpufe.sim.cosim.compiled.CxxrtlBackend`
runs the same loop in C++ over the design compiled by Yosys CXXRTL.

Waveforms: :class:`PysimBackend` writes a VCD of the whole run (``vcd`` a path) or of a window
of it (``vcd`` a :class:`VcdWindow`). A window is traced only while it lasts: the run goes
without tracing (at full speed) until the window's first cycle (a time jump stops there, so
that cycle is clocked), then Amaranth's VCD writer is opened (its first values are the design's
state then), and closed after the window's last cycle. Tracing only observes: the timeline is
the same.
"""

from collections import deque
from dataclasses import dataclass
import sys

from amaranth.hdl import Value
from amaranth.lib import data, enum
from amaranth.sim import Simulator

INPUT_STREAMS = ("mmio", "dma_read_resp", "compute_done", "copy_done", "device_launch")
OUTPUT_STREAMS = ("dma_read_req", "dma_write", "compute", "copy", "context", "retired")
BUSY_CAP = 50_000_000        # cycles the RTL may stay busy with nothing external happening
_NEVER = 1 << 127            # a cycle no run reaches
WAKE_NEVER = (1 << 64) - 1   # the FrontEnd's wake_at when it has no timer set


@dataclass(frozen=True)
class VcdWindow:
    """A VCD of part of a run: the cycles whose time (in ns, as in the timeline and the ``now``
    signal) lies in ``from_ns`` .. ``to_ns``, both included (``to_ns`` None: to the run's
    end). The file's times count from the window's first cycle (clocked cycles only: the
    simulator jumps over idle stretches; ``now`` says the model's time)."""
    path: str
    from_ns: int = 0
    to_ns: int = None

    def __post_init__(self):
        if self.from_ns < 0:
            raise ValueError(f"VCD window from {self.from_ns} ns: must be at least 0")
        if self.to_ns is not None and self.to_ns < self.from_ns:
            raise ValueError(f"VCD window from {self.from_ns} ns to {self.to_ns} ns: the end is "
                             f"before the start")

    def cycles(self, cycle_ps):
        """First and last cycle of the window (cycle ``c`` is at ``c * cycle_ps`` ps)."""
        first = -(-self.from_ns * 1000 // cycle_ps)
        last = _NEVER if self.to_ns is None else self.to_ns * 1000 // cycle_ps
        return first, last

    def __fspath__(self):
        return self.path

    def __str__(self):
        return self.path


class _WindowVcdFile:
    """The VCD text as Amaranth's writer (pyvcd) makes it, its timestamps counted from
    ``start_fs``, the simulator time at which the window opened. pyvcd writes whole lines,
    a timestamp line (``#T``) alone or followed by one value line; its first timestamp,
    before the initial values, is 0 and stays 0."""

    def __init__(self, f, start_fs):
        self.f, self.start, self.last = f, start_fs, None

    def write(self, text):
        if text.startswith("#"):
            stamp, _, rest = text[1:].partition("\n")
            t = max(int(stamp) - self.start, 0)
            if t != self.last:                  # the window's first changes go at 0 too
                self.last = t
                self.f.write(f"#{t}\n")
            text = rest
        if text:
            self.f.write(text)

    def flush(self):
        self.f.flush()


class Record:
    """A port payload as plain ints, by field name (what the harness reads)."""

    def __init__(self, fields):
        self.__dict__.update(fields)


class BackendBase:
    """Port naming and payload packing shared by the backends. Payloads of the FrontEnd's
    ports are flat struct layouts; they are packed and unpacked with precomputed field
    offsets (Amaranth's own constants are too slow per transaction)."""

    def __init__(self, dut, cycle_ps, jumps=True):
        self.dut = dut
        self.cycle_ps = cycle_ps
        self.jumps = jumps
        self.cycle = 0
        self.stats = {"rtl_cycles": 0, "jumped_cycles": 0, "jumps": 0}
        self._shapes = {}
        self._fields = {}
        for path, _, port in dut.signature.flatten(dut):
            name = "__".join(str(p) for p in path)
            self._shapes[name] = port
            shape = port.shape() if hasattr(port, "shape") else None
            if isinstance(shape, data.StructLayout):
                self._fields[name] = [(f, field.offset, (1 << field.width) - 1)
                                      for f, field in shape]

    def pack(self, name, value):
        if isinstance(value, int):
            return value
        fields = self._fields.get(name)
        if fields is not None:
            bits = 0
            for f, offset, mask in fields:
                v = value.get(f, 0)
                bits |= (int(v.value if isinstance(v, enum.Enum) else v) & mask) << offset
            return bits
        return int(value.value if isinstance(value, enum.Enum) else value)

    #: the last stop found ``retired`` transfers logged (:meth:`log_retired`)
    logged = False

    def log_retired(self, horizon_ps):
        """Log ``retired`` transfers instead of stopping at each (the compiled loop does);
        nothing here: this backend stops at every transfer."""

    def take_retired(self):
        """The ``retired`` transfers logged since the last stop, as (cycle, record)."""
        return []

    def serve_dma_reads(self, mem, latency_ps, step_ps):
        """Answer DMA read requests without stopping (the compiled loop can: see
        :meth:`CxxrtlBackend.serve_dma_reads`); False: this backend stops at each, and the
        harness answers it."""
        return False

    def fields(self, port):
        """(name, bit offset, mask) of each field of input stream ``port``'s payload."""
        return list(self._fields[f"{port}__payload"])

    def offsets(self, port):
        """Bit offset of each field of input stream ``port``'s payload."""
        return {f: offset for f, offset, _ in self._fields[f"{port}__payload"]}

    def unpack(self, name, bits):
        fields = self._fields.get(name)
        if fields is not None:
            return Record({f: (bits >> offset) & mask for f, offset, mask in fields})
        return bits


class PysimBackend(BackendBase):
    name = "pysim"

    def __init__(self, dut, cycle_ps, jumps=True, vcd=None):
        super().__init__(dut, cycle_ps, jumps)
        self.vcd = vcd
        self._queues = {n: deque() for n in INPUT_STREAMS}
        self._write_ready = 0
        self._values = {}
        self.settings = {}         # configuration inputs driven for the whole run
        self._offers = ()
        self.last_idle = self.quiet = True
        self.wake_ns = WAKE_NEVER          # the RTL's wake_at as of the last idle cycle
        # a windowed VCD: the cycle at which it opens, and the one at which it closes
        self._vcd_open_at = self._vcd_close_at = self._vcd_last = _NEVER
        self._vcd_trace = self._vcd_file = None
        if isinstance(vcd, VcdWindow):
            self._vcd_open_at, self._vcd_last = vcd.cycles(cycle_ps)

    def push(self, port, cycle, payload):
        self._queues[port].append((cycle, self.pack(f"{port}__payload", payload)))

    def push_packed(self, port, cycles, values):
        self._queues[port].extend(zip(cycles, values))

    def offers(self):
        return self._offers

    def write_ready_from(self, cycle):
        self._write_ready = cycle

    def queued(self):
        return sum(len(q) for q in self._queues.values())

    def wake(self):
        return self.wake_ns

    def get(self, name):
        return self.unpack(name, self._values[name])

    def drive(self, harness):
        """Run the harness: ``harness(backend, reason)`` returns the next ``until`` (a cycle
        or None) or ``False`` to stop."""
        sim = Simulator(self.dut)
        sim.add_clock(1e-9)
        dut = self.dut
        ports = {n: getattr(dut, n) for n in INPUT_STREAMS + OUTPUT_STREAMS}

        async def testbench(ctx):
            for n in ("dma_read_req", "compute", "copy", "context", "retired"):
                ctx.set(ports[n].ready, 1)
            for n, v in self.settings.items():
                ctx.set(getattr(dut, n), v)
            until = harness(self, "start")
            consume = False
            while until is not False:
                reason, consume = await self._run(ctx, ports, until, consume)
                until = harness(self, reason)

        sim.add_testbench(testbench)
        self._sim = sim
        if isinstance(self.vcd, VcdWindow):
            try:
                sim.run()
            finally:
                if self._vcd_close_at != _NEVER:        # the window lasts to the end
                    self._close_window()
            if self._vcd_file is None:
                self._window_after_the_run()
        elif self.vcd:
            with sim.write_vcd(self.vcd):
                sim.run()
        else:
            sim.run()

    def _open_window(self, c):
        """The window starts at cycle ``c``, whose inputs are set: trace from now on."""
        self._vcd_open_at = _NEVER
        if c > self._vcd_last:
            return
        # Simulator.write_vcd refuses to start once simulation time has advanced (Amaranth 0.5;
        # its source asks whether the restriction can be lifted). Its engine's writer, which
        # write_vcd returns after that check, does not need it: it registers every signal and
        # memory row with its value at the time it is opened, and records every change after.
        # tests/sim/test_vcd.py checks the window against a VCD of the whole run.
        engine = self._sim._engine
        self._vcd_file = open(self.vcd.path, "w")
        self._vcd_trace = engine.write_vcd(
            vcd_file=_WindowVcdFile(self._vcd_file, engine.now), gtkw_file=None, traces=(),
            fs_per_delta=0)
        self._vcd_trace.__enter__()
        self._vcd_close_at = self._vcd_last + 1

    def _close_window(self):
        self._vcd_close_at = _NEVER
        try:
            self._vcd_trace.__exit__(None, None, None)
        finally:
            self._vcd_file.close()

    def _window_after_the_run(self):
        """The run ended before the window began: the design would stay as it is now (idle,
        nothing due), so the VCD holds that state, and a line on stderr says so."""
        ns = self.cycle * self.cycle_ps // 1000
        print(f"gpufe: the run ended at {ns} ns, before the VCD window ({self.vcd.from_ns} "
              f"ns); {self.vcd.path} holds the final state only", file=sys.stderr)
        self._vcd_last = _NEVER
        self._open_window(self.cycle)
        self._close_window()

    async def _run(self, ctx, ports, until, consume):
        dut = self.dut
        busy = 0
        while True:
            c = self.cycle
            if consume:
                # the transfers offered at this cycle happen now: same inputs, then the edge
                offered = self._offered
                consume = False
            else:
                if until is not None and c >= until:
                    return "until", False
                if c >= self._vcd_close_at:
                    self._close_window()
                # offer due inputs
                offered = []
                for n, q in self._queues.items():
                    if q and q[0][0] <= c:
                        ctx.set(ports[n].valid, 1)
                        ctx.set(Value.cast(ports[n].payload), q[0][1])
                        offered.append(n)
                    else:
                        ctx.set(ports[n].valid, 0)
                write_ready = c >= self._write_ready
                ctx.set(dut.dma_write.ready, write_ready)
                ctx.set(dut.now, c * self.cycle_ps // 1000)
                if c >= self._vcd_open_at:
                    self._open_window(c)
                # settled outputs: an offered transfer goes to the host first
                if (ctx.get(dut.dma_read_req.valid) or ctx.get(dut.compute.valid)
                        or ctx.get(dut.copy.valid) or ctx.get(dut.context.valid)
                        or ctx.get(dut.retired.valid)
                        or (write_ready and ctx.get(dut.dma_write.valid))):
                    self._values = {}
                    for n in OUTPUT_STREAMS:
                        self._values[f"{n}__valid"] = ctx.get(ports[n].valid)
                        self._values[f"{n}__payload"] = ctx.get(Value.cast(ports[n].payload))
                    self._values["dma_write__ready"] = write_ready
                    self._offers = tuple(n for n in OUTPUT_STREAMS if self._values[f"{n}__valid"]
                                         and (n != "dma_write" or write_ready))
                    self._offered = offered
                    return "transfer", True
            idle = self.last_idle = ctx.get(dut.idle)
            self.quiet = idle and not offered
            taken = [n for n in offered if ctx.get(ports[n].ready)]
            if idle and not offered:
                due = [q[0][0] for q in self._queues.values() if q]
                wake = self.wake_ns = ctx.get(dut.wake_at)
                if wake != WAKE_NEVER:      # the design's own timer: the first cycle at it
                    due.append(-(-wake * 1000 // self.cycle_ps))
                target = min(due) if due else None
                if until is not None:
                    target = until if target is None else min(target, until)
                if target is None:
                    return "idle", False
                # a VCD window starts at a clocked cycle
                target = min(target, self._vcd_open_at)
                if self.jumps and target > c + 1:
                    self.stats["jumps"] += 1
                    self.stats["jumped_cycles"] += target - c - 1
                    self.cycle = target - 1      # one idle edge brings us to the target
            await ctx.tick()
            self.stats["rtl_cycles"] += 1
            self.cycle += 1
            for n in taken:
                self._queues[n].popleft()
            busy = 0 if (offered or idle) else busy + 1
            if busy > BUSY_CAP:
                raise RuntimeError(f"the RTL stayed busy for {BUSY_CAP} cycles with nothing "
                                   f"external happening (cycle {self.cycle})")
