// How the loop runs an iteration's step, chosen once per run: eagerly, train_step's work at every iteration; or
// replayed (--cuda-graph iteration): while the arm's protocol reads nothing between log points (protocol.h
// Replayable), that work is captured once and replays, log points included, and a log point's read may trail the
// next replay. train_step hands the driver its work as one callable (as Megatron's full-iteration graph wraps one);
// the replayed driver owns the graph, its static batch, the captured iteration's log inputs and the trailing read,
// so the loop asks no question about graphs.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "trainer/capture/capture.h"
#include "trainer/loop/config.h"
#include "trainer/loop/protocol.h"
#include "trainer/loop/trace.h"
#include "trainer/model/data.h"
#include "trainer/optim/adam.h"

namespace loopgate {

class Batches;
class Instruments;
class Ledger;
class Mutation;

// What one iteration's step gives the loop.
struct StepOutcome {
  at::Tensor loss;  // [1] token-weighted lm loss of the global batch (last stage; undefined elsewhere)
  OptimizerStepResult step;
  bool skipped = false;
  Decision decision;
  std::optional<LogInputs> inputs;  // training_log's inputs, computed once (a family may read them with the step)
  bool replayed = false;            // a replay of the captured iteration: only its log points log
};

// train_step's work for one iteration, as a driver runs it. `staged` null: on the iteration's own batch. Else a
// replayed iteration's body: on the graph's static batch, as a non-log iteration, with what training_log will receive
// (computed on the device: Megatron's params norm, every iteration).
using StepFn = std::function<StepOutcome(const Batch* staged)>;

// An iteration whose training_log has landed: its record and its outputs, for what follows training_log.
struct LandedLog {
  IterationRecord rec;
  LogOutputs log;
  bool log_point = false;
};

class StepDriver {
 public:
  virtual ~StepDriver() = default;
  // A segment of an arm begins at 0-based iteration `since`, with its `timers` (a graph holds the old arm's tensors:
  // it is dropped).
  virtual void begin_segment(int64_t since, LoopTimers& timers) = 0;
  // The step of 0-based `iteration`: `work(nullptr)` now, or replayed, `state` giving the loop's persistent tensors
  // a replay reads or writes (capture.h GraphState; asked only by a replay, which adds the protocol's and the static
  // batch).
  virtual StepOutcome step(LoopProtocol& protocol, int64_t iteration, IterationRecord& rec,
                           const std::function<GraphState()>& state, const StepFn& work) = 0;
  // A level-1 timer's start or stop where train_step has it: now, or, inside a replayed body, at that point of every
  // replay (capture.h cut).
  virtual void timer_action(const std::function<void()>& action) = 0;
  // training_log of the step `step` made, its record `rec` waiting with it: the outputs land now, or a replayed log
  // point's read is issued to land behind the next step. No read trails 1-based iteration `until` (the end of this
  // call of the loop), a save or an exit interval: the state must be whole there.
  virtual void training_log(LoopProtocol& protocol, const LogInputs& in, const StepOutcome& step, IterationRecord rec,
                            int64_t until) = 0;
  // The iterations whose training_log has landed since the last call, oldest first (a trailing read lands once a step
  // ran behind it; its reads count at its own iteration): the rest of each is the loop's.
  virtual std::vector<LandedLog> landed(LoopProtocol& protocol) = 0;
  // What the graph did over the run (on = false: no graph).
  virtual GraphReport report() const = 0;
};

// Eager unless the run asks for --cuda-graph iteration; then the replayed driver, its graph made here (on a GPU the
// run moves to the graph's stream: make it before the grad buffer's hooks exist) and handed through `m`, its batches
// from `batches`.
std::unique_ptr<StepDriver> make_step_driver(const RunConfig& cfg, const Mutation& m, Ledger& ledger,
                                             Instruments& instruments, Batches& batches);

}  // namespace loopgate
