// A loop change handed into the trainer from outside it: the planted defects of the test side (fixtures/defects/)
// or a user's experiment. Each method is one point where a loop change could go wrong, and each default is
// Megatron's behaviour, so an arm without a mutation runs the loop as ported. The trainer calls these points and
// the factories hand their products through them; it never asks what a mutation is.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer/capture/capture.h"
#include "trainer/timers/timers.h"
#include "trainer/measure/async_copy.h"
#include "trainer/model/module_tap.h"
#include "trainer/optim/adam.h"
#include "trainer/parallel/comm.h"

namespace loopgate {

struct Checkpoint;
class Ledger;
class LoopProtocol;
class RerunStateMachine;
struct LogInputs;
struct Schedule;
struct SiteContext;

class Mutation {
 public:
  virtual ~Mutation() = default;

  // ---- what the loop builds, handed through ----
  // The protocol select_protocol chose for the arm's family; a mutation may wrap it.
  virtual std::unique_ptr<LoopProtocol> protocol(std::unique_ptr<LoopProtocol> chosen, const SiteContext& c) const;
  // A deferred timer named `name` recording on `events` (LoopTimers): Megatron's lags one window, 1024 events.
  virtual std::unique_ptr<Timer> event_timer(const std::string& name, EventSource* events) const;
  // The pipeline schedule select_schedule picked for the layout.
  virtual void schedule(Schedule&) const {}
  // The asynchronous read a protocol's batched read goes through (async_copy.h): issue, wait, values.
  virtual std::unique_ptr<AsyncRead> log_read(std::unique_ptr<AsyncRead> made) const { return made; }
  // The stream that read's copies run on (async_copy.h's CopyStream): copy, keep the source, wait.
  virtual std::unique_ptr<CopyStream> copy_stream(std::unique_ptr<CopyStream> made) const { return made; }
  // The batch's upload path (async_copy.h's Upload), as made for the run.
  virtual std::unique_ptr<Upload> batch_upload(std::unique_ptr<Upload> made) const { return made; }
  // A module boundary's tensor (trainer/model/module_tap.h): what the model continues with. The loop taps the
  // model's boundaries only when changes_modules() (or --digests) says so: a tap costs host time per module.
  virtual bool changes_modules() const { return false; }
  virtual at::Tensor module_boundary(const ModuleSite&, Boundary, at::Tensor t) const { return t; }
  // The graph --cuda-graph iteration captures into and replays (capture.h), made once per run with its first arm.
  virtual std::unique_ptr<IterationGraph> iteration_graph(std::unique_ptr<IterationGraph> made) const { return made; }
  // The data-parallel group the grad buffer's bucket all-reduces go through.
  virtual CommPtr grad_sync_group(CommPtr dp) const { return dp; }

  // ---- the sites ----
  // A deferred NaN check banks its value (judged at the rerun decision).
  virtual void bank_nan(RerunStateMachine& rerun, const at::Tensor& value) const;
  // Over which group the rerun vote (_reduce_any) and the exit-duration vote are agreed: the world; null: none
  // (this rank's own).
  virtual Comm* rerun_vote_group(ProcessGroups& g) const { return g.world.get(); }
  virtual Comm* exit_vote_group(ProcessGroups& g) const { return g.world.get(); }
  // The grad-stats group optimizer.step reduces found_inf, the grad norm and the zeros over: TP x PP.
  virtual CommPtr grad_stats_group(ProcessGroups& g) const { return g.mp; }

  // ---- values ----
  virtual double step_lr(double lr) const { return lr; }  // the LR optimizer.step uses, given the scheduler's

  // ---- checkpoints (checkpoint.h) ----
  // What a save is about to write, and what a load has read before the loop takes it.
  virtual void saving(Checkpoint&) const {}
  virtual void loaded(Checkpoint&) const {}
};

// No change: Megatron's loop.
const Mutation& no_mutation();

}  // namespace loopgate
