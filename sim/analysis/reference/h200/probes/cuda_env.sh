# Sourced by a probe's record.sh (directly, or through build_fe_trace.sh), from the repository
# root on the lent machine: R (the reference set's folder), CUDA, INC (nvcc's flags for CUDA
# and CUPTI), CUDA's and CUPTI's libraries on the loader's path, and host_info FILE, which
# writes what the machine is (date, vCPUs, CPU, hypervisor, GPU, driver, clocks).
R=sim/analysis/reference/h200
CUDA=${CUDA_HOME:-$(dirname $(dirname $(readlink -f $(which nvcc))))}
INC="-I$CUDA/include -I$CUDA/extras/CUPTI/include -L$CUDA/lib64 -L$CUDA/extras/CUPTI/lib64 -lcupti"
export LD_LIBRARY_PATH=$CUDA/lib64:$CUDA/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}

host_info() {
  { date -u; nproc; lscpu | grep -E "Model name|Hypervisor";
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > "$1"
}
