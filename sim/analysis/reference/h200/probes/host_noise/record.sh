# Run from the repository root on the H200 machine, $OUT the output folder. Builds the
# project's fe_trace.cu unchanged (CUPTI on, latency timestamps on: as the calibration set was
# taken) and records four times over, each run a fresh process, unpinned, the calibration
# set's programs whose validation rows are furthest off on host time (fanout with 32
# connections, copy_busy1, xstream_t1), with the same programs at 8 connections beside them.
set -e
. sim/analysis/reference/h200/probes/build_fe_trace.sh
mkdir -p $OUT/t
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $OUT/t/smi.csv
for run in 1 2 3 4; do
  for c in 32 8; do
    for s in 16 32; do
      CUDA_DEVICE_MAX_CONNECTIONS=$c /tmp/fe_trace hyperq $OUT/t/fanout_c${c}_s${s}_r$run.jsonl \
        streams=$s k=1 ns=2000000 order=1 reps=2
    done
  done
  /tmp/fe_trace copy $OUT/t/copy_busy1_r$run.jsonl busy=1 reps=5
  /tmp/fe_trace xstream $OUT/t/xstream_t1_r$run.jsonl n=200 ns=20000 timing=1
done
cd $OUT/t && for f in *.jsonl; do gzip -9 $f; done && tar cf $OUT/host_noise.tar *
