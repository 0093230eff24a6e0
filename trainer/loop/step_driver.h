// How the loop runs an iteration's step, chosen once per run: eagerly, train_step at every iteration; or replayed
// (--cuda-graph iteration): while the arm's protocol reads nothing between log points (protocol.h Replayable), one
// captured iteration replays, log points included, and a log point's read may trail the next replay. The replayed
// driver owns the graph, its static batch, the captured iteration's log inputs and the trailing read, so the loop
// asks no question about graphs.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "trainer/capture/capture.h"
#include "trainer/loop/config.h"
#include "trainer/loop/protocol.h"
#include "trainer/loop/trace.h"
#include "trainer/model/data.h"
#include "trainer/optim/adam.h"

namespace loopgate {

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

// The loop's own step, as a driver runs it (made once by the loop).
struct LoopStep {
  // train_step on the iteration's own batch.
  std::function<StepOutcome(int64_t iteration, bool log_point, IterationRecord& rec)> eager;
  // A replayed iteration's body: train_step on the graph's static batch as a non-log iteration, then what
  // training_log would receive (Megatron's params norm, every iteration).
  std::function<LogInputs(int64_t iteration, IterationRecord& rec, const Batch& staged)> body;
  std::function<Batch(int64_t iteration)> batch;  // get_batch
  std::function<GraphState()> state;              // the loop's persistent tensors a replay reads or writes
  std::function<uint64_t()> checksum;             // the parameters' (the Trace's)
};

// A log point whose read trailed the next step, landed: its record and its outputs, for what follows training_log.
struct LandedLog {
  IterationRecord rec;
  LogOutputs log;
};

class StepDriver {
 public:
  virtual ~StepDriver() = default;
  // A segment of an arm begins at 0-based iteration `since`, with its `timers` (a graph holds the old arm's tensors:
  // it is dropped).
  virtual void begin_segment(int64_t since, LoopTimers& timers) = 0;
  // The step of 0-based `iteration`.
  virtual StepOutcome step(LoopProtocol& protocol, int64_t iteration, bool log_point, IterationRecord& rec) = 0;
  // A level-1 timer's start or stop where train_step has it: now, or, inside a replayed body, at that point of every
  // replay (capture.h cut).
  virtual void timer_action(const std::function<void()>& action) = 0;
  // training_log of the step `step` made: its outputs now, or nullopt when its read was issued to land behind the
  // next step (only where the loop allows it, `may_trail`; the record and inputs wait with it).
  virtual std::optional<LogOutputs> training_log(LoopProtocol& protocol, const LogInputs& in, const StepOutcome& step,
                                                 const IterationRecord& rec, bool may_trail) = 0;
  // A read left trailing lands, now that the next step is launched (its reads counted at its own iteration): the rest
  // of its iteration is the loop's. Nullopt when none trailed.
  virtual std::optional<LandedLog> land_trailing(LoopProtocol& protocol) = 0;
  virtual bool trailing() const = 0;
  // What the graph did over the run (on = false: no graph).
  virtual GraphReport report() const = 0;
};

// Eager unless the run asks for --cuda-graph iteration; then the replayed driver, its graph made here (on a GPU the
// run moves to the graph's stream: make it before the grad buffer's hooks exist) and handed through `m`.
std::unique_ptr<StepDriver> make_step_driver(const RunConfig& cfg, const Mutation& m, Ledger& ledger,
                                             RerunStateMachine& rerun, Instruments& instruments, LoopStep loop);

}  // namespace loopgate
