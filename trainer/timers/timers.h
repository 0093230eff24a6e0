// Timers (Megatron: megatron/core/timers.py; the seed's commit 4: docs/design.md) in two forms, one interface:
//   HostTimer  — the baseline: host clock read after a device synchronize, optionally behind a barrier, in both
//                start() and stop(). Exact and immediate, and it blocks the host every time.
//   EventTimer — the sync-free form (seed commit 4): start/stop record events on the device stream. Each
//                elapsed() is a log point that closes a window, and reports are lagged by EXACTLY ONE window:
//                the call at log point k reports the window that ended at log point k-1 (complete long ago on
//                a device at most one window behind, so reading it costs nothing; waited for, and counted,
//                when the device is further behind). The first call has no earlier window: it waits once for
//                the window it just closed and returns its time as a preview (never 0: the caller divides by
//                it); that window is reported, once, by the next call. Lossless: every interval is reported
//                exactly once, in order; at most 1024 events pending (the oldest is waited for when full);
//                drain() reports every open window. Never "whatever has completed": on a GPU that gives a 0.0
//                line and then two windows in one line (measured on an H200: results/history/timings-log.md).
// On CPU an "event" is a clock stamp taken when it is recorded, whose *completion* the EventSource decides —
// tests drive completion by hand, or WindowLagEventSource simulates a device running 0..N windows behind.
// Not here: the CUDA event source (GPU tier) and what the loop times.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "trainer/timers/timer_interval.h"

namespace loopgate {

class Comm;
class EventTimer;
class Ledger;

// ---- clocks ----

class Clock {
 public:
  virtual ~Clock() = default;
  virtual double now() = 0;  // seconds, monotonic
};

class SteadyClock : public Clock {
 public:
  double now() override;
  // CPU simulation only: time the run is said to have spent (a save's RunConfig::simulated_save_seconds), added
  // to every later reading, so a check sees which window holds it without the gate sleeping.
  void advance(double seconds) { offset_ += seconds; }

 private:
  double offset_ = 0.0;
};

// A clock the test moves. Use binary-fraction steps (0.25, 0.125, ...) so sums are exact.
class FakeClock : public Clock {
 public:
  explicit FakeClock(double start = 0.0) : t_(start) {}
  double now() override { return t_; }
  void set(double t) { t_ = t; }
  void advance(double dt) { t_ += dt; }

 private:
  double t_;
};

// ---- the timer interface ----

class Timer {
 public:
  virtual ~Timer() = default;
  virtual const std::string& name() const = 0;
  virtual void start(bool barrier = false) = 0;
  virtual void stop(bool barrier = false) = 0;
  // Megatron's Timer.elapsed: seconds accumulated since the last reset; a running timer is stopped and
  // restarted around the read. For an EventTimer, only intervals already completed count (lagged).
  virtual double elapsed(bool reset = true, bool barrier = false) = 0;
  virtual void reset() = 0;
  virtual bool started() const = 0;
  // The intervals that entered elapsed() since the last take (for a Trace), in order.
  virtual std::vector<TimerInterval> take_reported() = 0;
  // End of the timed region: stop if running, report every interval not yet reported (waiting for events if
  // need be); returns those intervals. They also join take_reported() and the accumulated elapsed().
  virtual std::vector<TimerInterval> drain() = 0;
  // Intervals timed so far (each stop after a start, the drain's included): after the drain, every one of them
  // must have been reported, once.
  virtual int64_t intervals_timed() const = 0;
  // The event timer this is, or wraps (a timer that wraps another forwards it): the loop reads an event timer's
  // report form and waits through it. Null for a host timer.
  virtual EventTimer* event_timer() { return nullptr; }
};

// ---- HostTimer (baseline) ----

// Megatron's Timer (timers.py L109-L214): barrier (optional), device synchronize, host clock.
// `device_sync` is the synchronize hook: on CPU a no-op; the loop passes one that counts Site::kTimers in the
// ledger (and on GPU calls the device synchronize).
class HostTimer : public Timer {
 public:
  HostTimer(std::string name, Clock* clock, Comm* barrier_comm = nullptr, std::function<void()> device_sync = {});
  const std::string& name() const override { return name_; }
  void start(bool barrier = false) override;
  void stop(bool barrier = false) override;
  double elapsed(bool reset = true, bool barrier = false) override;
  void reset() override;  // elapsed to 0; active_time kept (as Megatron)
  bool started() const override { return started_; }
  double active_time() const { return active_time_; }
  std::vector<TimerInterval> take_reported() override;
  std::vector<TimerInterval> drain() override;
  int64_t intervals_timed() const override { return next_seq_; }

