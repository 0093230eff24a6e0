// The shim's values files and what `loopgate pair` reads from them (tools/analysis/run_values.h,
// timer_accounting.h): exact values from hex floats, the optimizer's LR by step, a NaN counted as Megatron counts
// it, malformed files refused naming the file; where two runs' digests first part; and the timer row's known
// answers: exact windows pass at lag 0, and a report that accumulates, loses one interval, counts a window twice
// at a save or prints a line the shim never saw fails at that window, while a timer that reports one log point
// late passes at lag 1. Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every expected count by one.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "suites/unit/wrong.h"
#include "tools/analysis/run_values.h"
#include "tools/analysis/timer_accounting.h"
#include "trainer/common/error.h"

namespace loopgate {
namespace {

nlohmann::json log_call(int64_t it, double clock, int64_t step, const std::string& loss, int skipped = 0) {
  return {{"iteration", it}, {"clock", clock},       {"first", it == 1},        {"step", step},
          {"loss", {{"lm loss", loss}}},             {"learning_rate", "0x1.0p-10"}, {"loss_scale", "0x1.0p+0"},
          {"skipped", skipped},                      {"grad_norm", "0x1.8p+0"},  {"num_zeros", nullptr},
          {"params_norm", "0x1.4p+4"}};
}

nlohmann::json values(nlohmann::json logs) {
  return {{"format", "loopgate-values/1"},
          {"rank", 3},
          {"logs", logs},
          {"param_group_lrs", {{{"step", 1}, {"lrs", {"0x1.0p-11"}}}, {{"step", 2}, {"lrs", {"0x1.0p-12"}}}}},
          {"digests", {{{"step", 1},
                        {"tensors", nlohmann::json::array({nlohmann::json::array({"w", "aa"}),
                                                           nlohmann::json::array({"b", "bb"})})}}}}};
}

TEST(RunValues, HexFloatsAreReadAsExactBits) {
  const RunValues v = run_values_from_json(
      values(nlohmann::json::array({log_call(1, 0.5, 1, "0x1.2bfa94p-1"), log_call(2, 0.75, 2, "nan", 1)})), "v.json");
  ASSERT_EQ(v.exact.entries.size(), 2u + wrong());
  EXPECT_EQ(v.rank, 3);
  const RunEntry& e = v.exact.entries[0];
  EXPECT_EQ(e.lm_loss->value, 0x1.2bfa94p-1);
  EXPECT_TRUE(e.lm_loss->exact);
  EXPECT_EQ(e.optimizer_lr->value, 0x1.0p-11);  // the param group's LR after step 1
  EXPECT_FALSE(e.num_zeros.has_value());        // null: not logged
  EXPECT_EQ(*e.nan_iterations, 0);
  const RunEntry& skipped = v.exact.entries[1];
  EXPECT_EQ(*skipped.skipped_iterations, 1);
  EXPECT_EQ(*skipped.nan_iterations, 1);  // skipped with a non-finite loss: Megatron's NaN iteration
  EXPECT_EQ(skipped.optimizer_lr->value, 0x1.0p-12);
  ASSERT_EQ(v.calls.size(), 2u);
  EXPECT_TRUE(v.calls[0].first);
  EXPECT_EQ(v.calls[1].clock, 0.75);
  ASSERT_EQ(v.digests.size(), 1u);
  EXPECT_EQ(v.digests[0].step, "1");
}

TEST(RunValues, MalformedFilesAreRefusedNamingTheFileAndTheField) {
  auto refused = [](const nlohmann::json& j) -> std::string {
    try {
      run_values_from_json(j, "bad.json");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refused({{"format", "loopgate-syncs/1"}}).find("bad.json: not a loopgate values file"), std::string::npos);
  EXPECT_NE(refused({{"format", "loopgate-values/1"}}).find("bad.json: no \"logs\" array"), std::string::npos);
  // A decimal would claim exact bits it may not have: refused (wrong(): expected accepted).
  const std::string decimal = refused(values(nlohmann::json::array({log_call(1, 0.5, 1, "1.5")})));
  EXPECT_EQ(decimal.empty(), wrong() != 0) << decimal;
  if (!wrong()) EXPECT_NE(decimal.find("bad.json: loss 'lm loss' '1.5' is not a hex float"), std::string::npos);
  EXPECT_NE(refused(values(nlohmann::json::array({log_call(1, 0.5, 1, "0x1p+0x")}))).find("is not a hex float"), std::string::npos);
}

std::vector<StepDigest> digests(std::vector<std::tuple<std::string, std::string, std::string>> rows) {
  std::vector<StepDigest> out;
  for (const auto& [step, name, hash] : rows) {
    if (out.empty() || out.back().step != step) out.push_back({step, {}});
    out.back().tensors.emplace_back(name, hash);
  }
  return out;
}

TEST(RunValues, TheFirstPartingNamesTheStepAndTheTensor) {
  const auto a = digests({{"1", "w", "1"}, {"1", "b", "2"}, {"2", "w", "3"}, {"2", "b", "4"}, {"end", "w", "5"}});
  EXPECT_FALSE(first_parting(a, a).has_value());
  const auto b = digests({{"1", "w", "1"}, {"1", "b", "2"}, {"2", "w", "3"}, {"2", "b", "X"}, {"end", "w", "Y"}});
  const auto p = first_parting(a, b);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->step, wrong() ? "end" : "2");
  EXPECT_EQ(p->tensor, "b");
  EXPECT_EQ(p->differing, 1u);
}

// ---- the timer row ----

// A log line per iteration 1..n (Megatron's first line does not reset the timer) with `reported` ms per iteration,
// and the shim's clock at each log call: iteration k's call returns at `clock_ms[k - 1]`.
struct TimedRun {
  RunLog log;
  std::vector<LogCall> calls;
};

TimedRun timed(const std::vector<double>& reported, const std::vector<double>& clock_ms) {
  TimedRun r;
  r.log.path = "log.txt";
  for (size_t k = 0; k < reported.size(); ++k) {
    RunEntry e;
    e.iteration = static_cast<int64_t>(k) + 1;
    e.line = static_cast<int>(k) + 1;
    e.elapsed_ms = reported[k];
    r.log.entries.push_back(e);
    r.calls.push_back({e.iteration, clock_ms[k] / 1000.0, k == 0});
  }
  return r;
}

// The clock of 8 iterations of 100, 120, 100, 140, 100, 160, 100, 180 ms (windows of different lengths, so a lag is
// visible), and the reports an exact timer prints for them (the first two lines from the timer's start).
const std::vector<double> kSteps = {100, 120, 100, 140, 100, 160, 100, 180};
std::vector<double> clock_of(const std::vector<double>& steps) {
  std::vector<double> out;
  double t = 0;
  for (double s : steps) out.push_back(t += s);
  return out;
}

TimerAccounting judge(const std::vector<double>& reported) {
  const TimedRun r = timed(reported, clock_of(kSteps));
  return judge_timer(r.log, r.calls, TimerTolerance{});
}

TEST(TimerAccounting, ExactWindowsPassAtLagZero) {
  // Line 2 reports (t2 - t0) / 2 (the first line did not reset); lines 3.. their own window.
  const TimerAccounting t = judge({100, 110, 100, 140, 100, 160, 100, 180});
  EXPECT_TRUE(t.problems.empty()) << t.problems.front();
  EXPECT_EQ(t.lag, 0);
  EXPECT_EQ(t.compared, 6 + wrong());  // iterations 3..8: line 2's window opens at the timer's start
}

TEST(TimerAccounting, AReportThatAccumulatesFails) {
  std::vector<double> total;
  const std::vector<double> clock = clock_of(kSteps);
  for (size_t k = 0; k < clock.size(); ++k) total.push_back(clock[k]);  // the running total since the start
  const TimerAccounting t = judge(total);
  EXPECT_EQ(t.problems.size(), 6u + wrong());
  EXPECT_NE(t.problems.front().find("iteration 3: the log reports 320.0 ms for iterations 3-3"), std::string::npos)
      << t.problems.front();
}

TEST(TimerAccounting, OneLostIntervalFailsAtItsWindowAndIsNotTakenForALag) {
  const TimerAccounting t = judge({100, 110, 100, 140, 100, 3, 100, 180});  // iteration 6's step not timed
  ASSERT_EQ(t.problems.size(), 1u + wrong());
  EXPECT_EQ(t.lag, 0);
  EXPECT_NE(t.problems.front().find("iteration 6: the log reports 3.0 ms for iterations 6-6; the shim's clock "
                                    "measured 160.0 ms"),
            std::string::npos)
      << t.problems.front();
}

TEST(TimerAccounting, AWindowCountedTwiceAtASaveFails) {
  // A save at 4 charged to iteration 5's window as well as 4's: 5 reports 140 ms more than its clock.
  const TimerAccounting t = judge({100, 110, 100, 140, 240, 160, 100, 180});
  ASSERT_EQ(t.problems.size(), 1u + wrong());
  EXPECT_NE(t.problems.front().find("iteration 5"), std::string::npos);
}

TEST(TimerAccounting, ALaggedTimerPassesAtLagOne) {
  // Each line reports the window before its own (an event-based timer read one log point late).
  const TimerAccounting t = judge({100, 110, 110, 100, 140, 100, 160, 100});
  EXPECT_EQ(t.lag, 1 - wrong());
  EXPECT_TRUE(t.problems.empty()) << t.problems.front();
}

TEST(TimerAccounting, ALineTheShimNeverSawFails) {
  TimedRun r = timed({100, 110, 100, 140}, clock_of({100, 120, 100, 140}));
  r.calls.erase(r.calls.begin() + 2);  // no log call for iteration 3
  const TimerAccounting t = judge_timer(r.log, r.calls, TimerTolerance{});
  ASSERT_FALSE(t.problems.empty());
  EXPECT_NE(t.problems.front().find("log.txt:3: the log reports iteration 3, but the shim saw no log call for it"),
            std::string::npos)
      << t.problems.front();
  EXPECT_EQ(t.problems.size(), 2u + wrong());  // and line 4's window, now measured from line 2, is off by line 3's
}

}  // namespace
}  // namespace loopgate
