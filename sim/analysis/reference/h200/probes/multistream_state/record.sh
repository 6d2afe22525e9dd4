# One call on the lent H200 machine, from the repository root with OUT set: builds ms_probe
# (the project's fe_trace.cu plus the `seq` scenario) and runs each pattern as a fresh process,
# CUPTI on with latency timestamps, CUDA_DEVICE_MAX_CONNECTIONS=8.
set -e
P=sim/analysis/reference/h200/probes/multistream_state
CUDA=${CUDA_HOME:-$(dirname $(dirname $(readlink -f $(which nvcc))))}
INC="-I$CUDA/include -I$CUDA/extras/CUPTI/include -L$CUDA/lib64 -L$CUDA/extras/CUPTI/lib64 -lcupti"
nvcc -O2 -arch=sm_90 $P/ms_probe.cu $INC -o /tmp/ms_probe
export LD_LIBRARY_PATH=$CUDA/lib64:$CUDA/extras/CUPTI/lib64:$LD_LIBRARY_PATH
export CUDA_DEVICE_MAX_CONNECTIONS=8
mkdir -p $OUT/t
rep() { python3 -c "import sys; print(sys.argv[1] * int(sys.argv[2]), end='')" "$1" "$2"; }
run() { name=$1; shift; /tmp/ms_probe seq $OUT/t/$name.jsonl "$@"; }
run A60            pattern=$(rep A 60)
run A60_s2         pattern=$(rep A 60) streams=2
run A60_s16        pattern=$(rep A 60) streams=16
run B1A60          pattern=B$(rep A 60)
run A30B1A30       pattern=$(rep A 30)B$(rep A 30)
run AB30           pattern=$(rep AB 30)
run AB30_grid264   pattern=$(rep AB 30) grid=264 block=128
run AB30_grid2     pattern=$(rep AB 30) grid=2
run AB8A60         pattern=$(rep AB 8)$(rep A 60)
run A20B20A20      pattern=$(rep A 20)$(rep B 20)$(rep A 20)
run AB30_async     pattern=$(rep AB 30) sync=0 ns=20000
run A60_async      pattern=$(rep A 60) sync=0 ns=20000
run ABCD15         pattern=$(rep ABCD 15)
run A60_grid264    pattern=$(rep A 60) grid=264 block=128
cd $OUT/t && for f in *.jsonl; do gzip -9 $f; done && tar cf $OUT/ms.tar *.jsonl.gz && cd $OUT && rm -r $OUT/t
