// Gate: collectives. What each rank asks of its groups, from the sequences every gate scenario records
// (RunConfig::record_collectives; fixtures/collective_checks.h):
//   - within every arm, baseline included, every rank of a group issues the same collectives on it and every
//     send meets its receive, in every iteration: on the clean run and on each NaN/Inf fault run of the
//     nan_detection gate (a rank-local fault is where ranks part ways);
//   - each candidate issues the baseline's sequence on those runs, apart from the scopes its modes declare
//     (changed_collectives: a deferred site's collectives may move into the batched read; a step masked on the
//     device issues the step's collectives on an iteration the baseline skipped).
//   - on the rank-local fault run under the per-call exchange (--check-collectives), every rank issues each call
//     as its peers do, checked before the call reaches the transport.
// Power: defect-collective-bucket-order keeps the baseline's numerics bits and is rejected here;
// defect-nan-vote-local (each rank its own rerun verdict) hangs without --check-collectives and is named with it
// within 10 s.
// Not proven here: a collective a CUDA graph replays (the host does not issue it, so it is not recorded).
#include <gtest/gtest.h>
#include <mpi.h>

#include "fixtures/collective_checks.h"
#include "fixtures/compare.h"
#include "fixtures/faults/fault.h"
#include "fixtures/harness/arm_test.h"
#include "fixtures/scenarios.h"
#include "suites/nan_cases.h"

