// The operator-stream recorder and the CPU IterationGraph (op_stream.h).
#include "trainer/capture/op_stream.h"

#include <ATen/record_function.h>
#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace loopgate {
namespace {

struct Recording {
  std::mutex mu;
  std::atomic<bool> active{false};
  at::CallbackHandle handle = 0;  // the RecordFunction callback, registered only while recording
  std::vector<std::string> ops;
  std::unordered_map<const void*, size_t> state;  // storage -> index in the GraphState
};

Recording& recording() {
  static Recording r;
  return r;
}

const void* storage_id(const at::Tensor& t) {
  return t.defined() && t.has_storage() ? static_cast<const void*>(t.storage().unsafeGetStorageImpl()) : nullptr;
}

// Caller holds the mutex.
void describe_tensor(std::string& out, const at::Tensor& t, const Recording& r) {
  if (!t.defined()) {
    out += "undef";
    return;
  }
  out += fmt::format("{}{}", c10::toString(t.scalar_type()), c10::str(t.sizes()));
  auto it = r.state.find(storage_id(t));
  if (it != r.state.end()) out += fmt::format("@state{}+{}", it->second, t.storage_offset());
}

void describe_value(std::string& out, const c10::IValue& v, const Recording& r) {
  if (v.isTensor()) {
    describe_tensor(out, v.toTensor(), r);
  } else if (v.isTensorList()) {
    out += "[";
    for (const at::Tensor& t : v.toTensorVector()) {
      describe_tensor(out, t, r);
      out += ",";
    }
    out += "]";
  } else if (v.isDouble()) {
    out += fmt::format("{:a}", v.toDouble());
  } else if (v.isInt()) {
    out += std::to_string(v.toInt());
  } else if (v.isBool()) {
    out += v.toBool() ? "true" : "false";
  } else if (v.isIntList()) {
    out += c10::str(v.toIntVector());
  } else if (v.isDoubleList()) {
    for (double d : v.toDoubleVector()) out += fmt::format("{:a},", d);
  } else if (v.isNone()) {
    out += "None";
  } else if (v.isString()) {
    out += v.toStringRef();
  } else {
    out += v.tagKind();
  }
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  Recording& r = recording();
  if (!r.active.load(std::memory_order_relaxed)) return nullptr;
  std::lock_guard<std::mutex> lock(r.mu);
  std::string op = fn.name();
  op += "(";
  for (const c10::IValue& v : fn.inputs()) {
    describe_value(op, v, r);
    op += ", ";
  }
  op += ")";
  r.ops.push_back(std::move(op));
  return nullptr;
}

void on_end(const at::RecordFunction&, at::ObserverContext*) {}

}  // namespace

void OpStreamRecorder::start(const GraphState& state) {
  Recording& r = recording();
  std::lock_guard<std::mutex> lock(r.mu);
  // Registered only while recording: a callback that needs inputs left in place costs every operator of every
  // later scenario in the process (+34 % on the LR cases after one cuda_graph test, CPU).
  if (r.handle == 0)
    r.handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&on_start, &on_end).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  r.ops.clear();
  r.state.clear();
  for (size_t i = 0; i < state.size(); ++i)
    if (const void* id = storage_id(state[i].second)) r.state.emplace(id, i);
  r.active.store(true);
}

std::vector<std::string> OpStreamRecorder::stop() {
  Recording& r = recording();
  std::lock_guard<std::mutex> lock(r.mu);
  r.active.store(false);
  if (r.handle != 0) at::removeCallback(r.handle);
  r.handle = 0;
  r.state.clear();
  return std::move(r.ops);
}

size_t first_difference(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return i;
  return a.size() == b.size() ? std::string::npos : n;
}

namespace {

class OpStreamCheckGraph final : public IterationGraph {
 public:
  OpStreamCheckGraph() { report_.on = true; }

  void run(int64_t iteration, const std::function<void()>& body, const GraphState& state) override {
    phase_ = !checking_ ? Phase::kEager : captured_.empty() ? Phase::kCapture : Phase::kReplay;
    next_action_ = 0;
    if (checking_) OpStreamRecorder::start(state);
    body();
    phase_ = Phase::kEager;
    if (!checking_) return;
    std::vector<std::string> ops = OpStreamRecorder::stop();
    std::vector<const void*> storages;
    for (const auto& [name, t] : state) storages.push_back(storage_id(t));
    if (captured_.empty()) {
      captured_ = std::move(ops);
      captured_storages_ = std::move(storages);
      report_.captured_at = iteration;
      ++report_.captures;
      ++report_.replays;  // as on a GPU, where the captured iteration runs as its graph's first replay
      return;
    }
    ++report_.replays;
    if (next_action_ != actions_.size()) {  // a replay's cuts against the captured iteration's
      report_.error = fmt::format("iteration {} cut its work at {} timer action(s), the captured iteration {} at {} (a "
                                  "CUDA graph would replay the captured ones)",
                                  iteration, next_action_, report_.captured_at, actions_.size());
      checking_ = false;
      return;
    }
    for (size_t k = 0; k < state.size(); ++k) {
      if (k < captured_storages_.size() && storages[k] == captured_storages_[k]) continue;
      report_.error = fmt::format("iteration {}: persistent tensor '{}' is not the storage the captured iteration {} "
                                  "used (reallocated, not written in place: a CUDA graph would keep the old one)",
                                  iteration, state[k].first, report_.captured_at);
      checking_ = false;
      return;
    }
    const size_t i = first_difference(captured_, ops);
    if (i == std::string::npos) return;

    auto at = [&](const std::vector<std::string>& v) { return i < v.size() ? v[i] : std::string("(none: ended)"); };
    report_.error = fmt::format(
        "iteration {} dispatched a different operator stream from the captured iteration {} (a CUDA graph would "
        "replay the captured one): operator #{} of {}: captured {} ; now {}",
        iteration, report_.captured_at, i + 1, captured_.size(), at(captured_), at(ops));
    checking_ = false;  // the first difference is the finding; the run goes on eagerly
  }

  // As a GPU replays them: the captured iteration's actions, in order, at every later run — whatever the body now
  // passes (its action is run only past the captured ones, and the count is judged after the body).
  void cut(const std::function<void()>& action) override {
    if (phase_ == Phase::kCapture) actions_.push_back(action);
    if (phase_ == Phase::kReplay && next_action_ < actions_.size()) {
      actions_[next_action_++]();
      return;
    }
    if (phase_ == Phase::kReplay) ++next_action_;
    action();
  }

  void reset() override {
    captured_.clear();
    captured_storages_.clear();
    actions_.clear();
  }
  bool off() const override { return !checking_; }

 private:
  std::vector<std::string> captured_;
  std::vector<const void*> captured_storages_;
  std::vector<std::function<void()>> actions_;  // the captured iteration's cut actions
  enum class Phase { kEager, kCapture, kReplay } phase_ = Phase::kEager;
  size_t next_action_ = 0;
  bool checking_ = true;
};

}  // namespace

std::unique_ptr<IterationGraph> make_op_stream_check_graph() { return std::make_unique<OpStreamCheckGraph>(); }

}  // namespace loopgate
