#include "trainer/loop/replay.h"

#include <fmt/format.h>

#include <utility>

namespace loopgate {

void Replay::stage(Batch b) {
  if (batch_.microbatches.empty()) {
    batch_ = std::move(b);
    return;
  }
  for (size_t m = 0; m < b.microbatches.size(); ++m) {
    batch_.microbatches[m].tokens.copy_(b.microbatches[m].tokens);  // device to device: never blocks
    batch_.microbatches[m].labels.copy_(b.microbatches[m].labels);
  }
}

void Replay::run(int64_t iteration, const std::function<void()>& body, GraphState state) {
  for (size_t m = 0; m < batch_.microbatches.size(); ++m) {
    state.emplace_back(fmt::format("batch{}.tokens", m), batch_.microbatches[m].tokens);
    state.emplace_back(fmt::format("batch{}.labels", m), batch_.microbatches[m].labels);
  }
  graph_->run(iteration, [&] {
    struct InBody {
      bool& flag;
      explicit InBody(bool& f) : flag(f) { flag = true; }
      ~InBody() { flag = false; }
    } in_body(in_body_);
    body();
  }, state);
}

std::string Replay::schedule(const std::string& recorded) {
  if (recorded.empty()) return schedule_;
  schedule_ = recorded;
  return recorded;
}

}  // namespace loopgate
