// --cuda-graph iteration, the loop's replayed step: which iterations replay one captured iteration (capture.h
// IterationGraph), the static batch a replay reads, what a replay cannot recompute on the host (the captured
// iteration's schedule and log inputs), and a log point whose read trails the next replay.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "trainer/capture/capture.h"
#include "trainer/loop/config.h"
#include "trainer/loop/trace.h"
#include "trainer/model/data.h"

namespace loopgate {

class Replay {
 public:
  explicit Replay(bool cuda) : graph_(make_iteration_graph(cuda)) {}

  // Whether 0-based `iteration` replays. The first two (warm-up: cuBLAS, NCCL and the allocator initialise lazily),
  // an arm's first after it took over at `arm_since` (its buffers, e.g. the rerun bank, settle their sizes: a graph
  // captured while one grows keeps the freed storage) and one a planned fault hits (the injector decides on the
  // host) run eagerly; the rest replay, log points too.
  bool replays(int64_t iteration, int64_t arm_since, bool fault_planned) const {
    return !graph_->off() && iteration >= 2 && iteration > arm_since && !fault_planned;
  }

  // The graph reads its batch from static buffers: each replay's batch is copied in first, outside the graph.
  void stage(Batch batch);
  const Batch& batch() const { return batch_; }

  // Iteration `iteration` (Megatron's, 1-based): `body` captured on the first call since reset() and replayed on
  // later ones, over `state` (every persistent tensor it reads or writes; the static batch is added here).
  void run(int64_t iteration, const std::function<void()>& body, GraphState state);
  bool in_body() const { return in_body_; }
  // Inside the body: `action` runs at this point of every replay (a level-1 timer: capture.h cut).
  void cut(const std::function<void()>& action) { graph_->cut(action); }
  // The Trace's schedule for a replayed iteration: the captured iteration's (a replay runs no host code).
  std::string schedule(const std::string& recorded);

  LogInputs inputs;  // the captured iteration's log inputs: tensors every replay rewrites in place

  // A log point whose read was issued but not yet landed: it waits for the next iteration's replay to be launched,
  // so the device does not idle while the host makes the line.
  struct Trailing {
    IterationRecord rec;
    LogInputs in;
  };
  std::optional<Trailing> trailing;

  void reset() { graph_->reset(); }  // another arm's state: the next run captures afresh
  const GraphReport& report() const { return graph_->report(); }

 private:
  std::unique_ptr<IterationGraph> graph_;
  Batch batch_;
  std::string schedule_;
  bool in_body_ = false;
};

}  // namespace loopgate
