#!/bin/bash
# Probe torch_profiler_cost, part 2, on the device machine from the repository root:
#   bash sim/analysis/reference/h200/probes/torch_profiler_cost/run_steps.sh OUTDIR
# step_cost.py for each torch2 program, pinned to one CPU (taskset -c 3) and not pinned.
set -e
OUT=${1:?OUTDIR}
HERE=$(dirname "$0")
mkdir -p "$OUT"
for prog in twostream loader optstep; do
  taskset -c 3 python3 "$HERE/step_cost.py" "$OUT/steps_${prog}_pinned.json" $prog 5 20 2>/dev/null
  python3 "$HERE/step_cost.py" "$OUT/steps_${prog}.json" $prog 5 20 2>/dev/null
done
