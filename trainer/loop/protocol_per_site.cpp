// The per-site family: baseline (Megatron HEAD, every site eager) and syncfree-1..5 (the seed's commits, each
// making some sites deferred). Every site reads on its own, eagerly or at the log point's one batched read.
// Counts per iteration on the baseline: grad norm 3 (clip_grads read + reduce_max_stat H2D + read); num zeros 3;
// params norm 1; loss scale 1; learning rate 2; loss-accumulator seed 1; loss report 2 at log points.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "trainer/common/device.h"
#include "trainer/common/error.h"
#include "trainer/loop/bundle.h"
#include "trainer/loop/log_point.h"
#include "trainer/loop/mutation.h"
#include "trainer/loop/protocol.h"

namespace loopgate {
namespace {

class PerSiteProtocol final : public ProtocolBase {
 public:
  PerSiteProtocol(const SiteContext& c, LoopTimers& timers)
      : ProtocolBase(c, timers), decision_(c), update_(c), log_read_(make_log_read(Site::kBatchedLogRead)) {}

  StepGate before_step(RerunStateMachine& rerun, int64_t, bool) override {
    StepGate gate;
    gate.decision = decision_.decide(rerun);
    return gate;
  }

  StepVerdict after_step(RerunStateMachine&, const StepDone& step) override {
    StepVerdict v;
    v.update_successful = !step.skipped && update_.agree(step.update_successful, step.has_scaler);
    return v;
  }

  LogOutputs training_log(const LogInputs& in) override;

  void begin_segment(const SegmentStart& start) override {
    ProtocolBase::begin_segment(start);
    const SavedWindow& w = start.window;
    if (w.has_loss) total_loss_ = at::full({1}, w.loss_sum, on_run_device(at::kFloat));
    // Deferred, the window's NaN count is this rank's until the log point's read reduces it over the world.
    if (!eager_stats()) {
      window_.counts.nan = 0;
      nan_count_.fill_(static_cast<double>(w.counts.nan));
    }
  }

  // The loss sum and, deferred, the skipped iterations' NaN count not yet read (this rank's): one read.
  SavedWindow saved_window(int64_t) override {
    SavedWindow w = window_.saved(window_.has_loss, 0.0f);
    const bool nan_unread = !eager_stats() && window_.counts.skipped > 0;
    std::vector<at::Tensor> unread;
    if (window_.has_loss) unread.push_back(total_loss_.reshape({1}));
    if (nan_unread) unread.push_back(nan_count_.reshape({1}));
    if (unread.empty()) return w;
    const std::vector<double> v = c_.ledger.read(Site::kBatchedLogRead, at::cat(unread));
    if (window_.has_loss) w.loss_sum = static_cast<float>(v.front());
    if (nan_unread) w.counts.nan += static_cast<int64_t>(v.back());
    return w;
  }

 private:
  bool eager_stats() const { return c_.arm.stat_bundle == SyncMode::kEager; }
  bool eager_scalars() const { return c_.arm.device_scalars == SyncMode::kEager; }
  at::Tensor loss_seed() {  // Megatron builds torch.tensor([0.0], device): commit 3's site; deferred keeps one zero
    return eager_scalars() ? c_.ledger.device_scalar(Site::kLossAccumSeed, 0.0, on_run_device(at::kFloat)) : zero_;
  }
  void accumulate(const LogInputs& in);
  std::map<std::string, double> read_log_point(const LogInputs& in, LogOutputs& out);

