// Unit tests of OptimizerParamScheduler (trainer/optim/scheduler.h) against hand-computed values, plus golden
// bits from Python floats: the hexfloat literals below were printed by a line-for-line Python copy of Megatron's
// get_lr / get_wd (`float.hex()`), so EXPECT_EQ on doubles checks the port bit for bit.
#include <gtest/gtest.h>

#include <cmath>

#include "trainer/common/error.h"
#include "trainer/optim/scheduler.h"

namespace loopgate {
namespace {

// Steps the scheduler to `iters` iterations of `gbs` samples and returns the LR there.
double lr_at(OptimizerParamScheduler& s, int64_t iters, int64_t gbs) {
  s.step(iters * gbs - s.num_steps());
  return s.get_lr();
}

// ---- hand-computed ----

// Linear warmup over 10 iterations to 1.0, then cosine to 0.1 at 100 iterations; 4 samples per iteration.
TEST(Scheduler, WarmupThenCosineHandComputed) {
  SchedulerIters it;
  it.lr = 1.0;
  it.min_lr = 0.1;
  it.train_iters = 100;
  it.lr_warmup_iters = 10;
  it.lr_decay_style = LrDecayStyle::kCosine;
  it.global_batch_size = 4;
  const SchedulerConfig c = from_iters(it);
  EXPECT_EQ(c.lr_warmup_steps, 40.0);  // 10 iters * 4 samples
  EXPECT_EQ(c.lr_decay_steps, 400);    // lr_decay_iters defaults to train_iters
  EXPECT_EQ(c.wd_incr_steps, 400);
  OptimizerParamScheduler s(c);
  EXPECT_EQ(lr_at(s, 0, 4), 0.0);   // init_lr + (1 - 0) * 0 / 40
  EXPECT_EQ(lr_at(s, 5, 4), 0.5);   // 0 + 1 * 20 / 40
  EXPECT_EQ(lr_at(s, 10, 4), 1.0);  // 40 <= 40 is still warmup: 1 * 40 / 40
  // 55 iters = 220 samples: decay_ratio = (220 - 40) / (400 - 40) = 0.5, coeff = 0.5 * (cos(pi/2) + 1).
  EXPECT_EQ(lr_at(s, 55, 4), 0.1 + (0.5 * (std::cos(M_PI * 0.5) + 1.0)) * 0.9);
  EXPECT_NEAR(s.get_lr(), 0.55, 1e-15);
  EXPECT_EQ(lr_at(s, 100, 4), 0.1);  // decay_ratio 1: coeff 0.5 * (cos(pi) + 1) = 0
  EXPECT_EQ(lr_at(s, 110, 4), 0.1);  // past lr_decay_steps: min_lr
  EXPECT_EQ(lr_at(s, 200, 4), 0.1);
}

TEST(Scheduler, LinearDecayHandComputed) {
  SchedulerConfig c;
  c.max_lr = 1.0;
  c.min_lr = 0.0;
  c.lr_decay_steps = 100;
  c.lr_decay_style = LrDecayStyle::kLinear;
  c.wd_incr_steps = 100;
  OptimizerParamScheduler s(c);
  EXPECT_EQ(s.get_lr(), 1.0);  // no warmup: 1 - 0/100
  s.step(25);
  EXPECT_EQ(s.get_lr(), 0.75);  // 0 + (1 - 25/100) * 1
  s.step(75);
  EXPECT_EQ(s.get_lr(), 0.0);
}

TEST(Scheduler, ConstantAfterWarmup) {
  SchedulerConfig c;
  c.init_lr = 0.5;
  c.max_lr = 2.0;
  c.lr_warmup_steps = 4;
  c.lr_decay_steps = 10;
  c.lr_decay_style = LrDecayStyle::kConstant;
  OptimizerParamScheduler s(c);
  EXPECT_EQ(s.get_lr(), 0.5);
  s.step(2);
  EXPECT_EQ(s.get_lr(), 1.25);  // 0.5 + 1.5 * 2 / 4
  s.step(3);
  EXPECT_EQ(s.get_lr(), 2.0);
  s.step(100);
  EXPECT_EQ(s.get_lr(), 2.0);  // constant is checked before the past-decay clamp
}

// WSD: stable at max until lr_decay_steps - wsd_decay_steps = 80, then anneal over 20 steps.
TEST(Scheduler, WsdHandComputed) {
  auto make = [](WsdDecayStyle style) {
    SchedulerConfig c;
    c.max_lr = 1.0;
    c.min_lr = 0.0;
    c.lr_warmup_steps = 10;
    c.lr_decay_steps = 100;
    c.lr_decay_style = LrDecayStyle::kWSD;
    c.wsd_decay_steps = 20;
    c.lr_wsd_decay_style = style;
    OptimizerParamScheduler s(c);
    return s;
  };
  for (WsdDecayStyle style :
       {WsdDecayStyle::kLinear, WsdDecayStyle::kCosine, WsdDecayStyle::kExponential, WsdDecayStyle::kMinusSqrt}) {
    SCOPED_TRACE(to_string(style));
    OptimizerParamScheduler s = make(style);
    s.step(5);
    EXPECT_EQ(s.get_lr(), 0.5);  // warmup 5/10
    s.step(75);
    EXPECT_EQ(s.get_lr(), 1.0);  // 80 <= 80: stable phase, coeff 1
    s.step(20);
    EXPECT_EQ(s.get_lr(), 0.0 + 0.0 * 1.0) << "all styles end at coeff 0 (ratio 1)";
  }
  // Half-way into the anneal (90 steps): wsd_decay_ratio = (90 - 80) / 20 = 0.5.
  OptimizerParamScheduler lin = make(WsdDecayStyle::kLinear);
  lin.step(90);
  EXPECT_EQ(lin.get_lr(), 0.5);  // 1 - 0.5
  OptimizerParamScheduler cosine = make(WsdDecayStyle::kCosine);
  cosine.step(90);
  EXPECT_EQ(cosine.get_lr(), 0.5 * (std::cos(M_PI * 0.5) + 1.0));
  OptimizerParamScheduler expo = make(WsdDecayStyle::kExponential);
  expo.step(90);
  EXPECT_EQ(expo.get_lr(), 2.0 * std::pow(0.5, 0.5) - 1.0);  // 2 * 0.7071 - 1 = 0.4142
  EXPECT_NEAR(expo.get_lr(), std::sqrt(2.0) - 1.0, 1e-15);
  OptimizerParamScheduler msqrt = make(WsdDecayStyle::kMinusSqrt);
  msqrt.step(90);
  EXPECT_EQ(msqrt.get_lr(), 1.0 - std::sqrt(0.5));
}

TEST(Scheduler, InverseSquareRootHandComputed) {
  SchedulerConfig c;
  c.max_lr = 1.0;
  c.min_lr = 0.05;
  c.lr_warmup_steps = 16;
  c.lr_decay_steps = 10000;
  c.lr_decay_style = LrDecayStyle::kInverseSquareRoot;
  OptimizerParamScheduler s(c);
  s.step(16);
  EXPECT_EQ(s.get_lr(), 1.0);  // end of warmup
  s.step(48);
  EXPECT_EQ(s.get_lr(), 0.5);  // 1 * sqrt(16) / sqrt(64)
  s.step(6400 - 64);
  EXPECT_EQ(s.get_lr(), 0.05);  // 4 / 80 = 0.05 == min_lr
  s.step(10000 - 6400);
  EXPECT_EQ(s.get_lr(), 0.05);  // 4 / 100 = 0.04 < min_lr: max(min_lr, lr)
  s.step(1);
  EXPECT_EQ(s.get_lr(), 0.05);  // past decay steps
}

TEST(Scheduler, WeightDecayIncrementsHandComputed) {
  SchedulerConfig c;
  c.max_lr = 1.0;
  c.lr_decay_steps = 10;
  c.start_wd = 0.0;
  c.end_wd = 0.1;
  c.wd_incr_steps = 100;
  c.wd_incr_style = WdIncrStyle::kLinear;
  OptimizerParamScheduler lin(c);
  EXPECT_EQ(lin.get_wd(), 0.0);
  lin.step(50);
  EXPECT_EQ(lin.get_wd(), 0.5 * 0.1);  // start + ratio * (end - start)
  lin.step(51);
  EXPECT_EQ(lin.get_wd(), 0.1);  // past wd_incr_steps: end_wd

  c.wd_incr_style = WdIncrStyle::kCosine;
  OptimizerParamScheduler cosine(c);
  cosine.step(25);  // coeff = 0.5 * (cos(pi * 0.75) + 1) = 0.1464...
  EXPECT_EQ(cosine.get_wd(), 0.0 + 0.5 * (std::cos(M_PI * (1 - 0.25)) + 1.0) * 0.1);
  EXPECT_NEAR(cosine.get_wd(), 0.1 * (1.0 - std::sqrt(0.5)) / 2.0, 1e-16);

  c.wd_incr_style = WdIncrStyle::kConstant;
  c.start_wd = c.end_wd = 0.01;
  OptimizerParamScheduler constant(c);
  constant.step(7);
  EXPECT_EQ(constant.get_wd(), 0.01);
}

TEST(Scheduler, DoesNotMoveWithoutStep) {
  SchedulerConfig c;
  c.max_lr = 1.0;
  c.lr_warmup_steps = 10;
  c.lr_decay_steps = 100;
  OptimizerParamScheduler s(c);
  s.step(3);
  const double lr = s.get_lr(), wd = s.get_wd();
  for (int i = 0; i < 5; ++i) {  // reading is pure: a skipped iteration (no step) leaves LR and WD alone
    EXPECT_EQ(s.get_lr(), lr);
    EXPECT_EQ(s.get_wd(), wd);
  }
  EXPECT_EQ(s.num_steps(), 3);
  EXPECT_EQ(lr, 0.3);  // 0 + 1 * 3 / 10
  s.step(0);
  EXPECT_EQ(s.get_lr(), lr);
}

// ---- bits against Python ----

TEST(Scheduler, CosineMatchesPythonBits) {
  SchedulerIters it;
  it.lr = 3e-4;
  it.min_lr = 3e-5;
  it.train_iters = 100;
  it.lr_warmup_iters = 10;
  it.lr_decay_style = LrDecayStyle::kCosine;
  it.global_batch_size = 8;
  OptimizerParamScheduler s(from_iters(it));
  const std::vector<std::pair<int64_t, double>> golden = {
      {0, 0x0.0p+0},   {3, 0x1.797cc39ffd60ep-14},  {5, 0x1.3a92a30553261p-13},  {10, 0x1.3a92a30553261p-12},
      {37, 0x1.0038797b83e57p-12}, {55, 0x1.5a07b352a8437p-13}, {99, 0x1.f8b23adba7041p-16},
      {100, 0x1.f75104d551d69p-16}, {101, 0x1.f75104d551d69p-16}, {200, 0x1.f75104d551d69p-16}};
  for (const auto& [iter, lr] : golden) EXPECT_EQ(lr_at(s, iter, 8), lr) << "iteration " << iter;
}

TEST(Scheduler, WsdExponentialMatchesPythonBits) {
  SchedulerConfig c;
  c.max_lr = 6e-4;
  c.min_lr = 6e-5;
  c.lr_warmup_steps = 10;
  c.lr_decay_steps = 100;
  c.lr_decay_style = LrDecayStyle::kWSD;
  c.wsd_decay_steps = 20;
  c.lr_wsd_decay_style = WsdDecayStyle::kExponential;
  OptimizerParamScheduler s(c);
  const std::vector<std::pair<int64_t, double>> golden = {
      {0, 0x0.0p+0}, {33, 0x1.3a92a30553261p-11}, {90, 0x1.297483ce6a144p-12}, {95, 0x1.54195842d4541p-13},
      {99, 0x1.4b87d694f2e0ap-14}, {100, 0x1.f75104d551d69p-15}};
  for (const auto& [step, lr] : golden) EXPECT_EQ(lr_at(s, step, 1), lr) << "step " << step;
}

TEST(Scheduler, InverseSquareRootMatchesPythonBits) {
  SchedulerConfig c;
  c.init_lr = 1e-5;
  c.max_lr = 2e-4;
  c.min_lr = 1e-5;
  c.lr_warmup_steps = 16;
  c.lr_decay_steps = 10000;
  c.lr_decay_style = LrDecayStyle::kInverseSquareRoot;
  OptimizerParamScheduler s(c);
  const std::vector<std::pair<int64_t, double>> golden = {
      {0, 0x1.4f8b588e368f1p-17},    {7, 0x1.869835158b828p-14},    {16, 0x1.a36e2eb1c432dp-13},
      {17, 0x1.96e841fcdc51cp-13},   {64, 0x1.a36e2eb1c432dp-14},   {1000, 0x1.a86f0875fcf95p-16},
      {5000, 0x1.7ba0041886991p-17}, {10000, 0x1.4f8b588e368f1p-17}, {10001, 0x1.4f8b588e368f1p-17}};
  for (const auto& [step, lr] : golden) EXPECT_EQ(lr_at(s, step, 1), lr) << "step " << step;
}

// --lr-warmup-fraction makes lr_warmup_steps a float: 0.07 * 30 = 2.1 (0x1.0cccccccccccdp+1) in Python, so the
// decay ratio is measured from a fractional warmup end.
TEST(Scheduler, WarmupFractionMatchesPythonBits) {
  SchedulerIters it;
  it.lr = 1e-3;
  it.min_lr = 1e-4;
  it.lr_warmup_init = 1e-6;
  it.train_iters = 10;
  it.lr_warmup_fraction = 0.07;
  it.lr_decay_style = LrDecayStyle::kLinear;
  it.global_batch_size = 3;
  const SchedulerConfig c = from_iters(it);
  EXPECT_EQ(c.lr_warmup_steps, 0x1.0cccccccccccdp+1);
  OptimizerParamScheduler s(c);
  const std::vector<std::pair<int64_t, double>> golden = {
      {0, 0x1.0c6f7a0b5ed8dp-20}, {1, 0x1.fd111593a0b57p-11},  {2, 0x1.ca54459b06e91p-11},
      {5, 0x1.321dd5b139840p-11}, {9, 0x1.9caa573b494acp-13},  {10, 0x1.a36e2eb1c432dp-14},
      {11, 0x1.a36e2eb1c432dp-14}};
  for (const auto& [iter, lr] : golden) EXPECT_EQ(lr_at(s, iter, 3), lr) << "iteration " << iter;
}

TEST(Scheduler, CosineWeightDecayMatchesPythonBits) {
  SchedulerConfig c;
  c.max_lr = 1.0;
  c.lr_decay_steps = 10;
  c.start_wd = 0.01;
  c.end_wd = 0.1;
  c.wd_incr_steps = 100;
  c.wd_incr_style = WdIncrStyle::kCosine;
  OptimizerParamScheduler s(c);
  const std::vector<std::pair<int64_t, double>> golden = {
      {0, 0x1.47ae147ae147bp-7},  {25, 0x1.7bc8c8b1fd2dap-6}, {33, 0x1.06e82f598059dp-5},
      {50, 0x1.c28f5c28f5c2ap-5}, {100, 0x1.999999999999ap-4}, {101, 0x1.999999999999ap-4}};
  for (const auto& [step, wd] : golden) {
    s.step(step - s.num_steps());
    EXPECT_EQ(s.get_wd(), wd) << "step " << step;
  }
}

// ---- bad input ----

TEST(Scheduler, BadConfigIsInputError) {
  SchedulerConfig good;
  good.max_lr = 1.0;
  good.lr_warmup_steps = 10;
  good.lr_decay_steps = 100;
  EXPECT_NO_THROW(OptimizerParamScheduler{good});

  SchedulerConfig c = good;
  c.min_lr = 2.0;
  EXPECT_THROW(OptimizerParamScheduler{c}, InputError);  // min_lr > max_lr
  c = good;
  c.min_lr = -1.0;
  EXPECT_THROW(OptimizerParamScheduler{c}, InputError);
  c = good;
  c.init_lr = 3.0;
  EXPECT_THROW(OptimizerParamScheduler{c}, InputError);  // init_lr > max_lr
  c = good;
  c.lr_warmup_steps = 100;
  EXPECT_THROW(OptimizerParamScheduler{c}, InputError);  // warmup >= decay
  c = good;
  c.lr_decay_steps = 0;
  c.lr_warmup_steps = 0;
  EXPECT_THROW(OptimizerParamScheduler{c}, InputError);
  c = good;
  c.lr_decay_style = LrDecayStyle::kWSD;
  EXPECT_THROW(OptimizerParamScheduler{c}, InputError);  // WSD without wsd_decay_steps
  c = good;
  c.start_wd = 0.1;
  c.end_wd = 0.01;
  c.wd_incr_style = WdIncrStyle::kLinear;
  EXPECT_THROW(OptimizerParamScheduler{c}, InputError);  // end < start
  c.wd_incr_style = WdIncrStyle::kConstant;
  c.end_wd = 0.2;
  EXPECT_THROW(OptimizerParamScheduler{c}, InputError);  // constant needs start == end

  EXPECT_THROW(parse_decay_style("cosine-ish"), InputError);
  EXPECT_THROW(parse_decay_style("wsd"), InputError);  // Megatron spells it "WSD"
  EXPECT_THROW(parse_wsd_decay_style("sqrt"), InputError);
  EXPECT_THROW(parse_wd_incr_style("exponential"), InputError);
  try {
    parse_decay_style("nope");
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
  }

  SchedulerIters it;
  it.lr = 1.0;
  it.train_iters = 10;
  it.weight_decay_incr_style = WdIncrStyle::kLinear;  // needs start and end weight decay
  EXPECT_THROW(from_iters(it), InputError);
}

TEST(Scheduler, ParseStyles) {
  EXPECT_EQ(parse_decay_style("constant"), LrDecayStyle::kConstant);
  EXPECT_EQ(parse_decay_style("linear"), LrDecayStyle::kLinear);
  EXPECT_EQ(parse_decay_style("cosine"), LrDecayStyle::kCosine);
  EXPECT_EQ(parse_decay_style("inverse-square-root"), LrDecayStyle::kInverseSquareRoot);
  EXPECT_EQ(parse_decay_style("WSD"), LrDecayStyle::kWSD);
  EXPECT_EQ(parse_wsd_decay_style("minus_sqrt"), WsdDecayStyle::kMinusSqrt);
  EXPECT_EQ(parse_wsd_decay_style("exponential"), WsdDecayStyle::kExponential);
  EXPECT_EQ(parse_wd_incr_style("cosine"), WdIncrStyle::kCosine);
  EXPECT_STREQ(to_string(parse_decay_style("inverse-square-root")), "inverse-square-root");
}

}  // namespace
}  // namespace loopgate
