// NcclComm on real GPUs, one rank per GPU: every collective with closed-form, order-independent expectations
// (small integers, as nccl-tests' verifiable), the bool and bf16 paths, and the unsupported-dtype message.
// Device from the CTest resource allocation (RESOURCE_GROUPS "N,gpus:1") or the local rank. Also the deterministic
// cuBLAS setting (apply_cublas_determinism): its record and the workspace size it leaves.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "trainer/parallel/comm_nccl.h"

namespace loopgate {
namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

CommPtr world_comm() {
  static CommPtr c = [] {
    select_cuda_device(MPI_COMM_WORLD);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    return make_nccl_comm(dup, {}, /*own=*/true);
  }();
  return c;
}

at::TensorOptions cuda(at::ScalarType t) { return at::TensorOptions().dtype(t).device(at::kCUDA); }

// apply_cublas_determinism may clear CUBLAS_WORKSPACE_CONFIG (LibTorch re-parses it on every cuBLAS call). After it:
// the environment record still holds the configured value, LibTorch's cuBLAS workspace is still that value's size,
// and a product runs under deterministic algorithms (LibTorch refuses cuBLAS there without a deterministic value).
TEST(CublasDeterminism, RecordsTheConfiguredValueAndKeepsItsWorkspaceSize) {
  world_comm();  // selects this rank's GPU
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  const char* given = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  const std::string want = given ? given : ":4096:8";
  size_t size_kib = 0, count = 0;
  ASSERT_EQ(std::sscanf(want.c_str(), ":%zu:%zu", &size_kib, &count), 2) << want;
  apply_cublas_determinism(c10::Device(c10::kCUDA, c10::cuda::current_device()));
  EXPECT_EQ(cuda_environment().at("CUBLAS_WORKSPACE_CONFIG"), want);
  EXPECT_EQ(at::cuda::getChosenWorkspaceSize(), size_kib * 1024 * count);
  const at::Tensor x = at::ones({4, 4}, cuda(at::kFloat));
  EXPECT_EQ(at::mm(x, x).cpu()[0][0].item<float>(), 4.0f);
  std::printf("CUBLAS_WORKSPACE_CONFIG=%s: %s after apply_cublas_determinism\n", want.c_str(),
              std::getenv("CUBLAS_WORKSPACE_CONFIG") ? "kept" : "cleared");
}

TEST(NcclComm, AllReduceSumMaxMin) {
  CommPtr c = world_comm();
  const int n = c->size(), r = c->rank();
  at::Tensor t = at::full({1000}, static_cast<double>(r + 1), cuda(at::kFloat));
  c->all_reduce(t, ReduceOp::kSum);
  EXPECT_TRUE(at::equal(t.cpu(), at::full({1000}, n * (n + 1) / 2.0, at::kFloat)));
  at::Tensor m = at::full({3}, static_cast<double>(r), cuda(at::kLong));
  c->all_reduce(m, ReduceOp::kMax);
  EXPECT_EQ(m.cpu()[0].item<int64_t>(), n - 1);
  at::Tensor b = at::full({2}, r == 0, cuda(at::kBool));
  c->all_reduce(b, ReduceOp::kMax);  // any
  EXPECT_TRUE(b.cpu().all().item<bool>());
  at::Tensor h = at::full({8}, static_cast<double>(r + 1), cuda(at::kBFloat16));
  c->all_reduce(h, ReduceOp::kSum);
  EXPECT_EQ(h.cpu().to(at::kFloat)[0].item<float>(), n * (n + 1) / 2.0f);
}

TEST(NcclComm, AllGatherReduceScatterBroadcast) {
  CommPtr c = world_comm();
  const int n = c->size(), r = c->rank();
  at::Tensor g = c->all_gather(at::full({2, 3}, static_cast<double>(r), cuda(at::kFloat))).cpu();
  ASSERT_EQ(g.size(0), 2 * n);
  for (int k = 0; k < n; ++k) EXPECT_EQ(g[2 * k][0].item<float>(), static_cast<float>(k));
  at::Tensor rs = c->reduce_scatter(at::arange(2 * n, cuda(at::kFloat)), ReduceOp::kSum).cpu();
  ASSERT_EQ(rs.size(0), 2);
  EXPECT_EQ(rs[0].item<float>(), static_cast<float>(2 * r * n));
  at::Tensor bc = at::full({4}, static_cast<double>(r + 7), cuda(at::kFloat));
  c->broadcast(bc, 0);
  EXPECT_EQ(bc.cpu()[3].item<float>(), 7.0f);
}

TEST(NcclComm, SendRecvRing) {
  CommPtr c = world_comm();
  const int n = c->size(), r = c->rank();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  at::Tensor s = at::full({16}, static_cast<double>(r), cuda(at::kFloat));
  at::Tensor got = at::empty({16}, cuda(at::kFloat));
  c->send_recv(s, (r + 1) % n, got, (r + n - 1) % n);
  EXPECT_EQ(got.cpu()[0].item<float>(), static_cast<float>((r + n - 1) % n));
}

TEST(NcclComm, FixedOrderSumMatchesNative) {
  CommPtr c = world_comm();
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  CommPtr fixed = make_nccl_comm(dup, {ReduceOrder::kFixed, 0}, /*own=*/true);
  at::Tensor a = at::full({64}, static_cast<double>(c->rank() + 1), cuda(at::kFloat));
  at::Tensor b = a.clone();
  c->all_reduce(a);
  fixed->all_reduce(b);
  EXPECT_TRUE(at::equal(a.cpu(), b.cpu()));
}

TEST(NcclComm, UnsupportedDtypeSaysSo) {
  CommPtr c = world_comm();
  if (c->size() < 2) GTEST_SKIP() << "size-1 groups return before the dtype check";
  at::Tensor t = at::zeros({2}, cuda(at::kComplexFloat));
  try {
    c->all_reduce(t, ReduceOp::kSum);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("NcclComm: all_reduce of dtype"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loopgate
