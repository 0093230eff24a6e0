// Gate: NaN detection. A NaN/Inf injected into a microbatch loss or a grad bucket — on rank 0, on the last rank
// (the last pipeline stage; for tp2sp also TP rank 1) — is detected by baseline and by every candidate arm at the
// SAME iteration, BEFORE optimizer.step (on every rank the parameter checksum after the step equals the one
// before it), with Megatron's outcome: abort -> exit code 17 on every rank and no further iteration; skip -> the
// iteration is marked skipped on every rank, the LR does not advance (closed form from the scheduler), the log
// line counts it ("number of skipped iterations", "number of nan iterations" for a bad loss), the next iteration
// proceeds. As in Megatron, the job's first iteration is not validated: a fault there goes undetected.
// On dp64 (costly) one scenario: first iteration + grad bucket on rank 0, skip, two iterations (no "next iteration").
// Not proven here: detection of faults that are not NaN/Inf (spiky loss, large grads), the in-place rerun.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <cmath>
#include <regex>
#include <set>

#include "fixtures/compare.h"
#include "fixtures/faults/fault.h"
#include "fixtures/harness/arm_test.h"
#include "fixtures/scenarios.h"
#include "suites/nan_cases.h"

namespace loopgate {
namespace {

// ---- the checks: every problem, one line each, naming arm, iteration, rank ----

std::vector<std::string> detection_problems(const FaultCase& fc, const std::string& arm) {
  std::vector<std::string> p;
  const ScenarioResult& r = run_case(fc, arm);
  const RunConfig c = case_config(fc);
  const bool abort = fc.on_fault == FaultOutcome::kAbort;
  const std::string action = abort ? "abort" : "skip_step";
  auto bad = [&](int64_t it, int rank, const std::string& what) {
    p.push_back(fmt::format("{} [{}]: iteration {} rank {}: {}", arm, fc.name, it, rank, what));
  };
  for (int rank = 0; rank < world_size(); ++rank) {
    for (const IterationRecord& rec : r.trace.records) {
      if (rec.rank != rank) continue;
      for (const FaultVerdict& v : rec.fault_verdicts) {
        if (v.iteration != fc.detect || rec.iteration != fc.detect)
          bad(rec.iteration, rank, fmt::format("verdict for iteration {} (expected only at {})", v.iteration, fc.detect));
        if (v.phase != VerdictPhase::kBeforeStep) bad(rec.iteration, rank, "verdict phase " + std::string(verdict_phase_name(v.phase)));
        if (v.action != action) bad(rec.iteration, rank, "verdict action " + v.action + ", expected " + action);
      }
      if (abort && rec.iteration > fc.detect) bad(rec.iteration, rank, "ran after the abort");
    }
    const IterationRecord* d = r.trace.find(fc.detect, rank);
    if (!d) { bad(fc.detect, rank, "no record at the detection iteration"); continue; }
    if (d->fault_verdicts.empty()) bad(fc.detect, rank, "fault not detected");
    if (d->param_checksum_after != d->param_checksum_before)
      bad(fc.detect, rank, fmt::format("params moved: checksum before {:#x}, after {:#x}", d->param_checksum_before,
                                       d->param_checksum_after));
    if (!d->skipped) bad(fc.detect, rank, "iteration not marked skipped");
    if (abort) continue;
    // skip: LR held (closed form), the counters, the next iteration proceeds and advances.
    const double want = expected_lr(c, fc.detect - 1);
    if (!same_bits(d->learning_rate, want))
      bad(fc.detect, rank, fmt::format("learning_rate {} expected {} (no advance)", hex(d->learning_rate), hex(want)));
    // The nan-iteration counter is the last rank's (print_rank_last); ranks without a loss need not count it.
    if (rank == world_size() - 1 && d->nan != fc.bad_loss)
      bad(fc.detect, rank, fmt::format("nan flag {} expected {}", d->nan, fc.bad_loss));
    if (const IterationRecord* n = r.trace.find(fc.detect + 1, rank)) {
      const double next = expected_lr(c, fc.detect);
      if (n->skipped || !n->fault_verdicts.empty()) bad(fc.detect + 1, rank, "next iteration did not proceed");
      if (n->param_checksum_after == n->param_checksum_before) bad(fc.detect + 1, rank, "next iteration did not step");
      if (!same_bits(n->learning_rate, next))
        bad(fc.detect + 1, rank, fmt::format("learning_rate {} expected {}", hex(n->learning_rate), hex(next)));
    }
  }
  const int want_exit = abort ? kExitCodeFailedOnResultValidation : 0;
  if (r.local.exit_code != want_exit)
    bad(fc.detect, world_rank(), fmt::format("exit code {} expected {}", r.local.exit_code, want_exit));
  if (!abort && world_rank() == world_size() - 1) {
    const std::string counters = fmt::format("number of skipped iterations: {:3d} | number of nan iterations: {:3d} |",
                                             1, fc.bad_loss ? 1 : 0);
    const auto& lines = r.local.log_lines;
    if (lines.size() < static_cast<size_t>(fc.detect) || lines[fc.detect - 1].find(counters) == std::string::npos)
      bad(fc.detect, world_rank(), "log line lacks '" + counters + "'");
  }
  return p;
}

// ---- tests ----

TEST(NanDetection, BaselineDetectsEveryFaultBeforeTheStepWithMegatronsOutcome) {
  for (const FaultCase& fc : fault_cases()) {
    auto p = detection_problems(fc, "baseline");
    EXPECT_TRUE(p.empty()) << problem_list(p);
  }
}

class NanDetection : public ArmTest {};

TEST_P(NanDetection, SameIterationBeforeStepSameOutcomeAsBaseline) {
  const std::vector<std::string> fields = {"skipped", "learning_rate", "loss_scale", "param_checksum_after"};
  for (const FaultCase& fc : fault_cases()) {
    auto p = detection_problems(fc, GetParam());
    EXPECT_TRUE(p.empty()) << problem_list(p);
    // Verdicts (iteration, phase, action) and the outcome fields equal the baseline's on every rank.
    const Trace& base = run_case(fc, "baseline").trace;
    const Trace& cand = run_case(fc, GetParam()).trace;
    for (const IterationRecord& b : base.records) {
      const IterationRecord* c = cand.find(b.iteration, b.rank);
      EXPECT_TRUE(c && c->fault_verdicts == b.fault_verdicts)
          << fc.name << ": iteration " << b.iteration << " rank " << b.rank << ": verdicts differ from baseline";
    }
    EXPECT_EQ(cand.records.size(), base.records.size()) << fc.name << ": records (iterations x ranks) differ";
    auto m = compare_fields(base, cand, fields);
    EXPECT_TRUE(m.empty()) << fc.name << ": " << describe(m, "baseline", GetParam());
  }
}

INSTANTIATE_TEST_SUITE_P(Arms, NanDetection, ::testing::ValuesIn(gate_arms()),
                         [](const auto& info) { return param_name(info.param); });

// Megatron never validates the job's first iteration (rerun_state_machine.py: first_iteration_complete), so a
// fault there goes undetected by every arm; the loss it poisoned is NaN in the first log point, the step counts
// as successful (the LR advances).
TEST(NanDetection, FirstIterationIsNotValidated) {
  const FaultCase fc = fault_cases()[0];
  std::vector<std::string> arms = {"baseline"};
  for (const std::string& a : gate_arms()) arms.push_back(a);
  for (const std::string& arm : arms) {
    const Trace& t = run_case(fc, arm).trace;
    for (int rank = 0; rank < world_size(); ++rank) {
      const IterationRecord* r1 = t.find(1, rank);
      ASSERT_NE(r1, nullptr) << arm << ": no record at iteration 1 rank " << rank;
      EXPECT_TRUE(r1->fault_verdicts.empty()) << arm << ": iteration 1 rank " << rank << " was validated";
      EXPECT_FALSE(r1->skipped) << arm << ": iteration 1 rank " << rank << " skipped";
      // The step itself runs at LR 0 (warmup from 0, as Megatron), so params cannot show it; the schedule does.
      const double lr1 = expected_lr(case_config(fc), 1);
      EXPECT_TRUE(same_bits(r1->learning_rate, lr1)) << arm << ": iteration 1 rank " << rank << " learning_rate "
                                                     << hex(r1->learning_rate) << " expected " << hex(lr1);
    }
    const IterationRecord* last = t.find(1, world_size() - 1);
    EXPECT_TRUE(last && std::isnan(last->lm_loss))
        << arm << ": the iteration-1 fault did not reach the logged loss (lm_loss " << (last ? hex(last->lm_loss) : "-") << ")";
  }
  if (world_rank() == 0)
    std::printf("as in Megatron, the first iteration is not validated: a NaN injected into every rank's loss at "
                "iteration 1 went undetected by %zu arm(s); the fault at iteration %lld was detected\n",
                arms.size(), static_cast<long long>(fc.detect));
}

// ---- zerosync: the verdict reaches the host at the next log point ----

// A fault at iteration 4 with --log-interval 3: the baseline stops (abort) or skips (skip) at 4; zerosync masks
// the step at 4 on the device at once and — abort — keeps masking until its log point 6, where every rank exits
// 17 naming iteration 4, parameters as before iteration 4's step; or — skip — logs at 6 exactly what the baseline
// logs (the window's skip flags and verdict read back then). The iterations it ran past the fault are its one
// behavioural difference, and are checked exactly.
RunConfig zerosync_case_config(FaultOutcome outcome) {
  RunConfig c = gate_config();
  c.train_iters = 8;
  c.log_interval = 3;
  c.faults = inject(parse_fault_specs(fmt::format("iter=3,site=grad,bucket=0,rank={}", world_size() - 1)));
  c.rerun.on_fault = outcome;
  return c;
}

TEST(NanDetection, ZerosyncAbortsAtTheNextLogPointWithEveryStepSinceTheFaultMasked) {
  const RunConfig c = zerosync_case_config(FaultOutcome::kAbort);
  const ScenarioResult& z = run_scenario("nan:zerosync-abort-log3", c, "zerosync");
  const ScenarioResult& b = run_scenario("nan:zerosync-abort-log3", c, "baseline");
  const int64_t fault = 4, log_point = 6;
  EXPECT_EQ(b.local.exit_code, kExitCodeFailedOnResultValidation);
  EXPECT_EQ(z.local.exit_code, kExitCodeFailedOnResultValidation) << "rank " << world_rank();
  EXPECT_EQ(z.local.iterations_past_fault, log_point - fault) << "rank " << world_rank();
  EXPECT_EQ(z.trace.iterations_past_fault, log_point - fault) << "the gathered Trace";
  EXPECT_EQ(b.trace.iterations_past_fault, 0) << "the baseline aborts at the fault";
  EXPECT_EQ(z.local.iterations_done, fault - 1) << "rank " << world_rank() << ": the steps that took effect";
  for (int rank = 0; rank < world_size(); ++rank) {
    const IterationRecord* before = z.trace.find(fault, rank);
    const IterationRecord* base = b.trace.find(fault, rank);
    ASSERT_TRUE(before && base) << "rank " << rank << ": no record at the fault's iteration";
    EXPECT_EQ(before->fault_verdicts, base->fault_verdicts) << "rank " << rank << ": the verdict must name iteration 4";
    for (int64_t it = fault; it <= log_point; ++it) {
      const IterationRecord* r = z.trace.find(it, rank);
      ASSERT_NE(r, nullptr) << "rank " << rank << " iteration " << it;
      EXPECT_TRUE(r->skipped) << "rank " << rank << " iteration " << it << ": not masked";
      EXPECT_EQ(r->param_checksum_after, base->param_checksum_before)
          << "rank " << rank << " iteration " << it << ": parameters moved after the fault";
    }
    EXPECT_EQ(z.trace.find(log_point + 1, rank), nullptr) << "rank " << rank << ": ran past the abort's log point";
  }
  if (world_rank() == world_size() - 1)
    EXPECT_EQ(z.local.log_lines.size(), 2u) << "zerosync logged iteration 1 and 3 only (no line at the abort)";
}

TEST(NanDetection, ZerosyncSkipEqualsTheBaselineAtEveryIteration) {
  const RunConfig c = zerosync_case_config(FaultOutcome::kSkipStep);
  const ScenarioResult& z = run_scenario("nan:zerosync-skip-log3", c, "zerosync");
  const ScenarioResult& b = run_scenario("nan:zerosync-skip-log3", c, "baseline");
  auto m = compare_fields(b.trace, z.trace, {"skipped", "learning_rate", "loss_scale", "lm_loss", "grad_norm",
                                             "params_norm", "param_checksum_after"});
  EXPECT_TRUE(m.empty()) << describe(m, "baseline", "zerosync");
  for (const IterationRecord& r : b.trace.records) {
    const IterationRecord* x = z.trace.find(r.iteration, r.rank);
    EXPECT_TRUE(x && x->fault_verdicts == r.fault_verdicts)
        << "iteration " << r.iteration << " rank " << r.rank << ": verdicts differ";
  }
  EXPECT_EQ(z.local.exit_code, 0);
}

// Counters across log windows: two windows that each hold skipped steps (the second two of them, one a NaN loss),
// then windows with none. Every line an arm prints equals the baseline's whole, but for the elapsed time: a
// counter that is not reset after its read, or a count carried into the next window, shows in the line after.
// The baseline's own counters are pinned per window (1 skipped, 1 NaN; 2 skipped, 1 NaN; then 0 and 0).
RunConfig windows_case_config() {
  RunConfig c = gate_config();
  c.train_iters = 12;
  c.log_interval = 3;
  const int last = world_size() - 1;  // the loss lives on the last stage
  c.faults = inject(parse_fault_specs(fmt::format(
      "iter=1,site=loss,rank={0};iter=4,site=grad,bucket=0,rank=0;iter=5,site=loss,rank={0}", last)));
  c.rerun.on_fault = FaultOutcome::kSkipStep;
  return c;
}

// A log line without its elapsed time (the one field that differs between runs of one arm).
std::string without_elapsed(const std::string& line) {
  static const std::regex elapsed(R"(elapsed time per iteration \(ms\): [0-9.]+)");
  return std::regex_replace(line, elapsed, "elapsed time per iteration (ms): -");
}

TEST(NanDetection, EveryLineAfterSkipsInTwoWindowsEqualsTheBaselines) {
  if (heavy_fixture()) GTEST_SKIP() << "dp64 runs one NaN scenario (the first iteration's); its windows are here";
  const RunConfig c = windows_case_config();
  const ScenarioResult& b = run_scenario("nan:two-windows", c, "baseline");
  const std::vector<std::string> names = gate_arms();
  std::vector<const ScenarioResult*> arms;  // every rank runs every scenario (they are collective)
  for (const std::string& arm : names) arms.push_back(&run_scenario("nan:two-windows", c, arm));
  if (world_rank() != world_size() - 1) return;  // print_rank_last: the last rank holds the lines
  // Log points at iteration 1 (Megatron logs the first) and 3, 6, 9, 12.
  const std::vector<std::string> counters = {"skipped iterations:   0 | number of nan iterations:   0",
                                             "skipped iterations:   1 | number of nan iterations:   1",
                                             "skipped iterations:   2 | number of nan iterations:   1",
                                             "skipped iterations:   0 | number of nan iterations:   0",
                                             "skipped iterations:   0 | number of nan iterations:   0"};
  ASSERT_EQ(b.local.log_lines.size(), counters.size()) << "baseline: lines at iterations 1, 3, 6, 9, 12";
  for (size_t w = 0; w < counters.size(); ++w)
    EXPECT_NE(b.local.log_lines[w].find(counters[w]), std::string::npos)
        << "baseline line " << w + 1 << ": " << b.local.log_lines[w] << " lacks '" << counters[w] << "'";
  for (size_t a = 0; a < arms.size(); ++a) {
    const ScenarioResult& r = *arms[a];
    const std::string& arm = names[a];
    ASSERT_EQ(r.local.log_lines.size(), b.local.log_lines.size()) << arm << ": lines";
    for (size_t w = 0; w < b.local.log_lines.size(); ++w)
      EXPECT_EQ(without_elapsed(r.local.log_lines[w]), without_elapsed(b.local.log_lines[w]))
          << arm << ": line " << w + 1 << " of " << b.local.log_lines.size();
  }
}

// Gate power: zerosync masking the step one iteration late lets the fault's step through.
TEST(GatePower, NanDetectionRejectsAZerosyncMaskAppliedAfterTheStep) {
  const FaultCase fc = fault_cases()[heavy_fixture() ? 0 : 1];
  auto p = detection_problems(fc, "defect-zerosync-mask-after-step");
  size_t moved = 0;
  for (const std::string& x : p) moved += x.find("params moved") != std::string::npos;
  EXPECT_GT(moved, 0u) << "the nan_detection gate accepted a zerosync mask applied after the step: " << problem_list(p);
  if (moved > 0 && world_rank() == 0) std::printf("rejected as expected: %s\n", problem_list(p, 3).c_str());
}

// Gate power: an arm that acts on the verdict only after optimizer.step must be rejected, for the right reason:
// the parameters moved at the detected iteration (and the verdict's phase says after_step).
TEST(GatePower, NanDetectionRejectsVerdictAfterStep) {
  const FaultCase fc = fault_cases()[heavy_fixture() ? 0 : 1];
  auto p = detection_problems(fc, "defect-nan-after-step");
  size_t moved = 0;
  for (const std::string& s : p) moved += s.find("params moved") != std::string::npos;
  EXPECT_EQ(moved, static_cast<size_t>(world_size()))
      << "the nan_detection gate did not see the parameters move on every rank: " << problem_list(p);
  if (moved > 0 && world_rank() == 0) std::printf("rejected as expected: %s\n", problem_list(p, 3).c_str());
}

}  // namespace
}  // namespace loopgate
