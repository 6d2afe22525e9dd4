#!/bin/bash
# Third H200 recording (issue 46), run from the repository root on the H200 machine with $OUT
# set:  bash sim/analysis/reference/h200/probes/third_recording/record.sh [PART ...]
# PARTs (default: all, in this order): wider (new sizes of every fitted family), repeats
# (host-bound calibration programs five times over, each run a fresh process) and torch (the
# torch2 eager programs, profiled and unprofiled steps interleaved in one process, five
# processes each). Builds the project's fe_trace.cu and fe_trace2.cu (CUPTI on, latency
# timestamps on, as the calibration set was taken); each program runs unpinned, one at a time,
# under `timeout`, and a failed run is logged and skipped. Runs stop being started once
# DEADLINE_S (default 540) seconds have passed, so that what finished is always packed.
# Every part is packed as $OUT/<part>.tar of gzipped traces; $OUT/log.txt has each run's
# command, exit status and seconds.
set -u
PARTS=${*:-wider repeats torch}
DEADLINE_S=${DEADLINE_S:-540}
HERE=$(dirname "$0")
R=sim/analysis/reference/h200
T0=$(date +%s)
CUDA=${CUDA_HOME:-$(dirname $(dirname $(readlink -f $(which nvcc))))}
INC="-I$CUDA/include -I$CUDA/extras/CUPTI/include -L$CUDA/lib64 -L$CUDA/extras/CUPTI/lib64 -lcupti"
nvcc -O2 -arch=sm_90 $R/fe_trace.cu $INC -o /tmp/fe_trace &
nvcc -O2 -arch=sm_90 $R/fe_trace2.cu $INC -o /tmp/fe_trace2 &
wait
export LD_LIBRARY_PATH=$CUDA/lib64:$CUDA/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
LOG=$OUT/log.txt
W=/tmp/rec
mkdir -p $W
{ date -u; nproc; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv;
  python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)" 2>&1; } > $W/host.txt
cp $W/host.txt $OUT/host.txt

# run PART NAME [VAR=value ...] PROGRAM SCENARIO [key=value ...]: one fresh process writing
# $W/PART/NAME.jsonl (a procs run writes NAME.p<i>.jsonl beside it).
run() {
  local part=$1 name=$2; shift 2
  local envs=()
  while [[ $1 == *=* ]]; do envs+=("$1"); shift; done
  local prog=$1 sc=$2; shift 2
  local now=$(( $(date +%s) - T0 ))
  if (( now > DEADLINE_S )); then echo "SKIP $part/$name (deadline, ${now}s)" >> $LOG; return; fi
  mkdir -p $W/$part
  local a=$(date +%s.%N)
  env "${envs[@]}" timeout 90 $prog $sc $W/$part/$name.jsonl "$@" > $W/$part/$name.out 2>&1
  local rc=$? b=$(date +%s.%N)
  printf "%s %-44s rc=%d %6.2fs  %s %s %s\n" $part $name $rc $(awk "BEGIN{print $b - $a}") "${envs[*]}" "$sc" "$*" >> $LOG
  [[ -s $W/$part/$name.out ]] || rm -f $W/$part/$name.out
}
NC="FE_TRACE_NO_CUPTI=1"
F2=${F2:-/tmp/fe_trace2}
F1=${F1:-/tmp/fe_trace}

# the priority runs with the SMs held full (load=100)
prio_load() {
  local part=${1:-prio_load}
  for Ah in "1 0" "1 1" "4 0" "4 1" "4 2"; do set -- $Ah
    run $part nocupti_actgap_stamp_c16_A$1_g100_hi$2_load100 CUDA_DEVICE_MAX_CONNECTIONS=16 $NC $F2 actgap \
      A=$1 n=200 gate=100000000 reps=2 stamp=1 hi=$2 load=100
    run $part actgap_c16_A$1_g100_hi$2_load100 CUDA_DEVICE_MAX_CONNECTIONS=16 $F2 actgap \
      A=$1 n=200 gate=100000000 reps=2 hi=$2 load=100
  done
}

# stream priority under channel load: A chains at 16 connections, hi of them of the greatest
# priority; and the same with the SMs held full by a low-priority multi-wave kernel (load).
# `prio` alone re-records them (the bundled ones: see README)
prio() {
  local part=${1:-prio}
  for A in 4 12 24; do for h in 0 1 2; do
    run $part nocupti_actgap_stamp_c16_A${A}_g100_hi$h CUDA_DEVICE_MAX_CONNECTIONS=16 $NC $F2 actgap \
      A=$A n=200 gate=100000000 reps=2 stamp=1 hi=$h
    run $part actgap_c16_A${A}_g100_hi$h CUDA_DEVICE_MAX_CONNECTIONS=16 $F2 actgap \
      A=$A n=200 gate=100000000 reps=2 hi=$h
  done; done
  prio_load $part
}

