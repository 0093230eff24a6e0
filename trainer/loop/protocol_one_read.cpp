// The one-read family: onesync. The rerun verdict rides one collective before optimizer.step (the step is masked
// on the device by it); after the step, update_successful, the loss and, at log points, the stat bundle and the
// timers' reports are read in one read. training_log then reads nothing: it works from that read.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "trainer/common/device.h"
#include "trainer/common/error.h"
#include "trainer/loop/bundle.h"
#include "trainer/loop/protocol.h"

namespace loopgate {
namespace {

class OneReadProtocol final : public ProtocolBase {
 public:
  OneReadProtocol(const SiteContext& c, bool instrumented)
      : ProtocolBase(c, instrumented), read_once_(make_log_read(Site::kOnesyncRead)) {
    LG_INPUT_CHECK(timers_.deferred(), "arm '{}': one read per iteration needs deferred timers", c.arm.name);
  }

  // The one collective of the iteration: the banked verdicts (and at log points the exit flag and the timers'
  // reports) in one MAX over the world; the vote masks the step, unread.
  StepGate before_step(RerunStateMachine& rerun, int64_t iteration, bool log_point) override {
    ScopedSite scope(site_name(Site::kOnesyncRead));
    Bundle pre;
    pre.add("vote", rerun.decision_tensor());
    if (log_point && exit_.on()) pre.add_host("exit", exit_.local_flag(iteration + 1) ? 1.0 : 0.0);
    if (log_point) timers_.add_deferred_values(pre, iteration + 1);
    keys_ = pre.keys();
    packed_ = pre.packed();
    c_.groups.world->all_reduce(packed_, ReduceOp::kMax);
    StepGate gate;
    gate.mask = packed_.narrow(0, 0, 1).gt(0);
    return gate;
  }

  // The one read of the iteration, after the step.
  StepVerdict after_step(RerunStateMachine& rerun, const StepDone& step) override {
    const LogInputs& in = step.log_inputs();
    at::Tensor us = step.update_successful.defined() ? step.update_successful : at::zeros({1}, on_run_device(at::kBool));
    ScopedSite scope(site_name(Site::kOnesyncRead));
    Bundle all;
    for (size_t i = 0; i < keys_.size(); ++i) all.add(keys_[i], packed_.narrow(0, static_cast<int64_t>(i), 1));
    all.add("update_successful", us.to(at::kFloat));
    if (in.loss.defined()) all.add("loss", in.loss);
    if (in.log_point) {
      if (in.grad_norm.defined()) all.add("grad_norm", in.grad_norm);
      if (in.num_zeros.defined()) all.add("num_zeros", in.num_zeros);
      if (in.params_norm.defined()) all.add("params_norm", in.params_norm);
      all.add("loss_scale", in.loss_scale);
    }
    read_ = all.resolve(*read_once_, *c_.groups.world, /*reduce=*/false);
    StepVerdict v;
    v.decision = rerun.decide(read_.at("vote"));
    v.update_successful = read_.at("update_successful") != 0.0 && v.decision->proceed();
    return v;
  }

  LogOutputs training_log(const LogInputs& in) override;

  void begin_segment(const SegmentStart& start) override {
    const LogWindow& w = start.window;
    LG_INPUT_CHECK(w.abort_at == 0, "--load: the checkpoint's log window holds an abort due from iteration {}, which "
                   "only an arm that reads nothing between log points carries to its next log point", w.abort_at);
    has_total_loss_ = w.has_loss;
    total_loss_ = w.loss_sum;
    counts_.restore(w);
  }
  // Everything the window holds was read with its iterations.
  LogWindow open_window(int64_t) override {
    LogWindow w{has_total_loss_, total_loss_};
    counts_.into(w);
    return w;
  }

 private:
  double read(const char* key) const {
    auto it = read_.find(key);
    return it == read_.end() ? NAN : it->second;
  }

  std::unique_ptr<AsyncRead> read_once_;
  std::vector<std::string> keys_;
  at::Tensor packed_;
  std::map<std::string, double> read_;  // this iteration's one read
  float total_loss_ = 0;  // the baseline's fp32 loss sum, accumulated on the host from the reads
  bool has_total_loss_ = false;
  WindowCounts counts_;
};

LogOutputs OneReadProtocol::training_log(const LogInputs& in) {
  const bool reset = in.iteration != 1;  // Megatron HEAD: the first-iteration line does not reset
  if (!in.skipped) {
    ++counts_.advanced;
    if (in.loss.defined()) {
      total_loss_ = total_loss_ + static_cast<float>(read_.at("loss"));  // the same fp32 add
      has_total_loss_ = true;
    }
  } else {
    ++counts_.skipped;
    if (in.loss.defined()) counts_.nan += std::isfinite(read_.at("loss")) ? 0 : 1;  // the skipped-iteration NaN probe
  }
  if (!in.log_point) return {};

  LogValues v;
  if (has_total_loss_) v.lm_loss = total_loss_ / static_cast<double>(std::max<int64_t>(1, counts_.advanced));
  v.learning_rate = static_cast<float>(in.learning_rate);  // rounded as reduce_max_stat's float32 tensor rounds it
  v.loss_scale = read_.at("loss_scale");
  v.grad_norm = read("grad_norm");
  v.num_zeros = read_.count("num_zeros") ? as_reduce_max_stat(read_.at("num_zeros")) : NAN;
  v.params_norm = read("params_norm");
  v.elapsed_ms_per_iteration = timers_.elapsed_ms_per_iteration(read_);
  v.skipped = counts_.skipped;
  v.nan = counts_.nan;
  LogOutputs out = log_point_outputs(c_, in, v, timers_);
  out.exit_vote = read_.count("exit") && read_.at("exit") != 0.0;
  if (reset) {
    total_loss_ = 0.0f;
    counts_.clear();
    has_total_loss_ = false;
  }
  return out;
}

}  // namespace

std::unique_ptr<LoopProtocol> make_one_read_protocol(const SiteContext& c, bool instrumented) {
  return std::make_unique<OneReadProtocol>(c, instrumented);
}

}  // namespace loopgate
