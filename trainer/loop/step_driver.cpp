// The eager step driver, and the choice of a run's driver (step_driver.h).
#include "trainer/loop/step_driver.h"

#include <utility>

#include "trainer/common/error.h"
#include "trainer/loop/mutation.h"

namespace loopgate {

std::unique_ptr<StepDriver> make_replay_driver(const RunConfig& cfg, std::unique_ptr<IterationGraph> graph,
                                               Ledger& ledger, Instruments& instruments,
                                               Batches& batches);  // replay.cpp

namespace {

// train_step's work at every iteration, training_log at once.
class EagerDriver final : public StepDriver {
 public:
  void begin_segment(int64_t, LoopTimers&) override {}
  StepOutcome step(LoopProtocol&, int64_t, IterationRecord&, const std::function<GraphState()>&,
                   const StepFn& work) override {
    return work(nullptr);
  }
  void timer_action(const std::function<void()>& action) override { action(); }
  void training_log(LoopProtocol& protocol, const LogInputs& in, const StepOutcome&, IterationRecord rec,
                    int64_t) override {
    landed_.push_back({std::move(rec), protocol.training_log(in), in.log_point});
  }
  std::vector<LandedLog> landed(LoopProtocol&) override { return std::exchange(landed_, {}); }
  GraphReport report() const override { return {}; }

 private:
  std::vector<LandedLog> landed_;
};

}  // namespace

std::unique_ptr<StepDriver> make_step_driver(const RunConfig& cfg, const Mutation& m, Ledger& ledger,
                                             Instruments& instruments, Batches& batches) {
  if (!cfg.cuda_graph_iteration) return std::make_unique<EagerDriver>();
  LG_INPUT_CHECK(!cfg.capture.enabled(), "--cuda-graph iteration and --capture-probe: one at a time");
  LG_INPUT_CHECK(!cfg.digests,
                 "--digests with --cuda-graph iteration: a replayed iteration runs no host code to digest it");
  std::unique_ptr<IterationGraph> graph = handed_through<made::Graph>(m, make_iteration_graph(cfg.model.device.is_cuda()));
  return make_replay_driver(cfg, std::move(graph), ledger, instruments, batches);
}

}  // namespace loopgate
