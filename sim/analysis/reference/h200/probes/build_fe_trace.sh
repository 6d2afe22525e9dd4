# Sourced by a probe's record.sh, from the repository root on the H200 machine: builds the
# project's fe_trace.cu unchanged into /tmp/fe_trace (CUPTI on, latency timestamps on, as the
# calibration set was taken) and puts CUDA's and CUPTI's libraries on the loader's path.
R=sim/analysis/reference/h200
CUDA=${CUDA_HOME:-$(dirname $(dirname $(readlink -f $(which nvcc))))}
INC="-I$CUDA/include -I$CUDA/extras/CUPTI/include -L$CUDA/lib64 -L$CUDA/extras/CUPTI/lib64 -lcupti"
nvcc -O2 -arch=sm_90 $R/fe_trace.cu $INC -o /tmp/fe_trace
export LD_LIBRARY_PATH=$CUDA/lib64:$CUDA/extras/CUPTI/lib64:$LD_LIBRARY_PATH
