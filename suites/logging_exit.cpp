// Gate: logging and exit. (a) The batched read reports what the eager reads report, bit for bit: every logged
// field (lm loss, grad norm, num zeros, params norm, learning rate, loss scale) of each candidate equals the
// baseline's at every log point, with --log-interval 1 and 3 (the loss averaged over the interval). (b) Megatron's
// log lines are identical between arms apart from the timing field. (c) --exit-duration-in-mins: with a simulated
// clock that one non-zero rank runs faster, the MAX vote makes every rank exit at the same iteration — the first
// past the limit for an eager vote, the next log point for a deferred one (expected iterations computed here from
// the config, not taken from a run).
// Not proven here: wall-clock exit timing, timestamp formatting, TensorBoard output, the per-timer log block.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include "fixtures/compare.h"
#include "fixtures/golden.h"
#include "fixtures/harness/arm_test.h"
#include "fixtures/scenarios.h"

namespace loopgate {
namespace {

const std::vector<std::string> kLoggedFields = {"lm_loss", "grad_norm", "num_zeros", "params_norm", "learning_rate",
                                                "loss_scale"};

// ---- scenarios ----

// Log points 1, 3, 6 (dp64: 1, 3). The sync_budget gate's logged scenario (same key, same config): the exit
// vote is live there but never carried, which both arms share.
const ScenarioResult& log3_run(const std::string& arm) {
  const SyncScenario s = logged_scenario(gate_fixture());
  EXPECT_EQ(s.log_interval, 3) << "the logged scenario must log every 3 iterations";
  return run_scenario("sync:" + s.key, sync_scenario_config(gate_fixture(), s), arm);
}

// One rank's clock runs 2x: it crosses 0.375 min at iteration 2 (2 x 0.125 x 2 > 0.375), every other rank only at
// iteration 4 (4 x 0.125 > 0.375). Binary fractions: the comparisons are exact.
RunConfig exit_config() {
  RunConfig c = gate_config();
  c.train_iters = 6;
  c.log_interval = 3;
  c.exit_duration_in_mins = 0.375;
  c.simulated_minutes_per_iteration = 0.125;
  c.fast_clock_rank = world_size() - 1;  // a non-zero rank (rank 0 on the single fixture)
  c.fast_clock_factor = 2.0;
  return c;
}

const ScenarioResult& exit_run(const std::string& arm) { return run_scenario("exit-duration", exit_config(), arm); }

// The first iteration at which `rank`'s simulated clock is past the limit (as the loop computes it).
int64_t crossing(const RunConfig& c, int rank) {
  const double factor = rank == c.fast_clock_rank ? c.fast_clock_factor : 1.0;
  for (int64_t i = 1;; ++i)
    if (static_cast<double>(i) * c.simulated_minutes_per_iteration * factor > c.exit_duration_in_mins) return i;
}

// Megatron: an eager vote exits at the first iteration where ANY rank is past the limit (MAX all-reduce); a vote
// that rides the batched read is seen only at the next log point (iteration % log_interval == 0, or the first).
int64_t expected_exit(const RunConfig& c, const std::string& arm) {
  int64_t first = crossing(c, 0);
  for (int r = 1; r < world_size(); ++r) first = std::min(first, crossing(c, r));
  const Arm& a = find_arm(arm);
  if (a.exit_vote == SyncMode::kEager && !a.one_read) return first;
  int64_t i = first;
  while (!(i == 1 || i % c.log_interval == 0)) ++i;
  return i;
}

// Lines of `arm` that differ from the baseline's, on the last rank (print_rank_last); empty on other ranks.
std::vector<std::string> line_differences(const ScenarioResult& base, const ScenarioResult& cand, int64_t log_points) {
  std::vector<std::string> d;
  if (world_rank() != world_size() - 1) return d;
  const auto& b = base.local.log_lines;
  const auto& c = cand.local.log_lines;
  if (b.size() != static_cast<size_t>(log_points) || c.size() != b.size())
    d.push_back(fmt::format("{} baseline line(s), {} candidate line(s), {} log point(s)", b.size(), c.size(), log_points));
  for (size_t i = 0; i < b.size() && i < c.size(); ++i)
    if (without_log_timing(b[i]) != without_log_timing(c[i]))
      d.push_back(fmt::format("line {}:\n    baseline :{}\n    candidate:{}", i + 1, without_log_timing(b[i]), without_log_timing(c[i])));
  return d;
}

std::string indented_lines(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += "\n  " + x;
  return s;
}

// ---- (a) logged fields, (b) log lines ----

class LoggingExit : public ArmTest {};

// A failure says where the runs part (fixtures/localize.h); "none" there means the computed values agree and the
// difference is in what was logged.
TEST_P(LoggingExit, LoggedFieldsEqualBaselineAtEveryLogPointInterval1) {
  auto m = compare_fields(clean_run("baseline").trace, clean_run(GetParam()).trace, kLoggedFields);
  EXPECT_TRUE(m.empty()) << describe(m, "baseline", GetParam()) << "\n  "
                         << localize("clean", clean_config(), GetParam());
}

TEST_P(LoggingExit, LoggedFieldsEqualBaselineAtEveryLogPointInterval3) {
  const Trace& base = log3_run("baseline").trace;
  const IterationRecord* r3 = base.find(3, world_size() - 1);  // the averaged point must hold a loss
  ASSERT_TRUE(r3 && has_value(*r3, "lm_loss")) << "no lm loss logged at iteration 3 on the last rank";
  auto m = compare_fields(base, log3_run(GetParam()).trace, kLoggedFields);
  const SyncScenario s = logged_scenario(gate_fixture());
  EXPECT_TRUE(m.empty()) << describe(m, "baseline", GetParam()) << "\n  "
                         << localize("sync:" + s.key, sync_scenario_config(gate_fixture(), s), GetParam());
}

TEST_P(LoggingExit, MegatronLogLinesEqualBaselineApartFromTiming) {
  const int64_t n3 = log3_run("baseline").local.iterations_done;
  auto d1 = line_differences(clean_run("baseline"), clean_run(GetParam()), clean_run("baseline").local.iterations_done);
  auto d3 = line_differences(log3_run("baseline"), log3_run(GetParam()), 1 + n3 / 3);
  EXPECT_TRUE(d1.empty()) << GetParam() << ", log interval 1:" << indented_lines(d1);
  EXPECT_TRUE(d3.empty()) << GetParam() << ", log interval 3:" << indented_lines(d3);
}

// ---- (c) the exit-duration vote ----

void expect_exit_as_computed(const std::string& arm) {
  const RunConfig c = exit_config();
  const int64_t want = expected_exit(c, arm);
  const ScenarioResult& s = exit_run(arm);
  EXPECT_TRUE(s.local.exited_on_duration) << arm << ": rank " << world_rank() << " did not exit on duration";
  EXPECT_EQ(s.local.iterations_done, want) << arm << ": rank " << world_rank() << " exited after iteration "
                                           << s.local.iterations_done << ", expected " << want;
  for (const IterationRecord& r : s.trace.records) {
    EXPECT_LE(r.iteration, want) << arm << ": rank " << r.rank << " ran iteration " << r.iteration << " past the exit";
    EXPECT_EQ(r.exit_decision, r.iteration == want)
        << arm << ": iteration " << r.iteration << " rank " << r.rank << ": exit_decision " << r.exit_decision
        << ", expected the exit at iteration " << want << " on every rank";
  }
  for (int r = 0; r < world_size(); ++r)
    EXPECT_NE(s.trace.find(want, r), nullptr) << arm << ": rank " << r << " has no record at exit iteration " << want;
}

TEST(LoggingExit, BaselineExitsAtTheFirstIterationPastTheLimitOnEveryRank) {
  const RunConfig c = exit_config();
  // The configuration must make the vote matter: the fast rank crosses first, the others later than any exit.
  if (world_size() > 1) ASSERT_GT(crossing(c, 0), expected_exit(c, "syncfree"));
  ASSERT_NE(expected_exit(c, "baseline"), expected_exit(c, "syncfree")) << "log interval hides the granularity";
  expect_exit_as_computed("baseline");
}

TEST_P(LoggingExit, ExitVoteSameIterationOnEveryRankAtLogIntervalGranularity) {
  expect_exit_as_computed(GetParam());
  const int64_t want = expected_exit(exit_config(), GetParam());
  if (world_rank() == 0)
    std::printf("exit-duration: %s exits at iteration %lld on every rank (baseline %lld; fast clock on rank %d)\n",
                GetParam().c_str(), static_cast<long long>(want),
                static_cast<long long>(expected_exit(exit_config(), "baseline")), exit_config().fast_clock_rank);
}

INSTANTIATE_TEST_SUITE_P(Arms, LoggingExit, ::testing::ValuesIn(gate_arms()),
                         [](const auto& info) { return param_name(info.param); });

// Gate power: a batched read that reports the previous log point's grad norm must be rejected.
TEST(GatePower, LoggingExitRejectsStaleBatchedRead) {
  auto m = compare_fields(clean_run("baseline").trace, clean_run("defect-stale-log").trace, kLoggedFields);
  size_t grad = 0;
  for (const Mismatch& x : m) grad += x.field == "grad_norm";
  EXPECT_GT(grad, 0u) << "the logging gate accepted an arm whose batched read reports a stale grad norm";
  if (grad > 0 && world_rank() == 0) std::printf("rejected as expected: %s\n", describe(m, "baseline", "defect-stale-log", 3).c_str());
}

}  // namespace
}  // namespace loopgate