 private:
  void sync(bool barrier);

  std::string name_;
  Clock* clock_;
  Comm* barrier_comm_;
  std::function<void()> device_sync_;
  bool started_ = false;
  double start_time_ = 0.0, elapsed_ = 0.0, active_time_ = 0.0;
  int64_t next_seq_ = 0;
  std::vector<TimerInterval> unreported_, reported_;
};

// ---- events ----

// A device stream's timing events. Events complete in the order they were recorded (one stream).
class EventSource {
 public:
  virtual ~EventSource() = default;
  virtual int64_t record() = 0;                      // enqueue; returns the event id (0, 1, 2, ...)
  virtual bool query(int64_t id) = 0;                // completed? never blocks (cudaEventQuery)
  virtual void synchronize(int64_t id) = 0;          // block until completed (cudaEventSynchronize): a sync
  virtual double seconds_between(int64_t a, int64_t b) = 0;  // both completed (cudaEventElapsedTime / 1000)
  virtual int64_t blocking_waits() const = 0;        // synchronize() calls that had to wait
  // The caller is done with the event: the source may reuse it (a CUDA event re-recorded), so the id must not be
  // read again. A timer releases each interval's two events once it has their time, so a run of any length holds
  // only its pending events.
  virtual void release(int64_t /*id*/) {}
};

// CPU events: stamped from the clock at record(); completion decided by the test (resolve_upto, or a
// predicate), or at once (auto_complete, the real CPU case where the "device" is the host).
class ClockEventSource : public EventSource {
 public:
  explicit ClockEventSource(Clock* clock, bool auto_complete = false) : clock_(clock), auto_(auto_complete) {}
  int64_t record() override;
  bool query(int64_t id) override;
  void synchronize(int64_t id) override;
  double seconds_between(int64_t a, int64_t b) override;
  int64_t blocking_waits() const override { return blocking_waits_; }

  void release(int64_t id) override;  // reading a released id afterwards is an error (the GPU would reuse it)
  int64_t live() const { return recorded() - released_count_; }  // recorded and not released

  void resolve_upto(int64_t n);  // events with id < n have completed
  int64_t completed_upto() const { return completed_upto_; }  // ids below are known complete
  void set_completion(std::function<bool(int64_t id)> done) { done_ = std::move(done); }
  int64_t recorded() const { return static_cast<int64_t>(stamps_.size()); }

 private:
  Clock* clock_;
  bool auto_;
  std::vector<double> stamps_;
  std::vector<bool> released_;
  int64_t released_count_ = 0;
  int64_t completed_upto_ = 0;  // ids below are complete
  std::function<bool(int64_t)> done_;
  int64_t blocking_waits_ = 0;
};

// A CPU stand-in for a GPU that runs behind the host: at each log point the device has completed the work of
// all but the last `lag` windows, `lag` drawn from a seeded uniform 0..max_windows (0: the device is idle) — or
// more, if an earlier wait already drained it (completion never goes back). The loop calls begin_log_point()
// before its timers report and end_log_point() after, so a window is the events recorded between two log
// points. Between log points nothing completes (the device is "busy").
class WindowLagEventSource : public ClockEventSource {
 public:
  WindowLagEventSource(Clock* clock, uint64_t seed, int max_windows);
  int begin_log_point();  // applies this log point's lag; returns how many windows are still incomplete
  void end_log_point();   // the events recorded so far end this log point's window
  const std::vector<int>& lags() const { return lags_; }  // begin_log_point()'s results, in order

