// Unit tests of grad norm, clip coefficient, zero count, params norm and the model-parallel stat reductions
// (trainer/optim/clip_grads.h) on a Comm of size 1 (MPI_COMM_SELF), with inputs whose answers are closed-form
// (3-4-5 triangles), and checks that every result stays a [1] tensor (nothing was read on the host).
#include <gtest/gtest.h>
#include <mpi.h>

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <vector>

#include "trainer/optim/clip_grads.h"
#include "trainer/parallel/comm_mpi.h"

namespace loopgate {
namespace {

at::Tensor floats(std::vector<float> v) { return at::tensor(v, at::kFloat); }

TEST(OptimClipGrads, GradNormIsL2OverAllGrads) {
  CommPtr self = make_mpi_comm(MPI_COMM_SELF);
  // sqrt(3^2 + 4^2 + 12^2) = sqrt(169) = 13
  const std::vector<at::Tensor> grads = {floats({3, 0}), floats({4}), at::full({1, 1}, 12.0, at::kFloat)};
  const at::Tensor norm = get_grad_norm_fp32(grads, *self);
  EXPECT_EQ(norm.scalar_type(), at::kFloat);
  EXPECT_EQ(norm.numel(), 1);
  EXPECT_EQ(norm.item<float>(), 13.0f);
  EXPECT_EQ(self->calls(), 1) << "one all-reduce SUM over the group";
  // A rank with no grads still joins the all-reduce with zero.
  EXPECT_EQ(get_grad_norm_fp32({}, *self).item<float>(), 0.0f);
  EXPECT_EQ(self->calls(), 2);
}

TEST(OptimClipGrads, ClipCoefficientIsMegatronsForm) {
  const at::Tensor norm = at::full({1}, 5.0, at::kFloat);
  // (total_norm + 1e-6).reciprocal() * max_norm, all in float, then clamp_max(1).
  const float expected = (1.0f / (5.0f + 1e-6f)) * 1.0f;
  EXPECT_EQ(clip_coeff_fp32(1.0, norm).item<float>(), expected);
  EXPECT_NEAR(clip_coeff_fp32(1.0, norm).item<float>(), 0.2f, 1e-7);
  EXPECT_EQ(clip_coeff_fp32(10.0, norm).item<float>(), 1.0f) << "10 / 5 = 2 clamps to 1";
}

TEST(OptimClipGrads, ClipScalesOnlyAboveMaxNorm) {
  std::vector<at::Tensor> grads = {floats({3}), floats({4})};
  const at::Tensor norm = at::full({1}, 5.0, at::kFloat);
  clip_grad_by_total_norm_fp32(grads, 1.0, norm);
  const float c = 1.0f / (5.0f + 1e-6f);
  EXPECT_EQ(grads[0].item<float>(), 3.0f * c);
  EXPECT_EQ(grads[1].item<float>(), 4.0f * c);

  std::vector<at::Tensor> small = {floats({3}), floats({4})};
  clip_grad_by_total_norm_fp32(small, 100.0, norm);  // coefficient 20 clamps to 1: grads untouched
  EXPECT_EQ(small[0].item<float>(), 3.0f);
  EXPECT_EQ(small[1].item<float>(), 4.0f);
}

// HEAD's tensor branch multiplies by clamp_max(NaN, 1) = NaN: a NaN norm poisons the grads (host branch would not).
TEST(OptimClipGrads, NanNormMakesGradsNan) {
  std::vector<at::Tensor> grads = {floats({3, 4})};
  clip_grad_by_total_norm_fp32(grads, 1.0, at::full({1}, std::numeric_limits<float>::quiet_NaN(), at::kFloat));
  EXPECT_TRUE(std::isnan(grads[0][0].item<float>()));
}

TEST(OptimClipGrads, CountZeros) {
  CommPtr self = make_mpi_comm(MPI_COMM_SELF);
  const std::vector<at::Tensor> grads = {floats({0, 1, 0, 2}), at::tensor({0.f, 0.f, 3.f, 0.f}).reshape({2, 2})};
  const at::Tensor zeros = count_zeros_fp32(grads, *self);
  EXPECT_EQ(zeros.scalar_type(), at::kLong);
  EXPECT_EQ(zeros.numel(), 1);
  EXPECT_EQ(zeros.item<int64_t>(), 2 + 3);
  EXPECT_EQ(count_zeros_fp32({}, *self).item<int64_t>(), 0);
}

// Over a flat buffer less the grads that do not count: the per-grad count's integer.
TEST(OptimClipGrads, CountZerosOverAFlatBufferLessTheOnesLeftOut) {
  CommPtr self = make_mpi_comm(MPI_COMM_SELF);
  const at::Tensor flat = floats({0, 1, 0, 2, 0, 0, 3, 0, 0});
  const at::Tensor a = flat.narrow(0, 0, 4), b = flat.narrow(0, 4, 4).view({2, 2}), c = flat.narrow(0, 8, 1);
  const at::Tensor zeros = count_zeros_fp32(flat, {c}, *self);
  EXPECT_EQ(zeros.scalar_type(), at::kLong);
  EXPECT_EQ(zeros.sizes(), at::IntArrayRef({1}));
  EXPECT_EQ(zeros.item<int64_t>(), count_zeros_fp32({a, b}, *self).item<int64_t>());
  EXPECT_EQ(zeros.item<int64_t>(), 5);
  EXPECT_EQ(count_zeros_fp32(flat, {}, *self).item<int64_t>(), 6);
}

Param clip_param(const std::string& name, at::Tensor value, bool tp_sharded, bool tied = false) {
  Param p;
  p.name = name;
  p.value = value;
  p.tp_sharded = tp_sharded;
  p.embedding_tied = tied;
  return p;
}

TEST(OptimClipGrads, ParamsNormSkipsTpDuplicatesAndSharedCopy) {
  CommPtr self = make_mpi_comm(MPI_COMM_SELF);
  const Params params = {
      clip_param("fc1.weight", floats({3, 4}), /*tp_sharded=*/true),            // 25
      clip_param("ln.weight", floats({1, 2, 2}), /*tp_sharded=*/false),         // 9, counted on TP rank 0 only
      clip_param("embedding.weight", floats({12}), /*tp_sharded=*/true, true),  // 144, not on a non-first stage
  };
  const at::Tensor n0 = calc_params_l2_norm(params, *self, /*tp_rank=*/0);
  EXPECT_EQ(n0.scalar_type(), at::kDouble) << "Megatron takes the root of a Python float";
  // Squared norms are fp32 (Megatron's multi_tensor_l2norm ** 2): sqrt(178) and sqrt(34) are not exact in float,
  // so those two carry one float rounding; 13, 5 and 10 are exact all the way.
  EXPECT_NEAR(n0.item<double>(), std::sqrt(178.0), 1e-6);  // 25 + 9 + 144
  EXPECT_EQ(calc_params_l2_norm(params, *self, /*tp_rank=*/1).item<double>(), 13.0);  // 25 + 144
  EXPECT_NEAR(calc_params_l2_norm(params, *self, 0, /*is_first_pp_stage=*/false).item<double>(), std::sqrt(34.0),
              1e-6);
  EXPECT_EQ(calc_params_l2_norm(params, *self, 1, false).item<double>(), 5.0);
  // Measuring given values (fp32 main params) instead of the model values.
  const std::vector<at::Tensor> mains = {floats({6, 8}), floats({0, 0, 0}), floats({0})};
  EXPECT_EQ(calc_params_l2_norm(params, mains, *self, 0).item<double>(), 10.0);
}

TEST(OptimClipGrads, ReduceMaxStatAndLogicalAnd) {
  CommPtr self = make_mpi_comm(MPI_COMM_SELF);
  const at::Tensor stat = at::full({}, 2.5, at::kDouble);
  const at::Tensor reduced = reduce_max_stat(stat, *self);
  EXPECT_EQ(reduced.scalar_type(), at::kFloat);
  EXPECT_EQ(reduced.sizes(), at::IntArrayRef({1}));
  EXPECT_EQ(reduced.item<float>(), 2.5f);
  EXPECT_EQ(reduce_max_stat(absent_stat(at::kCPU), *self).item<float>(), -1.0f) << "None stays None";
  EXPECT_EQ(reduce_max_stat(at::full({1}, 7, at::kLong), *self).item<float>(), 7.0f);

  const at::Tensor yes = logical_and(at::ones({1}, at::kBool), *self);
  EXPECT_EQ(yes.scalar_type(), at::kBool);
  EXPECT_TRUE(yes.item<bool>());
  EXPECT_FALSE(logical_and(at::zeros({1}, at::kBool), *self).item<bool>());
  EXPECT_TRUE(logical_and(at::full({}, 3.0, at::kFloat), *self).item<bool>()) << "nonzero is true";
}

}  // namespace
}  // namespace loopgate
