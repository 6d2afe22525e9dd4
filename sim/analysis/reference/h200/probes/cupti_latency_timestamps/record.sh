# Run from the repository root on the H200 machine, $OUT the output folder. Builds fe_trace and
# fe_trace2 from this project's copies with the probe's patches (CUPTI activity kinds and
# latency timestamps chosen by environment variables), then records each variant.
set -e
P=sim/analysis/reference/h200/probes/cupti_latency_timestamps
CUDA=${CUDA_HOME:-$(dirname $(dirname $(readlink -f $(which nvcc))))}
INC="-I$CUDA/include -I$CUDA/extras/CUPTI/include -L$CUDA/lib64 -L$CUDA/extras/CUPTI/lib64 -lcupti"
patch -s -o /tmp/fe_trace.cu sim/analysis/reference/h200/fe_trace.cu $P/fe_trace.cu.diff
patch -s -o /tmp/fe_trace2.cu sim/analysis/reference/h200/fe_trace2.cu $P/fe_trace2.cu.diff
nvcc -O2 -arch=sm_90 /tmp/fe_trace.cu $INC -o /tmp/fe_trace &
nvcc -O2 -arch=sm_90 /tmp/fe_trace2.cu $INC -o /tmp/fe_trace2 &
wait
export LD_LIBRARY_PATH=$CUDA/lib64:$CUDA/extras/CUPTI/lib64:$LD_LIBRARY_PATH
export CUDA_DEVICE_MAX_CONNECTIONS=32
mkdir -p $OUT/t
for v in full nolat rt kern kern_nolat; do
  case $v in
    full) E="";; nolat) E="FE_TRACE_NO_LATENCY=1";; rt) E="FE_TRACE_KINDS=runtime";;
    kern) E="FE_TRACE_KINDS=kernel";; kern_nolat) E="FE_TRACE_KINDS=kernel FE_TRACE_NO_LATENCY=1";;
  esac
  for A in 1 8; do
    env $E /tmp/fe_trace2 actgap $OUT/t/actgap_stamp_A${A}_$v.jsonl A=$A n=200 gate=100000000 reps=2 stamp=1
  done
  env $E /tmp/fe_trace chain $OUT/t/chain_gate_n100_$v.jsonl n=100 gate=20000000 reps=3
done
FE_TRACE_NO_CUPTI=1 /tmp/fe_trace2 actgap $OUT/t/actgap_stamp_A8_nocupti.jsonl A=8 n=200 gate=100000000 reps=2 stamp=1
cd $OUT/t && tar czf $OUT/cupti_variants.tgz *.jsonl
