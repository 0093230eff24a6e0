// The loop's timers (the seed's commit 4): two level-1 timers around forward-backward and the optimizer, the
// interval timer behind the log line's elapsed time, and the report stream the timers gate checks. Eager: host-clock
// timers whose start / stop synchronize the device (Megatron's Timer); deferred: device events read lagged by one
// log window, riding the batched read. Both forms side by side, one object per arm segment.
// Megatron origin: megatron/core/timers.py.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trainer/measure/ledger.h"
#include "trainer/timers/timers.h"
#include "trainer/loop/arms.h"
#include "trainer/loop/bundle.h"
#include "trainer/loop/config.h"
#include "trainer/parallel/comm.h"

namespace loopgate {

// The iterations (1-based, inclusive) a reported interval-time value covers.
struct TimerWindow {
  int64_t first = 0, last = 0;
};

// What the timers did over a run (LoopTimers::finish).
struct TimerSummary {
  std::vector<TimerInterval> intervals;  // every interval reported, in report order
  double interval_total = 0.0;           // sum of the interval-time intervals
  int64_t first_report_waits = 0;        // deferred: the first report's wait (0 or 1)
  int64_t lag_waits = 0;                 // deferred: later reports that waited (device > 1 window behind)
  int64_t max_pending_events = 0;        // the most events any EventTimer held pending (bound 1024); 0 eager
  std::vector<int> event_lags;           // RunConfig::event_lag: the simulated lag at each log point
  std::map<std::string, int64_t> timed;  // per timer, the intervals it timed (every one must be in `intervals`)

  void append(const TimerSummary& later);  // a later segment's, after this one's
};

class LoopTimers {
 public:
  // `instrumented` false (`ab --arms A,A:bare`): a deferred arm's level-1 timers record no events (the interval
  // timer stays: the log line's elapsed time is Megatron's level 0). An eager arm's level-1 timers stay either way:
  // their synchronizes are Megatron's Timer.start/stop, the loop under test, not loopgate's bookkeeping.
  LoopTimers(const Arm& arm, const RunConfig& config, Ledger& ledger, ProcessGroups& groups, int world_rank,
             bool instrumented);
  ~LoopTimers();

  bool deferred() const { return arm_.timers == SyncMode::kDeferred; }
  void start(const std::string& name);
  void stop(const std::string& name);
  // The interval timer starts with the window of 1-based `first_iteration` (a segment's first).
  void start_interval(int64_t first_iteration);
  // Deferred, at a log point: every timer's lagged report into `b` (MAX and MAX-of-negated over ranks).
  void add_deferred_values(Bundle& b, int64_t iteration);
  // Eager, at a log point: every timer's time, all-gathered over the world and read once.
  std::map<std::string, double> eager_values(int64_t iteration);
  // The log line's elapsed time per iteration, from the values the log point read.
  double elapsed_ms_per_iteration(std::map<std::string, double>& values) const;
  // The intervals reported since the previous log point, and the iterations the shown time covers.
  std::vector<TimerInterval> take_log_point_intervals();
  TimerWindow shown_window() const { return shown_window_; }
  // Megatron's save_checkpoint_and_time around `save`: the interval timer stops, so the window open at the save
  // leaves the save's time out, and starts again after it; the save is timed by its own host timer
  // (save-checkpoint, behind a barrier as Megatron's), reported at once (Timers.log([save-checkpoint])).
  void time_save(const std::function<void()>& save);
  // Drains every timer (stop of the timer set): every interval ever reported, in report order, and counters.
  TimerSummary finish();

 private:
  Timer* level1(const std::string& name);  // null: left out (not instrumented); unknown names fail
  void publish(const std::vector<TimerInterval>& now);

  const Arm& arm_;
  Ledger& ledger_;
  ProcessGroups& groups_;
  SteadyClock clock_;
  double simulated_save_seconds_ = 0.0;  // RunConfig::simulated_save_seconds, on CPU events only
  std::unique_ptr<ClockEventSource> events_;
  std::unique_ptr<EventSource> device_events_;  // CUDA events on the GPU tier (timers use them when set)
  EventSource* timer_events_ = nullptr;         // the one the deferred timers record on
  WindowLagEventSource* lag_ = nullptr;         // events_, when RunConfig::event_lag simulates a lagging device
  std::map<std::string, std::unique_ptr<Timer>> timers_;
  int64_t window_start_ = 1;                    // first iteration of the timers' current window
  std::deque<TimerWindow> closed_windows_;      // deferred: closed, not yet reported
  TimerWindow shown_window_;                    // what this log point's time covers
  std::vector<TimerInterval> reported_;
  // The saves' own timer (save-checkpoint), one for the run as Megatron's Timers keeps it: its report stream is
  // numbered across saves.
  std::unique_ptr<HostTimer> save_timer_;
  size_t reported_mark_ = 0;  // reported_[mark..] were reported since the last log point
};

}  // namespace loopgate
