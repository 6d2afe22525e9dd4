#!/bin/bash
# Probe torch_profiler_cost, on the device machine from the repository root:
#   bash sim/analysis/reference/h200/probes/torch_profiler_cost/run.sh OUTDIR
# (1) profiler_cost.py: torch.profiler's host cost per op, profiled and unprofiled rounds
#     interleaved in one process, twice (two processes);
# (2) the torch2 programs twostream and loader run again (streams_torch.py), twice each: is the
#     bundled traces' ratio of profiled to unprofiled step reproducible?
set -e
OUT=${1:?OUTDIR}
HERE=$(dirname "$0")
T2=$HERE/../../torch2
mkdir -p "$OUT"
nproc > "$OUT/host.txt"; python3 -c "import torch; print(torch.__version__, torch.version.cuda)" >> "$OUT/host.txt"
for i in 1 2; do
  python3 "$HERE/profiler_cost.py" "$OUT/profiler_cost_$i.json" 7 | tee "$OUT/profiler_cost_$i.txt"
done
for i in 1 2; do
  for prog in twostream loader; do
    mkdir -p "$OUT/${prog}_$i"
    python3 "$T2/streams_torch.py" "$OUT/${prog}_$i" $prog > "$OUT/${prog}_$i/log.txt" 2>&1
  done
done
