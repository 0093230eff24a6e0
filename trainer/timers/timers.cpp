// Timers: HostTimer (Megatron's Timer), EventTimer (lagged, lossless), and the Timers registry and log strings.
#include "trainer/timers/timers.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>

#include "trainer/common/error.h"
#include "trainer/measure/ledger.h"
#include "trainer/parallel/comm.h"

namespace loopgate {

double SteadyClock::now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count() + offset_;
}

// ---- HostTimer ----

HostTimer::HostTimer(std::string name, Clock* clock, Comm* barrier_comm, std::function<void()> device_sync)
    : name_(std::move(name)), clock_(clock), barrier_comm_(barrier_comm), device_sync_(std::move(device_sync)) {
  LG_CHECK(clock_ != nullptr, "timer {} needs a clock", name_);
}

// Megatron: barrier (if asked) then torch.cuda.synchronize(), in both start and stop.
void HostTimer::sync(bool barrier) {
  if (barrier && barrier_comm_) barrier_comm_->barrier();
  if (device_sync_) device_sync_();
}

void HostTimer::start(bool barrier) {
  LG_CHECK(!started_, "timer {} has already been started", name_);
  sync(barrier);
  start_time_ = clock_->now();
  started_ = true;
}

void HostTimer::stop(bool barrier) {
  LG_CHECK(started_, "timer {} is not started", name_);
  sync(barrier);
  const double e = clock_->now() - start_time_;
  elapsed_ += e;
  active_time_ += e;
  started_ = false;
  unreported_.push_back({name_, next_seq_++, e});
}

void HostTimer::reset() {
  elapsed_ = 0.0;
  started_ = false;
  unreported_.clear();  // discarded time is never reported
}

double HostTimer::elapsed(bool reset, bool barrier) {
  const bool was_started = started_;
  if (was_started) stop(barrier);
  const double e = elapsed_;
  reported_.insert(reported_.end(), unreported_.begin(), unreported_.end());
  unreported_.clear();
  if (reset) this->reset();
  if (was_started) start(barrier);
  return e;
}

std::vector<TimerInterval> HostTimer::take_reported() { return std::exchange(reported_, {}); }

std::vector<TimerInterval> HostTimer::drain() {
  if (started_) stop();
  std::vector<TimerInterval> out = std::exchange(unreported_, {});
  reported_.insert(reported_.end(), out.begin(), out.end());
  return out;
}

// ---- ClockEventSource ----

int64_t ClockEventSource::record() {
  stamps_.push_back(clock_->now());
  released_.push_back(false);
  return static_cast<int64_t>(stamps_.size()) - 1;
}

void ClockEventSource::release(int64_t id) {
  LG_CHECK(id >= 0 && id < recorded(), "release of event {}, never recorded ({} recorded)", id, recorded());
  LG_CHECK(!released_[static_cast<size_t>(id)], "event {} released twice", id);
  released_[static_cast<size_t>(id)] = true;
  ++released_count_;
}

bool ClockEventSource::query(int64_t id) {
  LG_CHECK(id >= 0 && id < recorded(), "event {} was never recorded ({} recorded)", id, recorded());
  LG_CHECK(!released_[static_cast<size_t>(id)], "event {} read after its release", id);
  if (auto_ || id < completed_upto_) return true;
  if (done_ && done_(id)) {
    completed_upto_ = std::max(completed_upto_, id + 1);  // one stream: earlier events are done too
    return true;
  }
  return false;
}

void ClockEventSource::synchronize(int64_t id) {
  if (query(id)) return;
  ++blocking_waits_;
  completed_upto_ = id + 1;
}

double ClockEventSource::seconds_between(int64_t a, int64_t b) {
  LG_CHECK(query(a) && query(b), "elapsed time between events {} and {} before both completed", a, b);
  return stamps_[b] - stamps_[a];
}

void ClockEventSource::resolve_upto(int64_t n) { completed_upto_ = std::max(completed_upto_, n); }

// ---- WindowLagEventSource ----

WindowLagEventSource::WindowLagEventSource(Clock* clock, uint64_t seed, int max_windows)
    : ClockEventSource(clock), rng_(seed), max_windows_(max_windows) {
  LG_CHECK(max_windows >= 0, "event lag simulation: max_windows {} < 0", max_windows);
}

