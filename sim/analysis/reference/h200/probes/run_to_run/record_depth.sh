# Third call: actgap (A streams of n dependent empty kernels behind their gates, 32
# connections) with n from 8 to 200: does the one-kernel-at-a-time order of profiled
# multi-channel chains (each launch's `submitted` at the previous kernel's end) depend on how
# many kernels wait in each channel (more than ten: CUPTI's latency timestamps get slower)?
set -e
R=sim/analysis/reference/h200
CUDA=${CUDA_HOME:-$(dirname $(dirname $(readlink -f $(which nvcc))))}
INC="-I$CUDA/include -I$CUDA/extras/CUPTI/include -L$CUDA/lib64 -L$CUDA/extras/CUPTI/lib64 -lcupti"
nvcc -O2 -arch=sm_90 $R/fe_trace2.cu $INC -o /tmp/fe_trace2
export LD_LIBRARY_PATH=$CUDA/lib64:$CUDA/extras/CUPTI/lib64:$LD_LIBRARY_PATH
export CUDA_DEVICE_MAX_CONNECTIONS=32
mkdir -p $OUT/t
for A in 2 8; do
  for n in 8 12 30 200; do
    /tmp/fe_trace2 actgap $OUT/t/actgap_A${A}_n${n}.jsonl A=$A n=$n gate=20000000 reps=3
  done
done
cd $OUT/t && for f in *.jsonl; do gzip -9 $f; done && tar cf $OUT/depth.tar *
