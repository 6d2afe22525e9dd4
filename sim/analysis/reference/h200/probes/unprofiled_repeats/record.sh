#!/bin/bash
# Repeats of the unprofiled programs whose rows are made of host time (issue 42: host-bound
# figures scored against repeated recordings), and of the profiled chain whose host lead was
# one recording, run from the repository root on the lent H200 with $OUT set:
#   bash sim/analysis/reference/h200/probes/unprofiled_repeats/record.sh [ROUNDS]
# Builds the project's fe_trace.cu and fe_trace2.cu unchanged and runs, ROUNDS times
# (default 5), each fe_trace2 devlaunch program launched from the host (dl_{host,ff,
# hostplain}_b{1,2,4}_m100, with and without the 20 ms gate) and gupdate_n{10..3000} with
# FE_TRACE_NO_CUPTI=1, fe_trace's chain n=300 ns=1000 unprofiled and ns=5000 profiled: each
# a fresh process, unpinned, one at a time, under `timeout`, with the arguments of the
# bundled recordings (their headers). Runs stop being started after DEADLINE_S (default
# 420) s. Output: $OUT/repeats.tar of <scenario>_r<k>.jsonl.gz, $OUT/log.txt (each run's
# command, exit status, seconds), $OUT/host.txt.
set -u
ROUNDS=${1:-5}
DEADLINE_S=${DEADLINE_S:-420}
T0=$(date +%s)
: "${LD_LIBRARY_PATH:=}"
# /tmp/fe_trace, R, INC and the loader's path; then fe_trace2 the same way
source sim/analysis/reference/h200/probes/build_fe_trace.sh
nvcc -O2 -arch=sm_90 $R/fe_trace2.cu $INC -o /tmp/fe_trace2
LOG=$OUT/log.txt
W=/tmp/rec
mkdir -p $W/repeats
{ date -u; nproc; lscpu | grep -E "Model name|Hypervisor";
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $OUT/host.txt

run() {   # run NAME [ENV=V] BINARY PROGRAM ARGS...: one fresh process writing $W/repeats/NAME.jsonl
  local name=$1; shift
  local envs=()
  while [[ $1 == *=* ]]; do envs+=("$1"); shift; done
  local now=$(( $(date +%s) - T0 ))
  if (( now > DEADLINE_S )); then echo "SKIP $name (deadline, ${now}s)" >> $LOG; return; fi
  local a=$(date +%s.%N)
  env "${envs[@]}" timeout 90 $1 $2 $W/repeats/$name.jsonl "${@:3}" > /dev/null 2>&1
  local rc=$? b=$(date +%s.%N)
  printf "%-44s rc=%d %6.2fs  %s %s\n" $name $rc $(awk "BEGIN{print $b - $a}") "${envs[*]}" "$*" >> $LOG
}

NC=FE_TRACE_NO_CUPTI=1
for r in $(seq 1 $ROUNDS); do
  for b in 1 2 4; do
    for mm in "host 0" "ff 1" "hostplain 4"; do set -- $mm
      run nocupti_dl_$1_b${b}_m100_r$r $NC /tmp/fe_trace2 devlaunch b=$b m=100 mode=$2 reps=3
      run nocupti_dl_$1_b${b}_m100_gate_r$r $NC /tmp/fe_trace2 devlaunch b=$b m=100 mode=$2 \
          reps=3 gate=20000000
    done
  done
  for n in 10 30 100 300 3000; do
    run nocupti_gupdate_n${n}_r$r $NC /tmp/fe_trace2 gupdate n=$n reps=5
  done
  run nocupti_chain_ns1000_g0_r$r $NC /tmp/fe_trace chain n=300 ns=1000 graph=0 reps=5
  run chain_stream_ns5000_r$r /tmp/fe_trace chain n=300 ns=5000 graph=0 reps=3
done
(cd $W/repeats && gzip -9 -f *.jsonl && tar cf $OUT/repeats.tar *.jsonl.gz)
echo "total $(( $(date +%s) - T0 ))s" >> $LOG
