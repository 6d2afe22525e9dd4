"""The torch2 programs loader and twostream (eager) profiled as the bundled traces were, with
Kineto's CUDA synchronisation records on (experimental enable_cuda_sync_events): every
cudaStreamWaitEvent then has a cuda_sync "Stream Wait Event" record naming the waiting stream,
the recording stream and the record call's correlation id, against which the replay's
inference of both (from the calling thread's work) is checked.

  python3 sync_events.py OUTDIR PROGRAM        (PROGRAM: loader | twostream)

Writes OUTDIR/PROGRAM_eager_sync.json.gz: schedule wait=1 warmup=2 active=5, synchronised
steps, as streams_torch.py's profiled run.
"""
import sys

import torch
from torch.profiler import profile, ProfilerActivity, schedule

from torch2_steps import steps_of

OUT, PROG = sys.argv[1], sys.argv[2]
steps = steps_of(PROG)
fn = steps["eager"]
cfg = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
path = f"{OUT}/{PROG}_eager_sync.json.gz"
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
             schedule=schedule(wait=1, warmup=2, active=5, repeat=1),
             experimental_config=cfg,
             on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
    for i in range(8):
        torch.cuda.synchronize()
        fn()
        torch.cuda.synchronize()
        prof.step()
print("wrote", path)
