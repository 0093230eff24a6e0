// The replayed step driver (step_driver.h): --cuda-graph iteration.
#include <fmt/format.h>

#include <utility>

#include "trainer/common/error.h"
#include "trainer/loop/batches.h"
#include "trainer/loop/checkpoint.h"
#include "trainer/loop/instruments.h"
#include "trainer/loop/mutation.h"
#include "trainer/loop/step_driver.h"
#include "trainer/measure/ledger.h"

namespace loopgate {
namespace {

class ReplayDriver final : public StepDriver {
 public:
  ReplayDriver(const RunConfig& cfg, std::unique_ptr<IterationGraph> graph, Ledger& ledger, Instruments& instruments,
               Batches& batches)
      : cfg_(cfg), graph_(std::move(graph)), ledger_(ledger), instruments_(instruments), batches_(batches) {}

  void begin_segment(int64_t since, LoopTimers& timers) override {
    LG_CHECK(!trailing_, "a log point's read trailed past the end of its segment");
    graph_->reset();
    since_ = since;
    timers_ = &timers;
  }
  StepOutcome step(LoopProtocol& protocol, int64_t iteration, IterationRecord& rec,
                   const std::function<GraphState()>& loop_state, const StepFn& work) override;
  void timer_action(const std::function<void()>& action) override { in_body_ ? graph_->cut(action) : action(); }
  void training_log(LoopProtocol& protocol, const LogInputs& in, const StepOutcome& step, IterationRecord rec,
                    int64_t until) override;
  std::vector<LandedLog> landed(LoopProtocol& protocol) override;
  GraphReport report() const override {
    LG_CHECK(!trailing_, "a log point's read trailed past the end of the run");
    return graph_->report();
  }

 private:
  // Whether 0-based `iteration` replays: under a protocol that reads nothing between log points, not the first two
  // (warm-up: cuBLAS, NCCL and the allocator initialise lazily), nor an arm's first after it took over (its buffers,
  // e.g. the rerun bank, settle their sizes: a graph captured while one grows keeps the freed storage), nor one a
  // planned fault hits (the injector decides on the host). The rest replay, log points too.
  bool replays(LoopProtocol& protocol, int64_t iteration) const {
    const bool fault_planned = cfg_.faults && cfg_.faults->planned_at(iteration);
    return protocol.replayable() && !graph_->off() && iteration >= 2 && iteration > since_ && !fault_planned;
  }
  // Whether log point `in` may leave its read in flight behind the next step: a replayed one whose next iteration
  // replays too, where nothing the read brings could stop that step (Replayable::log_read_can_trail), before the
  // loop's bound `until`, and not where the run saves or ends on its interval (the state must be whole there).
  bool may_trail(LoopProtocol& protocol, const LogInputs& in, const StepOutcome& step, int64_t until) const {
    return step.replayed && in.log_point && in.iteration < until && !saves_at(cfg_, in.iteration) &&
           !exits_at(cfg_, in.iteration) && replays(protocol, in.iteration) &&
           protocol.replayable()->log_read_can_trail();
  }
  // The graph reads its batch from static buffers: each replay's batch is copied in first, outside the graph (the
  // first one is adopted as the buffers).
  void stage(Batch b);

  const RunConfig& cfg_;
  std::unique_ptr<IterationGraph> graph_;
  Ledger& ledger_;
  Instruments& instruments_;
  Batches& batches_;
  int64_t since_ = 0;
  LoopTimers* timers_ = nullptr;  // the segment's
  bool in_body_ = false;
  Batch batch_;
  std::string schedule_;  // the captured iteration's (a replay runs no host code)
  LogInputs inputs_;      // the captured iteration's log inputs: tensors every replay rewrites in place
  struct Trailing {       // a log point whose read was issued but has not landed
    IterationRecord rec;
    LogInputs in;
    bool behind = false;  // a step ran behind it: it may land
  };
  std::optional<Trailing> trailing_;
  std::vector<LandedLog> landed_;  // training_logs landed at once
};

void ReplayDriver::stage(Batch b) {
  if (batch_.microbatches.empty()) {
    batch_ = std::move(b);
    return;
  }
  for (size_t m = 0; m < b.microbatches.size(); ++m) {
    batch_.microbatches[m].tokens.copy_(b.microbatches[m].tokens);  // device to device: never blocks
    batch_.microbatches[m].labels.copy_(b.microbatches[m].labels);
  }
}

// train_step's device work and the log inputs, captured once and replayed; the host's bookkeeping and a log point's
// read (training_log, from the captured inputs) stay outside.
StepOutcome ReplayDriver::step(LoopProtocol& protocol, int64_t iteration, IterationRecord& rec,
                               const std::function<GraphState()>& loop_state, const StepFn& work) {
  if (trailing_) trailing_->behind = true;
  if (!replays(protocol, iteration)) return work(nullptr);
  GraphState state = loop_state();
  stage(batches_.get(iteration));
  for (auto& e : protocol.replayable()->device_state()) state.push_back(std::move(e));
  for (size_t m = 0; m < batch_.microbatches.size(); ++m) {
    state.emplace_back(fmt::format("batch{}.tokens", m), batch_.microbatches[m].tokens);
    state.emplace_back(fmt::format("batch{}.labels", m), batch_.microbatches[m].labels);
  }
  timers_->start("cuda-graph");
  graph_->run(iteration + 1, [&] {
    struct InBody {
      bool& flag;
      explicit InBody(bool& f) : flag(f) { flag = true; }
      ~InBody() { flag = false; }
    } in_body(in_body_);
    Instruments::Quiet quiet(instruments_);  // a replay runs no host code: the loop takes its checksums around it
    inputs_ = *work(&batch_).inputs;
  }, state);
  timers_->stop("cuda-graph");
  if (!rec.schedule.empty()) schedule_ = rec.schedule;  // recorded where the body ran on the host
  rec.schedule = schedule_;
  StepOutcome out;
  out.inputs = inputs_;
  out.replayed = true;
  return out;
}

// A replayed iteration logs at its log points only; a log point's read may trail the next step (may_trail).
void ReplayDriver::training_log(LoopProtocol& protocol, const LogInputs& in, const StepOutcome& step,
                                IterationRecord rec, int64_t until) {
  LG_CHECK(!trailing_, "a log point's read trailed more than one step");
  if (step.replayed && !in.log_point) {
    landed_.push_back({std::move(rec), LogOutputs{}, false});
  } else if (may_trail(protocol, in, step, until)) {
    protocol.replayable()->issue_log_read(in);
    trailing_ = Trailing{std::move(rec), in};
  } else {
    landed_.push_back({std::move(rec), protocol.training_log(in), in.log_point});
  }
}

std::vector<LandedLog> ReplayDriver::landed(LoopProtocol& protocol) {
  if (trailing_ && trailing_->behind) {
    Trailing t = std::move(*trailing_);
    trailing_.reset();
    Ledger::CountAs own(ledger_, t.rec.iteration - 1);
    LogOutputs log = protocol.replayable()->land_log_read(t.in);
    landed_.push_back({std::move(t.rec), std::move(log), true});
  }
  return std::exchange(landed_, {});
}

}  // namespace

std::unique_ptr<StepDriver> make_replay_driver(const RunConfig& cfg, std::unique_ptr<IterationGraph> graph,
                                               Ledger& ledger, Instruments& instruments, Batches& batches) {
  return std::make_unique<ReplayDriver>(cfg, std::move(graph), ledger, instruments, batches);
}

}  // namespace loopgate