int WindowLagEventSource::begin_log_point() {
  const int drawn = std::uniform_int_distribution<int>(0, max_windows_)(rng_);
  // Lag 0: everything the host issued is done. Lag L: done up to the end of the window L log points back.
  const int64_t k = static_cast<int64_t>(window_ends_.size());  // this log point's number
  resolve_upto(drawn == 0 ? recorded() : window_ends_[static_cast<size_t>(std::max<int64_t>(0, k - drawn))]);
  // What the device is really behind by: the current window, and each window ended at log points k-1, k-2, ...
  // whose closing event is not complete — an earlier wait may have drained more than the draw says. A log
  // point's last event restarts the running interval timer: it opens the next window, so it does not count.
  int lag = completed_upto() < recorded() ? 1 : 0;
  for (int64_t j = k - 1; j >= 1 && completed_upto() < window_ends_[static_cast<size_t>(j)] - 1; --j) ++lag;
  lags_.push_back(lag);
  return lag;
}

void WindowLagEventSource::end_log_point() { window_ends_.push_back(recorded()); }

// ---- the interval book ----

IntervalBook::IntervalBook(std::string name, EventSource* events, size_t max_pending)
    : name_(std::move(name)), events_(events), max_pending_(max_pending) {
  LG_CHECK(events_ != nullptr, "event timer {} needs an event source", name_);
  LG_CHECK(max_pending_ >= 2, "event timer {}: max_pending {} < 2", name_, max_pending_);
}

void IntervalBook::record(bool is_start) {
  // Full: wait for the oldest closed interval (a blocking wait, the bound's price) and keep it until its window
  // is due — forced completion never makes a report early.
  while (pending_.size() >= max_pending_) {
    LG_CHECK(pending_.size() >= 2 && pending_[0].is_start && !pending_[1].is_start,
             "event timer {}: queue full without a closed interval", name_);
    events_->synchronize(pending_[1].event);
    ++forced_waits_;
    harvest();
  }
  pending_.push_back({events_->record(), is_start, next_seq_});
  max_pending_seen_ = std::max(max_pending_seen_, pending_.size());
  if (!is_start) ++next_seq_;
}

void IntervalBook::drop_running_start() { pending_.pop_back(); }

void IntervalBook::close_window() {
  window_ends_.push_back(next_seq_);
  ++log_points_;
}

int64_t IntervalBook::take_oldest_window() {
  const int64_t end = window_ends_.front();
  window_ends_.pop_front();
  return end;
}

void IntervalBook::drop_windows() { window_ends_.clear(); }

void IntervalBook::harvest() {
  while (pending_.size() >= 2 && pending_[0].is_start && !pending_[1].is_start &&
         events_->query(pending_[0].event) && events_->query(pending_[1].event)) {
    done_[pending_[0].seq] = events_->seconds_between(pending_[0].event, pending_[1].event);
    events_->release(pending_[0].event);
    events_->release(pending_[1].event);
    pending_.pop_front();
    pending_.pop_front();
  }
}

bool IntervalBook::wait_for(int64_t end_seq) {
  harvest();
  bool waited = false;
  // The stop event of the window's last interval: once it completes, so has every earlier event (one stream).
  for (const Pending& p : pending_) {
    if (p.is_start || p.seq >= end_seq) continue;
    if (!events_->query(p.event)) {
      const int64_t before = events_->blocking_waits();
      auto last = std::find_if(pending_.rbegin(), pending_.rend(),
                               [end_seq](const Pending& q) { return !q.is_start && q.seq < end_seq; });
      events_->synchronize(last->event);
      waited = events_->blocking_waits() > before;
    }
    break;
  }
  harvest();
  LG_CHECK(done_.empty() || done_.begin()->first >= reported_upto_, "event timer {}: interval {} reported twice",
           name_, done_.begin()->first);
  for (int64_t s = reported_upto_; s < end_seq; ++s)
    LG_CHECK(done_.count(s), "event timer {}: interval {} still pending after its wait", name_, s);
  return waited;
}

void IntervalBook::book_unwaited_as_zero(int64_t seq) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->seq == seq) {
      events_->release(it->event);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  done_[seq] = 0.0;
}

double IntervalBook::sum_harvested(int64_t from, int64_t to) const {
  double sum = 0.0;
  for (auto it = done_.lower_bound(from); it != done_.end() && it->first < to; ++it) sum += it->second;
  return sum;
}

