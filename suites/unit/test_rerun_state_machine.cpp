// Unit tests for the rerun state machine (Megatron rerun_state_machine.py): the job's
// first iteration is not validated; the world vote is a SUM of per-rank flags (any rank -> every rank acts);
// a confirmed fault aborts with exit code 17 or skips the step, as configured; eager and deferred forms agree.
// Several "ranks" are several machines in one process; the vote's all-reduce is an explicit sum here.
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every hand-computed expectation, so every test here fails.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <deque>
#include <limits>

#include "suites/unit/wrong.h"
#include "trainer/common/error.h"
#include "trainer/loop/rerun.h"

namespace loopgate {
namespace {

int flag(const RerunStateMachine& m) { return static_cast<int>(m.decision_tensor().data_ptr<float>()[0]); }

// What the loop does at the loop exit: SUM all-reduce of every rank's decision tensor, read once.
double vote(std::deque<RerunStateMachine>& ranks) {
  at::Tensor sum = at::zeros({1}, at::kFloat);
  for (auto& m : ranks) sum += m.decision_tensor();
  return sum.data_ptr<float>()[0];
}

TEST(RerunMode, NamesAndExitCodes) {
  EXPECT_EQ(parse_rerun_mode("disabled"), RerunMode::kDisabled);
  EXPECT_EQ(parse_rerun_mode("validate_results"), RerunMode::kValidateResults);
  EXPECT_EQ(parse_rerun_mode("report_stats"), RerunMode::kReportStats);
  EXPECT_EQ(parse_rerun_mode("report_determinism_stats"), RerunMode::kReportStats);
  EXPECT_THROW(parse_rerun_mode("validate"), InputError);
  EXPECT_STREQ(rerun_mode_name(RerunMode::kValidateResults), "validate_results");
  EXPECT_EQ(parse_fault_outcome("skip"), FaultOutcome::kSkipStep);
  EXPECT_THROW(parse_fault_outcome("ignore"), InputError);
  EXPECT_EQ(kExitCodeFailedOnResultValidation, 17 + wrong());  // Megatron L36-L40
  EXPECT_EQ(kExitCodeResumeToDisambiguate, 16);
  EXPECT_EQ(RerunConfig{}.mode, RerunMode::kValidateResults);  // Megatron's default since core_v0.14.0
}

TEST(Rerun, FirstIterationOfTheJobIsNotValidated) {
  RerunStateMachine m(RerunConfig{});
  m.begin_iteration(1);
  EXPECT_FALSE(m.should_validate());
  m.bank_host(true, "found NaN in local forward loss calculation");  // ignored: not validated
  m.bank_value(at::full({}, std::numeric_limits<float>::quiet_NaN()));  // ignored too
  EXPECT_EQ(flag(m), 0);
  EXPECT_TRUE(m.decide(0.0).proceed());
  m.end_iteration();
  EXPECT_EQ(m.unvalidated_count(), 2);
  EXPECT_EQ(m.validated_count(), 0);

  m.begin_iteration(2);
  EXPECT_TRUE(m.should_validate());
  m.bank_host(true, "found NaN in local forward loss calculation");
  EXPECT_EQ(flag(m), 1);
  const Decision d = m.decide(1.0);
  EXPECT_EQ(d.action, Decision::Action::kAbort);
  EXPECT_EQ(d.exit_code, 17 + wrong());
  EXPECT_EQ(d.iteration, 2);
  EXPECT_EQ(m.nan_iterations(), 1);
  EXPECT_EQ(m.first_rejection(), "found NaN in local forward loss calculation");
}

TEST(Rerun, AnyRankVoteStopsEveryRank) {
  std::deque<RerunStateMachine> ranks;  // not movable (mutex): a deque constructs in place
  for (int r = 0; r < 4; ++r) ranks.emplace_back(RerunConfig{});
  for (auto& m : ranks) {  // iteration 1: not validated
    m.begin_iteration(1);
    EXPECT_TRUE(m.decide(vote(ranks)).proceed());
    m.end_iteration();
  }
  // Iteration 2: clean everywhere.
  for (auto& m : ranks) {
    m.begin_iteration(2);
    m.bank_host(false);
  }
  const double clean = vote(ranks);
  EXPECT_EQ(clean, 0.0);
  for (auto& m : ranks) EXPECT_TRUE(m.decide(clean).proceed());
  for (auto& m : ranks) m.end_iteration();
  // Iteration 3: only rank 2 sees a bad grad bucket; every rank must abort with 17.
  for (int r = 0; r < 4; ++r) {
    ranks[r].begin_iteration(3);
    ranks[r].bank_host(r == 2, "found NaN in local grad norm for bucket #0");
  }
  const double v = vote(ranks);
  EXPECT_EQ(v, 1.0 + wrong());
  for (auto& m : ranks) {
    const Decision d = m.decide(v);
    EXPECT_EQ(d.action, Decision::Action::kAbort);
    EXPECT_EQ(d.exit_code, kExitCodeFailedOnResultValidation);
    EXPECT_EQ(d.ranks_reporting, 1);
    EXPECT_EQ(m.votes(), 3);
  }
}

TEST(Rerun, SkipOutcomeSkipsTheStepAndTheNextStepProceeds) {
  RerunConfig cfg;
  cfg.on_fault = FaultOutcome::kSkipStep;
  RerunStateMachine m(cfg);
  m.begin_iteration(1);
  m.end_iteration();
  m.begin_iteration(2);
  m.bank_value(at::full({1}, std::numeric_limits<float>::infinity()));
  const Decision d = m.decide(2.0);  // two ranks reported
  EXPECT_EQ(d.action, wrong() ? Decision::Action::kAbort : Decision::Action::kSkipStep);
  EXPECT_EQ(d.exit_code, 0);
  EXPECT_EQ(d.ranks_reporting, 2);
  EXPECT_EQ(m.skipped_steps(), 1);
  m.end_iteration();
  m.begin_iteration(3);  // flags cleared
  EXPECT_EQ(flag(m), 0);
  EXPECT_TRUE(m.decide(0.0).proceed());
  EXPECT_EQ(m.nan_iterations(), 1);
}

TEST(Rerun, DeferredAndEagerFormsReachTheSameDecision) {
  // Iteration 2, three microbatch losses, the second NaN; then two grad buckets, clean.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<at::Tensor> losses = {at::full({}, 2.0f), at::full({}, nan), at::full({}, 3.0f)};
  const std::vector<at::Tensor> buckets = {at::ones({8}), at::zeros({8})};  // the loop checks each one's norm

  RerunStateMachine eager(RerunConfig{}), deferred(RerunConfig{});
  for (auto* m : {&eager, &deferred}) {
    m->begin_iteration(1);
    m->end_iteration();
    m->begin_iteration(2);
  }
  int eager_checks = 0;
  for (const auto& x : losses) {
    if (!eager.should_validate()) continue;  // Megatron's short-circuit after a rejection
    ++eager_checks;
    const at::Tensor bad = RerunStateMachine::nonfinite(x);
    eager.bank_host(bad.data_ptr<bool>()[0], "loss");  // the loop reads it through the ledger
  }
  for (const auto& g : buckets)
    if (eager.should_validate()) {
      ++eager_checks;
      eager.bank_host(RerunStateMachine::nonfinite(g).data_ptr<bool>()[0], "grad");
    }
  for (const auto& x : losses) deferred.bank_value(x);
  for (const auto& g : buckets) deferred.bank_value(g.norm());

  EXPECT_EQ(eager_checks, 2 + wrong());  // stopped after the NaN
  EXPECT_EQ(eager.validated_count(), 2);
  EXPECT_EQ(deferred.validated_count(), 5);  // no host verdict: every check banked
  EXPECT_EQ(flag(eager), 1);
  EXPECT_EQ(flag(deferred), 1);
  EXPECT_TRUE(eager.host_flag());
  EXPECT_FALSE(deferred.host_flag());
  EXPECT_EQ(eager.decide(flag(eager)).action, deferred.decide(flag(deferred)).action);
}

TEST(Rerun, DecisionTensorIsANewFloat32AnyNonFiniteOfTheBank) {
  RerunStateMachine m(RerunConfig{});
  m.begin_iteration(1);
  m.end_iteration();
  m.begin_iteration(2);
  m.bank_value(at::full({}, 7.0));  // finite: clean
  EXPECT_EQ(flag(m), 0 + wrong());
  m.bank_value(at::full({1}, -std::numeric_limits<double>::infinity()));  // -inf: bad
  at::Tensor t = m.decision_tensor();
  EXPECT_EQ(t.scalar_type(), at::kFloat);
  EXPECT_EQ(t.sizes().vec(), std::vector<int64_t>{1});
  t += 5;  // the loop's all-reduce in place must not change the banked verdict
  EXPECT_EQ(flag(m), 1);
  m.bank_value(at::zeros({}));  // a later clean check does not clear it
  EXPECT_EQ(flag(m), 1);
  for (int i = 0; i < 40; ++i) m.bank_value(at::ones({}));  // past the first capacity: the bank grows, keeps all
  EXPECT_EQ(flag(m), 1);
  EXPECT_THROW(m.bank_value(at::ones({2})), Error);  // one value per check
  m.end_iteration();
  m.begin_iteration(3);  // a new step starts with an empty bank
  EXPECT_EQ(flag(m), 0);
}

TEST(Rerun, DisabledModeChecksEveryStepLocallyAndTakesNoVote) {
  RerunConfig cfg;
  cfg.mode = RerunMode::kDisabled;
  RerunStateMachine m(cfg);
  m.begin_iteration(1);
  EXPECT_TRUE(m.should_validate());  // even the first step
  EXPECT_FALSE(m.needs_vote());
  m.bank_host(true);
  const Decision d = m.decide(flag(m));  // this rank's own flag
  EXPECT_EQ(d.action, Decision::Action::kAbort);
  EXPECT_EQ(d.exit_code, kExitCodeUncaughtError + wrong());  // Megatron raises RuntimeError
  EXPECT_EQ(m.votes(), 0);
}

TEST(Rerun, ReportStatsAndChecksOffValidateNothing) {
  RerunConfig report;
  report.mode = RerunMode::kReportStats;
  RerunConfig off;
  off.check_for_nan_in_loss_and_grad = false;
  for (const auto& cfg : {report, off}) {
    RerunStateMachine m(cfg);
    m.begin_iteration(1);
    m.end_iteration();
    m.begin_iteration(2);
    EXPECT_EQ(m.should_validate(), static_cast<bool>(wrong()));
    m.bank_host(true);
    m.bank_value(at::full({1}, std::numeric_limits<float>::quiet_NaN()));
    EXPECT_EQ(flag(m), 0);
    EXPECT_EQ(m.validated_count(), 0);
  }
}

}  // namespace
}  // namespace loopgate
