// Gate: isolation. A fixture's scenarios share one process: its communicators (pooled_run_groups: made once,
// restarted for each run), the CUDA context, cuBLAS handles and the allocator. A scenario must not see what ran
// before it: each arm's clean run, repeated in the same process after the scenarios before it, gives the same
// bits in every field at every iteration (the parameter checksum too). Run with --gtest_shuffle, the launch
// also puts the scenarios in another order; the golden values and the equivalence gate then check that order's
// bits.
// Power: defect-state-leak (a hook whose state outlives its run) is rejected: its first run is the baseline's,
// its repeat is not.
// Not proven here: isolation between processes (each launch is a new one) or of state no field depends on.
#include <gtest/gtest.h>

#include "fixtures/compare.h"
#include "fixtures/harness/args.h"
#include "fixtures/harness/arm_test.h"
#include "fixtures/scenarios.h"

namespace loopgate {
namespace {

// The clean run of `arm` (shared with the other gates, run at most once per launch) against the same
// configuration run again now, under another scenario key (so not taken from the cache).
std::vector<Mismatch> repeat_mismatches(const std::string& arm) {
  const Trace& first = clean_run(arm).trace;
  return compare_fields(first, run_scenario("isolation:repeat", clean_config(), arm).trace, record_fields());
}

// The baseline (the shared communicators and context) and the final arms that keep state on the device
// (onesync, zerosync), as far as they are candidates: a repeat costs a clean run each. Arms named with
// --lg_arms (loopgate gate --arm, selftest) all repeat.
std::vector<std::string> isolation_arms() {
  std::vector<std::string> a = {"baseline"};
  const bool named = !harness_arg("arms").empty();
  for (const std::string& c : gate_arms())
    if (named || c == "onesync" || c == "zerosync") a.push_back(c);
  return a;
}

class Isolation : public ArmTest {};

TEST_P(Isolation, CleanRunRepeatedInTheSameProcessIsBitIdentical) {
  if (heavy_fixture() && GetParam() != "baseline" && harness_arg("arms").empty())
    GTEST_SKIP() << "dp64: the baseline repeats (64 ranks on 2 cores; the arms' own state is checked on the others)";
  auto m = repeat_mismatches(GetParam());
  EXPECT_TRUE(m.empty()) << GetParam() << ": the repeat differs from the first run (state kept between scenarios)\n"
                         << describe(m, "first run", "repeat");
}

INSTANTIATE_TEST_SUITE_P(Arms, Isolation, ::testing::ValuesIn(isolation_arms()),
                         [](const auto& info) { return param_name(info.param); });

TEST(GatePower, IsolationRejectsAStateLeakBetweenScenarios) {
  if (heavy_fixture()) GTEST_SKIP() << "dp64: the same comparison is shown to reject on the smaller fixtures";
  auto m = repeat_mismatches("defect-state-leak");
  EXPECT_FALSE(m.empty()) << "the isolation gate accepted an arm whose state outlives its run";
  if (!m.empty() && world_rank() == 0)
    std::printf("rejected as expected:\n%s", describe(m, "first run", "repeat", 2).c_str());
}

}  // namespace
}  // namespace loopgate
