// The on-device family: zerosync. The rerun verdict, update_successful, the step count (the LR from a table),
// the log window's counters and per-iteration skip / fault flags, and the abort live on the device; the host reads
// only at log points, in one batched read. Every device tensor is allocated once and written in place, so a CUDA
// graph can replay the iterations, log points included (capture.h).
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "trainer/common/device.h"
#include "trainer/common/error.h"
#include "trainer/loop/bundle.h"
#include "trainer/loop/log_point.h"
#include "trainer/loop/mutation.h"
#include "trainer/loop/protocol.h"

namespace loopgate {
namespace {

at::TensorOptions f64() { return on_run_device(at::kDouble); }

// Non-finite as a predicate in two kernels: x * 0 is 0 for every finite x (a NaN or an infinity gives NaN).
at::Tensor any_nonfinite(const at::Tensor& x) { return x.mul(0).ne(0); }

class OnDeviceProtocol final : public ProtocolBase, public Replayable {
 public:
  OnDeviceProtocol(const SiteContext& c, LoopTimers& timers)
      : ProtocolBase(c, timers), log_read_(make_log_read(Site::kBatchedLogRead)) {}

  void begin_segment(const SegmentStart& start) override;
  StepGate before_step(RerunStateMachine& rerun, int64_t iteration, bool log_point) override;
  StepVerdict after_step(RerunStateMachine& rerun, const StepDone& step) override;
  LogOutputs training_log(const LogInputs& in) override;
  bool log_read_can_trail() const override { return !exit_.on(); }  // the exit vote would have to stop the next step
  void issue_log_read(const LogInputs& in) override;
  LogOutputs land_log_read(const LogInputs& in) override;
  GraphState device_state() const override;
  std::optional<int64_t> device_steps() override {
    return static_cast<int64_t>(c_.ledger.read(Site::kBatchedLogRead, steps_done_).at(0));
  }
  Replayable* replayable() override { return this; }  // nothing is read between log points
  SavedWindow saved_window(int64_t done) override;

 private:
  bool abort_outcome() const {
    return c_.config.rerun.on_fault == FaultOutcome::kAbort || c_.config.rerun.mode == RerunMode::kDisabled;
  }
  void read_window(std::map<std::string, double>& v, int64_t slot_base, int64_t iteration, LogOutputs& out);

