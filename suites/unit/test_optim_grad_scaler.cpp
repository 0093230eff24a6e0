// Unit tests of the loss scalers (trainer/optim/grad_scaler.h): Megatron's DynamicGradScaler growth / backoff /
// hysteresis over a scripted found_inf pattern, with the expected (scale, growth tracker, hysteresis tracker)
// worked out by hand from grad_scaler.py update(); all state is read back from device tensors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <vector>

#include "trainer/common/error.h"
#include "trainer/optim/grad_scaler.h"

namespace loopgate {
namespace {

float read_f(const at::Tensor& t) { return t.item<float>(); }
int64_t read_l(const at::Tensor& t) { return t.item<int64_t>(); }

at::Tensor flag(bool inf) { return at::full({1}, inf ? 1.0 : 0.0, at::kFloat); }  // Megatron's found_inf: float [1]

struct Expected {
  bool found_inf;  // fed to update()
  float scale;     // after update()
  int64_t growth;
  int64_t hysteresis;
};

// initial 8, min 1, growth x2 every 3 clean steps, backoff x0.5, hysteresis 2.
TEST(GradScaler, DynamicGrowthBackoffHysteresisSequence) {
  DynamicGradScalerConfig c;
  c.initial_scale = 8.0;
  c.min_scale = 1.0;
  c.growth_interval = 3;
  c.hysteresis = 2;
  DynamicGradScaler s(c, at::kCPU);
  EXPECT_EQ(read_f(s.scale()), 8.0f);
  EXPECT_EQ(read_l(s.growth_tracker()), 0);
  EXPECT_EQ(read_l(s.hysteresis_tracker()), 2);
  const std::vector<Expected> script = {
      {false, 8, 1, 2},   // clean: growth 1
      {false, 8, 2, 2},   // clean: growth 2
      {false, 16, 0, 2},  // clean: growth 3 == interval -> x2, growth 0, hysteresis restored to 2
      {true, 16, 0, 1},   // inf: hysteresis 2 -> 1 > 0, no backoff yet
      {false, 16, 1, 1},  // clean: one clean step does NOT restore hysteresis
      {true, 8, 0, 0},    // inf: hysteresis 1 -> 0 <= 0: backoff 16 * 0.5
      {true, 4, 0, -1},   // every further inf backs off
      {true, 2, 0, -2},
      {true, 1, 0, -3},
      {true, 1, 0, -4},   // max(1 * 0.5, min_scale 1) = 1
      {false, 1, 1, -4},
      {false, 1, 2, -4},
      {false, 2, 0, 2},   // growth after 3 clean steps restores hysteresis
      {true, 2, 0, 1},
  };
  for (size_t i = 0; i < script.size(); ++i) {
    const Expected& e = script[i];
    s.update(flag(e.found_inf));
    EXPECT_EQ(read_f(s.scale()), e.scale) << "after update " << i << " (found_inf " << e.found_inf << ")";
    EXPECT_EQ(read_l(s.growth_tracker()), e.growth) << "after update " << i;
    EXPECT_EQ(read_l(s.hysteresis_tracker()), e.hysteresis) << "after update " << i;
  }
}

// found_inf may arrive as bool or 0-dim; > 0 means inf.
TEST(GradScaler, DynamicAcceptsBoolAndZeroDimFlags) {
  DynamicGradScalerConfig c;
  c.initial_scale = 4.0;
  c.hysteresis = 1;
  DynamicGradScaler s(c, at::kCPU);
  s.update(at::ones({}, at::kBool));
  EXPECT_EQ(read_f(s.scale()), 2.0f);  // hysteresis 1 -> 0: backoff
  s.update(at::zeros({}, at::kFloat));
  EXPECT_EQ(read_f(s.scale()), 2.0f);
  EXPECT_EQ(read_l(s.growth_tracker()), 1);
}

// update() rebinds the scale (Megatron: self._scale = ...), so a tensor banked before keeps its value.
TEST(GradScaler, BankedScaleKeepsItsValue) {
  DynamicGradScalerConfig c;
  c.initial_scale = 64.0;
  c.hysteresis = 1;
  DynamicGradScaler s(c, at::kCPU);
  const at::Tensor banked = s.scale();
  s.update(flag(true));
  EXPECT_EQ(read_f(banked), 64.0f);
  EXPECT_EQ(read_f(s.scale()), 32.0f);
}

TEST(GradScaler, InvScaleThroughDouble) {
  ConstantGradScaler s(3.0, at::kCPU);
  EXPECT_EQ(read_f(s.inv_scale()), static_cast<float>(1.0 / 3.0));  // scale.double().reciprocal().float()
  EXPECT_EQ(s.inv_scale().scalar_type(), at::kFloat);
  DynamicGradScaler d({}, at::kCPU);
  EXPECT_EQ(read_f(d.scale()), 4294967296.0f);  // Megatron default initial scale 2**32
  EXPECT_EQ(read_f(d.inv_scale()), 0x1p-32f);
}

TEST(GradScaler, ConstantIgnoresFoundInf) {
  ConstantGradScaler s(1024.0, at::kCPU);
  EXPECT_FALSE(s.is_dynamic());
  for (int i = 0; i < 3; ++i) s.update(flag(true));
  EXPECT_EQ(read_f(s.scale()), 1024.0f);
}

TEST(GradScaler, ScaleOneIsConstantOne) {
  const at::Tensor one = scale_one(at::kCPU);
  EXPECT_EQ(one.scalar_type(), at::kFloat);
  EXPECT_EQ(one.numel(), 1);
  EXPECT_EQ(read_f(one), 1.0f);
}

TEST(GradScaler, BadConfigIsInputError) {
  DynamicGradScalerConfig c;
  c.min_scale = 0.0;
  EXPECT_THROW(DynamicGradScaler(c, at::kCPU), InputError);
  c = {};
  c.initial_scale = 0.5;  // < min_scale 1
  EXPECT_THROW(DynamicGradScaler(c, at::kCPU), InputError);
  c = {};
  c.growth_factor = 1.0;
  EXPECT_THROW(DynamicGradScaler(c, at::kCPU), InputError);
  c = {};
  c.backoff_factor = 1.0;
  EXPECT_THROW(DynamicGradScaler(c, at::kCPU), InputError);
  c = {};
  c.growth_interval = 0;
  EXPECT_THROW(DynamicGradScaler(c, at::kCPU), InputError);
  c = {};
  c.hysteresis = 0;
  EXPECT_THROW(DynamicGradScaler(c, at::kCPU), InputError);
  EXPECT_THROW(ConstantGradScaler(0.0, at::kCPU), InputError);
}

}  // namespace
}  // namespace loopgate
