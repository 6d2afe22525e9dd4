#!/bin/bash
# Probe graph_branches, from the repository root on the lent machine with $OUT set:
#   bash sim/analysis/reference/h200/probes/graph_branches/record.sh
# Builds branches.cu and runs it for 1, 2 and 4 branches of 8, 31 and 64 kernels (0 and
# 2,000 ns each), issued branch after branch and round robin, without and with CUPTI, 20
# launches each, each run a fresh process. Output: $OUT/branches.jsonl, $OUT/host.txt.
set -u
P=sim/analysis/reference/h200/probes/graph_branches
CUDA=${CUDA_HOME:-$(dirname $(dirname $(readlink -f $(which nvcc))))}
nvcc -O2 -arch=sm_90 $P/branches.cu -I$CUDA/include -I$CUDA/extras/CUPTI/include \
     -L$CUDA/lib64 -L$CUDA/extras/CUPTI/lib64 -lcupti -o /tmp/branches || exit 1
export LD_LIBRARY_PATH=$CUDA/lib64:$CUDA/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
{ date -u; nproc; lscpu | grep -E "Model name|Hypervisor";
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $OUT/host.txt
for cupti in 0 1; do
  for order in 0 1; do
    for B in 1 2 4; do
      for N in 8 31 64; do
        for ns in 0 2000; do
          timeout 60 /tmp/branches $B $N $ns $order $cupti 20 >> $OUT/branches.jsonl || echo "FAIL $B $N $ns $order $cupti" >> $OUT/host.txt
        done
      done
    done
  done
done
