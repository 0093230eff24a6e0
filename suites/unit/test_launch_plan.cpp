// Unit tests for `loopgate gate`'s launch plan (tools/loopgate/launch_plan.h), on CPU for a GPU runner's options:
// which executables run per fixture, with which filter and device, for every check, some checks, a GPU-only check
// alone and a selftest-style filter; the shards a fixture's gate suites split into (every test in exactly one).
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every expectation, so every test here fails.
#include <gtest/gtest.h>

#include <cstdlib>

#include "suites/unit/wrong.h"
#include "tools/loopgate/launch_plan.h"

namespace loopgate {
namespace {

GateOptions options(const std::string& device, std::vector<std::string> checks = {}, std::string filter = "") {
  GateOptions o;
  o.device = device;
  o.checks = std::move(checks);
  o.filter = std::move(filter);
  o.suites_exe = "gates";
  o.gpu_loop_exe = "gpu_loop";
  return o;
}

const std::vector<Fixture> kTwo = {{"single", 1, ""}, {"tp2sp", 2, ""}};

TEST(LaunchPlan, CpuRunsTheGateSuitesOncePerFixture) {
  const auto u = launch_units(options("cpu"), kTwo);
  ASSERT_EQ(u.size(), 2u + wrong());
  for (const LaunchUnit& x : u) {
    EXPECT_EQ(x.exe, "gates");
    EXPECT_EQ(x.filter, "*");
    EXPECT_EQ(x.device, "cpu");
    EXPECT_EQ(x.tag, "");
  }
  EXPECT_EQ(u[1].fixture.name, "tp2sp");
}

TEST(LaunchPlan, CudaAddsOneProcessPerGpuOnlyCheck) {
  const auto u = launch_units(options("cuda"), {kTwo[0]});
  ASSERT_EQ(u.size(), 3u + wrong());
  EXPECT_EQ(u[0].exe, "gates");
  EXPECT_EQ(u[0].device, "cuda");
  EXPECT_EQ(u[1].exe, "gpu_loop");
  EXPECT_EQ(u[1].tag, ".ledger_cupti");
  EXPECT_EQ(u[1].filter, "*LedgerEqualsCupti*");
  EXPECT_EQ(u[2].tag, ".capture_probe");  // last: a refused capture in a process of its own
  EXPECT_EQ(u[2].filter, "*CaptureProbe*");
}

TEST(LaunchPlan, AGpuOnlyCheckAloneLaunchesNoGateSuites) {
  const auto u = launch_units(options("cuda", {"ledger_cupti"}), {kTwo[0]});
  ASSERT_EQ(u.size(), 1u + wrong());
  EXPECT_EQ(u[0].exe, "gpu_loop");
  const auto g = launch_units(options("cuda", {"timers"}), {kTwo[0]});
  ASSERT_EQ(g.size(), 1u + wrong());
  EXPECT_EQ(g[0].exe, "gates");
  EXPECT_EQ(g[0].filter, "Arms/Timers*:Timers*:GatePower.Timers*:GatePower/Timers*");
}

TEST(LaunchPlan, ASelftestFilterNarrowsEveryLaunchOfItsChecks) {
  const std::string f = "Arms/Timers*/defect_x:Arms/LedgerEqualsCupti*/defect_hidden_sync";
  const auto u = launch_units(options("cuda", {"timers", "ledger_cupti"}, f), {kTwo[0]});
  ASSERT_EQ(u.size(), 2u + wrong());
  EXPECT_EQ(u[0].exe, "gates");
  EXPECT_EQ(u[0].filter, f);
  EXPECT_EQ(u[1].exe, "gpu_loop");
  EXPECT_EQ(u[1].filter, f);
  EXPECT_EQ(launch_units(options("cpu", {"timers"}, f), {kTwo[0]}).size(), 1u + wrong());
}

// What `--gtest_list_tests` prints: suites, plain and parameterized tests, and a stray log line.
const char* kListing =
    "loopgate: a stray log line.\n"
    "Timers.\n"
    "  FirstReportWaits\n"
    "Arms/LrSchedule.\n"
    "  SequenceBitIdentical/syncfree  # GetParam() = \"syncfree\"\n"
    "  SequenceBitIdentical/onesync  # GetParam() = \"onesync\"\n"
    "GatePower.\n"
    "  LrScheduleRejectsLrAdvancingOnSkippedStep\n";

TEST(LaunchPlan, TestListingGivesFullNamesInOrder) {
  const std::vector<std::string> want = {"Timers.FirstReportWaits", "Arms/LrSchedule.SequenceBitIdentical/syncfree",
                                         "Arms/LrSchedule.SequenceBitIdentical/onesync",
                                         "GatePower.LrScheduleRejectsLrAdvancingOnSkippedStep"};
  const auto got = parse_test_list(kListing);
  ASSERT_EQ(got.size(), want.size() + wrong());
  EXPECT_EQ(got, want);
}

TEST(LaunchPlan, ShardsTakeEveryTestOnceByArmOrSuite) {
  const LaunchUnit u = launch_units(options("cuda"), {kTwo[0]})[0];
  const auto tests = parse_test_list(kListing);
  const auto s = split_unit(u, tests, 3);
  ASSERT_EQ(s.size(), 3u + wrong());
  EXPECT_EQ(s[0].filter, "Timers.FirstReportWaits:GatePower.LrScheduleRejectsLrAdvancingOnSkippedStep");
  EXPECT_EQ(s[1].filter, "Arms/LrSchedule.SequenceBitIdentical/syncfree");
  EXPECT_EQ(s[2].filter, "Arms/LrSchedule.SequenceBitIdentical/onesync");
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(s[k].shard, k);
    EXPECT_EQ(s[k].shards, 3);
    EXPECT_EQ(s[k].exe, u.exe);
    EXPECT_EQ(s[k].device, "cuda");
  }
  // More shards than tests: one per test. One shard, or no listing: the unit as it was (its own filter).
  EXPECT_EQ(split_unit(u, tests, 9).size(), 4u + wrong());
  EXPECT_EQ(split_unit(u, tests, 1)[0].filter, "*");
  EXPECT_EQ(split_unit(u, {}, 4).size(), 1u + wrong());
}

// An arm's tests stay in one shard across suites (its scenarios run once), and so do a suite's other tests.
TEST(LaunchPlan, ShardsKeepAnArmsTestsAndASuitesTestsTogether) {
  const LaunchUnit u = launch_units(options("cpu"), {kTwo[0]})[0];
  const std::vector<std::string> tests = {"Arms/Resume.A/baseline", "Arms/Resume.A/zerosync", "Arms/Resume.B/baseline",
                                          "Arms/Resume.B/zerosync", "GatePower.X", "GatePower.Y"};
  const auto s = split_unit(u, tests, 2);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].filter, wrong() ? "Arms/Resume.A/baseline:GatePower.X"
                                 : "Arms/Resume.A/baseline:Arms/Resume.B/baseline:GatePower.X:GatePower.Y");
  EXPECT_EQ(s[1].filter, "Arms/Resume.A/zerosync:Arms/Resume.B/zerosync");
  // Fewer groups than shards: one shard per group.
  EXPECT_EQ(split_unit(u, tests, 8).size(), 3u + wrong());
}

