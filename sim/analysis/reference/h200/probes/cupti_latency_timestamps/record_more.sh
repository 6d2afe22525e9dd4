# The multi-channel half of the probe (run like record.sh): hyperq with 8 streams on 8
# channels, 2 on 2, and fanout2 (hyperq breadth-first, 32 streams x 2 kernels of 2 ms on 8
# channels), with and without latency timestamps.
set -e
P=sim/analysis/reference/h200/probes/cupti_latency_timestamps
CUDA=${CUDA_HOME:-$(dirname $(dirname $(readlink -f $(which nvcc))))}
INC="-I$CUDA/include -I$CUDA/extras/CUPTI/include -L$CUDA/lib64 -L$CUDA/extras/CUPTI/lib64 -lcupti"
patch -s -o /tmp/fe_trace.cu sim/analysis/reference/h200/fe_trace.cu $P/fe_trace.cu.diff
nvcc -O2 -arch=sm_90 /tmp/fe_trace.cu $INC -o /tmp/fe_trace
export LD_LIBRARY_PATH=$CUDA/lib64:$CUDA/extras/CUPTI/lib64:$LD_LIBRARY_PATH
mkdir -p $OUT/t
for v in full nolat; do
  case $v in full) E="";; nolat) E="FE_TRACE_NO_LATENCY=1";; esac
  env $E CUDA_DEVICE_MAX_CONNECTIONS=8 /tmp/fe_trace hyperq $OUT/t/hyperq_c8_s8_$v.jsonl streams=8 k=4 ns=100000 order=0 reps=3
  env $E CUDA_DEVICE_MAX_CONNECTIONS=2 /tmp/fe_trace hyperq $OUT/t/hyperq_c2_s2_$v.jsonl streams=2 k=4 ns=100000 order=0 reps=3
  env $E CUDA_DEVICE_MAX_CONNECTIONS=8 /tmp/fe_trace hyperq $OUT/t/fanout2_c8_s32_$v.jsonl streams=32 k=2 ns=2000000 order=1 reps=2
done
cd $OUT/t && tar czf $OUT/cupti_multichannel.tgz *.jsonl
