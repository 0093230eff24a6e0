// A loop protocol: how a family of arms moves the iteration's decisions and log values between device and host.
// Chosen once per arm segment (select_protocol), as select_schedule picks a pipeline schedule, so train_step and
// training_log ask no questions about the arm. Three families, one file each:
//   per-site  (protocol_per_site.cpp): baseline and syncfree-1..5; each site eager or deferred, as the arm says;
//   one read  (protocol_one_read.cpp): onesync; the iteration's decisions and log values in one collective + read;
//   on device (protocol_on_device.cpp): zerosync; nothing read between log points.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainer/capture/capture.h"
#include "trainer/loop/arms.h"
#include "trainer/loop/config.h"
#include "trainer/loop/log_point.h"
#include "trainer/loop/loop_timers.h"
#include "trainer/loop/rerun.h"
#include "trainer/loop/sites.h"
#include "trainer/loop/trace.h"
#include "trainer/optim/scheduler.h"

namespace loopgate {

// A segment of an arm begins: after the scheduler's steps so far (each `samples_per_step` samples), at 0-based
// `next_iteration`, in a run of `train_iters`.
struct SegmentStart {
  const OptimizerParamScheduler& scheduler;
  int64_t samples_per_step = 0;
  int64_t next_iteration = 0;
  int64_t train_iters = 0;
  SavedWindow window;  // the log window a run loaded from a save continues (empty: a window begins here)
};

// The LR optimizer.step uses after k successful steps, k = 0..train_iters, as the float the step multiplies by,
// from the port's scheduler itself (so the logged LR keeps its bits, skipped steps included), through `m`'s step_lr.
// A family that counts its steps on the device indexes it there.
std::vector<double> lr_table(const SegmentStart& start, const Mutation& m);

// What train_step learns before optimizer.step.
struct StepGate {
  Decision decision;                      // the host's rerun decision (proceed where the host took none)
  at::Tensor mask;                        // onesync, zerosync: true masks the step on the device (never read)
  const at::Tensor* device_lr = nullptr;  // zerosync: the LR the step reads on the device
  std::optional<double> host_lr;          // an LR the protocol hands the step instead of the scheduler's
};

// What train_step hands the protocol after optimizer.step and the loss reduction.
struct StepDone {
  int64_t iteration = 0;        // 0-based
  bool log_point = false;
  bool has_scaler = false;
  bool skipped = false;         // the host decided before the step to skip it
  at::Tensor update_successful; // this rank's optimizer.step verdict (undefined when no step ran)
  at::Tensor loss;              // [1] global-batch lm loss (last stage), undefined elsewhere
  std::function<const LogInputs&()> log_inputs;  // computed at most once (onesync reads them with the step)
};

// What the device hands the host at a save, or where a segment ends.
struct HandOver {
  std::optional<int64_t> steps;  // the successful steps the device counted (zerosync); nullopt where the host knows
  SavedWindow window;            // at a save: the log window so far
};

// What the protocol tells train_step after it.
struct StepVerdict {
  // Whether the step took effect over TP x PP; nullopt: only the device knows (zerosync), the host's scheduler
  // does not step (the device steps its own count).
  std::optional<bool> update_successful;
  std::optional<Decision> decision;                // a rerun decision the host took after the step
  VerdictPhase phase = VerdictPhase::kBeforeStep;  // where that decision acts (recorded when not proceed)
};

// What a family that reads nothing between log points offers the replayed step (--cuda-graph iteration,
// step_driver.h): the device tensors a replay reads and writes in place, and its log point's read in two halves, so
// the read can trail the next replay.
class Replayable {
 public:
  virtual ~Replayable() = default;
  virtual GraphState device_state() const = 0;
  // Whether a log point's read may trail the next replay: only where nothing the read brings could stop that step
  // (zerosync without the exit vote: an abort masks every later step on the device already).
  virtual bool log_read_can_trail() const = 0;
  // training_log at a log point, in two halves: issue_log_read starts the batched read, and the loop launches the
  // next replay before land_log_read waits on it and makes the line.
  virtual void issue_log_read(const LogInputs& in) = 0;
  virtual LogOutputs land_log_read(const LogInputs& in) = 0;
};

class LoopProtocol {
 public:
  virtual ~LoopProtocol() = default;

