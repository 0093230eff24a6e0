// The loop's timers (loop_timers.h).
#include "trainer/loop/loop_timers.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "trainer/common/device.h"
#include "trainer/common/error.h"
#include "trainer/loop/mutation.h"
#if LOOPGATE_HAS_CUDA
#include "trainer/timers/device_cuda.h"
#endif

namespace loopgate {

void TimerSummary::append(const TimerSummary& t) {
  intervals.insert(intervals.end(), t.intervals.begin(), t.intervals.end());
  interval_total += t.interval_total;
  first_report_waits += t.first_report_waits;
  lag_waits += t.lag_waits;
  max_pending_events = std::max(max_pending_events, t.max_pending_events);
  event_lags.insert(event_lags.end(), t.event_lags.begin(), t.event_lags.end());
  for (const auto& [name, n] : t.timed) timed[name] += n;
}
namespace {
const char* const kLevel1Timers[] = {"forward-backward", "optimizer"};
constexpr const char* kIntervalTimer = "interval-time";
constexpr const char* kSaveTimer = "save-checkpoint";

// Megatron's Timer.start/stop synchronize the device (torch.cuda.synchronize()).
void timer_device_sync() {
#if LOOPGATE_HAS_CUDA
  if (run_device().is_cuda()) cuda_device_synchronize();
#endif
}
}  // namespace

LoopTimers::LoopTimers(const Arm& arm, const RunConfig& config, Ledger& ledger, ProcessGroups& groups, int world_rank,
                       bool instrumented)
    : arm_(arm), ledger_(ledger), groups_(groups) {
  // CPU "device events" complete with a lag of two later events, as queued device work would: reports are
  // lagged, and the first report has to wait once (what the CUDA-event timer does on a GPU). With
  // RunConfig::event_lag the CPU device instead runs a seeded random 0..N log windows behind the host.
  // --async-emulation lags the events too (0..3 windows), unless the run names its own lag.
  RunConfig::EventLag lagging = config.event_lag;
  if (lagging.max_windows == 0 && config.async_emulation.on) lagging = {config.async_emulation.seed, 3};
  if (lagging.max_windows > 0) {
    auto lag = std::make_unique<WindowLagEventSource>(&clock_, lagging.seed ^ static_cast<uint64_t>(world_rank),
                                                      lagging.max_windows);
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
  if (!device_events_) simulated_save_seconds_ = config.simulated_save_seconds;
  auto make = [&](const std::string& name) -> std::unique_ptr<Timer> {
    if (arm_.timers == SyncMode::kDeferred) {
      std::unique_ptr<Timer> t = std::make_unique<EventTimer>(name, timer_events_, EventTimer::kMaxPendingEvents);
      arm_.mutated().wrap(made::EventTimer{t, name, timer_events_});
      return t;
    }
    return std::make_unique<HostTimer>(name, &clock_, groups_.world.get(), [this] {
      ledger_.record_sync(Site::kTimers);
      timer_device_sync();
    });
  };
  if (instrumented || arm_.timers != SyncMode::kDeferred)
    for (const char* name : kLevel1Timers) timers_[name] = make(name);
  timers_[kIntervalTimer] = make(kIntervalTimer);
  // --cuda-graph iteration: a replayed iteration is also timed as a whole, around its segments and their actions.
  if (config.cuda_graph_iteration) timers_["cuda-graph"] = make("cuda-graph");
}

LoopTimers::~LoopTimers() = default;

Timer* LoopTimers::level1(const std::string& name) {
  auto it = timers_.find(name);
  if (it != timers_.end()) return it->second.get();
  const bool known = std::find(std::begin(kLevel1Timers), std::end(kLevel1Timers), name) != std::end(kLevel1Timers);
  LG_CHECK(known, "no timer named '{}'", name);
  return nullptr;  // a level-1 timer left out (not instrumented)
}
void LoopTimers::start(const std::string& name) {
  ScopedSite scope(site_name(Site::kTimers));
  if (Timer* t = level1(name)) t->start(/*barrier=*/false);
}
void LoopTimers::stop(const std::string& name) {
  ScopedSite scope(site_name(Site::kTimers));
  if (Timer* t = level1(name)) t->stop(/*barrier=*/false);
}
void LoopTimers::start_interval(int64_t first_iteration) {
  window_start_ = first_iteration;  // a loaded run, or an arm taking over, opens its first window here, not at 1
  timers_.at(kIntervalTimer)->start(/*barrier=*/true);
}

void LoopTimers::time_save(const std::function<void()>& save) {
  Timer& interval = *timers_.at(kIntervalTimer);
  interval.stop(/*barrier=*/false);
  if (!save_timer_)
    save_timer_ = std::make_unique<HostTimer>(kSaveTimer, &clock_, groups_.world.get(),
                                              [this] { ledger_.checkpoint_sync(timer_device_sync); });
  HostTimer& timer = *save_timer_;
  timer.start(/*barrier=*/true);
  save();
  clock_.advance(simulated_save_seconds_);
  timer.stop(/*barrier=*/true);
  timer.elapsed(/*reset=*/true, /*barrier=*/false);
  publish(timer.take_reported());
  interval.start(/*barrier=*/true);
}

// The interval time read at this log point over the iterations it covers, shown_window_ (eager: this log
// interval; deferred: the one before, lagged by one window), in ms per iteration.
double LoopTimers::elapsed_ms_per_iteration(std::map<std::string, double>& v) const {
  const double interval = v["timer:" + std::string(kIntervalTimer) + ":max"];
  const int64_t window_iterations = shown_window_.last - shown_window_.first + 1;
  return interval / static_cast<double>(std::max<int64_t>(1, window_iterations)) * 1000.0;
}

// Deferred: each timer's report (lagged by one window, trainer/timers/timers.h) rides the batched read as
// MAX and MAX-of-negated (= MIN) over ranks. A log point closes a window of iterations; the value reported
// covers the window before it (the first log point: a preview of its own window, waited for once).
void LoopTimers::add_deferred_values(Bundle& b, int64_t iteration) {
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
  publish(now);
  closed_windows_.push_back({window_start_, iteration});
  window_start_ = iteration + 1;
  const EventTimer* interval = timers_.at(kIntervalTimer)->event_timer();
  LG_CHECK(interval != nullptr, "a deferred interval timer is an event timer");
  switch (interval->shows()) {
    case EventTimer::Shows::kPreviewOfThisWindow:
      shown_window_ = closed_windows_.back();  // reported by the next log point
      break;
    case EventTimer::Shows::kUpToNow:
      shown_window_ = closed_windows_.back();  // what such a report claims; the gate checks what it reported
      closed_windows_.clear();
      break;
    case EventTimer::Shows::kPreviousWindow:
      shown_window_ = closed_windows_.front();
      closed_windows_.pop_front();
      break;
  }
  if (lag_) lag_->end_log_point();
  // The first report's wait, and any later one (the device was more than a window behind), are host syncs.
  for (int64_t w = waits_before; w < timer_events_->blocking_waits(); ++w) ledger_.record_sync(Site::kTimers);
}

// Eager: host-clock timers (their synchronizes were counted at start/stop), then Timers.log's all-gather of
// every rank's times and one read of the result.
std::map<std::string, double> LoopTimers::eager_values(int64_t iteration) {
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
  publish(now);
  at::Tensor local = at::empty({1, static_cast<int64_t>(values.size())}, on_run_device(at::kDouble));
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

// What a log point (or the drain) reports joins the run's stream.
void LoopTimers::publish(const std::vector<TimerInterval>& now) {
  reported_.insert(reported_.end(), now.begin(), now.end());
}

TimerSummary LoopTimers::finish() {
  std::vector<TimerInterval> drained;
  for (auto& [name, timer] : timers_) {
    for (TimerInterval& t : timer->drain()) drained.push_back(t);
  }
  publish(drained);
  TimerSummary out;
  for (const TimerInterval& t : reported_)
    if (t.name == kIntervalTimer) out.interval_total += t.seconds;
  if (const EventTimer* ev = timers_.at(kIntervalTimer)->event_timer()) {
    out.first_report_waits = ev->first_report_waits();
    out.lag_waits = ev->lag_waits();
  }
  for (auto& [name, timer] : timers_)
    if (const EventTimer* ev = timer->event_timer())
      out.max_pending_events = std::max(out.max_pending_events, static_cast<int64_t>(ev->max_pending_seen()));
  if (lag_) out.event_lags = lag_->lags();
  for (auto& [name, timer] : timers_) out.timed[name] += timer->intervals_timed();
  if (save_timer_) out.timed[kSaveTimer] = save_timer_->intervals_timed();
  out.intervals = reported_;
  return out;
}

std::vector<TimerInterval> LoopTimers::take_log_point_intervals() {
  std::vector<TimerInterval> out(reported_.begin() + static_cast<long>(reported_mark_), reported_.end());
  reported_mark_ = reported_.size();
  return out;
}

}  // namespace loopgate
