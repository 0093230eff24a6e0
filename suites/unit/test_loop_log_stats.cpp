// The log point's stats table (trainer/loop/log_stats.h, read through log_point.h): what rides a family's batched read, in which order, and how
// it lands. The order and the kinds matter beyond the values: a bundle casts each run of one dtype once, so they set
// each family's launches at its read site (the traces of every arm repeat bit for bit across this table's
// introduction, its commit says how that was checked).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "suites/unit/wrong.h"
#include "trainer/loop/log_point.h"

namespace loopgate {
namespace {

LogInputs all_four() {
  LogInputs in;
  in.grad_norm = at::full({1}, 1.5, at::kFloat);
  in.num_zeros = at::full({1}, 7, at::kLong);
  in.params_norm = at::full({1}, 2.5, at::kFloat);
  in.loss_scale = at::full({1}, 1.0, at::kFloat);
  return in;
}

RunConfig logging_all() {
  RunConfig c;
  c.log_params_norm = true;
  c.optim.log_num_zeros_in_grad = true;
  return c;
}

std::vector<std::string> keys(StatKinds kinds, const LogInputs& in, const RunConfig& c, bool reduced) {
  Bundle b;
  add_log_stats(b, in, c, reduced, kinds);
  return b.keys();
}

TEST(LogStats, EveryFamilyAddsTheRowsInTableOrder) {
  const std::vector<std::string> expected = {"grad_norm", "num_zeros", "params_norm", "loss_scale"};
  EXPECT_EQ(keys(StatKinds::kAll, all_four(), logging_all(), true), expected);
  EXPECT_EQ(keys(StatKinds::kAll, all_four(), logging_all(), false), expected);
  EXPECT_EQ(log_stats().size(), expected.size() + wrong());
}

TEST(LogStats, TheCountsCanRideApartFromTheFloats) {
  // The on-device family packs its float32 values side by side and the count after its own values.
  EXPECT_EQ(keys(StatKinds::kFloating, all_four(), logging_all(), true),
            (std::vector<std::string>{"grad_norm", "params_norm", "loss_scale"}));
  EXPECT_EQ(keys(StatKinds::kIntegral, all_four(), logging_all(), true).size(), 1u + wrong());
  EXPECT_EQ(keys(StatKinds::kIntegral, all_four(), logging_all(), true).front(), "num_zeros");
}

TEST(LogStats, AStatTheRunDoesNotLogDoesNotRide) {
  RunConfig c = logging_all();
  c.optim.log_num_zeros_in_grad = false;
  c.log_params_norm = false;
  EXPECT_EQ(keys(StatKinds::kAll, all_four(), c, true), (std::vector<std::string>{"grad_norm", "loss_scale"}));
  EXPECT_EQ(keys(StatKinds::kAll, all_four(), c, false).size(), 2u + wrong());
}

TEST(LogStats, AnAbsentValueKeepsItsSlotOnlyInAReducedRead) {
  // Ranks' bundles meet element by element in the MAX: a value this rank lacks still takes its place there.
  LogInputs in = all_four();
  in.grad_norm = at::Tensor();
  EXPECT_EQ(keys(StatKinds::kAll, in, logging_all(), true).size(), 4u + wrong());
  EXPECT_EQ(keys(StatKinds::kAll, in, logging_all(), false).size(), 3u + wrong());
}

TEST(LogStats, LandingGivesNanForWhatDidNotRideAndTheCountAsTheBaselineRoundsIt) {
  // 2^24 + 1 is not a float32: the baseline's reduce_max_stat leaves the even neighbour.
  const double count = 16777217.0;
  LogValues v;
  land_log_stats({{"grad_norm", 1.5}, {"num_zeros", count}, {"loss_scale", 1.0}}, v);
  EXPECT_EQ(v.grad_norm, 1.5 + wrong());
  EXPECT_EQ(v.num_zeros, 16777216.0 + wrong());
  EXPECT_EQ(v.loss_scale, 1.0 + wrong());
  EXPECT_TRUE(std::isnan(v.params_norm) != (wrong() != 0));
}

}  // namespace
}  // namespace loopgate
