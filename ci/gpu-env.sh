# The environment every GPU measurement script runs under (sourced from the repository root): Open MPI as root in
# a container, NVLink multicast off (this workplace's machines), deterministic NCCL and cuBLAS (bit identity
# across runs and arms). NCCL_ALGO / NCCL_PROTO may be overridden from outside.
while IFS='=' read -r key value; do  # Open MPI's root and oversubscribe lines of ctest/mpi-env.list
  [[ $key == OMPI_ALLOW_RUN_AS_ROOT* || $key == OMPI_MCA_rmaps_base_oversubscribe ]] && export "$key=$value"
done < "$(dirname "${BASH_SOURCE[0]}")/../ctest/mpi-env.list"
unset key value
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# HIDDENxLAYERSxSEQ -> loopgate's model flags (heads = hidden / 64, at least 4): the size notation of the sweep,
# overhead and determinism scripts. Unquoted use splits it into its words: $(lg_model_flags 2048x4x1024).
lg_model_flags() {
  local h l s
  IFS=x read -r h l s <<< "$1"
  echo "--hidden-size $h --num-layers $l --seq-length $s --num-attention-heads $(( h / 64 > 4 ? h / 64 : 4 ))"
}
# A measurement's results folder and the loopgate binary: R=${RESULTS:-build/gpu/results}/NAME (created), LG.
lg_results() {
  R="${RESULTS:-build/gpu/results}/$1"
  mkdir -p "$R"
  LG=build/gpu/tools/loopgate
}
export NCCL_ALGO="${NCCL_ALGO:-Ring}" NCCL_PROTO="${NCCL_PROTO:-Simple}" CUBLAS_WORKSPACE_CONFIG=:4096:8
