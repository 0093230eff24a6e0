// NcclComm: Comm over NCCL for CUDA tensors, on LibTorch's current stream. kFixed / kPermuted float sums are
// an all-gather plus adds in a chosen order on the device, as MpiComm does on the host, so their bits do not
// depend on NCCL's algorithm choice.
#include "trainer/parallel/comm_nccl.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <numeric>
#include <random>
#include <regex>

#include "trainer/common/device.h"
#include "trainer/common/error.h"
#include "trainer/parallel/comm_mpi.h"  // MpiGroup: NCCL bootstraps over an MPI communicator

#define LG_NCCL_CHECK(call)                                                                                    \
  do {                                                                                                         \
    ncclResult_t lg_nccl_rc_ = (call);                                                                         \
    if (lg_nccl_rc_ != ncclSuccess)                                                                            \
      ::loopgate::throw_error(__FILE__, __LINE__, fmt::format("NCCL call failed: {}: {} ({})", #call,          \
                                                              ncclGetErrorString(lg_nccl_rc_),                 \
                                                              ncclGetLastError(nullptr)));                     \
  } while (0)

#define LG_CUDA_CHECK(call)                                                                                    \
  do {                                                                                                         \
    cudaError_t lg_cuda_rc_ = (call);                                                                          \
    if (lg_cuda_rc_ != cudaSuccess)                                                                            \
      ::loopgate::throw_error(__FILE__, __LINE__,                                                              \
                              fmt::format("CUDA call failed: {}: {}", #call, cudaGetErrorString(lg_cuda_rc_))); \
  } while (0)

namespace loopgate {
namespace {

ncclDataType_t nccl_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    case at::kByte: return ncclUint8;
    case at::kChar: return ncclInt8;
    default: return ncclNumTypes;
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

cudaStream_t current_stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

class NcclComm final : public Comm {
 public:
  NcclComm(MPI_Comm comm, CommOptions options, bool own) : g_(comm, own), options_(options) {
    ncclUniqueId id;
    if (g_.rank == 0) LG_NCCL_CHECK(ncclGetUniqueId(&id));
    LG_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, g_.comm));
    LG_NCCL_CHECK(ncclCommInitRank(&nccl_, g_.size, id, g_.rank));
    // A hang in NCCL never returns to the host: the progress watchdog aborts the communicator (its kernels end,
    // the stuck synchronize returns) before it aborts the job, so no rank is left spinning on the GPU.
    abort_hook_ = add_abort_hook([comm = nccl_] { ncclCommAbort(comm); });
  }
  ~NcclComm() override {
    remove_abort_hook(abort_hook_);
    if (nccl_) ncclCommDestroy(nccl_);  // before g_ frees the MPI communicator
  }

  const char* backend() const override { return "nccl"; }
  int rank() const override { return g_.rank; }
  int size() const override { return g_.size; }
  const std::vector<int>& world_ranks() const override { return g_.world_ranks; }
  int64_t calls() const override { return calls_; }
  void restart(const CommOptions& options) override {
    options_ = options;
    calls_ = 0;
  }

  void all_reduce(at::Tensor& t, ReduceOp op) override {
    check_tensor(t, "all_reduce");
    ++calls_;
    note_progress();
    if (g_.size == 1) return;
    if (op == ReduceOp::kSum && options_.order != ReduceOrder::kNative && t.is_floating_point()) {
      t.copy_(ordered_sum(t));
      return;
    }
    at::Tensor work = reducible(t, "all_reduce");
    LG_NCCL_CHECK(ncclAllReduce(work.data_ptr(), work.data_ptr(), static_cast<size_t>(work.numel()),
                                nccl_type(work.scalar_type()), nccl_op(op), nccl_, current_stream()));
    if (!work.is_same(t)) t.copy_(work);
  }

  at::Tensor all_gather(const at::Tensor& t) override {
    check_tensor(t, "all_gather");
    ++calls_;
    note_progress();
    return gather_raw(t);
  }

  at::Tensor reduce_scatter(const at::Tensor& t, ReduceOp op) override {
    check_tensor(t, "reduce_scatter");
    LG_CHECK(t.dim() >= 1 && t.size(0) % g_.size == 0, "reduce_scatter: dim 0 ({}) not divisible by group size {}",
             t.dim() ? t.size(0) : 0, g_.size);
    ++calls_;
    note_progress();
    if (g_.size == 1) return t.clone();
    const int64_t chunk = t.size(0) / g_.size;
    if (op == ReduceOp::kSum && options_.order != ReduceOrder::kNative && t.is_floating_point())
      return ordered_sum(t).narrow(0, g_.rank * chunk, chunk).clone();
    at::Tensor work = reducible(t, "reduce_scatter");
    std::vector<int64_t> shape = work.sizes().vec();
    shape[0] = chunk;
    at::Tensor out = at::empty(shape, work.options());
    LG_NCCL_CHECK(ncclReduceScatter(work.data_ptr(), out.data_ptr(), static_cast<size_t>(out.numel()),
                                    nccl_type(work.scalar_type()), nccl_op(op), nccl_, current_stream()));
    return out.to(t.scalar_type());
  }

  void broadcast(at::Tensor& t, int root) override {
    check_tensor(t, "broadcast");
    ++calls_;
    note_progress();
    if (g_.size == 1) return;
    LG_NCCL_CHECK(ncclBroadcast(t.data_ptr(), t.data_ptr(), bytes(t), ncclUint8, root, nccl_, current_stream()));
  }

  void send(const at::Tensor& t, int peer) override {
    check_tensor(t, "send");
    ++calls_;
    note_progress();
    LG_NCCL_CHECK(ncclSend(t.data_ptr(), bytes(t), ncclUint8, peer, nccl_, current_stream()));
  }

  void recv(at::Tensor& t, int peer) override {
    check_tensor(t, "recv");
    ++calls_;
    note_progress();
    LG_NCCL_CHECK(ncclRecv(t.data_ptr(), bytes(t), ncclUint8, peer, nccl_, current_stream()));
  }

  void send_recv(const at::Tensor& s, int send_peer, at::Tensor& r, int recv_peer) override {
    check_tensor(s, "send_recv");
    check_tensor(r, "send_recv");
    ++calls_;
    note_progress();
    LG_NCCL_CHECK(ncclGroupStart());
    LG_NCCL_CHECK(ncclSend(s.data_ptr(), bytes(s), ncclUint8, send_peer, nccl_, current_stream()));
    LG_NCCL_CHECK(ncclRecv(r.data_ptr(), bytes(r), ncclUint8, recv_peer, nccl_, current_stream()));
    LG_NCCL_CHECK(ncclGroupEnd());
  }

  // A host barrier over the group (what Megatron's timers want from barrier()); device work is not waited for.
  void barrier() override {
    ++calls_;
    note_progress();
    LG_MPI_CHECK(MPI_Barrier(g_.comm));
  }

 private:
  static size_t bytes(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

  void check_tensor(const at::Tensor& t, const char* op) const {
    LG_CHECK(t.defined(), "NcclComm::{}: undefined tensor", op);
    LG_CHECK(t.device().is_cuda(), "NcclComm::{}: tensor on {} (the nccl backend takes CUDA tensors)", op,
             t.device().str());
    LG_CHECK(t.is_contiguous(), "NcclComm::{}: tensor not contiguous", op);
  }

  // Bool reduces as uint8 (SUM = count, MAX = any, MIN = all).
  static at::Tensor reducible(const at::Tensor& t, const char* op) {
    if (t.scalar_type() == at::kBool) return t.to(at::kByte);
    if (nccl_type(t.scalar_type()) == ncclNumTypes)
      throw Error(fmt::format("NcclComm: {} of dtype {} not supported", op, std::string(c10::toString(t.scalar_type()))));
    return t;
  }

  at::Tensor gather_raw(const at::Tensor& t) {
    std::vector<int64_t> shape = t.dim() == 0 ? std::vector<int64_t>{1} : t.sizes().vec();
    shape[0] *= g_.size;
    at::Tensor out = at::empty(shape, t.options());
    LG_NCCL_CHECK(ncclAllGather(t.data_ptr(), out.data_ptr(), bytes(t), ncclUint8, nccl_, current_stream()));
    return out;
  }

  at::Tensor ordered_sum(const at::Tensor& t) {
    return sum_in_order(gather_raw(t.contiguous()).view({g_.size, t.numel()}), options_, calls_).view(t.sizes());
  }

  MpiGroup g_;
  CommOptions options_;
  ncclComm_t nccl_ = nullptr;
  int abort_hook_ = -1;
  int64_t calls_ = 0;
};

CommPtr split(MPI_Comm base, int color, int key, const CommOptions& options) {
  MPI_Comm out;
  LG_MPI_CHECK(MPI_Comm_split(base, color, key, &out));
  return make_nccl_comm(out, options, /*own=*/true);
}

}  // namespace

namespace {

// CUBLAS_WORKSPACE_CONFIG as apply_cublas_determinism found or set it (empty before): the environment record
// keeps it after the variable is cleared.
std::string& configured_cublas_workspace() {
  static std::string value;
  return value;
}

}  // namespace

std::map<std::string, std::string> cuda_environment() {
  std::map<std::string, std::string> env;
  int device = 0, driver = 0, runtime = 0, nccl = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) == cudaSuccess && cudaGetDeviceProperties(&prop, device) == cudaSuccess)
    env["gpu"] = fmt::format("{} (sm_{}{})", prop.name, prop.major, prop.minor);
  if (cudaDriverGetVersion(&driver) == cudaSuccess) env["cuda_driver"] = std::to_string(driver);
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) env["cuda_runtime"] = std::to_string(runtime);
  if (ncclGetVersion(&nccl) == ncclSuccess) env["nccl"] = std::to_string(nccl);
  for (const char* var : {"NCCL_ALGO", "NCCL_PROTO"}) {
    const char* v = std::getenv(var);
    env[var] = v ? v : "(unset)";
  }
  const char* cublas = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  const std::string& configured = configured_cublas_workspace();
  env["CUBLAS_WORKSPACE_CONFIG"] = !configured.empty() ? configured : cublas ? cublas : "(unset)";
  return env;
}

