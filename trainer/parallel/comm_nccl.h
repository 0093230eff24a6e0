// NcclComm: the GPU backend of Comm — one NCCL communicator per process group, bootstrapped through MPI
// (nccl-tests style: group rank 0 calls ncclGetUniqueId, MPI_Bcast over the group's MPI communicator,
// ncclCommInitRank), collectives enqueued on LibTorch's current CUDA stream (stream-ordered: no host wait).
// Deterministic settings are applied before the first init unless the user set them: NCCL_NVLS_ENABLE=0,
// NCCL_ALGO=Ring, NCCL_PROTO=Simple (docs/design.md); cuBLAS's workspace by apply_cublas_determinism. Built only with
// LOOPGATE_CUDA.
// Not here: choosing the backend (fixtures do) or anything MPI-only (comm_mpi.h).
#pragma once
#include <map>
#include <string>
#include <mpi.h>

#include "trainer/parallel/comm.h"
#include "trainer/parallel/layout.h"

namespace loopgate {

// Picks and sets this rank's CUDA device (cudaSetDevice and LibTorch's current device): the CTest resource
// allocation CTEST_RESOURCE_GROUP_<rank>_GPUS="id:N,slots:1" when CTEST_RESOURCE_GROUP_COUNT is set (it must
// equal the world size), else the node-local rank (MPI_COMM_TYPE_SHARED split) modulo the device count.
// Returns the device index.
int select_cuda_device(MPI_Comm world);

// What a GPU run's bits depend on besides the code: the current GPU's model, the driver, the CUDA runtime, NCCL's
// version and its algorithm and protocol, cuBLAS's workspace. GPU golden values are recorded per environment.
std::map<std::string, std::string> cuda_environment();

// Sets NCCL_NVLS_ENABLE=0, NCCL_ALGO=Ring, NCCL_PROTO=Simple where the environment leaves them unset.
void apply_nccl_determinism_env();

// Deterministic cuBLAS, once per process: CUBLAS_WORKSPACE_CONFIG=:4096:8 where the environment leaves it unset
// (LibTorch's deterministic algorithms refuse cuBLAS without it), its value kept for cuda_environment(). Then one
// product and its backward on `device`, the selected GPU, after which the variable may be cleared (the .cpp says
// when and why). Call after setDeterministicAlgorithms(true).
void apply_cublas_determinism(c10::Device device);

// One NCCL communicator over the ranks of `comm` (collective over `comm`; the MPI communicator is kept for
// barrier()). own=true frees `comm` on destruction.
CommPtr make_nccl_comm(MPI_Comm comm, const CommOptions& options = {}, bool own = false);

// make_mpi_groups' twin: world/tp/dp/pp/mp groups for this rank, each its own NCCL communicator. The
// device must already be selected (select_cuda_device).
ProcessGroups make_nccl_groups(const Layout& layout, MPI_Comm base, const CommOptions& options = {});

}  // namespace loopgate
