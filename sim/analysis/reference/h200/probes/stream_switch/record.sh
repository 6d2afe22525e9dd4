# Run from the repository root on the H200 machine, $OUT the output folder. Builds the
# project's fe_trace.cu unchanged (CUPTI on, latency timestamps on: as the calibration set was
# taken) and runs its hyperq program depth-first (each stream's k launches in a row, then the
# next stream's) over S = 2 to 16 streams, three runs each, a fresh process each: within one
# run, a launch into the stream just launched into against the first into the next stream,
# whose previous launch was S - 1 streams ago.
set -e
. sim/analysis/reference/h200/probes/build_fe_trace.sh
mkdir -p $OUT/t
for run in 1 2 3; do
  for s in 2 3 4 5 6 8 16; do
    CUDA_DEVICE_MAX_CONNECTIONS=32 /tmp/fe_trace hyperq $OUT/t/depth_s${s}_r$run.jsonl \
      streams=$s k=8 ns=20000 order=0 reps=5
  done
done
cd $OUT/t && for f in *.jsonl; do gzip -9 $f; done && tar cf $OUT/stream_switch.tar *