TEST(LaunchPlan, GpuShardsTakeTheBlocksOfGpusInTurn) {
  LaunchUnit u = launch_units(options("cuda"), {kTwo[1]})[0];  // tp2sp: 2 ranks
  const std::vector<std::string> tests = {"A.a", "B.a", "C.a", "D.a"};
  auto s = split_unit(u, tests, 2);
  ASSERT_TRUE(assign_gpus(&s, {"4", "5", "6", "7"}, 2));
  EXPECT_EQ(s[0].gpus, wrong() ? "4" : "4,5");
  EXPECT_EQ(s[1].gpus, "6,7");
  // Three shards on two blocks: the third shares the first block (an explicit --shards beyond the GPUs).
  auto m = split_unit(u, tests, 3);
  ASSERT_TRUE(assign_gpus(&m, {"4", "5", "6", "7"}, 2));
  EXPECT_EQ(m[2].gpus, wrong() ? "6,7" : "4,5");
  // Three GPUs for two ranks: one block (the odd GPU idle), both shards on it.
  auto t = split_unit(u, tests, 2);
  ASSERT_TRUE(assign_gpus(&t, {"0", "1", "2"}, 2));
  EXPECT_EQ(t[0].gpus, "0,1");
  EXPECT_EQ(t[1].gpus, wrong() ? "1,2" : "0,1");
  // Fewer GPUs than ranks: none assigned.
  auto n = split_unit(u, tests, 2);
  EXPECT_EQ(assign_gpus(&n, {"0"}, 2), wrong() != 0);
  EXPECT_EQ(n[0].gpus, "");
}

}  // namespace
}  // namespace loopgate
