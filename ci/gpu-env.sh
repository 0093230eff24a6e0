# The environment every GPU measurement script runs under (sourced from the repository root): Open MPI as root in
# a container, NVLink multicast off (this workplace's machines), deterministic NCCL and cuBLAS (bit identity
# across runs and arms). NCCL_ALGO / NCCL_PROTO may be overridden from outside.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_ALGO="${NCCL_ALGO:-Ring}" NCCL_PROTO="${NCCL_PROTO:-Simple}" CUBLAS_WORKSPACE_CONFIG=:4096:8
