"""The bundled front-end demo: a small scenario through the RTL, told cycle by cycle.

Three streams on three channels: stream A launches two kernels, then records a timing event
(a RELEASE with timestamp to host memory) and signals syncpoint 0; stream B waits on that
syncpoint before its kernel; stream C, of higher priority, launches two short kernels and a
copy meanwhile. One cycle is one ns of ``now``.
"""

from gpufe.rtl.layouts import CHANNEL_REGS, ChannelReg
from gpufe.sim.host.encode import PushBuffer, launch_descriptor, syncpoint_address
from gpufe.sim.testbench.frontend import FrontEndBench


def build_demo(cfg, vcd=None):
    b = FrontEndBench(cfg, vcd=vcd)
    names = {0: "A", 1: "B", 2: "C"}
    for c in names:
        b.setup_channel(c, priority=1 if c == 2 else 0)

    def kernel(kid, ns):
        return b.put_descriptor(launch_descriptor(block_ns=ns, kernel_id=kid))

    sp = syncpoint_address(cfg, 0)
    event = b.mem.alloc(16)
    b.submit(0, PushBuffer().launch(kernel(1, 300)).sem_release(sp, 1)
             .sem_acquire(sp, 1).launch(kernel(2, 200))
             .sem_release(event, 0xE0E0, timestamp=True).sem_release(sp, 2))
    b.at(40, lambda bench: bench.submit(1, PushBuffer().sem_acquire(sp, 2).launch(kernel(3, 100))))
    b.at(80, lambda bench: bench.submit(
        2, PushBuffer().launch(kernel(4, 50)).launch(kernel(5, 50))
        .copy(bench.mem.alloc(4096), bench.mem.alloc(4096), 4096)))
    return b, names, event


def timeline(b, names):
    """(cycle, text) of everything the models saw, in time order."""
    mmio_names = {r.value: r.name for r in ChannelReg}
    rows = []
    for t, addr, count, tag in b.log.dma_reads:
        rows.append((t, f"DMA read    ch{tag} ({names.get(tag, '?')}) {count} dwords "
                        f"at {addr:#012x}"))
    for t, kind, rec in b.log.dispatches:
        what = f"kernel {rec['kernel_id']}" if kind == "compute" else f"copy {rec['length']} B"
        rows.append((t, f"dispatch    ch{rec['channel']} ({names.get(rec['channel'], '?')}) "
                        f"{what} seq {rec['seq']}"))
    for t, kind, ch, seq in b.log.completions:
        rows.append((t, f"complete    ch{ch} ({names.get(ch, '?')}) {kind} seq {seq}"))
    for t, addr, data, wide in b.log.dma_writes:
        rows.append((t, f"DMA write   {addr:#012x} <- {data:#x}"))
    for t, addr, data in b.mmio_log:
        reg = mmio_names.get(addr % CHANNEL_REGS, "?")
        if reg == "GP_PUT":
            ch = addr // CHANNEL_REGS
            rows.append((t, f"doorbell    ch{ch} ({names.get(ch, '?')}) GP_PUT={data}"))
    return sorted(rows, key=lambda r: r[0])


def run_demo(cfg, vcd=None, out=print):
    b, names, event = build_demo(cfg, vcd)
    try:
        end = b.run_until_idle(50_000)
    finally:
        b.close()
    for t, text in timeline(b, names):
        out(f"{t:7d} ns  {text}")
    stamp = b.mem.read64(event + 8)
    out(f"idle after {end} cycles; event timestamp {stamp} ns, payload "
        f"{b.mem.read_dword(event):#x}; syncpoint 0 = {b.peek(b.dut.syncpoint.counter_data[0])}")
    if vcd:
        out(f"waveform: {vcd}")
    return b
