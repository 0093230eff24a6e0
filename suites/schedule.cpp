// Gate: schedule. The pipeline runs Megatron's order: on this fixture's layout the order functions have 1F1B's
// warmup / steady / cooldown counts (warmup = min(pp - stage - 1, M) forwards, M - warmup (F, B) pairs, warmup
// backwards; no pipelining: F0 B0 F1 B1 ...), and every arm's run executed, on every rank and iteration, the
// order schedule_1f1b_order gives for its stage (pipelined fixtures) or no-pipelining's (the others) — read from
// the Trace's `schedule` field, so a change to the executor that keeps the numerics (the p2p still pairs up)
// is caught too. Not proven here: interleaved 1F1B (not modelled), timing overlap between stages.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <algorithm>

#include "fixtures/compare.h"
#include "fixtures/loop_checks.h"
#include "fixtures/harness/arm_test.h"
#include "fixtures/scenarios.h"

namespace loopgate {
namespace {

Layout gate_layout() { return Layout::build(world_size(), gate_config().layout); }
int gate_microbatches() { return num_microbatches(gate_config().data, gate_layout()); }
std::vector<int> microbatch_counts() {
  std::vector<int> m = {gate_microbatches()};
  for (int k = 1; k <= 2 * gate_layout().pp() + 2; ++k) m.push_back(k);
  return m;
}

// This layout's pp with its M, and with every M up to 2 pp + 2 (a change of the global batch must not find a
// wrong warmup cap: with M <= pp - stage - 1 the warmup is M).
TEST(Schedule, OrderFunctionsHaveMegatronsCountsOnThisLayout) {
  const Layout layout = gate_layout();
  std::vector<std::string> p;
  for (int m : microbatch_counts()) {
    auto a = schedule_1f1b_problems(schedule_1f1b_order, layout.pp(), m);
    auto b = schedule_no_pipelining_problems(schedule_no_pipelining_order, m);
    p.insert(p.end(), a.begin(), a.end());
    p.insert(p.end(), b.begin(), b.end());
  }
  EXPECT_TRUE(p.empty()) << layout.describe() << ": " << problem_list(p);
  const ScheduleKind want = layout.pp() > 1 ? ScheduleKind::k1F1B : ScheduleKind::kNoPipelining;
  EXPECT_EQ(select_schedule(layout).kind, want) << layout.describe() << ": select_schedule picked "
                                                << select_schedule(layout).name();
}

class ScheduleRun : public ArmTest {};

TEST_P(ScheduleRun, EveryRankRanTheSelectedOrderAtEveryIteration) {
  for (const std::string& arm : {std::string("baseline"), GetParam()}) {
    const auto p = trace_schedule_problems(clean_run(arm).trace, gate_layout(), gate_microbatches());
    EXPECT_TRUE(p.empty()) << problem_list(p);
  }
}

INSTANTIATE_TEST_SUITE_P(Arms, ScheduleRun, ::testing::ValuesIn(candidate_arms()),
                         [](const auto& info) { return param_name(info.param); });

// ---- gate power ----

// An order function whose warmup is one forward too long (it computes stage s as s - 1): the counts reject it on
// every layout, pp = 1 included (1F1B there must equal no pipelining) — with two microbatches at least: with one,
// every warmup runs F0 B0 (dp64), and there is nothing to be off by.
TEST(GatePower, ScheduleRejectsAWarmupOffByOne) {
  const OrderFn one_too_many = [](int pp, int stage, int m) { return schedule_1f1b_order(pp, stage - 1, m); };
  const auto p = schedule_1f1b_problems(one_too_many, gate_layout().pp(), std::max(gate_microbatches(), 2));
  EXPECT_FALSE(p.empty()) << "the schedule gate accepted a 1F1B warmup off by one on " << gate_layout().describe();
  if (!p.empty() && world_rank() == 0) std::printf("rejected as expected: %s\n", problem_list(p, 2).c_str());
}

// A run whose 1F1B executor warms up one forward too many (defect-schedule-warmup): the p2p still pairs up and
// the numerics are the baseline's bits, so only the executed schedule shows it.
TEST(GatePower, ScheduleRejectsARunWithAShiftedWarmup) {
  if (gate_layout().pp() == 1) GTEST_SKIP() << "no pipeline on " << gate_fixture() << ": the warmup has nothing to shift";
  const std::string arm = "defect-schedule-warmup";
  const auto p = trace_schedule_problems(clean_run(arm).trace, gate_layout(), gate_microbatches());
  EXPECT_FALSE(p.empty()) << "the schedule gate accepted " << arm;
  // The claim that makes this defect worth planting: no other gate's numbers see it.
  const auto m = compare_fields(clean_run("baseline").trace, clean_run(arm).trace,
                                {"lm_loss", "params_norm", "grad_norm", "num_zeros", "param_checksum_after"});
  EXPECT_TRUE(m.empty()) << arm << " changed the numerics (then equivalence sees it, and this defect no longer "
                         << "isolates the schedule check): " << describe(m, "baseline", arm);
  if (!p.empty() && world_rank() == 0) std::printf("rejected as expected (numerics identical): %s\n", problem_list(p, 2).c_str());
}

}  // namespace
}  // namespace loopgate