  RerunDecisionSite decision_;
  UpdateSuccessfulSite update_;
  std::unique_ptr<AsyncRead> log_read_;
  at::Tensor total_loss_;  // Megatron's total_loss_dict's loss sum, on the device (the window's counts: window_)
  // The stats (log_stats.h) the baseline reads every iteration, log point or not (eager sites): the last ones read.
  LogValues stats_;
  double lr_ = NAN;
};

// Accumulation, every iteration (Megatron total_loss_dict): the loss of an advanced iteration, the NaN probe of
// a skipped one.
void PerSiteProtocol::accumulate(const LogInputs& in) {
  ScopedSite scope(site_name(Site::kLossAccumSeed));
  if (!in.skipped) {
    ++window_.counts.advanced;
    if (in.loss.defined()) {  // Megatron builds the seed every iteration (a dict.get default)
      const at::Tensor seed = eager_scalars() ? loss_seed() : zero_;
      total_loss_ = (window_.has_loss ? total_loss_ : seed) + in.loss;
      window_.has_loss = true;
    }
    return;
  }
  ++window_.counts.skipped;
  if (!in.loss.defined()) return;
  if (eager_stats()) {
    window_.counts.nan += std::isfinite(c_.read_scalar(Site::kLossReport, in.loss)) ? 0 : 1;
  } else {
    nan_count_.add_(RerunStateMachine::nonfinite(in.loss).to(at::kFloat).reshape({1}));
  }
}

// The log point's one batched read of everything deferred (none for the baseline), then the eager timers' read.
std::map<std::string, double> PerSiteProtocol::read_log_point(const LogInputs& in, LogOutputs& out) {
  ScopedSite scope(site_name(Site::kBatchedLogRead));
  Bundle bundle;
  if (!eager_stats()) {
    add_log_stats(bundle, in, c_.config, /*reduced=*/true);
    window_.has_loss ? bundle.add("loss_total", total_loss_) : bundle.add_absent("loss_total");
    // Only skipped iterations probe their loss; with none since the last log point the count is 0, unread.
    if (window_.counts.skipped > 0) bundle.add("nan_count", nan_count_);
  }
  // The LR rides the read as the same float32 that reduce_max_stat would have made of it.
  if (!eager_scalars()) bundle.add_host("lr", static_cast<float>(lr_));
  if (timers_.deferred()) timers_.add_deferred_values(bundle, in.iteration);
  if (c_.arm.exit_vote == SyncMode::kDeferred && exit_.on()) {
    Comm* group = exit_vote_group(c_.arm.mutated(), c_.groups);
    LG_CHECK(group == nullptr || group == c_.groups.world.get(), "a deferred exit vote rides the world's read");
    if (group) {
      bundle.add_host("exit", exit_.local_flag(in.iteration) ? 1.0 : 0.0);  // MAX over the world in the read
    } else {
      out.exit_vote = exit_.local_flag(in.iteration);  // this rank's own clock only
    }
  }
  std::map<std::string, double> v;
  if (!bundle.empty()) v = bundle.resolve(*log_read_, *c_.groups.world);
  if (!eager_stats()) {
    land_log_stats(v, stats_);
    if (window_.counts.skipped > 0) {
      window_.counts.nan += static_cast<int64_t>(v["nan_count"]);
      nan_count_.zero_();
    }
  }
  if (!eager_scalars()) lr_ = v["lr"];
  if (!timers_.deferred()) {
    std::map<std::string, double> t = timers_.eager_values(in.iteration);
    v.insert(t.begin(), t.end());
  }
  if (v.count("exit")) out.exit_vote = v["exit"] != 0.0;
  return v;
}

LogOutputs PerSiteProtocol::training_log(const LogInputs& in) {
  const bool reset = LogWindow::ends_at(in.iteration);
  accumulate(in);
  lr_ = in.learning_rate;
  if (eager_stats()) read_log_stats_eager(c_, in, stats_);
  if (eager_scalars()) lr_ = reduce_max_stat_host(c_, Site::kLearningRate, lr_);
  if (!in.log_point) return {};

  LogOutputs read;
  std::map<std::string, double> v = read_log_point(in, read);

  // Loss average over advanced iterations: the read of total / max(1, advanced).
  ScopedSite scope(site_name(Site::kLossReport));
  LogValues values = stats_;
  if (window_.has_loss) {
    const double total = eager_stats() ? c_.read_scalar(Site::kLossReport, total_loss_) : v["loss_total"];
    values.lm_loss = total / static_cast<double>(std::max<int64_t>(1, window_.counts.advanced));
    if (reset) total_loss_ = loss_seed();  // Megatron reseeds the accumulator
  }
  values.learning_rate = lr_;
  values.elapsed_ms_per_iteration = timers_.elapsed_ms_per_iteration(v);
  values.skipped = window_.counts.skipped;
  values.nan = window_.counts.nan;
  LogOutputs out = log_point_outputs(c_, in, values, timers_);
  out.exit_vote = read.exit_vote;
  if (reset) window_.reset();
  return out;
}

}  // namespace

std::unique_ptr<LoopProtocol> make_per_site_protocol(const SiteContext& c, LoopTimers& timers) {
  return std::make_unique<PerSiteProtocol>(c, timers);
}

}  // namespace loopgate
