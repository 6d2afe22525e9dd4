set -e
CUDA=${CUDA_HOME:-$(dirname $(dirname $(readlink -f $(which nvcc))))}
nvcc -O2 -arch=sm_90 sim/analysis/reference/h200/fe_trace.cu -I$CUDA/include -I$CUDA/extras/CUPTI/include -L$CUDA/lib64 -L$CUDA/extras/CUPTI/lib64 -lcupti -o /tmp/fe_trace
export LD_LIBRARY_PATH=$CUDA/lib64:$CUDA/extras/CUPTI/lib64:$LD_LIBRARY_PATH
for n in 20 100 300 1000; do
  /tmp/fe_trace chain $OUT/chain_gate_n$n.jsonl n=$n gate=20000000 reps=3
  /tmp/fe_trace grid $OUT/grid1_n$n.jsonl n=$n grid=1 block=32 gate=20000000
done
/tmp/fe_trace grid $OUT/grid1_b128_n20.jsonl n=20 grid=1 block=128 gate=2000000
/tmp/fe_trace chain $OUT/chain_gate_n1000_b128.jsonl n=1000 gate=20000000 reps=3 block=128
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/smi.csv
gzip $OUT/*.jsonl
ls -la $OUT
