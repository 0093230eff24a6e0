// Unit tests of Adam on fp32 main params and of optimizer_step (trainer/optim/adam.h): Adam against a
// hand-rolled two-step AdamW update in float (Apex multi_tensor_adam, adam_w_mode), the no-weight-decay group
// policy, the masked skip, and the Megatron step order (unscale + found_inf -> norm -> clip -> zeros -> Adam ->
// copy to model) on a Comm of size 1.
#include <gtest/gtest.h>
#include <mpi.h>

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <vector>

#include "trainer/optim/adam.h"
#include "trainer/optim/clip_grads.h"
#include "trainer/parallel/comm_mpi.h"

namespace loopgate {
namespace {

Param make_param(const std::string& name, at::Tensor value, bool tp_sharded = true) {
  Param p;
  p.name = name;
  p.value = value;
  p.tp_sharded = tp_sharded;
  return p;
}

at::Tensor vec(std::vector<float> v) { return at::tensor(v, at::kFloat); }

// A new flat grad buffer holding copies of `grads`, one after another: Adam's default layout.
MainGrads pack(const std::vector<at::Tensor>& grads) {
  int64_t total = 0;
  for (const at::Tensor& g : grads) total += g.numel();
  MainGrads out{at::zeros({total}, at::kFloat), {}};
  int64_t at_element = 0;
  for (const at::Tensor& g : grads) {
    out.views.push_back(out.flat.narrow(0, at_element, g.numel()).view(g.sizes()));
    out.views.back().copy_(g);
    at_element += g.numel();
  }
  return out;
}

// One element of Apex's ADAM_MODE_1 update, written out in float (t = step after increment).
struct HandAdam {
  float p, m = 0.0f, v = 0.0f;
  void step(float g, int t, float lr, float decay) {
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    const float bc1 = static_cast<float>(1 - std::pow(static_cast<double>(b1), t));
    const float bc2 = static_cast<float>(1 - std::pow(static_cast<double>(b2), t));
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    const float denom = std::sqrt(v / bc2) + eps;
    const float update = (m / bc1) / denom + decay * p;
    p = p - lr * update;
  }
};

TEST(OptimAdam, NoWeightDecayForBiasesAndNorms) {
  EXPECT_TRUE(no_weight_decay_cond("layers.0.mlp.fc1.bias", at::zeros({4, 2})));
  EXPECT_TRUE(no_weight_decay_cond("layers.0.input_layernorm.weight", at::zeros({4})));  // 1-D
  EXPECT_FALSE(no_weight_decay_cond("layers.0.mlp.fc1.weight", at::zeros({4, 2})));
  EXPECT_FALSE(no_weight_decay_cond("embedding.word_embeddings.weight", at::zeros({8, 4})));
  const Params params = {make_param("fc.weight", at::zeros({2, 2})), make_param("fc.bias", at::zeros({2})),
                         make_param("ln.weight", at::zeros({2}))};
  Adam adam(params);
  EXPECT_EQ(adam.wd_mult(0), 1.0);
  EXPECT_EQ(adam.wd_mult(1), 0.0);
  EXPECT_EQ(adam.wd_mult(2), 0.0);
}

TEST(OptimAdam, TwoStepsMatchHandRolledAdamW) {
  const Params params = {make_param("fc.weight", vec({1.0f, -2.0f}).reshape({1, 2})),
                         make_param("fc.bias", vec({0.5f}))};
  Adam adam(params);
  const double lr = 0.01, wd = 0.1;
  HandAdam w0{1.0f}, w1{-2.0f}, b{0.5f};
  const std::vector<std::vector<float>> grads_w = {{0.1f, -0.2f}, {-0.4f, 0.05f}};
  const std::vector<float> grads_b = {0.3f, 0.1f};
  for (int t = 1; t <= 2; ++t) {
    adam.step(pack({vec(grads_w[t - 1]).reshape({1, 2}), vec({grads_b[t - 1]})}), lr, wd);
    w0.step(grads_w[t - 1][0], t, 0.01f, 0.1f);
    w1.step(grads_w[t - 1][1], t, 0.01f, 0.1f);
    b.step(grads_b[t - 1], t, 0.01f, 0.0f);  // bias: wd_mult 0
    EXPECT_FLOAT_EQ(adam.main_params()[0][0][0].item<float>(), w0.p) << "step " << t;
    EXPECT_FLOAT_EQ(adam.main_params()[0][0][1].item<float>(), w1.p) << "step " << t;
    EXPECT_FLOAT_EQ(adam.main_params()[1][0].item<float>(), b.p) << "step " << t;
    EXPECT_FLOAT_EQ(adam.exp_avg()[0][0][0].item<float>(), w0.m) << "step " << t;
    EXPECT_FLOAT_EQ(adam.exp_avg_sq()[1][0].item<float>(), b.v) << "step " << t;
    EXPECT_EQ(adam.step_count().item<int64_t>(), t);
  }
  // Step 1 by hand: bias correction makes m^ = g and v^ = g^2, so the update is sign(g) (+ decay * p):
  // w0 = 1 - 0.01 * (1 + 0.1 * 1) = 0.989; b = 0.5 - 0.01 * 1 = 0.49.
  Adam fresh(params);
  fresh.step(pack({vec({0.1f, -0.2f}).reshape({1, 2}), vec({0.3f})}), lr, wd);
  EXPECT_NEAR(fresh.main_params()[0][0][0].item<float>(), 0.989f, 1e-6);
  EXPECT_NEAR(fresh.main_params()[0][0][1].item<float>(), -2.0f - 0.01f * (-1.0f + 0.1f * -2.0f), 1e-6);  // -1.988
  EXPECT_NEAR(fresh.main_params()[1][0].item<float>(), 0.49f, 1e-6);
  // The model params were not touched (copy_main_to_model is separate).
  EXPECT_EQ(params[0].value[0][0].item<float>(), 1.0f);
}

TEST(OptimAdam, MaskedSkipKeepsEverything) {
  const Params params = {make_param("fc.weight", vec({1.0f, 2.0f}).reshape({2, 1}))};
  Adam masked(params), plain(params);
  const MainGrads g = pack({vec({0.5f, -0.5f}).reshape({2, 1})});
  masked.step(g, 0.1, 0.01, at::ones({1}, at::kBool));  // skipped
  EXPECT_EQ(masked.step_count().item<int64_t>(), 0);
  EXPECT_TRUE(at::equal(masked.main_params()[0], params[0].value));
  EXPECT_EQ(masked.exp_avg()[0].abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(masked.exp_avg_sq()[0].abs().sum().item<float>(), 0.0f);
  masked.step(g, 0.1, 0.01, at::zeros({1}, at::kBool));  // not skipped: same as the plain step
  plain.step(g, 0.1, 0.01);
  EXPECT_EQ(masked.step_count().item<int64_t>(), 1);
  EXPECT_TRUE(at::equal(masked.main_params()[0], plain.main_params()[0]));
  EXPECT_TRUE(at::equal(masked.exp_avg_sq()[0], plain.exp_avg_sq()[0]));
}

TEST(OptimAdam, CopyMainToModelCastsToModelDtype) {
  Params params = {make_param("fc.weight", vec({1.0f, 3.0f}).reshape({1, 2}).to(at::kBFloat16))};
  Adam adam(params);
  EXPECT_EQ(adam.main_params()[0].scalar_type(), at::kFloat);
  adam.step(pack({vec({0.25f, -1.0f}).reshape({1, 2})}), 0.125, 0.0);
  adam.copy_main_to_model(params);
  EXPECT_EQ(params[0].value.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(params[0].value, adam.main_params()[0].to(at::kBFloat16)));
}

// The flat update against the same operations run one param at a time (the form before the flat buffers), on
// params with and without weight decay laid out in reverse order (GradBuffer's), masked steps and a NaN grad
// included: the same bits in every param and moment after every step.
TEST(OptimAdam, FlatStepHasTheBitsOfOneParamAtATime) {
  at::manual_seed(7);
  const Params params = {make_param("a.weight", at::randn({3, 5})), make_param("a.bias", at::randn({5})),
                         make_param("b.weight", at::randn({4, 2})), make_param("ln.weight", at::randn({7}))};
  std::vector<int64_t> offsets(params.size());
  int64_t total = 0;
  for (size_t i = params.size(); i-- > 0;) {
    offsets[i] = total;
    total += params[i].value.numel();
  }
  Adam adam(params, {}, 0, true, offsets);
  std::vector<at::Tensor> p, m, v;
  for (const Param& q : params) {
    p.push_back(q.value.clone());
    m.push_back(at::zeros_like(q.value));
    v.push_back(at::zeros_like(q.value));
  }
  const float b1 = 0.9f, b2 = 0.999f;
  int64_t t = 0;
  for (int s = 0; s < 6; ++s) {
    const bool skip = s == 3;
    MainGrads g{at::randn({total}), {}};
    if (s == 3) g.flat[2] = std::numeric_limits<float>::quiet_NaN();  // a skipped step's NaN stays out
    for (size_t i = 0; i < params.size(); ++i)
      g.views.push_back(g.flat.narrow(0, offsets[i], params[i].value.numel()).view(params[i].value.sizes()));
    const double lr = 1e-3 * (s + 1), wd = 0.05;
    adam.step(g, lr, wd, at::full({1}, skip, at::kBool));
    if (skip) continue;
    ++t;
    const at::Tensor bc1 = at::full({1}, static_cast<float>(1 - std::pow(static_cast<double>(b1), t)));
    const at::Tensor bc2 = at::full({1}, static_cast<float>(1 - std::pow(static_cast<double>(b2), t)));
    for (size_t i = 0; i < params.size(); ++i) {
      const double decay = static_cast<float>(wd * adam.wd_mult(i));
      m[i] = m[i].mul(static_cast<double>(b1)).add(g.views[i].mul(static_cast<double>(1.0f - b1)));
      v[i] = v[i].mul(static_cast<double>(b2)).add(g.views[i].mul(static_cast<double>(1.0f - b2)).mul(g.views[i]));
      const at::Tensor update = m[i].div(bc1).div(v[i].div(bc2).sqrt().add(static_cast<double>(1e-8f))).add(
          p[i].mul(decay));
      p[i] = p[i].sub(update.mul(static_cast<double>(static_cast<float>(lr))));
    }
  }
  EXPECT_EQ(adam.step_count().item<int64_t>(), t);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(at::equal(adam.main_params()[i], p[i])) << params[i].name;
    EXPECT_TRUE(at::equal(adam.exp_avg()[i], m[i])) << params[i].name;
    EXPECT_TRUE(at::equal(adam.exp_avg_sq()[i], v[i])) << params[i].name;
  }
}

TEST(OptimAdam, GradsLaidOutOtherwiseAreRefused) {
  const Params params = {make_param("a.weight", at::ones({2, 2})), make_param("a.bias", at::ones({2}))};
  Adam adam(params, {}, 0, true, {2, 0});  // the bias first, as GradBuffer lays them out
  EXPECT_THROW(adam.step(pack({at::ones({2, 2}), at::ones({2})}), 0.1, 0.0), std::exception);
}

// ---- optimizer_step ----

// fc.weight grad [3, 4] (norm 5), ln.weight grad [0]: clip by 1/(5+1e-6), one zero, Adam on clipped grads.
TEST(OptimStep, NoScalerNormClipZerosThenAdam) {
  CommPtr self = make_mpi_comm(MPI_COMM_SELF);
  Params params = {make_param("fc.weight", vec({1.0f, 2.0f}).reshape({1, 2})),
                   make_param("ln.weight", vec({0.5f}), /*tp_sharded=*/false)};
  Adam adam(params), reference(params);
  MainGrads grads = pack({vec({3.0f, 4.0f}).reshape({1, 2}), vec({0.0f})});
  OptimizerStepConfig config;
  config.log_num_zeros_in_grad = true;
  const OptimizerStepResult r = optimizer_step(adam, nullptr, grads, params, *self, config, 0.01, 0.1);
  EXPECT_TRUE(r.update_successful.item<bool>());
  EXPECT_EQ(r.grad_norm.item<float>(), 5.0f);
  EXPECT_EQ(r.num_zeros.item<int64_t>(), 1);
  EXPECT_EQ(r.found_inf.item<float>(), 0.0f);
  const float c = 1.0f / (5.0f + 1e-6f);
  EXPECT_EQ(grads.views[0][0][1].item<float>(), 4.0f * c) << "grads are clipped in place";
  reference.step(pack({vec({3.0f * c, 4.0f * c}).reshape({1, 2}), vec({0.0f})}), 0.01, 0.1);
  EXPECT_TRUE(at::equal(adam.main_params()[0], reference.main_params()[0]));
  EXPECT_TRUE(at::equal(adam.main_params()[1], reference.main_params()[1]));
  EXPECT_TRUE(at::equal(params[0].value, adam.main_params()[0])) << "main copied to model";
  EXPECT_EQ(adam.step_count().item<int64_t>(), 1);
  // Default: no zero count (Megatron returns None -> -1).
  MainGrads grads2 = pack({vec({0.0f, 0.0f}).reshape({1, 2}), vec({0.0f})});
  EXPECT_EQ(optimizer_step(adam, nullptr, grads2, params, *self, {}, 0.01, 0.1).num_zeros.item<int64_t>(), -1);
}

// A replicated param on TP rank 1 is left out of the norm but still clipped and stepped.
TEST(OptimStep, TpDuplicateLeftOutOfNorm) {
  CommPtr self = make_mpi_comm(MPI_COMM_SELF);
  Params params = {make_param("fc.weight", vec({0.0f, 0.0f}).reshape({1, 2})),
                   make_param("ln.weight", vec({0.0f}), /*tp_sharded=*/false)};
  Adam adam(params, {}, /*tp_rank=*/1);
  MainGrads grads = pack({vec({3.0f, 4.0f}).reshape({1, 2}), vec({12.0f})});
  OptimizerStepConfig config;
  config.clip_grad = 100.0;
  const OptimizerStepResult r = optimizer_step(adam, nullptr, grads, params, *self, config, 0.01, 0.0);
  EXPECT_EQ(r.grad_norm.item<float>(), 5.0f) << "not 13: ln.weight counts on TP rank 0 only";
  EXPECT_NE(adam.main_params()[1].item<float>(), 0.0f);
}

// fp16-style: grads scaled by the loss scale; an inf skips the step (masked) and backs the scale off; the next
// clean step unscales and updates exactly as Adam on the unscaled, clipped grads.
TEST(OptimStep, DynamicScalerSkipsOnInfThenSteps) {
  CommPtr self = make_mpi_comm(MPI_COMM_SELF);
  Params params = {make_param("fc.weight", vec({1.0f, 2.0f}).reshape({1, 2}))};
  Adam adam(params), reference(params);
  DynamicGradScalerConfig sc;
  sc.initial_scale = 8.0;
  sc.hysteresis = 1;
  DynamicGradScaler scaler(sc, at::kCPU);
  OptimizerStepConfig config;
  config.log_num_zeros_in_grad = true;

  MainGrads bad = pack({vec({std::numeric_limits<float>::infinity(), 1.0f}).reshape({1, 2})});
  const OptimizerStepResult skipped = optimizer_step(adam, &scaler, bad, params, *self, config, 0.01, 0.1);
  EXPECT_FALSE(skipped.update_successful.item<bool>());
  EXPECT_EQ(skipped.found_inf.item<float>(), 1.0f);
  EXPECT_EQ(skipped.grad_norm.item<float>(), -1.0f) << "Megatron returns None on a skipped step";
  EXPECT_EQ(skipped.num_zeros.item<int64_t>(), -1);
  EXPECT_EQ(scaler.scale().item<float>(), 4.0f) << "hysteresis 1: back off at once";
  EXPECT_EQ(adam.step_count().item<int64_t>(), 0);
  EXPECT_TRUE(at::equal(adam.main_params()[0], vec({1.0f, 2.0f}).reshape({1, 2})));
  EXPECT_TRUE(at::equal(params[0].value, vec({1.0f, 2.0f}).reshape({1, 2})));
  EXPECT_EQ(adam.exp_avg()[0].abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(bad.views[0][0][1].item<float>(), 1.0f / 8.0f) << "unscaled but not clipped, as in Megatron";

  // Clean step at scale 4: grads 4 * [0.3, 0.4] -> unscaled [0.3, 0.4], norm 0.5 < clip 1 (coefficient 1).
  MainGrads good = pack({vec({1.2f, 1.6f}).reshape({1, 2})});
  const OptimizerStepResult ok = optimizer_step(adam, &scaler, good, params, *self, config, 0.01, 0.1);
  EXPECT_TRUE(ok.update_successful.item<bool>());
  const at::Tensor unscaled = vec({1.2f, 1.6f}).reshape({1, 2}) * 0.25f;
  EXPECT_EQ(ok.grad_norm.item<float>(), at::norm(unscaled).item<float>());
  EXPECT_NEAR(ok.grad_norm.item<float>(), 0.5f, 1e-7);
  EXPECT_EQ(ok.num_zeros.item<int64_t>(), 0);
  EXPECT_EQ(adam.step_count().item<int64_t>(), 1);
  reference.step(pack({unscaled}), 0.01, 0.1);
  EXPECT_TRUE(at::equal(adam.main_params()[0], reference.main_params()[0]));
  EXPECT_EQ(scaler.growth_tracker().item<int64_t>(), 1);
}

TEST(OptimStep, ConstantScalerUnscalesAndSkipsOnNan) {
  CommPtr self = make_mpi_comm(MPI_COMM_SELF);
  Params params = {make_param("fc.weight", vec({1.0f}).reshape({1, 1}))};
  Adam adam(params);
  ConstantGradScaler scaler(4.0, at::kCPU);
  MainGrads nan = pack({vec({std::numeric_limits<float>::quiet_NaN()}).reshape({1, 1})});
  EXPECT_FALSE(optimizer_step(adam, &scaler, nan, params, *self, {}, 0.01, 0.0).update_successful.item<bool>());
  EXPECT_EQ(adam.step_count().item<int64_t>(), 0) << "Megatron skips with any grad scaler, constant too";
  EXPECT_EQ(scaler.scale().item<float>(), 4.0f);
  MainGrads g = pack({vec({2.0f}).reshape({1, 1})});
  const OptimizerStepResult r = optimizer_step(adam, &scaler, g, params, *self, {}, 0.01, 0.0);
  EXPECT_TRUE(r.update_successful.item<bool>());
  EXPECT_EQ(r.grad_norm.item<float>(), 0.5f);  // 2 / 4
  EXPECT_EQ(get_loss_scale(&scaler, at::kCPU).item<float>(), 4.0f);
  EXPECT_EQ(get_loss_scale(nullptr, at::kCPU).item<float>(), 1.0f);
}

}  // namespace
}  // namespace loopgate
