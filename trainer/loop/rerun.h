// The rerun state machine's NaN/Inf detection (Megatron: megatron/core/rerun_state_machine.py;
// docs/design.md), reduced to what a step needs: per-rank verdicts on each microbatch loss and each
// grad bucket, a world-wide "any" vote (_reduce_any: SUM all-reduce of per-rank int32 flags), and a decision
// taken before optimizer.step: proceed, skip the step, or abort with Megatron's exit code.
// Two forms, one machine (docs/design.md "The seed change", commit 1):
//   eager    — the loop reads each predicate through the ledger now and calls bank_host(bool);
//   deferred — the loop calls bank_value(scalar): one device copy of the checked value into this step's bank, no
//              read; at loop exit one "any banked value non-finite" verdict rides the decision all-reduce, still
//              before optimizer.step. One copy per check rather than a predicate's handful of kernels: a
//              candidate arm must not launch more than the baseline.
// This file does no host reads and no collectives: the loop all-reduces decision_tensor(), reads the result
// through the ledger (Site::kRerunDecision) and passes the value to decide().
// Not modelled: the in-place rerun and checkpoint-rerun (RERUNNING_* states), spiky-loss / large-grad checks,
// error injection by rate, report_determinism_stats' statistics (that mode validates nothing here).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "trainer/capture/capture.h"

namespace loopgate {

enum class RerunMode { kDisabled, kValidateResults, kReportStats };
RerunMode parse_rerun_mode(const std::string& name);  // disabled | validate_results | report_stats
                                                      // (report_determinism_stats accepted); else InputError
const char* rerun_mode_name(RerunMode mode);

// Megatron rerun_state_machine.py L36-L40.
inline constexpr int kExitCodeResumeToDisambiguate = 16;
inline constexpr int kExitCodeFailedOnResultValidation = 17;
// Megatron in disabled mode raises RuntimeError on a rejected result: an uncaught Python exception exits 1.
inline constexpr int kExitCodeUncaughtError = 1;

// What a confirmed fault does. kAbort is Megatron's behaviour (a fatal validation that reruns to the same result
// ends the job with exit 17); kSkipStep keeps training without the step (the skipped-iteration path).
enum class FaultOutcome { kAbort, kSkipStep };
FaultOutcome parse_fault_outcome(const std::string& name);  // abort | skip
const char* fault_outcome_name(FaultOutcome outcome);

struct RerunConfig {
  RerunMode mode = RerunMode::kValidateResults;  // Megatron's default since core_v0.14.0
  FaultOutcome on_fault = FaultOutcome::kAbort;
  int abort_exit_code = kExitCodeFailedOnResultValidation;
  bool check_for_nan_in_loss_and_grad = true;  // gates both the loss and the grad-bucket checks
};

struct Decision {
  enum class Action { kProceed, kSkipStep, kAbort };
  Action action = Action::kProceed;
  int exit_code = 0;  // kAbort only
  int64_t iteration = -1;
  int64_t ranks_reporting = 0;  // the reduced vote: how many ranks saw a bad result
  bool proceed() const { return action == Action::kProceed; }
};
const char* action_name(Decision::Action action);

class RerunStateMachine {
 public:
  // flag_options: where the per-rank flag lives (the device of the vote's all-reduce); dtype forced to int32.
  explicit RerunStateMachine(RerunConfig config, const at::TensorOptions& flag_options = {});

  // ---- per step ----
  void begin_iteration(int64_t iteration);  // clears the step's flags; the flag tensor is rebuilt with zeros
  // Should this check be evaluated at all? false: the job's first step in validate_results mode (Megatron never
  // validates it), checks off, report_stats mode, or (eager) a rejection already banked on this rank this step
  // (Megatron short-circuits later validate_result calls once rerun_requested is set).
  bool should_validate() const;

  // Eager: the loop read the predicate (through the ledger) and passes it. `what` names the check for logs.
  void bank_host(bool bad, const std::string& what = "");
  // Deferred: `value` is the checked device scalar (one element, any floating dtype; NaN/Inf = bad). Copied into
  // the step's bank (float32: a float64 beyond float range would read as Inf), no read.
  void bank_value(const at::Tensor& value);
  // The device predicate "any element is NaN or Inf" of x (0-dim bool).
  static at::Tensor nonfinite(const at::Tensor& x);

  // The value to SUM all-reduce over the world: float32 [1], this rank's flag (0/1), a new tensor. No sync to build
  // it: the eager flag, or (deferred) whether any banked value is non-finite.
  at::Tensor decision_tensor() const;
  // zerosync's vote: float64 [1], 0 when every banked value is finite, NaN when one is not — SUM-reduced over the
  // world it stays NaN (and 0 otherwise) on every backend. Two kernels; a new tensor.
  at::Tensor poisoned_vote() const;
  // The eager form's host flag, for a loop that builds the vote tensor the baseline way (Megatron's
  // torch.tensor([rerun_requested], device=...) through Ledger::device_scalar at Site::kRerunDecision).
  bool host_flag() const { return host_flag_; }
  // Whether the world vote is taken at all (Megatron: no _reduce_any in disabled mode).
  bool needs_vote() const { return config_.mode != RerunMode::kDisabled; }

  // reduced_value: the all-reduced decision_tensor() read on the host (in disabled mode: this rank's own flag).
  Decision decide(double reduced_value);
  // After the step (Megatron sets first_iteration_complete in should_checkpoint_and_exit).
  void end_iteration();

  // ---- counters ----
  int64_t validated_count() const { return validated_count_; }  // checks evaluated (banked) this job
  int64_t unvalidated_count() const { return unvalidated_count_; }  // banked while should_validate() was false
  int64_t nan_iterations() const { return nan_iterations_; }    // iterations whose vote found a bad result
  int64_t skipped_steps() const { return skipped_steps_; }
  int64_t votes() const { return votes_; }
  bool first_iteration_complete() const { return first_iteration_complete_; }
  const std::string& first_rejection() const { return first_rejection_; }  // this step, eager form
  const RerunConfig& config() const { return config_; }
  int64_t iteration() const { return iteration_; }
  // The flag and the bank: device tensors a replayed iteration writes (--cuda-graph iteration; capture.h).
  GraphState device_state() const { return {{"rerun.flag", flag_}, {"rerun.bank", bank_}}; }

 private:
  RerunConfig config_;
  at::TensorOptions flag_options_;
  mutable std::mutex mu_;  // grad-ready hooks may bank from the autograd thread
  int64_t iteration_ = -1;
  bool first_iteration_complete_ = false;
  bool host_flag_ = false;
  at::Tensor flag_;  // int32 [1] on the flag device
  at::Tensor bank_;  // float32 [capacity]: the deferred checks' values, bank_[0..banked_) this step
  int64_t banked_ = 0;
  bool flag_set_ = false;  // flag_ was written this step (eager or predicate form)
  bool validates_deferred() const;
  std::string first_rejection_;
  int64_t validated_count_ = 0, unvalidated_count_ = 0, nan_iterations_ = 0, skipped_steps_ = 0, votes_ = 0;
};

}  // namespace loopgate
