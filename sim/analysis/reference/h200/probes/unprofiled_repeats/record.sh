#!/bin/bash
# Repeats of the unprofiled programs (issue 42: host-bound figures scored against repeated
# recordings), run from the repository root on the lent machine with $OUT set:
#   bash sim/analysis/reference/h200/probes/unprofiled_repeats/record.sh [ROUNDS [NAME...]]
# Builds the project's fe_trace.cu and fe_trace2.cu unchanged and runs, ROUNDS times
# (default 5), each scenario NAME (default: every bundled unprofiled one but the device-side
# stamp programs actgap and pdl, commands.py) as a fresh process, unpinned, one at a time,
# under `timeout`, with the arguments of the bundled recording (its header; commands.py).
# Runs stop being started after DEADLINE_S (default 480) s. Output: $OUT/repeats.tar of
# <scenario>_r<k>.jsonl.gz, $OUT/log.txt (each run's command, exit status, seconds),
# $OUT/host.txt (the GPU's name among it: only an H200's runs are repeats of the set).
set -u
ROUNDS=${1:-5}
shift || true
DEADLINE_S=${DEADLINE_S:-480}
T0=$(date +%s)
# /tmp/fe_trace, R, INC, the loader's path and host_info; then fe_trace2 the same way
source sim/analysis/reference/h200/probes/build_fe_trace.sh
nvcc -O2 -arch=sm_90 $R/fe_trace2.cu $INC -o /tmp/fe_trace2
LOG=$OUT/log.txt
W=/tmp/rec
mkdir -p $W/repeats
host_info $OUT/host.txt
python3 $R/probes/unprofiled_repeats/commands.py "$@" > $W/commands.txt || exit 1

for r in $(seq 1 $ROUNDS); do
  while IFS=$'\t' read -r name envs cmd; do
    now=$(( $(date +%s) - T0 ))
    if (( now > DEADLINE_S )); then echo "SKIP ${name}_r$r (deadline, ${now}s)" >> $LOG; continue; fi
    [[ $envs == - ]] && envs=
    set -- $cmd
    a=$(date +%s.%N)
    env $envs timeout 90 $1 $2 $W/repeats/${name}_r$r.jsonl "${@:3}" > /dev/null 2>&1
    rc=$? b=$(date +%s.%N)
    printf "%-44s rc=%d %6.2fs  %s %s\n" ${name}_r$r $rc $(awk "BEGIN{print $b - $a}") "$envs" "$cmd" >> $LOG
  done < $W/commands.txt
done
(cd $W/repeats && gzip -9 -f *.jsonl && tar cf $OUT/repeats.tar *.jsonl.gz)
echo "total $(( $(date +%s) - T0 ))s" >> $LOG