namespace loopgate {
namespace {

// The runs each arm is judged on: the clean run and the fixture's fault cases.
std::vector<const ScenarioResult*> judged_runs(const std::string& arm) {
  std::vector<const ScenarioResult*> runs = {&clean_run(arm)};
  for (const FaultCase& fc : fault_cases()) runs.push_back(&run_case(fc, arm));
  return runs;
}

std::vector<std::string> within_arm_problems(const std::string& arm) {
  std::vector<std::string> p;
  for (const ScenarioResult* r : judged_runs(arm))
    for (const std::string& line : group_sequence_problems(r->trace)) p.push_back(line);
  return p;
}

std::vector<std::string> across_arm_problems(const std::string& arm) {
  std::vector<std::string> p;
  const std::vector<const ScenarioResult*> base = judged_runs("baseline"), cand = judged_runs(arm);
  for (size_t i = 0; i < base.size(); ++i)
    for (const std::string& line : sequence_differences(base[i]->trace, cand[i]->trace,
                                                        changed_collectives(find_arm(arm))))
      p.push_back(line);
  return p;
}

TEST(CollectivesBaseline, EveryRankOfAGroupIssuesTheSameSequence) {
  const auto p = within_arm_problems("baseline");
  EXPECT_TRUE(p.empty()) << first_lines(p);
}

class Collectives : public ArmTest {};

TEST_P(Collectives, EveryRankOfAGroupIssuesTheSameSequence) {
  const auto p = within_arm_problems(GetParam());
  EXPECT_TRUE(p.empty()) << first_lines(p);
}

TEST_P(Collectives, TheBaselinesSequenceOutsideTheDeclaredScopes) {
  const auto p = across_arm_problems(GetParam());
  EXPECT_TRUE(p.empty()) << first_lines(p);
}

// The rank-local fault (the last rank's loss Inf, skipped: where ranks part ways) once more, under the per-call
// exchange (--check-collectives): a call that one rank skips, adds or resizes there is named before it reaches the
// transport. With the records alone Open MPI refuses a resized call first, and a skipped one waits for the stall
// verdict (checks.md).
TEST_P(Collectives, ARankLocalFaultMatchesCallForCallBeforeTheTransport) {
  if (world_size() == 1) GTEST_SKIP() << "one rank: no peer to part from";
  if (heavy_fixture()) GTEST_SKIP() << "dp64: shown on the smaller fixtures";
  RunConfig c = case_config(fault_cases().at(2));
  c.check_collectives = true;
  std::string what;
  try {
    run_arm_on(pooled_run_groups(on_gate_device(c)), GetParam());
  } catch (const std::exception& e) {
    what = e.what();
  }
  EXPECT_TRUE(what.empty()) << GetParam() << " under --check-collectives, " << fault_cases().at(2).name << ": " << what;
}

INSTANTIATE_TEST_SUITE_P(Arms, Collectives, ::testing::ValuesIn(gate_arms()),
                         [](const auto& info) { return param_name(info.param); });

// ---- power ----

// Same numerics, another order: equivalence's bits hold and the sequence check rejects it.
TEST(GatePower, CollectivesRejectABucketOrderThatKeepsTheBits) {
  if (gate_fixture() != "pp2tp2dp2") GTEST_SKIP() << "needs data parallelism and a small world: pp2tp2dp2";
  const std::string arm = "defect-collective-bucket-order";
  const auto bits = compare_fields(clean_run("baseline").trace, clean_run(arm).trace,
                                   {"lm_loss", "grad_norm", "params_norm", "param_checksum_after"});
  EXPECT_TRUE(bits.empty()) << arm << " should keep the baseline's bits:\n" << describe(bits, "baseline", arm);
  const auto p = across_arm_problems(arm);
  EXPECT_FALSE(p.empty()) << "the collectives check accepted " << arm;
  if (!p.empty() && world_rank() == 0) std::printf("%s rejected:\n%s\n", arm.c_str(), first_lines(p, 2).c_str());
}

// A rank whose local fault flag decides alone skips the optimizer's collectives its peers issue: with
// --check-collectives the mismatch is named at the next collective, on every rank, long before the watchdog.
TEST(GatePower, CollectivesNameALocalVoteWithinTenSeconds) {
  if (gate_fixture() != "tp2sp") GTEST_SKIP() << "shown on tp2sp";
  RunConfig c = case_config(fault_cases().at(2));  // the last rank's loss, skip: rank-local
  c.check_collectives = true;
  c.param_checksums = true;
  const double start = MPI_Wtime();
  std::string what;
  try {
    run_arm_on(pooled_run_groups(on_gate_device(c)), "defect-nan-vote-local");
  } catch (const std::exception& e) {
    what = e.what();
  }
  const double seconds = MPI_Wtime() - start;
  EXPECT_NE(what.find("collective mismatch on group"), std::string::npos)
      << "defect-nan-vote-local was not named (" << (what.empty() ? "it ran to the end" : what) << ")";
  EXPECT_LT(seconds, 10.0) << "named after " << seconds << " s";
  if (world_rank() == 0) std::printf("named in %.1f s: %s\n", seconds, what.c_str());
}

// A rank whose collective has another size (defect-vote-size-on-fault: the rerun vote's all-reduce carries two
// elements on the last rank when it saw the fault): with --check-collectives the ranks compare each call's
// fingerprint before it reaches the transport, so the mismatch is named with each rank's count, and no transport
// error comes first. (Without it, the gate's records name the same call after Open MPI refuses it: checks.md.)
TEST(GatePower, CollectivesNameASizeMismatchBeforeTheTransport) {
  if (gate_fixture() != "tp2sp") GTEST_SKIP() << "shown on tp2sp";
  RunConfig c = case_config(fault_cases().at(2));  // the last rank's loss, skip: the fault that resizes the vote
  c.check_collectives = true;
  std::string what;
  try {
    run_arm_on(pooled_run_groups(on_gate_device(c)), "defect-vote-size-on-fault");
  } catch (const std::exception& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("collective mismatch on group world"), std::string::npos)
      << "defect-vote-size-on-fault was not named before the transport (" << (what.empty() ? "it ran to the end" : what)
      << ")";
  EXPECT_NE(what.find("1 x Float"), std::string::npos) << what;
  EXPECT_NE(what.find("2 x Float"), std::string::npos) << what;
  if (world_rank() == 0) std::printf("named before the transport: %s\n", what.c_str());
}

}  // namespace
}  // namespace loopgate
