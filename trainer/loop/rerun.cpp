// The rerun state machine: modes, banking (eager and deferred), the vote tensor and the decision.
#include "trainer/loop/rerun.h"

#include "trainer/common/device.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>  // at::NoGradGuard (not via ATen.h in LibTorch 2.x)

#include "trainer/common/error.h"

namespace loopgate {

// ---- names ----

RerunMode parse_rerun_mode(const std::string& name) {
  if (name == "disabled") return RerunMode::kDisabled;
  if (name == "validate_results") return RerunMode::kValidateResults;
  if (name == "report_stats" || name == "report_determinism_stats") return RerunMode::kReportStats;
  LG_INPUT_CHECK(false, "unknown rerun mode '{}' (known: disabled, validate_results, report_stats)", name);
  return RerunMode::kDisabled;
}

const char* rerun_mode_name(RerunMode mode) {
  switch (mode) {
    case RerunMode::kDisabled: return "disabled";
    case RerunMode::kValidateResults: return "validate_results";
    case RerunMode::kReportStats: return "report_stats";
  }
  return "unknown";
}

FaultOutcome parse_fault_outcome(const std::string& name) {
  if (name == "abort") return FaultOutcome::kAbort;
  if (name == "skip") return FaultOutcome::kSkipStep;
  LG_INPUT_CHECK(false, "unknown fault outcome '{}' (known: abort, skip)", name);
  return FaultOutcome::kAbort;
}

const char* fault_outcome_name(FaultOutcome outcome) { return outcome == FaultOutcome::kAbort ? "abort" : "skip"; }

const char* action_name(Decision::Action action) {
  switch (action) {
    case Decision::Action::kProceed: return "proceed";
    case Decision::Action::kSkipStep: return "skip_step";
    case Decision::Action::kAbort: return "abort";
  }
  return "unknown";
}

// ---- the machine ----

RerunStateMachine::RerunStateMachine(RerunConfig config, const at::TensorOptions& flag_options)
    : config_(config),
      flag_options_(flag_options.dtype(at::kInt).device(flag_options.has_device() ? flag_options.device() : run_device())) {
  flag_ = at::zeros({1}, flag_options_);
}

void RerunStateMachine::begin_iteration(int64_t iteration) {
  std::lock_guard<std::mutex> lock(mu_);
  iteration_ = iteration;
  if (flag_set_ || !flag_.defined()) flag_ = at::zeros({1}, flag_options_);  // zeros: no copy (seed commit 3)
  flag_set_ = false;
  host_flag_ = false;
  first_rejection_.clear();
  banked_ = 0;
}

bool RerunStateMachine::should_validate() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!config_.check_for_nan_in_loss_and_grad) return false;
  switch (config_.mode) {
    case RerunMode::kDisabled: return true;  // backward-compatible check: every call evaluates
    case RerunMode::kReportStats: return false;
    case RerunMode::kValidateResults: return first_iteration_complete_ && !host_flag_;
  }
  return false;
}

void RerunStateMachine::bank_host(bool bad, const std::string& what) {
  const bool validate = should_validate();
  std::lock_guard<std::mutex> lock(mu_);
  if (!validate) {
    ++unvalidated_count_;
    return;
  }
  ++validated_count_;
  if (!bad) return;
  if (!host_flag_) first_rejection_ = what;
  host_flag_ = true;
  flag_set_ = true;
  flag_.fill_(1);  // fill_: the value rides in the kernel arguments, no copy
}

// The deferred forms have no host verdict, so they never short-circuit on a banked rejection.
bool RerunStateMachine::validates_deferred() const {
  return config_.check_for_nan_in_loss_and_grad &&
         (config_.mode == RerunMode::kDisabled ||
          (config_.mode == RerunMode::kValidateResults && first_iteration_complete_));
}

void RerunStateMachine::bank_value(const at::Tensor& value) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!validates_deferred()) {
    ++unvalidated_count_;
    return;
  }
  ++validated_count_;
  LG_CHECK(value.numel() == 1, "rerun: a deferred check banks one value, got {} elements", value.numel());
  at::NoGradGuard no_grad;
  if (!bank_.defined() || banked_ == bank_.numel()) {  // grows rarely: the checks per step are fixed
    at::Tensor bigger = at::empty({std::max<int64_t>(16, 2 * banked_)}, flag_options_.dtype(at::kFloat));
    if (banked_ > 0) bigger.narrow(0, 0, banked_).copy_(bank_.narrow(0, 0, banked_));
    bank_ = bigger;
  }
  bank_.narrow(0, banked_++, 1).copy_(value.detach().reshape({1}));  // one copy, no read
}
at::Tensor RerunStateMachine::nonfinite(const at::Tensor& x) {
  at::NoGradGuard no_grad;
  return at::logical_not(at::isfinite(x.detach())).any();
}

at::Tensor RerunStateMachine::decision_tensor() const {
  std::lock_guard<std::mutex> lock(mu_);
  at::NoGradGuard no_grad;
  // A new tensor: the caller all-reduces it in place, and the banked flag stays this rank's own.
  if (banked_ == 0) return flag_.to(at::kFloat);
  // Any banked value non-finite, in four kernels: their sum in double (no finite values overflow it) is finite
  // exactly when they all are, and s * 0 is 0 exactly when s is finite.
  at::Tensor any_bad = bank_.narrow(0, 0, banked_).sum(at::kDouble).mul(0).ne(0).reshape({1}).to(at::kFloat);
  if (flag_set_) at::maximum_out(any_bad, any_bad, flag_);
  return any_bad;
}

at::Tensor RerunStateMachine::poisoned_vote() const {
  std::lock_guard<std::mutex> lock(mu_);
  at::NoGradGuard no_grad;
  if (banked_ == 0) return at::zeros({1}, flag_options_.dtype(at::kDouble));
  return bank_.narrow(0, 0, banked_).sum(at::kDouble).mul(0).reshape({1});  // finite sum * 0 = 0; otherwise NaN
}

Decision RerunStateMachine::decide(double reduced_value) {
  std::lock_guard<std::mutex> lock(mu_);
  Decision d;
  d.iteration = iteration_;
  d.ranks_reporting = static_cast<int64_t>(reduced_value);
  if (needs_vote()) ++votes_;
  const bool bad = reduced_value > 0;  // Megatron _reduce_any: the reduced flag read > 0
  if (!bad || config_.mode == RerunMode::kReportStats) return d;
  ++nan_iterations_;
  if (config_.mode == RerunMode::kDisabled) {
    d.action = Decision::Action::kAbort;  // Megatron raises RuntimeError on the rank that saw it
    d.exit_code = kExitCodeUncaughtError;
    return d;
  }
  if (config_.on_fault == FaultOutcome::kSkipStep) {
    d.action = Decision::Action::kSkipStep;
    ++skipped_steps_;
  } else {
    d.action = Decision::Action::kAbort;
    d.exit_code = config_.abort_exit_code;
  }
  return d;
}

void RerunStateMachine::end_iteration() {
  std::lock_guard<std::mutex> lock(mu_);
  first_iteration_complete_ = true;
}

}  // namespace loopgate
