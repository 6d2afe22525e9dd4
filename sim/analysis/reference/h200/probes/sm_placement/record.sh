#!/bin/bash
# Probe sm_placement, run from the repository root on the H200 machine with $OUT set:
#   bash sim/analysis/reference/h200/probes/sm_placement/record.sh
# Builds sm_place.cu and runs it (16 connections, no CUPTI) for A = 1 and 4 chains with 0, 1
# or 2 of the greatest priority beside the full-GPU load, as the third recording's
# actgap ..._load100 runs; each a fresh process; gzipped JSON in $OUT, log in $OUT/log.txt.
set -u
HERE=$(dirname "$0")
nvcc -O2 -arch=sm_90 $HERE/sm_place.cu -o /tmp/sm_place || exit 1
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $OUT/log.txt
for run in "A=1 hi=0" "A=1 hi=1" "A=4 hi=0" "A=4 hi=1" "A=4 hi=2" "A=12 hi=1"; do
  name=sm_$(echo $run | tr -d ' =')
  t0=$(date +%s%N)
  CUDA_DEVICE_MAX_CONNECTIONS=16 timeout 120 /tmp/sm_place /tmp/$name.json $run gate=100000000
  rc=$?
  echo "$name: $run gate=100000000 rc=$rc $(( ($(date +%s%N) - t0) / 1000000 )) ms" >> $OUT/log.txt
  gzip -c /tmp/$name.json > $OUT/$name.json.gz
done
