# Run from the repository root on the H200 machine, $OUT the output folder. Builds the
# project's fe_trace.cu and fe_trace2.cu unchanged (CUPTI on, latency timestamps on: as the
# calibration set was taken) and records the same programs several times over, each run a
# fresh process, some pinned to one CPU core: what varies from run to run with nothing
# changed, against what the program changes.
set -e
R=sim/analysis/reference/h200
CUDA=${CUDA_HOME:-$(dirname $(dirname $(readlink -f $(which nvcc))))}
INC="-I$CUDA/include -I$CUDA/extras/CUPTI/include -L$CUDA/lib64 -L$CUDA/extras/CUPTI/lib64 -lcupti"
nvcc -O2 -arch=sm_90 $R/fe_trace.cu $INC -o /tmp/fe_trace &
nvcc -O2 -arch=sm_90 $R/fe_trace2.cu $INC -o /tmp/fe_trace2 &
wait
export LD_LIBRARY_PATH=$CUDA/lib64:$CUDA/extras/CUPTI/lib64:$LD_LIBRARY_PATH
mkdir -p $OUT/t
nproc > $OUT/t/nproc.txt
for run in 1 2 3 4; do
  # unpinned, as the calibration set was recorded
  /tmp/fe_trace chain $OUT/t/chain_stream_r$run.jsonl n=1000 ns=0 graph=0 reps=3
  /tmp/fe_trace chain $OUT/t/chain_stream_ns1000_r$run.jsonl n=300 ns=1000 graph=0 reps=3
  CUDA_DEVICE_MAX_CONNECTIONS=1 /tmp/fe_trace hyperq $OUT/t/hyperq_c1_s16_r$run.jsonl \
    streams=16 k=4 ns=100000 order=0 reps=2
  CUDA_DEVICE_MAX_CONNECTIONS=8 /tmp/fe_trace hyperq $OUT/t/hyperq_c8_s2_r$run.jsonl \
    streams=2 k=4 ns=100000 order=0 reps=2
  CUDA_DEVICE_MAX_CONNECTIONS=32 /tmp/fe_trace2 actgap $OUT/t/actgap_A2_r$run.jsonl \
    A=2 n=200 gate=100000000 reps=2
done
# the same chain pinned to one core, cores spread over the machine
if command -v taskset > /dev/null; then
  for core in 0 5 10 15; do
    for run in 1 2; do
      taskset -c $core /tmp/fe_trace chain $OUT/t/chain_stream_core${core}_r$run.jsonl \
        n=1000 ns=0 graph=0 reps=3
    done
  done
fi
cd $OUT/t && for f in *.jsonl; do gzip -9 $f; done && tar cf $OUT/run_to_run.tar *
