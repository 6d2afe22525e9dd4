# Second call, same binaries rebuilt: the chain pinned to each of the 16 cores in turn (which
# cores are fast), the CPU topology, and hyperq on one channel with 1 to 16 streams and with
# short kernels (what makes submitted -> start longer than a single stream's 0.54 us).
set -e
R=sim/analysis/reference/h200
CUDA=${CUDA_HOME:-$(dirname $(dirname $(readlink -f $(which nvcc))))}
INC="-I$CUDA/include -I$CUDA/extras/CUPTI/include -L$CUDA/lib64 -L$CUDA/extras/CUPTI/lib64 -lcupti"
nvcc -O2 -arch=sm_90 $R/fe_trace.cu $INC -o /tmp/fe_trace
export LD_LIBRARY_PATH=$CUDA/lib64:$CUDA/extras/CUPTI/lib64:$LD_LIBRARY_PATH
mkdir -p $OUT/t
(lscpu; lscpu -e; cat /proc/cpuinfo | grep MHz) > $OUT/t/cpu.txt 2>&1 || true
for core in $(seq 0 15); do
  taskset -c $core /tmp/fe_trace chain $OUT/t/chain_stream_core${core}_r3.jsonl \
    n=1000 ns=0 graph=0 reps=3
done
for s in 1 2 4 8 16; do
  CUDA_DEVICE_MAX_CONNECTIONS=1 /tmp/fe_trace hyperq $OUT/t/hyperq_c1_s${s}_k4.jsonl \
    streams=$s k=4 ns=100000 order=0 reps=2
done
CUDA_DEVICE_MAX_CONNECTIONS=1 /tmp/fe_trace hyperq $OUT/t/hyperq_c1_s16_ns2000.jsonl \
  streams=16 k=4 ns=2000 order=0 reps=2
CUDA_DEVICE_MAX_CONNECTIONS=1 /tmp/fe_trace hyperq $OUT/t/hyperq_c1_s1_k64.jsonl \
  streams=1 k=64 ns=100000 order=0 reps=2
cd $OUT/t && for f in *.jsonl; do gzip -9 $f; done && tar cf $OUT/more.tar *
