// Arms: a loop variant is data — one SyncMode per host-sync site plus a few named policies — not a branch in the
// loop. `baseline` reads every site eagerly (Megatron HEAD); `syncfree-1` … `syncfree-5` apply the seed's five
// commits cumulatively (Megatron-LM PR #7076; `syncfree` = `syncfree-5`); `onesync` goes beyond the seed: the
// rerun verdict, update_successful and, at log points, the stat bundle and exit vote ride one collective and one
// read per iteration. Planted defects (`defect-*`) are arms that set one policy wrongly or carry one small
// injected function (ArmHooks): the loop calls policies and hooks, never asks whether an arm is a defect.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "trainer/instrument/timers.h"
#include "trainer/optim/adam.h"

namespace loopgate {

class Ledger;
struct LogInputs;

enum class SyncMode { kEager, kDeferred };

// How a deferred NaN check banks its verdict: one copy of the checked value (the default), or the seed's first
// form — a predicate OR-ed into a flag, several kernels per check.
enum class NanBank { kValue, kPredicate };

// Over which ranks a decision is agreed. Megatron: the whole world (every rank takes the same decision).
enum class VoteGroup { kWorld, kThisRankOnly };

// Over which ranks optimizer.step MAX-reduces found_inf (a grad overflow under a loss scaler). Megatron: the
// grad-stats group, TP x PP (DP replicas agree already: their grads were all-reduced). Narrower is a defect.
enum class FoundInfVote { kGradStatsGroup, kTensorParallelGroup, kThisRankOnly };

// Small injected functions at the points where a loop change could go wrong; empty = Megatron's behaviour.
struct ArmHooks {
  std::function<double(double lr)> step_lr;  // the learning rate optimizer.step uses (given the scheduler's)
  // The grad norm a log point reports, given this log point's and the previous log point's.
  std::function<double(double now, double previous)> logged_grad_norm;
  // Intervals a timer report is about to publish (this log point's, or the drain's), in order; may edit them.
  std::function<void(std::vector<TimerInterval>& reported)> timer_report;
  // Extra work after training_log each iteration (e.g. a read the arm's budget does not allow).
  std::function<void(Ledger& ledger, const LogInputs& in)> after_training_log;
};

struct Arm {
  std::string name;
  std::string description;
  SyncMode nan_check = SyncMode::kEager;       // commit 1: validate_result verdicts banked on device
  SyncMode stat_bundle = SyncMode::kEager;     // commit 2: grad norm, zeros, params norm, loss scale, losses
  SyncMode device_scalars = SyncMode::kEager;  // commit 3: loss-accumulator seed, LR into the batched read
  SyncMode timers = SyncMode::kEager;          // commit 4: device-event timers, no per-call barrier
  SyncMode exit_vote = SyncMode::kEager;       // commit 5: exit vote rides the batched read
  bool one_read = false;                       // onesync
  // zerosync: the rerun verdict, update_successful, the step count (the LR from a table), the skip / NaN counters
  // and the abort live on the device; the host reads only at log points.
  bool on_device = false;
  // ---- policies: Megatron's behaviour by default ----
  TimerReport timer_report = TimerReport::kLaggedOneWindow;  // deferred timers: how a log point reports
  size_t timer_max_pending = EventTimer::kMaxPendingEvents;  // deferred timers: events pending before a wait
  NanBank nan_bank = NanBank::kValue;
  bool verdict_after_step = false;   // act on the rerun decision after optimizer.step (Megatron: before)
  int lr_table_shift = 0;            // zerosync: the step after k successful steps uses table[k + shift] (0)
  // zerosync: the step's LR as a kernel argument from the host's table at the iteration (not the device's tensor).
  // Eagerly the same bits while no step is skipped; a CUDA graph replays the captured value forever.
  bool lr_from_host = false;
  Adam::MaskWrite mask_write = Adam::MaskWrite::kInPlace;  // a masked step's writes (onesync, zerosync)
  bool lr_advances_on_skip = false;  // the scheduler steps on a skipped iteration (Megatron: success only)
  VoteGroup rerun_vote = VoteGroup::kWorld;  // _reduce_any over the world
  VoteGroup exit_vote_group = VoteGroup::kWorld;  // the --exit-duration-in-mins vote over the world
  int schedule_warmup_shift = 0;     // forwards added to 1F1B's warmup on every stage (Megatron: 0; Schedule)
  FoundInfVote found_inf_vote = FoundInfVote::kGradStatsGroup;  // optimizer.step's found_inf over TP x PP
  ArmHooks hooks;
  // ---- planted defects only ----
  std::string rejected_by;  // the gate that must reject it (`loopgate selftest`); "" for a real arm
  std::string fixture;      // the smallest fixture that shows the defect ("" = single)
  bool hangs = false;       // its ranks end in different collectives: the progress watchdog fails the test
  bool gpu_only = false;    // only a GPU run can show it
};

// Every registered arm: baseline, syncfree-1..5, syncfree, onesync, the defect arms, then the arms added with
// register_arm in the order they were added.
const std::vector<Arm>& all_arms();
// InputError naming the unknown arm and listing the known ones.
const Arm& find_arm(const std::string& name);
// The candidates a gate compares with baseline by default: syncfree-1..5, syncfree, onesync, zerosync.
std::vector<std::string> default_candidates();
// The planted defects, in catalogue order.
std::vector<const Arm*> planted_defects();

// ---- arms from outside the trainer (docs/custom-arms.md) ----

// Adds `arm` to all_arms() / find_arm(), so `--lg_arms=NAME` (the gate suites), `loopgate run --arm NAME` and
// `loopgate gate --arm NAME` take it. InputError when the name is empty, holds anything but letters, digits and '-', or is taken.
// Call it before anything runs: the gate suites read the arms when GoogleTest registers its tests (in
// InitGoogleTest), so register from a static initializer (LOOPGATE_REGISTER_ARM) in a source file linked into
// the executable itself — not a static library, whose unreferenced objects the linker drops.
void register_arm(Arm arm);

// The static initializer behind LOOPGATE_REGISTER_ARM: registers, and on bad input prints one line
// (`loopgate: error: ...`) and exits with code 2 before main.
struct ArmRegistrar {
  explicit ArmRegistrar(Arm arm);
};

}  // namespace loopgate

#define LOOPGATE_CONCAT_INNER_(a, b) a##b
#define LOOPGATE_CONCAT_(a, b) LOOPGATE_CONCAT_INNER_(a, b)
// LOOPGATE_REGISTER_ARM(expr): registers the Arm `expr` evaluates to, at static-initialization time
// (variadic: an expression with commas outside parentheses stays one argument).
#define LOOPGATE_REGISTER_ARM(...) \
  static const ::loopgate::ArmRegistrar LOOPGATE_CONCAT_(loopgate_arm_registrar_, __COUNTER__) { __VA_ARGS__ }