std::vector<TimerInterval> IntervalBook::report_upto(int64_t end_seq) {
  std::vector<TimerInterval> out;
  for (; reported_upto_ < end_seq; ++reported_upto_) {
    auto it = done_.find(reported_upto_);
    out.push_back({name_, reported_upto_, it->second});
    elapsed_ += it->second;
    done_.erase(it);
  }
  reported_.insert(reported_.end(), out.begin(), out.end());
  return out;
}

std::vector<TimerInterval> IntervalBook::drain() {
  if (!pending_.empty()) events_->synchronize(pending_.back().event);
  harvest();
  LG_CHECK(pending_.empty(), "event timer {}: {} events still pending after drain", name_, pending_.size());
  window_ends_.clear();
  return report_upto(next_seq_);
}

// ---- the lagged report ----

ReportForm::Shown LaggedReport::report(IntervalBook& book) {
  if (book.log_points() == 1) {
    // The first log point: no earlier window to report. Wait once for this one and show it; it is reported
    // (exactly once) by the next log point.
    if (book.wait_for(book.newest_window_end())) book.note_first_report_wait();
    return {book.reported_sum() + book.sum_harvested(book.reported_upto(), book.newest_window_end()),
            TimerShows::kPreviewOfThisWindow};
  }
  // Every later log point reports the window before the one it just closed: exactly one window.
  const int64_t due = book.take_oldest_window();
  if (book.wait_for(due)) book.note_lag_wait();
  book.report_upto(due);
  return {book.reported_sum(), TimerShows::kPreviousWindow};
}

// ---- EventTimer ----

EventTimer::EventTimer(std::string name, EventSource* events, size_t max_pending, std::unique_ptr<ReportForm> form)
    : book_(std::move(name), events, max_pending), form_(std::move(form)) {
  LG_CHECK(form_ != nullptr, "event timer {} needs a report form", book_.name());
}

void EventTimer::start(bool) {
  LG_CHECK(!started_, "timer {} has already been started", book_.name());
  book_.record(true);
  started_ = true;
}

void EventTimer::stop(bool) {
  LG_CHECK(started_, "timer {} is not started", book_.name());
  book_.record(false);
  started_ = false;
}

double EventTimer::elapsed(bool reset, bool) {
  const bool was_started = started_;
  if (was_started) stop();
  book_.close_window();  // the window this log point closes
  const ReportForm::Shown shown = form_->report(book_);
  shows_ = shown.shows;
  if (reset) book_.reset_sum();
  if (was_started) start();
  return shown.seconds;
}

void EventTimer::reset() {
  book_.reset_sum();
  if (started_) {  // Megatron's reset drops a running window; its start event is never reported
    book_.drop_running_start();
    started_ = false;
  }
}

std::vector<TimerInterval> EventTimer::drain() {
  if (started_) stop();
  return book_.drain();
}

// ---- Timers ----

namespace {
// Megatron's DummyTimer: a timer above the log level. start/stop do nothing; elapsed raises.
class DummyTimer : public Timer {
 public:
  const std::string& name() const override { return name_; }
  void start(bool) override {}
  void stop(bool) override {}
  double elapsed(bool, bool) override {
    LG_CHECK(false, "elapsed() is not supported on a timer above the log level");
    return 0.0;
  }
  void reset() override {}
  bool started() const override { return false; }
  std::vector<TimerInterval> take_reported() override { return {}; }
  std::vector<TimerInterval> drain() override { return {}; }
  int64_t intervals_timed() const override { return 0; }

 private:
  std::string name_ = "dummy";
};

constexpr int kMaxLogLevel = 2;

std::string ljust_dots(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), '.');
}
}  // namespace

Timers::Timers(TimersConfig config, Clock* clock, EventSource* events, Comm* comm, std::function<void()> device_sync,
               Ledger* ledger)
    : config_(config), clock_(clock), events_(events), comm_(comm), device_sync_(std::move(device_sync)),
      ledger_(ledger), dummy_(std::make_unique<DummyTimer>()) {
  LG_CHECK(config_.kind != TimerKind::kEvent || events_ != nullptr, "event timers need an event source");
  LG_CHECK(config_.kind != TimerKind::kHost || clock_ != nullptr, "host timers need a clock");
}