  // log_state_ (float64, read whole at a log point): [code of slot 0 .. k-1, aborted]; slot s holds fault +
  // skipped / 2 + non-finite loss / 4 of the window's s-th iteration, from which the host counts advanced, skipped
  // and NaN iterations and finds the first fault. codes_ and aborted_ are views into it.
  at::Tensor lr_table_, lr_now_, steps_done_, slot_, fault_now_;
  at::Tensor log_state_, codes_, aborted_;
  at::Tensor total_loss_;
  std::unique_ptr<AsyncRead> log_read_;
  Bundle issued_;             // the log point's read between issue_log_read and land_log_read
  int64_t slot_base_ = 0;     // 0-based iteration whose code is in slot 0 (the first after the last log point)
  int64_t issued_base_ = 0;   // slot_base_ of the codes the issued read holds
  int64_t window_begin_ = 0;  // 0-based first iteration whose code the host has not read (a save reads some)
  bool loss_here_ = false;  // this rank holds the loss (the last stage): its sum is the window's
};

void OnDeviceProtocol::begin_segment(const SegmentStart& start) {
  // Values that reach the device from the host without a read: the table in one pinned upload, the counters as
  // kernel arguments (full). Everything below is allocated here, once, and only written in place afterwards.
  const int64_t k = c_.config.log_interval;
  LG_INPUT_CHECK(start.scheduler.config().wd_incr_style == WdIncrStyle::kConstant,
                 "zerosync needs a constant weight decay: the device holds no weight-decay schedule");
  lr_table_ = upload(lr_table(start, c_.arm.mutated()), on_run_device(at::kFloat));
  const int64_t steps_done = start.scheduler.num_steps() / start.samples_per_step;
  steps_done_ = at::full({1}, steps_done, on_run_device(at::kLong));
  lr_now_ = lr_table_.index_select(0, steps_done_);
  slot_ = at::zeros({1}, on_run_device(at::kLong));
  fault_now_ = at::zeros({1}, f64());
  log_state_ = at::zeros({1 + k}, f64());
  codes_ = log_state_.narrow(0, 0, k);
  aborted_ = log_state_.narrow(0, k, 1);
  // A run loaded from a save between log points continues the window the save read (checkpoint.h).
  ProtocolBase::begin_segment(start);
  total_loss_ = at::full({1}, start.window.loss_sum, on_run_device(at::kFloat));
  if (window_.due_abort) aborted_.fill_(1.0);  // every later step stays masked, as in the run that saved
  slot_base_ = window_begin_ = start.next_iteration;
}

// The rerun vote over the world (SUM of every rank's banked verdicts), never read: it masks this step, and every
// later one once an abort is due (the host learns it at the next log point).
StepGate OnDeviceProtocol::before_step(RerunStateMachine& rerun, int64_t, bool) {
  StepGate gate;
  {
    ScopedSite scope(site_name(Site::kRerunDecision));
    // _reduce_any as a SUM that any rank's non-finite verdict poisons (a NaN survives every backend's sum).
    at::Tensor vote = rerun.poisoned_vote();
    if (Comm* group = rerun_vote_group(c_.arm.mutated(), c_.groups)) group->all_reduce(vote, ReduceOp::kSum);
    at::ne_out(fault_now_, vote, 0);
    gate.mask = at::maximum(fault_now_, aborted_);  // after an abort verdict every step stays masked
  }
  gate.device_lr = &lr_now_;
  return gate;
}

// After the step, in place (a CUDA graph replays these kernels): update_successful over TP x PP, the step count
// and the next LR, the log window's counters, loss sum and per-iteration skip / fault flags, the abort.
StepVerdict OnDeviceProtocol::after_step(RerunStateMachine&, const StepDone& step) {
  ScopedSite scope(site_name(Site::kUpdateSuccessful));
  // Megatron logical_and_across_model_parallel_group: MIN over TP x PP, here never read.
  at::Tensor ok = step.update_successful.to(at::kLong).reshape({1});
  c_.groups.mp->all_reduce(ok, ReduceOp::kMin);
  loss_here_ = step.loss.defined();
  steps_done_.add_(ok);                                      // the scheduler steps on success only
  at::index_select_out(lr_now_, lr_table_, 0, steps_done_);  // the LR of the next step, from the port's table
  // This iteration's code, read back at the log point: fault - ok / 2 (+ a non-finite loss / 4, where the loss is)
  // — whether the vote found a fault, whether the step was skipped, the NaN probe (decoded there, + 1/2).
  at::Tensor code = at::add(fault_now_, ok, -0.5);
  if (step.loss.defined()) {
    total_loss_.add_(at::where(ok.gt(0), step.loss, zero_));  // Megatron accumulates advanced iterations only
    code.add_(any_nonfinite(step.loss), 0.25);
  }
  codes_.index_copy_(0, slot_, code);
  slot_.add_(1);  // back to 0 at each log point
  if (abort_outcome()) at::maximum_out(aborted_, aborted_, fault_now_);  // sticky: every later step is masked
  return {};  // update_successful stays on the device
}

GraphState OnDeviceProtocol::device_state() const {
  GraphState s = {{"sites.total_loss", total_loss_}, {"sites.zero", zero_}, {"sites.nan_count", nan_count_}};
  for (const auto& [name, t] : std::initializer_list<std::pair<const char*, const at::Tensor*>>{
           {"sites.lr_table", &lr_table_}, {"sites.lr_now", &lr_now_}, {"sites.steps_done", &steps_done_},
           {"sites.slot", &slot_}, {"sites.fault_now", &fault_now_}, {"sites.log_state", &log_state_}})
    if (t->defined()) s.emplace_back(name, *t);
  return s;
}

// The window's codes the host has not read: counts, skips, faults, NaNs; the first fault when it aborts.
void OnDeviceProtocol::read_window(std::map<std::string, double>& v, int64_t slot_base, int64_t iteration,
                                   LogOutputs& out) {
  for (int64_t it = window_begin_; it < iteration; ++it) {
    double code = v[fmt::format("state@{}", it - slot_base)] + 0.5;  // fault + skipped / 2 + non-finite loss / 4
    const bool fault = code >= 1.0;
    code -= fault ? 1.0 : 0.0;
    const bool skipped = code >= 0.5;
    code -= skipped ? 0.5 : 0.0;
    out.window.push_back({skipped, fault ? (abort_outcome() ? "abort" : "skip_step") : nullptr});
    skipped ? ++window_.counts.skipped : ++window_.counts.advanced;
    if (skipped && code >= 0.25) ++window_.counts.nan;  // a skipped iteration's non-finite loss (the NaN probe)
    if (fault && abort_outcome() && !out.abort && !window_.due_abort) {  // Megatron's exit code, on every rank
      const int code_out = c_.config.rerun.mode == RerunMode::kDisabled ? kExitCodeUncaughtError
                                                                        : c_.config.rerun.abort_exit_code;
      out.abort = LateAbort{it + 1, code_out};
    }
  }
  window_begin_ = iteration;
}

// At a log point, one batched read: the counters, the LR, the window's skip and fault flags and the abort.
LogOutputs OnDeviceProtocol::training_log(const LogInputs& in) {
  if (!in.log_point) return {};
  issue_log_read(in);
  return land_log_read(in);
}

// The read's values, packed and reduced, its copy issued; then the device's window state reset behind the copy in
// stream order, so that the next iteration may run before the read lands.
void OnDeviceProtocol::issue_log_read(const LogInputs& in) {
  ScopedSite scope(site_name(Site::kBatchedLogRead));
  Bundle bundle;  // the float32 values side by side (one cast), then the counts
  add_log_stats(bundle, in, c_.config, /*reduced=*/true, StatKinds::kFloating);
  bundle.add("lr", lr_now_);
  in.loss.defined() ? bundle.add("loss_total", total_loss_) : bundle.add_absent("loss_total");
  bundle.add_all("state", log_state_);  // the window's codes and the abort: one tensor
  add_log_stats(bundle, in, c_.config, /*reduced=*/true, StatKinds::kIntegral);
  timers_.add_deferred_values(bundle, in.iteration);
  if (exit_.on()) bundle.add_host("exit", exit_.local_flag(in.iteration) ? 1.0 : 0.0);
  bundle.issue(*log_read_, *c_.groups.world);
  issued_ = std::move(bundle);
  // The next window writes its codes from slot 0 (stale slots past its length are never read); the loss sum
  // resets unless this is the first line (Megatron HEAD: the first-iteration line does not reset).
  slot_.zero_();
  issued_base_ = std::exchange(slot_base_, in.iteration);
  if (LogWindow::ends_at(in.iteration)) total_loss_.zero_();
}

// A save's read of the window so far: the loss sum and the codes of the iterations since the last log point or save,
// decoded into the host's counters as a log point would (the skips the records learn, an abort now due).
SavedWindow OnDeviceProtocol::saved_window(int64_t done) {
  ScopedSite scope(site_name(Site::kBatchedLogRead));
  // The codes MAX-reduced over the world as the log point's read reduces them (a NaN on any rank is the window's),
  // so the counts the load seeds are the ones this rank's line would have shown; the loss sum stays this rank's.
  at::Tensor codes = log_state_.clone();
  c_.groups.world->all_reduce(codes, ReduceOp::kMax);
  const std::vector<double> read = c_.ledger.read(Site::kBatchedLogRead, at::cat({total_loss_.to(at::kDouble), codes}));
  std::map<std::string, double> v;
  for (size_t i = 1; i < read.size(); ++i) v[fmt::format("state@{}", i - 1)] = read[i];
  LogOutputs window;
  read_window(v, slot_base_, done, window);
  if (window.abort) window_.due_abort = window.abort;
  SavedWindow w = window_.saved(loss_here_ && window_.counts.advanced > 0, static_cast<float>(read.front()));
  w.steps = std::move(window.window);
  return w;
}

// The read lands: the window's codes decoded, the line made (or the abort found).
LogOutputs OnDeviceProtocol::land_log_read(const LogInputs& in) {
  ScopedSite scope(site_name(Site::kBatchedLogRead));
  std::map<std::string, double> v = issued_.land(*log_read_);
  issued_ = Bundle();

  LogOutputs window;
  read_window(v, issued_base_, in.iteration, window);
  if (window_.due_abort) window.abort = std::exchange(window_.due_abort, std::nullopt);
  const double advanced = static_cast<double>(window_.counts.advanced);
  const bool has_loss = advanced > 0 && in.loss.defined();  // the loss lives on the last stage, as the baseline's
  LogValues values;
  land_log_stats(v, values);
  values.lm_loss = has_loss ? v["loss_total"] / std::max(1.0, advanced) : NAN;
  values.learning_rate = v["lr"];
  values.elapsed_ms_per_iteration = timers_.elapsed_ms_per_iteration(v);
  values.skipped = window_.counts.skipped;
  values.nan = window_.counts.nan;
  // An abort ends the run here, before this line, as Megatron exits before it logs the fault's iteration.
  LogOutputs out = log_point_outputs(c_, in, values, timers_, /*print=*/!window.abort);
  out.window = std::move(window.window);
  out.abort = window.abort;
  if (v.count("exit")) out.exit_vote = v["exit"] != 0.0;
  if (LogWindow::ends_at(in.iteration)) window_.reset();  // the host's window counters, as the device's
  return out;
}

}  // namespace

std::unique_ptr<LoopProtocol> make_on_device_protocol(const SiteContext& c, LoopTimers& timers) {
  return std::make_unique<OnDeviceProtocol>(c, timers);
}

}  // namespace loopgate
