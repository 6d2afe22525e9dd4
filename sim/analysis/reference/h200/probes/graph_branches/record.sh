#!/bin/bash
# Probe graph_branches, from the repository root on the lent machine with $OUT set:
#   bash sim/analysis/reference/h200/probes/graph_branches/record.sh
# Builds branches.cu and runs it for 1, 2 and 4 branches of 8, 31 and 64 kernels (0 and
# 2,000 ns each), issued branch after branch and round robin, without and with CUPTI, 20
# launches each, each run a fresh process. Output: $OUT/branches.jsonl, $OUT/host.txt.
set -u
. sim/analysis/reference/h200/probes/cuda_env.sh
nvcc -O2 -arch=sm_90 $R/probes/graph_branches/branches.cu $INC -o /tmp/branches || exit 1
host_info $OUT/host.txt
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
