# Sourced by a probe's record.sh, from the repository root on the H200 machine: builds the
# project's fe_trace.cu unchanged into /tmp/fe_trace (CUPTI on, latency timestamps on, as the
# calibration set was taken), with cuda_env.sh's setting (R, INC, the loader's path,
# host_info).
. sim/analysis/reference/h200/probes/cuda_env.sh
nvcc -O2 -arch=sm_90 $R/fe_trace.cu $INC -o /tmp/fe_trace