 private:
  std::mt19937_64 rng_;
  int max_windows_;
  std::vector<int64_t> window_ends_ = {0};  // events recorded at the end of log point 0 (start), 1, 2, ...
  std::vector<int> lags_;
};

// ---- EventTimer (sync-free) ----

// What an event timer's elapsed() shows after a log point: the window before the one it closed (the contract), a
// preview of the window it closed (the first log point; reported again by the next), or every interval completed
// up to now.
enum class TimerShows { kPreviousWindow, kPreviewOfThisWindow, kUpToNow };

// An event timer's book: its events not yet harvested, the intervals harvested and not yet reported, the windows
// closed and not yet reported, the reported sum, and the waits. A report form reads and moves it through these calls
// only, so its invariants (an interval reported once, in order; at most max_pending events) hold in one place.
class IntervalBook {
 public:
  IntervalBook(std::string name, EventSource* events, size_t max_pending);
  const std::string& name() const { return name_; }
  void record(bool is_start);  // a start or a stop event; a stop closes interval timed() - 1
  int64_t timed() const { return next_seq_; }  // intervals closed so far
  void drop_running_start();   // reset() of a running timer: its start event is never reported

  // Windows: a log point closes one at timed(); a report takes the oldest, or every one.
  int64_t log_points() const { return log_points_; }  // windows closed so far, by elapsed()
  void close_window();
  int64_t newest_window_end() const { return window_ends_.back(); }
  int64_t take_oldest_window();  // its end (an interval seq)
  void drop_windows();

  void harvest();                   // completed intervals move from pending to harvested
  bool wait_for(int64_t end_seq);   // every interval below end_seq harvested; true if that blocked
  bool harvested(int64_t seq) const { return done_.count(seq) > 0; }
  // Books interval `seq` at 0 s without waiting for its events, which are released: a form that will not wait.
  void book_unwaited_as_zero(int64_t seq);
  double sum_harvested(int64_t from, int64_t to) const;
  int64_t reported_upto() const { return reported_upto_; }  // intervals with seq below were reported
  // Harvested [reported_upto(), end_seq) -> reported (returned, and kept for take_reported), added to reported_sum().
  std::vector<TimerInterval> report_upto(int64_t end_seq);
  double reported_sum() const { return elapsed_; }
  void reset_sum() { elapsed_ = 0.0; }
  std::vector<TimerInterval> take_reported() { return std::exchange(reported_, {}); }
  std::vector<TimerInterval> drain();  // one blocking wait for every pending event; reports every interval

  size_t pending_events() const { return pending_.size(); }
  size_t max_pending_seen() const { return max_pending_seen_; }
  int64_t forced_waits() const { return forced_waits_; }  // waits because the queue was full
  // A form counts its first report's wait, and its later reports' (the device was > 1 window behind).
  void note_first_report_wait() { ++first_report_waits_; }
  void note_lag_wait() { ++lag_waits_; }
  int64_t first_report_waits() const { return first_report_waits_; }
  int64_t lag_waits() const { return lag_waits_; }

 private:
  struct Pending {
    int64_t event;
    bool is_start;
    int64_t seq;
  };
  std::string name_;
  EventSource* events_;
  size_t max_pending_;
  int64_t next_seq_ = 0, log_points_ = 0;
  double elapsed_ = 0.0;
  std::deque<Pending> pending_;
  std::map<int64_t, double> done_;       // harvested, not yet reported: seq -> seconds
  std::deque<int64_t> window_ends_;      // closed windows not yet reported: the seq each ends before
  int64_t reported_upto_ = 0;
  std::vector<TimerInterval> reported_;  // reported, not yet taken
  size_t max_pending_seen_ = 0;
  int64_t forced_waits_ = 0, first_report_waits_ = 0, lag_waits_ = 0;
};

// How an event timer's log point reports, after elapsed() closed its window in the book: what elapsed() returns and
// what it shows. The trainer has one, the lagged contract (LaggedReport); a loop change under test (built outside
// the trainer) hands the timer another.
class ReportForm {
 public:
  struct Shown {
    double seconds;
    TimerShows shows;
  };
  virtual ~ReportForm() = default;
  virtual Shown report(IntervalBook& book) = 0;
};

// The contract (the file comment): the first log point waits once for the window it closed and previews it; every
// later one reports exactly the window before the one it closed, waiting only if the device is further behind.
class LaggedReport : public ReportForm {
 public:
  Shown report(IntervalBook& book) override;
};

class EventTimer : public Timer {
 public:
  static constexpr size_t kMaxPendingEvents = 1024;
  using Shows = TimerShows;
  EventTimer(std::string name, EventSource* events, size_t max_pending = kMaxPendingEvents,
             std::unique_ptr<ReportForm> form = std::make_unique<LaggedReport>());
  const std::string& name() const override { return book_.name(); }
  void start(bool barrier = false) override;  // barrier ignored: the sync-free form drops the per-call barrier
  void stop(bool barrier = false) override;
  // A log point: closes the current window (a running timer stops and restarts at the boundary) and reports
  // through the timer's form; returns the accumulated reported seconds (the first call: the preview of the window
  // it closed). `reset` clears the accumulation after the read.
  double elapsed(bool reset = true, bool barrier = false) override;
  void reset() override;  // drops the accumulated (already reported) sum; pending intervals stay pending
  bool started() const override { return started_; }
  std::vector<TimerInterval> take_reported() override { return book_.take_reported(); }

