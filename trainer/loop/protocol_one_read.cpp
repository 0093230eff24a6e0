// The one-read family: onesync. The rerun verdict rides one collective before optimizer.step (the step is masked
// on the device by it); after the step, update_successful, the loss and, at log points, the stat bundle and the
// timers' reports are read in one read. training_log then reads nothing: it works from that read.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "trainer/common/device.h"
#include "trainer/common/error.h"
#include "trainer/loop/bundle.h"
#include "trainer/loop/log_point.h"
#include "trainer/loop/protocol.h"

namespace loopgate {
namespace {

class OneReadProtocol final : public ProtocolBase {
 public:
  OneReadProtocol(const SiteContext& c, LoopTimers& timers)
      : ProtocolBase(c, timers), read_once_(make_log_read(Site::kOnesyncRead)) {
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
    if (in.log_point) add_log_stats(all, in, c_.config, /*reduced=*/false);
    read_ = all.resolve(*read_once_, *c_.groups.world, /*reduce=*/false);
    StepVerdict v;
    v.decision = rerun.decide(read_.at("vote"));
    v.update_successful = read_.at("update_successful") != 0.0 && v.decision->proceed();
    return v;
  }

  LogOutputs training_log(const LogInputs& in) override;

  // Everything the window holds was read with its iterations: the loss sum is the host's.
  SavedWindow saved_window(int64_t) override { return window_.saved(window_.has_loss, window_.host_loss_sum); }

 private:
  std::unique_ptr<AsyncRead> read_once_;
  std::vector<std::string> keys_;
  at::Tensor packed_;
  std::map<std::string, double> read_;  // this iteration's one read
};

LogOutputs OneReadProtocol::training_log(const LogInputs& in) {
  const bool reset = LogWindow::ends_at(in.iteration);
  if (!in.skipped) {
    ++window_.counts.advanced;
    if (in.loss.defined()) {
      window_.host_loss_sum = window_.host_loss_sum + static_cast<float>(read_.at("loss"));  // the baseline's fp32 add
      window_.has_loss = true;
    }
  } else {
    ++window_.counts.skipped;
    if (in.loss.defined()) window_.counts.nan += std::isfinite(read_.at("loss")) ? 0 : 1;  // the skipped-iteration NaN probe
  }
  if (!in.log_point) return {};

  LogValues v;
  land_log_stats(read_, v);
  if (window_.has_loss) v.lm_loss = window_.host_loss_sum / static_cast<double>(std::max<int64_t>(1, window_.counts.advanced));
  v.learning_rate = static_cast<float>(in.learning_rate);  // rounded as reduce_max_stat's float32 tensor rounds it
  v.elapsed_ms_per_iteration = timers_.elapsed_ms_per_iteration(read_);
  v.skipped = window_.counts.skipped;
  v.nan = window_.counts.nan;
  LogOutputs out = log_point_outputs(c_, in, v, timers_);
  out.exit_vote = read_.count("exit") && read_.at("exit") != 0.0;
  if (reset) window_.reset();
  return out;
}

}  // namespace

std::unique_ptr<LoopProtocol> make_one_read_protocol(const SiteContext& c, LoopTimers& timers) {
  return std::make_unique<OneReadProtocol>(c, timers);
}

}  // namespace loopgate