void apply_cublas_determinism(c10::Device device) {
  if (!configured_cublas_workspace().empty()) return;
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  configured_cublas_workspace() = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  // LibTorch 2.x (2.11 on the H200 runners) parses CUBLAS_WORKSPACE_CONFIG again on every cuBLAS call, compiling
  // a std::regex each time: a fifth of the GPU gate's host time in a profile (results/history/results-gpu-log.md §22). By the end
  // of one product and its backward the variable has done its work: LibTorch's deterministic-mode check keeps the
  // verdict of its first call, and both threads that issue cuBLAS calls (this one and the autograd engine's for
  // this device) hold their handles. It is then cleared if LibTorch's workspace size without it is the same
  // (:4096:8 and the default are both 32 MiB on Hopper and later); else it stays, which costs only the time.
  product_and_backward(device);
  const size_t configured = at::cuda::getChosenWorkspaceSize();
  unsetenv("CUBLAS_WORKSPACE_CONFIG");
  if (at::cuda::getChosenWorkspaceSize() != configured)
    setenv("CUBLAS_WORKSPACE_CONFIG", configured_cublas_workspace().c_str(), /*overwrite=*/1);
}

void apply_nccl_determinism_env() {
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  setenv("NCCL_ALGO", "Ring", 0);
  setenv("NCCL_PROTO", "Simple", 0);
}