  std::vector<TimerInterval> drain() override;  // waits for every pending event (one blocking wait)
  int64_t intervals_timed() const override { return book_.timed(); }
  EventTimer* event_timer() override { return this; }
  Shows shows() const { return shows_; }
  bool last_was_preview() const { return shows_ == Shows::kPreviewOfThisWindow; }
  size_t pending_events() const { return book_.pending_events(); }
  size_t max_pending_seen() const { return book_.max_pending_seen(); }
  int64_t forced_waits() const { return book_.forced_waits(); }
  int64_t first_report_waits() const { return book_.first_report_waits(); }
  int64_t lag_waits() const { return book_.lag_waits(); }

 private:
  IntervalBook book_;
  std::unique_ptr<ReportForm> form_;
  bool started_ = false;
  Shows shows_ = Shows::kPreviousWindow;
};

// ---- the registry (Megatron's Timers) ----

enum class TimerKind { kHost, kEvent };
enum class TimerLogOption { kMax, kMinMax, kAll };

struct TimersConfig {
  TimerKind kind = TimerKind::kHost;
  int log_level = 0;                       // --timing-log-level: timers above it are no-ops (DummyTimer)
  TimerLogOption log_option = TimerLogOption::kMinMax;  // --timing-log-option
  c10::Device comm_device{c10::DeviceType::CPU};         // where log()'s gather tensor lives (CUDA for NCCL)
};

class Timers {
 public:
  // `events` is required for kEvent; `comm` (world) for barriers and for log()'s min/max over ranks;
  // `ledger` (optional) counts the read of the gathered times at Site::kTimers.
  Timers(TimersConfig config, Clock* clock, EventSource* events = nullptr, Comm* comm = nullptr,
         std::function<void()> device_sync = {}, Ledger* ledger = nullptr);

  // Megatron's timers(name, log_level): log_level < 0 means "max level" (2). Above the configured level the
  // returned timer does nothing. The level of an existing timer must match.
  Timer& operator()(const std::string& name, int log_level = -1);
  bool has(const std::string& name) const;

  // Megatron's Timers.log strings (timers.py L338-L376): per timer (min, max) over ranks of elapsed seconds
  // divided by normalizer/1000 (ms). One all-gather over `comm` (none when comm is null: this rank only).
  // Timers with no positive time on any rank are omitted; if none remain, returns "".
  std::string log(const std::vector<std::string>& names, double normalizer = 1.0, bool reset = true);
  // Times (seconds) of `names` on every rank: [rank][name]. One all-gather.
  std::vector<std::vector<double>> elapsed_all_ranks(const std::vector<std::string>& names, bool reset = true);

  std::vector<TimerInterval> take_reported();  // from every timer, by timer name then seq
  std::vector<TimerInterval> drain();          // kEvent: drain every timer; kHost: stop running ones and report

 private:
  TimersConfig config_;
  Clock* clock_;
  EventSource* events_;
  Comm* comm_;
  std::function<void()> device_sync_;
  Ledger* ledger_;
  std::map<std::string, std::unique_ptr<Timer>> timers_;
  std::map<std::string, int> levels_;
  std::unique_ptr<Timer> dummy_;
};

}  // namespace loopgate
