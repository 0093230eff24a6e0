// schedule_1f1b_order against the order written out by hand from Megatron 9.4 (schedules.py
// forward_backward_pipelining_without_interleaving): stage r runs min(pp-1-r, M) warmup forwards, then
// (F, B) pairs, then the warmup's backwards. select_schedule picks 1F1B exactly when pp > 1.
#include <gtest/gtest.h>

#include "trainer/pipeline/schedules.h"

namespace loopgate {
namespace {

void expect_order(int pp, int stage, int m, const char* expected) {
  EXPECT_EQ(to_string(schedule_1f1b_order(pp, stage, m)), expected) << "pp=" << pp << " stage=" << stage
                                                                     << " M=" << m;
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
  EXPECT_EQ(to_string(schedule_no_pipelining_order(3)), "F0 B0 F1 B1 F2 B2");
}

}  // namespace
}  // namespace loopgate