int select_cuda_device(MPI_Comm world) {
  int rank = 0, size = 1, count = 0;
  LG_MPI_CHECK(MPI_Comm_rank(world, &rank));
  LG_MPI_CHECK(MPI_Comm_size(world, &size));
  LG_CUDA_CHECK(cudaGetDeviceCount(&count));
  LG_CHECK(count > 0, "no CUDA device visible to rank {}", rank);
  int device = -1;
  if (const char* n = std::getenv("CTEST_RESOURCE_GROUP_COUNT")) {
    LG_CHECK(std::atoi(n) == size, "CTEST_RESOURCE_GROUP_COUNT={} but the job has {} ranks (RESOURCE_GROUPS must "
             "be \"{},gpus:1\")", n, size, size);
    std::string var = fmt::format("CTEST_RESOURCE_GROUP_{}_GPUS", rank);
    const char* spec = std::getenv(var.c_str());
    LG_CHECK(spec != nullptr, "{} is not set (ctest --resource-spec-file with a \"gpus\" resource)", var);
    std::smatch m;
    std::string s = spec;
    LG_CHECK(std::regex_search(s, m, std::regex("id:([0-9]+)")), "cannot parse {}={}", var, s);
    device = std::stoi(m[1]);
  } else {
    MPI_Comm node;
    LG_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    int local = 0;
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    device = local % count;
  }
  LG_CHECK(device < count, "rank {}: device {} requested but only {} visible", rank, device, count);
  LG_CUDA_CHECK(cudaSetDevice(device));
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
  return device;
}

CommPtr make_nccl_comm(MPI_Comm comm, const CommOptions& options, bool own) {
  apply_nccl_determinism_env();
  return std::make_shared<NcclComm>(comm, options, own);
}

ProcessGroups make_nccl_groups(const Layout& layout, MPI_Comm base, const CommOptions& options) {
  int rank = 0, size = 0;
  LG_MPI_CHECK(MPI_Comm_rank(base, &rank));
  LG_MPI_CHECK(MPI_Comm_size(base, &size));
  LG_CHECK(size == layout.world(), "layout world {} != communicator size {}", layout.world(), size);
  ProcessGroups g;
  MPI_Comm world_dup;
  LG_MPI_CHECK(MPI_Comm_dup(base, &world_dup));
  g.world = make_nccl_comm(world_dup, options, /*own=*/true);
  const Layout::GroupColors colors = layout.group_colors(rank);
  g.tp = split(base, colors.tp, rank, options);
  g.dp = split(base, colors.dp, rank, options);
  g.pp = split(base, colors.pp, rank, options);
  g.mp = split(base, colors.mp, rank, options);
  return g;
}

}  // namespace loopgate
