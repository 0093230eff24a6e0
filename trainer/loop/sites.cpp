// Eager and deferred forms of every host-sync site. Counts per iteration on the baseline (Megatron HEAD, docs/design.md
// "Megatron semantics the trainer ports"): NaN check 2 reads per microbatch loss and per grad bucket (from the
// second iteration); rerun decision 2 (H2D + read); update_successful 2; grad norm 3 (clip_grads read +
// reduce_max_stat H2D + read); num zeros 3; params norm 1; loss scale 1; learning rate 2; loss-accumulator seed
// 1; timers 4 (device synchronize in start/stop of two level-1 timers) and, at log points, the interval timer's
// synchronizes plus one read of the gathered times; loss report 2 at log points; exit vote 2.
#include "trainer/loop/sites.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "trainer/common/device.h"
#include "trainer/common/error.h"
#include "trainer/loop/config.h"
#include "trainer/optim/clip_grads.h"
#if LOOPGATE_HAS_CUDA
#include "trainer/instrument/device_cuda.h"
#endif

namespace loopgate {
namespace {

// On the run's device (trainer/common/device.h): CPU unless the run is on a GPU.
at::TensorOptions f32() { return on_run_device(at::kFloat); }
at::TensorOptions f64() { return on_run_device(at::kDouble); }
const char* const kLevel1Timers[] = {"forward-backward", "optimizer"};
constexpr double kNanInTheMax = std::numeric_limits<double>::max();  // a NaN through the batched read's MAX
constexpr const char* kIntervalTimer = "interval-time";

}  // namespace

// ---- Bundle ----

void Bundle::add(const std::string& key, const at::Tensor& value) {
  LG_CHECK(value.numel() == 1, "bundle value {} has {} elements", key, value.numel());
  keys_.push_back(key);
  parts_.push_back({value.reshape({1}), {}});
}

void Bundle::add_all(const std::string& prefix, const at::Tensor& values) {
  for (int64_t i = 0; i < values.numel(); ++i) keys_.push_back(fmt::format("{}@{}", prefix, i));
  parts_.push_back({values.reshape({-1}), {}});
}

void Bundle::add_host(const std::string& key, double value) {
  keys_.push_back(key);
  if (parts_.empty() || parts_.back().device.defined()) parts_.push_back({});
  parts_.back().host.push_back(value);
}

void Bundle::add_absent(const std::string& key) { add_host(key, -std::numeric_limits<double>::infinity()); }

at::Tensor Bundle::packed(Ledger& ledger) const {
  // Consecutive device values of one dtype are joined, then cast to double once; host runs are uploaded.
  std::vector<at::Tensor> t, run;
  auto flush = [&] {
    if (run.empty()) return;
    t.push_back((run.size() == 1 ? run[0] : at::cat(run)).to(at::kDouble));
    run.clear();
  };
  for (const Part& p : parts_) {
    if (!p.device.defined()) {
      flush();
      t.push_back(ledger.upload_pinned(p.host, f64()));
      continue;
    }
    if (!run.empty() && run.back().scalar_type() != p.device.scalar_type()) flush();
    run.push_back(p.device);
  }
  flush();
  return t.size() == 1 ? t[0] : at::cat(t);
}

std::map<std::string, double> Bundle::resolve(Ledger& ledger, Site site, Comm& world, bool reduce) {
  at::Tensor packed = this->packed(ledger);
  if (reduce) {
    // The MAX must keep a NaN (a NaN loss is what the baseline logs). NCCL's max drops a NaN against -inf (on
    // 2 x H200, pp2: a NaN loss on the last stage was logged as -inf), Open MPI's keeps it; so a NaN rides as the
    // largest finite double, which no logged value reaches, and every backend gives the same answer. (Only +inf
    // beats it: a key that is NaN on one rank and +inf on another reads +inf. The loop's keys never are.)
    packed = at::nan_to_num(packed, kNanInTheMax, std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity());
    world.all_reduce(packed, ReduceOp::kMax);
  }
  std::vector<double> host = ledger.read(site, packed);
  for (double& x : host)
    if (x == kNanInTheMax) x = std::numeric_limits<double>::quiet_NaN();
  std::map<std::string, double> out;
  for (size_t i = 0; i < keys_.size(); ++i) out[keys_[i]] = host[i];
  return out;
}

// ---- construction ----

Sites::Sites(const Arm& arm, const RunConfig& config, Ledger& ledger, ProcessGroups& groups, int world_rank,
             bool instrumented)
    : arm_(arm), config_(config), ledger_(ledger), groups_(groups), rank_(world_rank) {
  start_time_ = clock_.now();
  // CPU "device events" complete with a lag of two later events, as queued device work would: reports are
  // lagged, and the first report has to wait once (what the CUDA-event timer does on a GPU). With
  // RunConfig::event_lag the CPU device instead runs a seeded random 0..N log windows behind the host.
  if (config.event_lag.max_windows > 0) {
    auto lag = std::make_unique<WindowLagEventSource>(&clock_, config.event_lag.seed ^ static_cast<uint64_t>(rank_),
                                                      config.event_lag.max_windows);
    lag_ = lag.get();
    events_ = std::move(lag);
  } else {
    events_ = std::make_unique<ClockEventSource>(&clock_, /*auto_complete=*/false);
    ClockEventSource* ev = events_.get();
    events_->set_completion([ev](int64_t id) { return id + 2 < ev->recorded(); });
  }
#if LOOPGATE_HAS_CUDA
  if (run_device().is_cuda() && !lag_) device_events_ = make_cuda_event_source();  // GPU: real device events
#endif
  timer_events_ = device_events_ ? device_events_.get() : events_.get();
  auto make = [&](const std::string& name) -> std::unique_ptr<Timer> {
    if (arm_.timers == SyncMode::kDeferred)
      return std::make_unique<EventTimer>(name, timer_events_, arm_.timer_max_pending, arm_.timer_report);
    return std::make_unique<HostTimer>(name, &clock_, groups_.world.get(), [this] {
      ledger_.record_sync(Site::kTimers);
#if LOOPGATE_HAS_CUDA
      if (run_device().is_cuda()) cuda_device_synchronize();  // torch.cuda.synchronize()
#endif
    });
  };
  if (instrumented || arm_.timers != SyncMode::kDeferred)
    for (const char* name : kLevel1Timers) timers_[name] = make(name);
  timers_[kIntervalTimer] = make(kIntervalTimer);
  // --cuda-graph iteration: a replayed iteration is timed as a whole (its events cannot be inside the graph).
  if (config_.cuda_graph_iteration) timers_["cuda-graph"] = make("cuda-graph");
  nan_count_ = at::zeros({1}, f32());
  zero_ = at::zeros({1}, f32());
}

Sites::~Sites() = default;

double Sites::read_scalar(Site site, const at::Tensor& t) { return ledger_.read(site, t).at(0); }

// Megatron reduce_max_stat_across_model_parallel_group on a device stat: the stat is read (to build the host
// float), sent back as torch.tensor([x]) (H2D), MAX-reduced over TP x PP and read again.
double Sites::reduce_max_stat_eager(Site site, const at::Tensor& stat) {
  return reduce_max_stat_host(site, read_scalar(site, stat));
}

// reduce_max_stat on a host float: torch.tensor([x], float32) (H2D), MAX over TP x PP, then `item() == -1`
// and `return item()`: two reads.
double Sites::reduce_max_stat_host(Site site, double local) {
  ScopedSite scope(site_name(site));
  at::Tensor t = ledger_.device_scalar(site, local, f32());
  groups_.mp->all_reduce(t, ReduceOp::kMax);
  read_scalar(site, t);
  return read_scalar(site, t);
}

// The baseline's num zeros went through reduce_max_stat's float32 tensor: counts above 2^24 keep only their even
// (then multiple-of-4, ...) neighbours. A deferred read carries the exact int64 count, so it rounds on the host
// the same way (rounding is monotonic: the MAX of rounded values is the rounded MAX). Seen on an H200 at
// 2048x8x1024 (docs/performance.md); the CPU gate simulates it (OptimizerStepConfig::simulated_extra_zeros).
namespace {
double as_reduce_max_stat(double x) { return static_cast<double>(static_cast<float>(x)); }
}  // namespace

// ---- commit 1: NaN/Inf checks ----

void Sites::nan_check(RerunStateMachine& rerun, Site site, const at::Tensor& value) {
  ScopedSite scope(site_name(site));
  if (!rerun.should_validate()) return;  // Megatron: the first iteration is not validated
  if (arm_.nan_check == SyncMode::kEager) {
    // validate_result(isnan) then validate_result(isinf): one bool() read each.
    bool bad = read_scalar(site, value.isnan().any()) != 0.0;
    bad = (read_scalar(site, value.isinf().any()) != 0.0) || bad;
    rerun.bank_host(bad, site_name(site));
  } else {
    if (arm_.nan_bank == NanBank::kValue) {
      rerun.bank_value(value);
    } else {
      rerun.bank_predicate(RerunStateMachine::nonfinite(value));
    }
  }
}

Decision Sites::rerun_decision(RerunStateMachine& rerun) {
  ScopedSite scope(site_name(Site::kRerunDecision));
  if (!rerun.needs_vote()) return rerun.decide(0.0);
  at::Tensor vote;
  if (arm_.nan_check == SyncMode::kEager) {
    vote = ledger_.device_scalar(Site::kRerunDecision, rerun.host_flag() ? 1.0 : 0.0, f32());  // torch.tensor([b])
  } else {
    vote = rerun.decision_tensor();  // banked verdicts ride the same all-reduce (a new tensor)
  }
  if (arm_.rerun_vote == VoteGroup::kWorld) groups_.world->all_reduce(vote, ReduceOp::kSum);  // _reduce_any
  return rerun.decide(read_scalar(Site::kRerunDecision, vote));
}

// ---- update_successful ----

bool Sites::update_successful(const at::Tensor& local, bool has_scaler) {
  ScopedSite scope(site_name(Site::kUpdateSuccessful));
  at::Tensor t;
  if (arm_.device_scalars == SyncMode::kEager) {
    // Megatron: optimizer.step returned a Python bool (found_inf read with item() with a scaler), then
    // torch.tensor([update_successful]) (pageable H2D), MIN over TP x PP, then item().
    double host = has_scaler ? read_scalar(Site::kUpdateSuccessful, local) : 1.0;
    t = ledger_.device_scalar(Site::kUpdateSuccessful, host, f32());
  } else {
    t = local.to(at::kFloat).reshape({1}).clone();
  }
  groups_.mp->all_reduce(t, ReduceOp::kMin);
  return read_scalar(Site::kUpdateSuccessful, t) != 0.0;
}

// ---- onesync ----

at::Tensor Sites::one_read_vote(RerunStateMachine& rerun, bool log_point, int64_t iteration) {
  ScopedSite scope(site_name(Site::kOnesyncRead));
  Bundle pre;
  pre.add("vote", rerun.decision_tensor());
  if (log_point && config_.exit_duration_in_mins > 0) pre.add_host("exit", exit_flag_local(iteration) ? 1.0 : 0.0);
  if (log_point) add_timer_values(pre, iteration);
  one_read_keys_ = pre.keys();
  one_read_packed_ = pre.packed(ledger_);
  groups_.world->all_reduce(one_read_packed_, ReduceOp::kMax);  // the one collective of the iteration
  return one_read_packed_.narrow(0, 0, 1).gt(0);
}

std::map<std::string, double> Sites::one_read_resolve(const at::Tensor& update_successful, const LogInputs& in) {
  ScopedSite scope(site_name(Site::kOnesyncRead));
  Bundle all;
  for (size_t i = 0; i < one_read_keys_.size(); ++i) all.add(one_read_keys_[i], one_read_packed_.narrow(0, i, 1));
  all.add("update_successful", update_successful.to(at::kFloat));
  if (in.loss.defined()) all.add("loss", in.loss);
  if (in.log_point) {
    if (in.grad_norm.defined()) all.add("grad_norm", in.grad_norm);
    if (in.num_zeros.defined()) all.add("num_zeros", in.num_zeros);
    if (in.params_norm.defined()) all.add("params_norm", in.params_norm);
    all.add("loss_scale", in.loss_scale);
  }
  return all.resolve(ledger_, Site::kOnesyncRead, *groups_.world, /*reduce=*/false);
}

// ---- zerosync ----

void Sites::start_on_device(const std::vector<double>& lr_table, int64_t steps_done, int64_t next_iteration) {
  // Values that reach the device from the host without a read: the table in one pinned upload, the counters as
  // kernel arguments (full). Everything below is allocated here, once, and only written in place afterwards.
  const int64_t k = config_.log_interval;
  lr_table_ = ledger_.upload_pinned(lr_table, f32());
  steps_done_ = at::full({1}, steps_done, on_run_device(at::kLong));
  lr_now_ = lr_table_.index_select(0, steps_done_);
  slot_ = at::zeros({1}, on_run_device(at::kLong));
  fault_now_ = at::zeros({1}, f64());
  log_state_ = at::zeros({1 + k}, f64());
  codes_ = log_state_.narrow(0, 0, k);
  aborted_ = log_state_.narrow(0, k, 1);
  total_loss_ = at::zeros({1}, f32());
  window_begin_ = next_iteration;
}

// Non-finite as a predicate in two kernels: x * 0 is 0 for every finite x (a NaN or an infinity gives NaN).
static at::Tensor any_nonfinite(const at::Tensor& x) { return x.mul(0).ne(0); }

at::Tensor Sites::device_vote(RerunStateMachine& rerun, bool late) {
  ScopedSite scope(site_name(Site::kRerunDecision));
  // _reduce_any as a SUM that any rank's non-finite verdict poisons (a NaN survives every backend's sum).
  at::Tensor vote = rerun.poisoned_vote();
  if (arm_.rerun_vote == VoteGroup::kWorld) groups_.world->all_reduce(vote, ReduceOp::kSum);
  at::ne_out(fault_now_, vote, 0);
  if (late) return aborted_.clone();
  return at::maximum(fault_now_, aborted_);  // after an abort verdict every step stays masked until the log point
}

void Sites::device_after_step(const at::Tensor& local_update_successful, const at::Tensor& loss) {
  ScopedSite scope(site_name(Site::kUpdateSuccessful));
  // Megatron logical_and_across_model_parallel_group: MIN over TP x PP, here never read.
  at::Tensor ok = local_update_successful.to(at::kLong).reshape({1});
  groups_.mp->all_reduce(ok, ReduceOp::kMin);
  steps_done_.add_(ok);                                      // the scheduler steps on success only
  at::index_select_out(lr_now_, lr_table_, 0, steps_done_);  // the LR of the next step, from the port's table
  // This iteration's code, read back at the log point: fault - ok / 2 (+ a non-finite loss / 4, where the loss is)
  // — whether the vote found a fault, whether the step was skipped, the NaN probe (decoded there, + 1/2).
  at::Tensor code = at::add(fault_now_, ok, -0.5);
  if (loss.defined()) {
    total_loss_.add_(at::where(ok.gt(0), loss, zero_));  // Megatron accumulates advanced iterations only
    code.add_(any_nonfinite(loss), 0.25);
  }
  codes_.index_copy_(0, slot_, code);
  slot_.add_(1);  // back to 0 at each log point
  if (config_.rerun.on_fault == FaultOutcome::kAbort || config_.rerun.mode == RerunMode::kDisabled)
    at::maximum_out(aborted_, aborted_, fault_now_);  // sticky: every later step is masked
}

GraphState Sites::device_state() const {
  GraphState s = {{"sites.total_loss", total_loss_}, {"sites.zero", zero_}, {"sites.nan_count", nan_count_}};
  for (const auto& [name, t] : std::initializer_list<std::pair<const char*, const at::Tensor*>>{
           {"sites.lr_table", &lr_table_}, {"sites.lr_now", &lr_now_}, {"sites.steps_done", &steps_done_},
           {"sites.slot", &slot_}, {"sites.fault_now", &fault_now_}, {"sites.log_state", &log_state_}})
    if (t->defined()) s.emplace_back(name, *t);
  return s;
}

int64_t Sites::read_steps_done() { return static_cast<int64_t>(ledger_.read(Site::kBatchedLogRead, steps_done_).at(0)); }

LogOutputs Sites::training_log_on_device(const LogInputs& in) {
  LogOutputs out;
  if (!in.log_point) return out;
  ScopedSite scope(site_name(Site::kBatchedLogRead));
  const bool reset = in.iteration != 1;  // Megatron HEAD: the first-iteration line does not reset
  Bundle bundle;  // the float32 values side by side (one cast), then the doubles (none)
  in.grad_norm.defined() ? bundle.add("grad_norm", in.grad_norm) : bundle.add_absent("grad_norm");
  bundle.add("loss_scale", in.loss_scale);
  bundle.add("lr", lr_now_);
  in.loss.defined() ? bundle.add("loss_total", total_loss_) : bundle.add_absent("loss_total");
  if (in.params_norm.defined()) bundle.add("params_norm", in.params_norm);
  bundle.add_all("state", log_state_);  // the window's codes and the abort: one tensor
  if (config_.optim.log_num_zeros_in_grad && in.num_zeros.defined()) bundle.add("num_zeros", in.num_zeros);
  const int64_t k = config_.log_interval;
  add_timer_values(bundle, in.iteration);
  if (config_.exit_duration_in_mins > 0) bundle.add_host("exit", exit_flag_local(in.iteration) ? 1.0 : 0.0);
  std::map<std::string, double> v = bundle.resolve(ledger_, Site::kBatchedLogRead, *groups_.world);

  auto state = [&](int64_t i) { return v[fmt::format("state@{}", i)]; };
  const bool abort_outcome = config_.rerun.on_fault == FaultOutcome::kAbort || config_.rerun.mode == RerunMode::kDisabled;
  for (int64_t it = window_begin_; it < in.iteration; ++it) {  // the window's codes: counts, skips, faults, NaNs
    double code = state(it - window_begin_) + 0.5;  // fault + skipped / 2 + non-finite loss / 4
    const bool fault = code >= 1.0;
    code -= fault ? 1.0 : 0.0;
    const bool skipped = code >= 0.5;
    code -= skipped ? 0.5 : 0.0;
    out.window_skipped.push_back(skipped);
    out.window_fault.push_back(fault);
    skipped ? ++skipped_ : ++advanced_;
    if (skipped && code >= 0.25) ++nan_;  // a skipped iteration whose loss is not finite (Megatron's NaN probe)
    if (fault && abort_outcome && !out.abort) {
      out.abort = true;
      out.fault_iteration = it + 1;
    }
  }
  window_begin_ = in.iteration;
  if (v.count("exit")) out.exit_vote = v["exit"] != 0.0;

  const double advanced = static_cast<double>(advanced_), skipped = static_cast<double>(skipped_);
  const bool has_loss = advanced > 0 && in.loss.defined();  // the loss lives on the last stage, as the baseline's
  const double loss_avg = has_loss ? v["loss_total"] / std::max(1.0, advanced) : NAN;
  LogFields f;
  f.iteration = in.iteration;
  f.train_iters = in.train_iters;
  f.consumed_samples = in.consumed_samples;
  f.global_batch = in.global_batch;
  f.elapsed_ms_per_iteration = elapsed_ms_per_iteration(v);
  f.learning_rate = v["lr"];
  f.has_loss = has_loss && loss_avg >= 0.0;
  f.lm_loss = loss_avg;
  f.loss_scale = v["loss_scale"];
  f.grad_norm = v["grad_norm"];
  f.has_grad_norm = std::isfinite(f.grad_norm) && f.grad_norm >= 0.0;
  f.num_zeros = v.count("num_zeros") ? as_reduce_max_stat(v["num_zeros"]) : NAN;
  f.has_num_zeros = config_.optim.log_num_zeros_in_grad && std::isfinite(f.num_zeros) && f.num_zeros >= 0;
  f.params_norm = v.count("params_norm") ? v["params_norm"] : NAN;
  f.has_params_norm = config_.log_params_norm && std::isfinite(f.params_norm);
  f.skipped = static_cast<int64_t>(skipped);
  f.nan = nan_;
  // An abort ends the run here, before this line, as Megatron exits before it logs the fault's iteration.
  if (rank_ == groups_.world->size() - 1 && !out.abort) out.line = format_log_line(f);

  out.lm_loss = has_loss ? loss_avg : NAN;
  out.grad_norm = f.grad_norm;
  out.num_zeros = f.num_zeros;
  out.params_norm = f.params_norm;
  out.learning_rate = f.learning_rate;
  out.loss_scale = f.loss_scale;
  out.nan_iteration = f.nan > 0;
  out.timer_intervals.assign(reported_.begin() + static_cast<long>(reported_mark_), reported_.end());
  out.timer_window = shown_window_;
  reported_mark_ = reported_.size();
  // The next window writes its codes from slot 0 (stale slots past its length are never read); the loss sum and
  // the counters reset unless this is the first line (no reset).
  slot_.zero_();
  if (reset) {
    total_loss_.zero_();
    advanced_ = skipped_ = nan_ = 0;
  }
  return out;
}

// ---- commit 4: timers ----

Timer* Sites::level1_timer(const std::string& name) {
  auto it = timers_.find(name);
  if (it != timers_.end()) return it->second.get();
  const bool known = std::find(std::begin(kLevel1Timers), std::end(kLevel1Timers), name) != std::end(kLevel1Timers);
  LG_CHECK(known, "no timer named '{}'", name);
  return nullptr;  // a level-1 timer left out (not instrumented)
}
void Sites::timer_start(const std::string& name) {
  ScopedSite scope(site_name(Site::kTimers));
  if (Timer* t = level1_timer(name)) t->start(/*barrier=*/false);
}
void Sites::timer_stop(const std::string& name) {
  ScopedSite scope(site_name(Site::kTimers));
  if (Timer* t = level1_timer(name)) t->stop(/*barrier=*/false);
}
void Sites::start_interval_timer() { timers_.at(kIntervalTimer)->start(/*barrier=*/true); }

// The interval time read at this log point over the iterations it covers, shown_window_ (eager: this log
// interval; deferred: the one before, lagged by one window), in ms per iteration.
double Sites::elapsed_ms_per_iteration(std::map<std::string, double>& v) const {
  const double interval = v["timer:" + std::string(kIntervalTimer) + ":max"];
  const int64_t window_iterations = shown_window_.last - shown_window_.first + 1;
  return interval / static_cast<double>(std::max<int64_t>(1, window_iterations)) * 1000.0;
}

// Deferred: each timer's report (lagged by one window, trainer/instrument/timers.h) rides the batched read as
// MAX and MAX-of-negated (= MIN) over ranks. A log point closes a window of iterations; the value reported
// covers the window before it (the first log point: a preview of its own window, waited for once).
void Sites::add_timer_values(Bundle& b, int64_t iteration) {
  ScopedSite scope(site_name(Site::kTimers));
  const bool reset = iteration != 1;  // Megatron HEAD: the first-iteration line does not reset
  if (lag_) lag_->begin_log_point();
  const int64_t waits_before = timer_events_->blocking_waits();
  // interval-time first: its window's end is the newest event, so a wait for it (one stream) completes every
  // other timer's window too and a report waits at most once.
  std::vector<std::pair<std::string, Timer*>> order = {{kIntervalTimer, timers_.at(kIntervalTimer).get()}};
  for (auto& [name, timer] : timers_)
    if (name != kIntervalTimer) order.emplace_back(name, timer.get());
  std::vector<TimerInterval> now;
  for (auto& [name, timer] : order) {
    double v = timer->elapsed(reset, /*barrier=*/false);
    b.add_host("timer:" + name + ":max", v);
    b.add_host("timer:" + name + ":negmin", -v);
    for (TimerInterval& t : timer->take_reported()) now.push_back(t);
  }
  publish_timer_report(now);
  closed_windows_.push_back({window_start_, iteration});
  window_start_ = iteration + 1;
  if (arm_.timer_report == TimerReport::kWhateverCompleted) {
    shown_window_ = closed_windows_.back();  // what this policy claims; the gate checks what it reported
    closed_windows_.clear();
  } else if (dynamic_cast<EventTimer&>(*timers_.at(kIntervalTimer)).last_was_preview()) {
    shown_window_ = closed_windows_.back();  // reported by the next log point
  } else {
    shown_window_ = closed_windows_.front();
    closed_windows_.pop_front();
  }
  if (lag_) lag_->end_log_point();
  // The first report's wait, and any later one (the device was more than a window behind), are host syncs.
  for (int64_t w = waits_before; w < timer_events_->blocking_waits(); ++w) ledger_.record_sync(Site::kTimers);
}

// Eager: host-clock timers (their synchronizes were counted at start/stop), then Timers.log's all-gather of
// every rank's times and one read of the result.
std::map<std::string, double> Sites::timer_values_eager(int64_t iteration) {
  ScopedSite scope(site_name(Site::kTimers));
  const bool reset = iteration != 1;  // Megatron HEAD: the first-iteration line does not reset
  std::vector<std::string> names;
  std::vector<double> values;
  std::vector<TimerInterval> now;
  for (auto& [name, timer] : timers_) {
    names.push_back(name);
    values.push_back(timer->elapsed(reset, /*barrier=*/name == kIntervalTimer));
    for (TimerInterval& t : timer->take_reported()) now.push_back(t);
  }
  publish_timer_report(now);
  at::Tensor local = at::empty({1, static_cast<int64_t>(values.size())}, f64());
  for (size_t i = 0; i < values.size(); ++i) local[0][i].fill_(values[i]);
  std::vector<double> all = ledger_.read(Site::kTimers, groups_.world->all_gather(local));
  std::map<std::string, double> out;
  const size_t n = values.size();
  for (size_t i = 0; i < n; ++i) {
    double mx = -INFINITY, mn = INFINITY;
    for (size_t r = 0; r < all.size() / n; ++r) {
      mx = std::max(mx, all[r * n + i]);
      mn = std::min(mn, all[r * n + i]);
    }
    out["timer:" + names[i] + ":max"] = mx;
    out["timer:" + names[i] + ":negmin"] = -mn;
  }
  (void)values;
  out["timer:local:" + std::string(kIntervalTimer)] = values[std::distance(
      names.begin(), std::find(names.begin(), names.end(), kIntervalTimer))];
  shown_window_ = {window_start_, iteration};
  if (reset) window_start_ = iteration + 1;
  return out;
}

// What a log point (or the drain) reports joins the run's stream, through the arm's report hook if it has one.
void Sites::publish_timer_report(std::vector<TimerInterval>& now) {
  if (arm_.hooks.timer_report) arm_.hooks.timer_report(now);
  reported_.insert(reported_.end(), now.begin(), now.end());
}

TimerSummary Sites::finish() {
  std::vector<TimerInterval> drained;
  for (auto& [name, timer] : timers_) {
    for (TimerInterval& t : timer->drain()) drained.push_back(t);
  }
  publish_timer_report(drained);
  TimerSummary out;
  for (const TimerInterval& t : reported_)
    if (t.name == kIntervalTimer) out.interval_total += t.seconds;
  if (auto* ev = dynamic_cast<EventTimer*>(timers_.at(kIntervalTimer).get())) {
    out.first_report_waits = ev->first_report_waits();
    out.lag_waits = ev->lag_waits();
  }
  for (auto& [name, timer] : timers_)
    if (auto* ev = dynamic_cast<EventTimer*>(timer.get()))
      out.max_pending_events = std::max(out.max_pending_events, static_cast<int64_t>(ev->max_pending_seen()));
  if (lag_) out.event_lags = lag_->lags();
  out.intervals = reported_;
  return out;
}

// ---- commit 5: exit duration ----

bool Sites::exit_flag_local(int64_t iteration) const {
  if (config_.exit_duration_in_mins <= 0) return false;
  double minutes;
  if (config_.simulated_minutes_per_iteration > 0) {
    double factor = rank_ == config_.fast_clock_rank ? config_.fast_clock_factor : 1.0;
    minutes = static_cast<double>(iteration) * config_.simulated_minutes_per_iteration * factor;
  } else {
    minutes = (const_cast<SteadyClock&>(clock_).now() - start_time_) / 60.0;
  }
  return minutes > config_.exit_duration_in_mins;
}

bool Sites::exit_vote(int64_t iteration, bool log_point, const LogOutputs& log) {
  ScopedSite scope(site_name(Site::kExitVote));
  if (config_.exit_duration_in_mins <= 0) return false;
  if (arm_.exit_vote == SyncMode::kDeferred) return log_point && log.exit_vote;
  at::Tensor done = ledger_.device_scalar(Site::kExitVote, exit_flag_local(iteration) ? 1.0 : 0.0, f32());
  if (arm_.exit_vote_group == VoteGroup::kWorld) groups_.world->all_reduce(done, ReduceOp::kMax);
  return read_scalar(Site::kExitVote, done) != 0.0;
}

// ---- commits 2 and 3: training_log ----

LogOutputs Sites::training_log(const LogInputs& in) {
  LogOutputs out;
  const bool eager_stats = arm_.stat_bundle == SyncMode::kEager && !arm_.one_read;
  const bool eager_scalars = arm_.device_scalars == SyncMode::kEager && !arm_.one_read;
  const bool reset = in.iteration != 1;  // Megatron HEAD: the first-iteration line does not reset
  auto pre = [&](const char* key) { return in.pre_read ? in.pre_read->at(key) : NAN; };

  // Accumulation, every iteration (Megatron total_loss_dict).
  std::optional<ScopedSite> scope(std::in_place, site_name(Site::kLossAccumSeed));
  if (!in.skipped) {
    ++advanced_;
    if (in.loss.defined()) {
      if (arm_.one_read) {
        total_loss_host_ = total_loss_host_ + static_cast<float>(pre("loss"));  // the same fp32 add
      } else {
        // Megatron builds the seed every iteration (a dict.get default); the deferred form keeps one zero.
        const at::Tensor seed = eager_scalars ? ledger_.device_scalar(Site::kLossAccumSeed, 0.0, f32()) : zero_;
        total_loss_ = (has_total_loss_ ? total_loss_ : seed) + in.loss;
      }
      has_total_loss_ = true;
    }
  } else {
    ++skipped_;
    if (in.loss.defined()) {  // the skipped-iteration NaN probe
      if (arm_.one_read) {
        nan_ += std::isfinite(pre("loss")) ? 0 : 1;
      } else if (eager_stats) {
        nan_ += std::isfinite(read_scalar(Site::kLossReport, in.loss)) ? 0 : 1;
      } else {
        nan_count_.add_(RerunStateMachine::nonfinite(in.loss).to(at::kFloat).reshape({1}));
      }
    }
  }

  scope.reset();
  // Stats the baseline reads every iteration, log point or not.
  double grad_norm = NAN, num_zeros = NAN, loss_scale = NAN, params_norm = NAN, lr = in.learning_rate;
  if (eager_stats) {
    if (in.grad_norm.defined()) grad_norm = reduce_max_stat_eager(Site::kGradNorm, in.grad_norm);
    if (in.num_zeros.defined() && config_.optim.log_num_zeros_in_grad)
      num_zeros = reduce_max_stat_eager(Site::kNumZeros, in.num_zeros);
    if (in.params_norm.defined()) params_norm = read_scalar(Site::kParamsNorm, in.params_norm);
    loss_scale = read_scalar(Site::kLossScale, in.loss_scale);
  }
  if (eager_scalars) lr = reduce_max_stat_host(Site::kLearningRate, lr);
  if (!in.log_point) return out;

  // ---- the log point: one batched read of everything deferred ----
  scope.emplace(site_name(Site::kBatchedLogRead));
  Bundle bundle;
  std::map<std::string, double> v;
  if (arm_.one_read) {
    v = *in.pre_read;
    grad_norm = v.count("grad_norm") ? v["grad_norm"] : NAN;
    num_zeros = v.count("num_zeros") ? as_reduce_max_stat(v["num_zeros"]) : NAN;
    params_norm = v.count("params_norm") ? v["params_norm"] : NAN;
    loss_scale = v["loss_scale"];
    lr = static_cast<float>(lr);  // host value, rounded as reduce_max_stat's float32 tensor rounds it
  } else {
    if (!eager_stats) {
      in.grad_norm.defined() ? bundle.add("grad_norm", in.grad_norm) : bundle.add_absent("grad_norm");
      if (config_.optim.log_num_zeros_in_grad && in.num_zeros.defined()) bundle.add("num_zeros", in.num_zeros);
      if (in.params_norm.defined()) bundle.add("params_norm", in.params_norm);
      bundle.add("loss_scale", in.loss_scale);
      has_total_loss_ ? bundle.add("loss_total", total_loss_) : bundle.add_absent("loss_total");
      // Only skipped iterations probe their loss; with none since the last log point the count is 0, unread.
      if (skipped_ > 0) bundle.add("nan_count", nan_count_);
    }
    // The LR rides the read as the same float32 that reduce_max_stat would have made of it.
    if (!eager_scalars) bundle.add_host("lr", static_cast<float>(lr));
    if (arm_.timers == SyncMode::kDeferred) add_timer_values(bundle, in.iteration);
    if (arm_.exit_vote == SyncMode::kDeferred && config_.exit_duration_in_mins > 0) {
      if (arm_.exit_vote_group == VoteGroup::kWorld) {
        bundle.add_host("exit", exit_flag_local(in.iteration) ? 1.0 : 0.0);  // MAX over the world in the read
      } else {
        out.exit_vote = exit_flag_local(in.iteration);  // this rank's own clock only
      }
    }
    if (!bundle.empty()) v = bundle.resolve(ledger_, Site::kBatchedLogRead, *groups_.world);
    if (!eager_stats) {
      grad_norm = v["grad_norm"];
      num_zeros = v.count("num_zeros") ? as_reduce_max_stat(v["num_zeros"]) : NAN;
      params_norm = v.count("params_norm") ? v["params_norm"] : NAN;
      loss_scale = v["loss_scale"];
      if (skipped_ > 0) {
        nan_ += static_cast<int64_t>(v["nan_count"]);
        nan_count_.zero_();
      }
      const double this_log_point = grad_norm;
      if (arm_.hooks.logged_grad_norm) grad_norm = arm_.hooks.logged_grad_norm(this_log_point, last_grad_norm_);
      last_grad_norm_ = this_log_point;
    }
    if (!eager_scalars) lr = v["lr"];
  }
  if (arm_.timers == SyncMode::kEager) {
    std::map<std::string, double> t = timer_values_eager(in.iteration);
    v.insert(t.begin(), t.end());
  }
  if (v.count("exit")) out.exit_vote = v["exit"] != 0.0;

  // Loss average over advanced iterations: the read of total / max(1, advanced).
  scope.emplace(site_name(Site::kLossReport));
  double loss_avg = NAN;
  if (has_total_loss_) {
    double total;
    if (arm_.one_read) {
      total = total_loss_host_;
    } else if (eager_stats) {
      total = read_scalar(Site::kLossReport, total_loss_);
    } else {
      total = v["loss_total"];
    }
    loss_avg = total / static_cast<double>(std::max<int64_t>(1, advanced_));
    if (reset) {
      // Megatron reseeds with torch.tensor([0.0], device): a device-scalar construction, commit 3's site.
      total_loss_ = eager_scalars ? ledger_.device_scalar(Site::kLossAccumSeed, 0.0, f32()) : zero_;
      total_loss_host_ = 0.0f;
    }
  }

  LogFields f;
  f.iteration = in.iteration;
  f.train_iters = in.train_iters;
  f.consumed_samples = in.consumed_samples;
  f.global_batch = in.global_batch;
  f.elapsed_ms_per_iteration = elapsed_ms_per_iteration(v);
  f.learning_rate = lr;
  f.has_loss = has_total_loss_ && loss_avg >= 0.0;
  f.lm_loss = loss_avg;
  f.loss_scale = loss_scale;
  f.has_grad_norm = std::isfinite(grad_norm) && grad_norm >= 0.0;
  f.grad_norm = grad_norm;
  f.has_num_zeros = config_.optim.log_num_zeros_in_grad && std::isfinite(num_zeros) && num_zeros >= 0;
  f.num_zeros = num_zeros;
  f.has_params_norm = config_.log_params_norm && std::isfinite(params_norm);
  f.params_norm = params_norm;
  f.skipped = skipped_;
  f.nan = nan_;
  if (rank_ == groups_.world->size() - 1) out.line = format_log_line(f);

  out.lm_loss = has_total_loss_ ? loss_avg : NAN;
  out.grad_norm = grad_norm;
  out.num_zeros = num_zeros;
  out.params_norm = params_norm;
  out.learning_rate = lr;
  out.loss_scale = loss_scale;
  out.nan_iteration = nan_ > 0;
  out.timer_intervals.assign(reported_.begin() + static_cast<long>(reported_mark_), reported_.end());
  out.timer_window = shown_window_;
  reported_mark_ = reported_.size();
  if (reset) {
    advanced_ = skipped_ = nan_ = 0;
    has_total_loss_ = false;
  }
  return out;
}

std::string format_log_line(const LogFields& f) {
  std::string s = fmt::format(" iteration {:8d}/{:8d} |", f.iteration, f.train_iters);
  s += fmt::format(" consumed samples: {:12d} |", f.consumed_samples);
  s += fmt::format(" elapsed time per iteration (ms): {:.1f} |", f.elapsed_ms_per_iteration);
  s += fmt::format(" learning rate: {:.6E} |", f.learning_rate);
  s += fmt::format(" global batch size: {:5d} |", f.global_batch);
  if (f.has_loss) s += fmt::format(" lm loss: {:.6E} |", f.lm_loss);
  s += fmt::format(" loss scale: {:.1f} |", f.loss_scale);
  if (f.has_grad_norm) s += fmt::format(" grad norm: {:.3f} |", f.grad_norm);
  if (f.has_num_zeros) s += fmt::format(" num zeros: {:.1f} |", f.num_zeros);
  if (f.has_params_norm) s += fmt::format(" params norm: {:.3f} |", f.params_norm);
  s += fmt::format(" number of skipped iterations: {:3d} |", f.skipped);
  s += fmt::format(" number of nan iterations: {:3d} |", f.nan);
  return s;
}

}  // namespace loopgate
