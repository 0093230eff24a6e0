// loopgate_nccl_smoke: the NCCL bootstrap on its own, no LibTorch (docs/design.md "GPU facts"). Rank 0 makes the
// unique id, MPI_Bcast shares it, each rank takes device local_rank % count, ncclCommInitRank, then an
// all-reduce of rank-valued floats whose sum is exact (n(n-1)/2 + i*n for element i) is checked bit for bit,
// twice, and the mismatch count is all-reduced so every rank exits with the same code.
//   mpirun -np 2 build/gpu/tools/loopgate_nccl_smoke
// Compiled in CPU CI too when the CUDA toolkit is present (it cannot run there).
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#define SMOKE_CHECK(cond, ...)                                                   \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::fprintf(stderr, "loopgate_nccl_smoke: rank %d: %s:%d: ", g_rank, __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                                         \
      std::fprintf(stderr, "\n");                                                \
      MPI_Abort(MPI_COMM_WORLD, 1);                                              \
    }                                                                            \
  } while (0)

static int g_rank = 0;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  setenv("NCCL_ALGO", "Ring", 0);
  setenv("NCCL_PROTO", "Simple", 0);

  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node);
  int local = 0, count = 0;
  MPI_Comm_rank(node, &local);
  cudaError_t ce = cudaGetDeviceCount(&count);
  SMOKE_CHECK(ce == cudaSuccess && count > 0, "no CUDA device: %s", cudaGetErrorString(ce));
  const int device = local % count;
  SMOKE_CHECK(cudaSetDevice(device) == cudaSuccess, "cudaSetDevice(%d) failed", device);

  ncclUniqueId id;
  if (g_rank == 0) SMOKE_CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId failed");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  ncclResult_t nr = ncclCommInitRank(&comm, size, id, g_rank);
  SMOKE_CHECK(nr == ncclSuccess, "ncclCommInitRank: %s", ncclGetErrorString(nr));

  const size_t n = 1 << 20;
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(g_rank + static_cast<int>(i % 1024));
  float* buf = nullptr;
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  cudaMalloc(&buf, n * sizeof(float));
  long long wrong = 0;
  for (int rep = 0; rep < 2; ++rep) {
    cudaMemcpy(buf, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    nr = ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, comm, stream);
    SMOKE_CHECK(nr == ncclSuccess, "ncclAllReduce: %s", ncclGetErrorString(nr));
    std::vector<float> out(n);
    cudaMemcpyAsync(out.data(), buf, n * sizeof(float), cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    for (size_t i = 0; i < n; ++i) {
      const float expect = static_cast<float>(size * (size - 1) / 2 + static_cast<long long>(i % 1024) * size);
      if (out[i] != expect) ++wrong;
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  int version = 0;
  ncclGetVersion(&version);
  if (g_rank == 0)
    std::printf("loopgate_nccl_smoke: %d rank(s), NCCL %d, all-reduce of %zu floats x2: %lld wrong element(s): %s\n",
                size, version, n, wrong, wrong == 0 ? "OK" : "FAILED");
  ncclCommDestroy(comm);
  cudaFree(buf);
  MPI_Comm_free(&node);
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
