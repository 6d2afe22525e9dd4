# Second call: `gap2`, A streams of dependent kernels queued behind gates (fe_trace2's actgap
# shape), stream 0's kernels spinning ns0: does another stream's launch wait for them?
set -e
P=sim/analysis/reference/h200/probes/multistream_state
CUDA=${CUDA_HOME:-$(dirname $(dirname $(readlink -f $(which nvcc))))}
INC="-I$CUDA/include -I$CUDA/extras/CUPTI/include -L$CUDA/lib64 -L$CUDA/extras/CUPTI/lib64 -lcupti"
nvcc -O2 -arch=sm_90 $P/ms_probe.cu $INC -o /tmp/ms_probe
export LD_LIBRARY_PATH=$CUDA/lib64:$CUDA/extras/CUPTI/lib64:$LD_LIBRARY_PATH
export CUDA_DEVICE_MAX_CONNECTIONS=32
mkdir -p $OUT/t
for ns0 in 0 1000 3000 10000; do
  /tmp/ms_probe gap2 $OUT/t/gap2_A2_ns0_$ns0.jsonl A=2 n=200 ns0=$ns0
done
/tmp/ms_probe gap2 $OUT/t/gap2_A2_both3000.jsonl A=2 n=200 ns0=3000 ns=3000
/tmp/ms_probe gap2 $OUT/t/gap2_A1_ns0_3000.jsonl A=1 n=200 ns0=3000
/tmp/ms_probe gap2 $OUT/t/gap2_A4_ns0_3000.jsonl A=4 n=200 ns0=3000
cd $OUT/t && for f in *.jsonl; do gzip -9 $f; done && tar cf $OUT/gap2.tar *.jsonl.gz && cd $OUT && rm -r $OUT/t