wider() {
  prio wider
  # host threads
  for T in 3 6 12; do for sh in 0 1; do
    run wider nocupti_threads_T${T}_sh$sh $NC $F2 threads T=$T n=2000 shared=$sh reps=3
    run wider threads_T${T}_sh$sh $F2 threads T=$T n=2000 shared=$sh reps=3
  done; done
  # graph update, set-params, destroy, instantiate, re-instantiate
  for n in 30 300 3000; do
    run wider nocupti_gupdate_n$n $NC $F2 gupdate n=$n reps=5
    run wider gupdate_n$n $F2 gupdate n=$n reps=5
  done
  # PDL chains of longer kernels, stream (behind a gate) and graph
  for ns in 5000 50000; do for pt in "0 0" "1 0" "1 1"; do set -- $pt; for g in 0 1; do
    gate=$([[ $g == 0 ]] && echo gate=20000000)
    run wider nocupti_pdl_stamp_p$1_t$2_ns${ns}_g$g $NC $F2 pdl n=300 ns=$ns pdl=$1 trigger=$2 graph=$g \
      reps=5 stamp=1 $gate
    run wider pdl_stamp_p$1_t$2_ns${ns}_g$g $F2 pdl n=300 ns=$ns pdl=$1 trigger=$2 graph=$g \
      reps=5 stamp=1 $gate
  done; done; done
  # conditional WHILE and its host-launched body, bodies of 2 and 4 kernels
  for b in 2 4; do
    for pre in "" nocupti_; do
      e=$([[ -n $pre ]] && echo $NC)
      run wider ${pre}cond_b${b}_m100 $e $F2 cond b=$b m=100 host=0 reps=3
      run wider ${pre}condhost_b${b}_m100 $e $F2 cond b=$b m=100 host=1 reps=3
      run wider ${pre}condhost_b${b}_m100_gate $e $F2 cond b=$b m=100 host=1 reps=3 gate=20000000
    done
    run wider nocupti_cond_b${b}_m1000 $NC $F2 cond b=$b m=1000 host=0 reps=3
    run wider nocupti_condhost_b${b}_m1000 $NC $F2 cond b=$b m=1000 host=1 reps=3
    run wider nocupti_condhost_b${b}_m1000_gate $NC $F2 cond b=$b m=1000 host=1 reps=3 gate=20000000
  done
  # device graph launch: host, hostplain, fire-and-forget, tail, tail started by fire-and-forget
  for b in 2 4; do
    for pre in "" nocupti_; do
      e=$([[ -n $pre ]] && echo $NC)
      for mm in "host 0" "ff 1" "hostplain 4"; do set -- $mm
        run wider ${pre}dl_$1_b${b}_m100 $e $F2 devlaunch b=$b m=100 mode=$2 reps=3
        run wider ${pre}dl_$1_b${b}_m100_gate $e $F2 devlaunch b=$b m=100 mode=$2 reps=3 gate=20000000
      done
      run wider ${pre}dl_tail_b${b}_m100 $e $F2 devlaunch b=$b m=100 mode=2 reps=3
    done
    run wider dl_tailff_b${b}_m100 $F2 devlaunch b=$b m=100 mode=3 reps=3
  done
}

repeats() {
  for r in 1 2 3 4 5; do
    for c in 1 8 32; do for s in 16 32 64 128 256; do
      run repeats fanout_c${c}_s${s}_r$r CUDA_DEVICE_MAX_CONNECTIONS=$c $F1 hyperq \
        streams=$s k=1 ns=2000000 order=1 reps=2
    done; done
    for c in 1 8; do for s in 32 64; do
      run repeats fanout2_c${c}_s${s}_r$r CUDA_DEVICE_MAX_CONNECTIONS=$c $F1 hyperq \
        streams=$s k=2 ns=2000000 order=1 reps=2
    done; done
    run repeats xstream_t1_r$r $F1 xstream n=200 ns=20000 timing=1
    run repeats copy_busy0_r$r $F1 copy busy=0 reps=5
    run repeats copy_busy1_r$r $F1 copy busy=1 reps=5
    run repeats procs_empty_P2_r$r $F2 procs P=2 empty=1 n=2000 period=250000000 reps=3
  done
}

torch() {
  mkdir -p $W/torch
  for r in 1 2 3 4 5; do for prog in twostream loader optstep; do
    local now=$(( $(date +%s) - T0 ))
    if (( now > DEADLINE_S )); then echo "SKIP torch/${prog}_r$r (deadline)" >> $LOG; continue; fi
    local a=$(date +%s.%N)
    timeout 120 python3 $R/probes/torch_profiler_cost/step_cost.py $W/torch/steps_${prog}_r$r.json \
      $prog 2 20 > $W/torch/steps_${prog}_r$r.txt 2>&1
    local rc=$? b=$(date +%s.%N)
    printf "torch %-44s rc=%d %6.2fs\n" steps_${prog}_r$r $rc $(awk "BEGIN{print $b - $a}") >> $LOG
  done; done
}

for p in $PARTS; do
  $p
  if [[ -d $W/$p ]]; then
    (cd $W/$p && for f in *.jsonl; do [[ -e $f ]] && gzip -9 -f $f; done
     tar cf $OUT/$p.tar *)
  fi
done
echo "total $(( $(date +%s) - T0 ))s" >> $LOG