  // commit 1: every microbatch loss and grad bucket (eager or deferred, as the arm says).
  virtual void nan_check(RerunStateMachine& rerun, Site site, const at::Tensor& value) = 0;
  // A segment of this arm begins (a family that steps its own count on the device takes the LR schedule here).
  virtual void begin_segment(const SegmentStart& start) = 0;
  // The rerun decision (should_run_forward_backward at loop exit), before optimizer.step.
  virtual StepGate before_step(RerunStateMachine& rerun, int64_t iteration, bool log_point) = 0;
  // update_successful over TP x PP after the step.
  virtual StepVerdict after_step(RerunStateMachine& rerun, const StepDone& step) = 0;
  // Megatron's training_log: every iteration, a line at log points.
  virtual LogOutputs training_log(const LogInputs& in) = 0;
  // checkpoint_and_decide_exit's duration vote.
  virtual bool exit_vote(int64_t iteration, bool log_point, const LogOutputs& log) = 0;
  // What the host must learn from the device at a save after 1-based `save_after`, or where the segment ends
  // (nullopt): the successful steps the device counted (zerosync: one read) and, at a save, the log window so far,
  // read where the device holds it (one read); the window goes on as it was.
  virtual HandOver hand_over(std::optional<int64_t> save_after) = 0;
  // The family's replay facet where it reads nothing between log points; null where the host reads every iteration
  // (then every iteration runs eagerly, and the host knows each step's outcome as it happens).
  virtual Replayable* replayable() { return nullptr; }
  bool reads_between_log_points() { return replayable() == nullptr; }
};

// What the three families share: the NaN checks, the segment's timers (the loop's: a family adds their deferred
// reports to its reads), the exit vote, the log window and the deferred accumulators' seeds.
class ProtocolBase : public LoopProtocol {
 public:
  ProtocolBase(const SiteContext& c, LoopTimers& timers);
  ~ProtocolBase() override;

  void nan_check(RerunStateMachine& rerun, Site site, const at::Tensor& value) override {
    nan_check_.check(rerun, site, value);
  }
  // The log window a loaded run continues; a family that holds some of it on the device adds its part.
  void begin_segment(const SegmentStart& start) override;
  bool exit_vote(int64_t iteration, bool log_point, const LogOutputs& log) override;
  HandOver hand_over(std::optional<int64_t> save_after) override;

 protected:
  // The family's part of hand_over: the steps the device counted (one read; nullopt where the host counts them),
  // and the window at a save after `done`, read where the device holds it.
  virtual std::optional<int64_t> device_steps() { return std::nullopt; }
  virtual SavedWindow saved_window(int64_t done) = 0;
  // The family's batched read at `site`, through the arm's mutation (async_copy.h).
  std::unique_ptr<AsyncRead> make_log_read(Site site) const;

  SiteContext c_;
  LoopTimers& timers_;
  NanCheckSite nan_check_;
  ExitVoteSite exit_;
  LogWindow window_;
  at::Tensor zero_;       // the deferred loss accumulator's seed, made once (never written)
  at::Tensor nan_count_;  // the deferred NaN probe of skipped iterations
};

// The arm's family's protocol over the segment's `timers` (which it reads where the arm defers them), handed through
// the arm's mutation (which may wrap it).
std::unique_ptr<LoopProtocol> select_protocol(const Arm& arm, const RunConfig& config, Ledger& ledger,
                                              ProcessGroups& groups, int world_rank, LoopTimers& timers);

// The three families (select_protocol picks one by the arm).
std::unique_ptr<LoopProtocol> make_per_site_protocol(const SiteContext& c, LoopTimers& timers);
std::unique_ptr<LoopProtocol> make_one_read_protocol(const SiteContext& c, LoopTimers& timers);
std::unique_ptr<LoopProtocol> make_on_device_protocol(const SiteContext& c, LoopTimers& timers);

}  // namespace loopgate
