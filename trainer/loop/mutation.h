// A loop change handed into the trainer from outside it: the planted defects of the test side (fixtures/defects/)
// or a user's experiment. Each method is one point where a loop change could go wrong, and each default is
// Megatron's behaviour, so an arm without a mutation runs the loop as ported. The trainer calls these points and
// the factories hand their products through them; it never asks what a mutation is.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <variant>
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

// What the loop builds for an arm, each handed through Mutation::wrap before the loop uses it. One alternative per
// product: the product itself (a reference: a mutation may decorate or replace it) and what it was made for.
namespace made {
// The protocol select_protocol chose for the arm's family.
struct Protocol {
  std::unique_ptr<LoopProtocol>& protocol;
  const SiteContext& site;
};
// A deferred timer named `name` recording on `events` (LoopTimers): Megatron's lags one window, 1024 events.
struct EventTimer {
  std::unique_ptr<Timer>& timer;
  const std::string& name;
  EventSource* events;
};
// The pipeline schedule select_schedule picked for the layout.
struct PipelineSchedule {
  Schedule& schedule;
};
// The asynchronous read a protocol's batched read goes through (async_copy.h): issue, wait, values.
struct LogRead {
  std::unique_ptr<AsyncRead>& read;
};
// The stream that read's copies run on (async_copy.h's CopyStream): copy, keep the source, wait.
struct ReadCopyStream {
  std::unique_ptr<CopyStream>& stream;
};
// The batch's upload path (async_copy.h's Upload), as made for the run.
struct BatchUpload {
  std::unique_ptr<Upload>& upload;
};
// The graph --cuda-graph iteration captures into and replays (capture.h), made once per run with its first arm.
struct Graph {
  std::unique_ptr<IterationGraph>& graph;
};
// The data-parallel group the grad buffer's bucket all-reduces go through.
struct GradSyncGroup {
  CommPtr& dp;
};
// The grad-stats group optimizer.step reduces found_inf, the grad norm and the zeros over: TP x PP.
struct GradStatsGroup {
  CommPtr& group;
  ProcessGroups& groups;
};
// Over which group the rerun vote (_reduce_any) and the exit-duration vote are agreed: the world; null: none (this
// rank's own).
struct RerunVoteGroup {
  Comm*& group;
  ProcessGroups& groups;
};
struct ExitVoteGroup {
  Comm*& group;
  ProcessGroups& groups;
};
// What a save is about to write (checkpoint.h).
struct Saving {
  Checkpoint& checkpoint;
};
// What a load has read, before the loop takes it.
struct Loaded {
  Checkpoint& checkpoint;
};
}  // namespace made

using Made = std::variant<made::Protocol, made::EventTimer, made::PipelineSchedule, made::LogRead, made::ReadCopyStream,
                          made::BatchUpload, made::Graph, made::GradSyncGroup, made::GradStatsGroup,
                          made::RerunVoteGroup, made::ExitVoteGroup, made::Saving, made::Loaded>;

class Mutation {
 public:
  virtual ~Mutation() = default;

  // ---- what the loop builds, handed through ----
  // Every product of the loop's factories (Made) passes here before the loop uses it; the default leaves it as made.
  virtual void wrap(const Made&) const {}

  // ---- the model ----
  // A module boundary's tensor (trainer/model/module_tap.h): what the model continues with. The loop taps the
  // model's boundaries only when changes_modules() (or --digests) says so: a tap costs host time per module.
  virtual bool changes_modules() const { return false; }
  virtual at::Tensor module_boundary(const ModuleSite&, Boundary, at::Tensor t) const { return t; }

  // ---- the sites and values ----
  // A deferred NaN check banks its value (judged at the rerun decision).
  virtual void bank_nan(RerunStateMachine& rerun, const at::Tensor& value) const;
  virtual double step_lr(double lr) const { return lr; }  // the LR optimizer.step uses, given the scheduler's
};

// A product that is all its alternative P holds (a read, a stream, a graph, a group), after the arm's mutation had
// its turn: `handed_through<made::LogRead>(m, make_async_read(...))`.
template <class P, class T>
T handed_through(const Mutation& m, T product) {
  m.wrap(Made{P{product}});
  return product;
}

// The groups chosen from `groups`, as the arm's mutation leaves them: the votes' (the world), optimizer.step's
// grad stats (TP x PP).
Comm* rerun_vote_group(const Mutation& m, ProcessGroups& groups);
Comm* exit_vote_group(const Mutation& m, ProcessGroups& groups);
CommPtr grad_stats_group(const Mutation& m, ProcessGroups& groups);

// No change: Megatron's loop.
const Mutation& no_mutation();

}  // namespace loopgate
