#!/bin/bash
# Repeats of the host-bound graph-launch programs (issue 42's host rows), run from the
# repository root on the lent H200 with $OUT set:
#   bash sim/analysis/reference/h200/probes/host_repeats/record.sh [ROUNDS]
# Builds the project's fe_trace2.cu unchanged (CUPTI on, latency timestamps on, as the
# calibration set was taken) and runs, ROUNDS times (default 5), each profiled program of
# the device-graph-launch (dl_{host,hostplain,ff}), conditional (condhost) and graph-update
# (gupdate) families whose rows are made of host time, with and without the 20 ms gate, and
# the host-thread runs whose rows are furthest off (threads_T8_sh0, T12_sh0, T6_sh1), each a
# fresh process, unpinned, one at a time, under `timeout`, with the same arguments as the
# second and third recordings (../third_recording/record.sh). Runs stop being started once
# DEADLINE_S (default 420) seconds have passed, so that what finished is always packed:
# $OUT/repeats.tar of <scenario>_r<k>.jsonl.gz, $OUT/log.txt (each run's command, exit status,
# seconds) and $OUT/host.txt.
set -u
ROUNDS=${1:-5}
DEADLINE_S=${DEADLINE_S:-420}
R=sim/analysis/reference/h200
T0=$(date +%s)
CUDA=${CUDA_HOME:-$(dirname $(dirname $(readlink -f $(which nvcc))))}
INC="-I$CUDA/include -I$CUDA/extras/CUPTI/include -L$CUDA/lib64 -L$CUDA/extras/CUPTI/lib64 -lcupti"
nvcc -O2 -arch=sm_90 $R/fe_trace2.cu $INC -o /tmp/fe_trace2
export LD_LIBRARY_PATH=$CUDA/lib64:$CUDA/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
LOG=$OUT/log.txt
W=/tmp/rec
mkdir -p $W/repeats
{ date -u; nproc; lscpu | grep -E "Model name|Hypervisor"; 
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $OUT/host.txt
F2=/tmp/fe_trace2

run() {   # run NAME PROGRAM-ARGS...: one fresh process writing $W/repeats/NAME.jsonl
  local name=$1; shift
  local now=$(( $(date +%s) - T0 ))
  if (( now > DEADLINE_S )); then echo "SKIP $name (deadline, ${now}s)" >> $LOG; return; fi
  local a=$(date +%s.%N)
  timeout 90 $F2 $1 $W/repeats/$name.jsonl "${@:2}" > /dev/null 2>&1
  local rc=$? b=$(date +%s.%N)
  printf "%-40s rc=%d %6.2fs  %s\n" $name $rc $(awk "BEGIN{print $b - $a}") "$*" >> $LOG
}

for r in $(seq 1 $ROUNDS); do
  for b in 1 2 4; do
    for mm in "host 0" "ff 1" "hostplain 4"; do set -- $mm
      run dl_$1_b${b}_m100_r$r devlaunch b=$b m=100 mode=$2 reps=3
      run dl_$1_b${b}_m100_gate_r$r devlaunch b=$b m=100 mode=$2 reps=3 gate=20000000
    done
    run condhost_b${b}_m100_r$r cond b=$b m=100 host=1 reps=3
    run condhost_b${b}_m100_gate_r$r cond b=$b m=100 host=1 reps=3 gate=20000000
  done
  for n in 10 30 100 300 3000; do
    run gupdate_n${n}_r$r gupdate n=$n reps=5
  done
  for tsh in "8 0" "12 0" "6 1"; do set -- $tsh
    run threads_T$1_sh$2_r$r threads T=$1 n=2000 shared=$2 reps=3
  done
done
(cd $W/repeats && gzip -9 -f *.jsonl && tar cf $OUT/repeats.tar *.jsonl.gz)
echo "total $(( $(date +%s) - T0 ))s" >> $LOG
