"""What torch.profiler (CPU + CUDA activities, as the torch2 traces were taken) costs the host
per op, measured in one process with profiled and unprofiled rounds interleaved (so that both
see the same vCPU).

  python3 profiler_cost.py OUT.json [ROUNDS]

Each case is a Python loop of N ops; a round times it with perf_counter after a
torch.cuda.synchronize() (the GPU work is tiny: the loop is host-bound). Per case and regime:
the median over rounds of the time per op, in us. The profiler's own cost per op is the
difference. Cases:
  gpu_new       y = x + 1.0        4 KiB CUDA tensor, a new tensor (1 aten op, 1 launch)
  gpu_inplace   x.add_(1.0)        in place (1 aten op, 1 launch)
  gpu_mm        a @ w              256x256 fp32 (aten::matmul + aten::mm, cuBLAS launch)
  gpu_side      y = x * 0.9        inside torch.cuda.stream(s) (a side stream)
  cpu_inplace   c.add_(1.0)        a CPU tensor (1 aten op, no launch)
  cpu_item      c.item()           a CPU tensor (aten::item + _local_scalar_dense)
  record_wait   e.record(); s.wait_event(e)   (cudaEventRecord + cudaStreamWaitEvent)
"""
import json
import statistics as st
import sys
import time

import torch
from torch.profiler import profile, ProfilerActivity

OUT = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 7
N = 2000
dev = "cuda"
x = torch.zeros(1024, device=dev)
a = torch.randn(256, 256, device=dev)
w = torch.randn(256, 256, device=dev)
c = torch.zeros(1024)
s = torch.cuda.Stream()
e = torch.cuda.Event()


def gpu_new():
    for _ in range(N):
        y = x + 1.0


def gpu_inplace():
    for _ in range(N):
        x.add_(1.0)


def gpu_mm():
    for _ in range(N):
        y = a @ w


def gpu_side():
    with torch.cuda.stream(s):
        for _ in range(N):
            y = x * 0.9


def cpu_inplace():
    for _ in range(N):
        c.add_(1.0)


def cpu_item():
    for _ in range(N):
        c[0].item()


def record_wait():
    cur = torch.cuda.current_stream()
    for _ in range(N):
        e.record(cur)
        s.wait_event(e)


def empty_loop():
    for _ in range(N):
        pass


CASES = [gpu_new, gpu_inplace, gpu_mm, gpu_side, cpu_inplace, cpu_item, record_wait, empty_loop]


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e6 / N


for fn in CASES:          # warm up (allocator, cuBLAS handles, the profiler's first start)
    fn()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
    gpu_new()

res = {"torch": torch.__version__, "cuda": torch.version.cuda, "N": N, "rounds": ROUNDS,
       "cases": {}}
samples = {fn.__name__: {"off": [], "on": []} for fn in CASES}
for r in range(ROUNDS):
    for fn in CASES:
        samples[fn.__name__]["off"].append(timed(fn))
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for fn in CASES:
            samples[fn.__name__]["on"].append(timed(fn))
for name, sm in samples.items():
    off, on = st.median(sm["off"]), st.median(sm["on"])
    res["cases"][name] = {"off_us_per_op": off, "on_us_per_op": on, "profiler_us_per_op": on - off,
                          "off_all": sm["off"], "on_all": sm["on"]}
    print(f"{name:12} off {off:7.2f} us  on {on:7.2f} us  profiler {on - off:6.2f} us  "
          f"(off {min(sm['off']):.2f}-{max(sm['off']):.2f}, on {min(sm['on']):.2f}-{max(sm['on']):.2f})",
          flush=True)
json.dump(res, open(OUT, "w"), indent=1)
