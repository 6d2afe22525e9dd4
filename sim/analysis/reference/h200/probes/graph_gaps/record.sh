#!/bin/bash
# Probe graph_gaps, from the repository root on the lent machine with $OUT set:
#   bash sim/analysis/reference/h200/probes/graph_gaps/record.sh
# Builds gaps.cu and runs it without and with CUPTI: 140 configurations each (parameter block
# 8/1,024 bytes, 1/2/4 distinct functions, 1/132/528/1,024/1,320 blocks, 0/2,000 ns of work;
# and chains of copying kernels, 4 and 16 float4s a thread; each as a
# graph and queued in a stream), chains of 32 kernels, 20 repetitions. Output:
# $OUT/gaps.jsonl, $OUT/host.txt.
set -u
. sim/analysis/reference/h200/probes/cuda_env.sh
nvcc -O2 -arch=sm_90 $R/probes/graph_gaps/gaps.cu $INC -o /tmp/gaps || exit 1
host_info $OUT/host.txt
for cupti in 0 1; do
  timeout 200 /tmp/gaps $cupti 32 20 >> $OUT/gaps.jsonl || echo "FAIL cupti=$cupti" >> $OUT/host.txt
done
