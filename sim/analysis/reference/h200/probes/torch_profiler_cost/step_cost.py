"""torch.profiler's cost per step of the torch2 programs, profiled and unprofiled steps
interleaved in one process (so that both regimes see the same vCPU; the bundled summaries
measured them in separate phases of a run).

  python3 step_cost.py OUT.json PROGRAM [ROUNDS] [STEPS]      (PROGRAM: loader | twostream | optstep)

The programs are streams_torch.py's (its source is run with its own `record` replaced, so the
steps are exactly those of the bundled traces). Per variant and round: the median of STEPS
synchronised steps (torch.cuda.synchronize() before and after, perf_counter) without the
profiler, then the same inside torch.profiler.profile(CPU + CUDA activities), whose operator
records per step are counted. Written: per variant, every round's medians, and the median
over rounds of each regime.
"""
import json
import statistics as st
import sys
import time

import torch
from torch.profiler import profile, ProfilerActivity

from torch2_steps import steps_of

OUT, PROG = sys.argv[1], sys.argv[2]
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
STEPS = int(sys.argv[4]) if len(sys.argv) > 4 else 20


def timed(fn, n):
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) * 1e6)
    return st.median(out)


steps = steps_of(PROG)
res = {"program": PROG, "torch": torch.__version__, "rounds": ROUNDS, "steps": STEPS,
       "variants": {}}
for variant, fn in steps.items():
    for _ in range(3):
        fn()
    off, on, ops = [], [], None
    for r in range(ROUNDS):
        off.append(timed(fn, STEPS))
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            on.append(timed(fn, STEPS))
        if ops is None:
            ops = sum(e.count for e in prof.key_averages()
                      if e.device_type == torch.autograd.DeviceType.CPU) / STEPS
    res["variants"][variant] = {"off_us": off, "on_us": on, "off_median_us": st.median(off),
                                "on_median_us": st.median(on), "cpu_records_per_step": ops}
    print(f"{PROG:9} {variant:9} off {st.median(off):9.1f} us  on {st.median(on):9.1f} us  "
          f"ratio {st.median(on) / st.median(off):.2f}  records/step {ops:.0f}  "
          f"(off {min(off):.0f}-{max(off):.0f}, on {min(on):.0f}-{max(on):.0f})", flush=True)
json.dump(res, open(OUT, "w"), indent=1)
