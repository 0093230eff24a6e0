// schedule_1f1b_order against the order written out by hand from Megatron 9.4 (schedules.py
// forward_backward_pipelining_without_interleaving): stage r runs min(pp-1-r, M) warmup forwards, then
// (F, B) pairs, then the warmup's backwards. select_schedule picks 1F1B exactly when pp > 1. The counting check
// the schedule gate runs (fixtures/loop_checks.h) over many layouts, and its power on a warmup off by one.
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every hand-computed expectation, so every test here fails.
#include <gtest/gtest.h>

#include <cstdlib>

#include "fixtures/loop_checks.h"
#include "suites/unit/wrong.h"
#include "trainer/pipeline/schedules.h"

namespace loopgate {
namespace {

void expect_order(int pp, int stage, int m, const char* expected) {
  EXPECT_EQ(to_string(schedule_1f1b_order(pp, stage, m)), wrong() ? std::string(expected) + " F9" : expected)
      << "pp=" << pp << " stage=" << stage << " M=" << m;
}

TEST(PipelineSchedule, OneFOneBPp2) {
  expect_order(2, 0, 4, "F0 F1 B0 F2 B1 F3 B2 B3");
  expect_order(2, 1, 4, "F0 B0 F1 B1 F2 B2 F3 B3");
  expect_order(2, 0, 8, "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7");
  expect_order(2, 1, 8, "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
}

TEST(PipelineSchedule, OneFOneBPp4) {
  expect_order(4, 0, 4, "F0 F1 F2 F3 B0 B1 B2 B3");  // warmup 3, one pair, cooldown 3
  expect_order(4, 1, 4, "F0 F1 F2 B0 F3 B1 B2 B3");
  expect_order(4, 2, 4, "F0 F1 B0 F2 B1 F3 B2 B3");
  expect_order(4, 3, 4, "F0 B0 F1 B1 F2 B2 F3 B3");
  expect_order(4, 0, 8, "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  expect_order(4, 1, 8, "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
  expect_order(4, 2, 8, "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7");
  expect_order(4, 3, 8, "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
}

TEST(PipelineSchedule, WarmupCappedByMicrobatches) {
  expect_order(4, 0, 2, "F0 F1 B0 B1");  // min(pp - stage - 1, M) = 2: no steady state
}

TEST(PipelineSchedule, SelectedFromLayout) {
  EXPECT_EQ(select_schedule(Layout::build(2, {1, 1, false})).kind, ScheduleKind::kNoPipelining);
  EXPECT_EQ(select_schedule(Layout::build(2, {1, 2, false})).kind, ScheduleKind::k1F1B);
  EXPECT_EQ(to_string(schedule_no_pipelining_order(3)), wrong() ? "F0 B0 F1 F2 B1 B2" : "F0 B0 F1 B1 F2 B2");
}

TEST(PipelineSchedule, CountsMatchMegatronOnEveryLayoutUpToPp8AndM16) {
  int checked = 0;
  for (int pp = 1; pp <= 8; ++pp)
    for (int m = 1; m <= 16; ++m, ++checked) {
      EXPECT_TRUE(schedule_1f1b_problems(schedule_1f1b_order, pp, m).empty()) << "pp=" << pp << " M=" << m;
      EXPECT_TRUE(schedule_no_pipelining_problems(schedule_no_pipelining_order, m).empty()) << "M=" << m;
    }
  EXPECT_EQ(checked, 128 + wrong());
}

TEST(PipelineSchedule, AWarmupOffByOneIsRejectedWithItsCounts) {
  const OrderFn one_too_many = [](int pp, int stage, int m) { return schedule_1f1b_order(pp, stage - 1, m); };
  const auto p = schedule_1f1b_problems(one_too_many, 2, 4);
  ASSERT_EQ(p.size(), 2u + wrong());  // both stages
  EXPECT_EQ(p[1], "1F1B pp=2 stage 1 M=4: 'F0 F1 B0 F2 B1 F3 B2 B3' (2 forward(s) before the first backward, 2 "
                  "backward(s) after the last forward); Megatron: 'F0 B0 F1 B1 F2 B2 F3 B3' (warmup min(pp - stage - 1, "
                  "M) = 0 forwards, 4 (F, B) pairs, 0 cooldown backwards: 1 forward(s) before the first backward, 1 "
                  "backward(s) after the last forward)");
  const OrderFn one_too_few = [](int pp, int stage, int m) { return schedule_1f1b_order(pp, stage + 1, m); };
  // Stage 0 loses its warmup forward; the last stage computes a warmup of -1, so five pairs of four microbatches.
  EXPECT_EQ(schedule_1f1b_problems(one_too_few, 2, 4).size(), 2u);
}

}  // namespace
}  // namespace loopgate