Timer& Timers::operator()(const std::string& name, int log_level) {
  if (log_level < 0) log_level = kMaxLogLevel;
  auto it = timers_.find(name);
  if (it != timers_.end()) {
    LG_CHECK(levels_[name] == log_level, "timer {}: log level {} does not match its earlier level {}", name,
             log_level, levels_[name]);
    return *it->second;
  }
  LG_CHECK(log_level <= kMaxLogLevel, "timer {}: log level {} > {}", name, log_level, kMaxLogLevel);
  if (log_level > config_.log_level) return *dummy_;
  std::unique_ptr<Timer> t;
  if (config_.kind == TimerKind::kHost)
    t = std::make_unique<HostTimer>(name, clock_, comm_, device_sync_);
  else
    t = std::make_unique<EventTimer>(name, events_);
  levels_[name] = log_level;
  return *(timers_[name] = std::move(t));
}

bool Timers::has(const std::string& name) const { return timers_.count(name) > 0; }

// Megatron: _get_elapsed_time_all_ranks — own row filled, one all_gather over the world, one read.
std::vector<std::vector<double>> Timers::elapsed_all_ranks(const std::vector<std::string>& names, bool reset) {
  std::vector<double> mine(names.size(), 0.0);
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = timers_.find(names[i]);
    if (it != timers_.end()) mine[i] = it->second->elapsed(reset);
  }
  if (comm_ == nullptr || names.empty()) return {mine};
  // fp64, not Megatron's fp32, so gathered times are the exact values each rank measured.
  const auto opts = at::TensorOptions().dtype(at::kDouble).device(config_.comm_device);
  at::Tensor row = ledger_ ? ledger_->device_tensor(Site::kTimers, mine, opts)
                           : at::tensor(mine, at::TensorOptions().dtype(at::kDouble)).to(config_.comm_device);
  at::Tensor all = comm_->all_gather(row);
  std::vector<double> flat;
  if (ledger_) {
    flat = ledger_->read(Site::kTimers, all);
  } else {
    at::Tensor host = all.to(at::kCPU).contiguous();
    flat.assign(host.data_ptr<double>(), host.data_ptr<double>() + host.numel());
  }
  const size_t n = names.size();
  std::vector<std::vector<double>> out(flat.size() / n);
  for (size_t r = 0; r < out.size(); ++r) out[r].assign(flat.begin() + r * n, flat.begin() + (r + 1) * n);
  return out;
}

std::string Timers::log(const std::vector<std::string>& names, double normalizer, bool reset) {
  LG_CHECK(normalizer > 0.0, "timers log: normalizer {} <= 0", normalizer);
  const auto times = elapsed_all_ranks(names, reset);
  const double scale = normalizer / 1000.0;  // seconds -> ms per normalizer unit
  std::string out;
  bool any = false;
  for (size_t i = 0; i < names.size(); ++i) {
    double lo = 0.0, hi = 0.0;
    bool found = false;
    std::string per_rank;
    for (size_t r = 0; r < times.size(); ++r) {
      const double t = times[r][i];
      if (!(t > 0.0)) continue;  // ranks that never ran it
      lo = found ? std::min(lo, t) : t;
      hi = found ? std::max(hi, t) : t;
      found = true;
      per_rank += fmt::format("\n     rank {:2d}: {:.2f}", r, t / scale);
    }
    if (!found) continue;
    any = true;
    switch (config_.log_option) {
      case TimerLogOption::kMinMax:
        out += fmt::format("\n    {}: ({:.2f}, {:.2f})", ljust_dots(names[i] + " ", 48), lo / scale, hi / scale);
        break;
      case TimerLogOption::kMax:
        out += fmt::format("\n    {}: {:.2f}", ljust_dots(names[i] + " ", 48), hi / scale);
        break;
      case TimerLogOption::kAll:
        out += fmt::format("\n  {}:", names[i]) + per_rank;
        break;
    }
  }
  if (!any) return "";
  switch (config_.log_option) {
    case TimerLogOption::kMinMax: return "(min, max) time across ranks (ms):" + out;
    case TimerLogOption::kMax: return "max time across ranks (ms):" + out;
    case TimerLogOption::kAll: return "times across ranks (ms):" + out;
  }
  return out;
}

std::vector<TimerInterval> Timers::take_reported() {
  std::vector<TimerInterval> out;
  for (auto& [name, t] : timers_) {
    auto v = t->take_reported();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

std::vector<TimerInterval> Timers::drain() {
  std::vector<TimerInterval> out;
  for (auto& [name, t] : timers_) {
    auto v = t->drain();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace loopgate
