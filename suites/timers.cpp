// Gate: timers. On real multi-rank runs of every arm (host timers for eager arms, lagged device-event timers for
// deferred ones), the properties of the seed's commit 4, sharpened: every interval reported
// exactly once (per timer, sequence numbers 0..n-1, no gap or duplicate), in order (what each iteration reported
// is a prefix of the run's report stream); at most 1024 events pending; open windows drained on stop; the
// reported interval-time intervals sum exactly to the total; and ONE WINDOW PER LOG LINE: every log line after
// the first carries exactly one interval-time window, > 0, covering the iterations of the window before it
// (deferred: lagged by one window) or its own (eager); the first report waits once and later reports wait only
// when the device is more than a window behind — shown with a CPU device that runs a seeded random 0-3 log
// windows behind the host (RunConfig::event_lag), where "whatever has completed" gives 0.0 lines and doubled
// windows (measured on an H200). Plus the registry on a FakeClock: 1000 intervals of exact
// binary fractions through Timers/EventTimer, the 1024 bound exercised, sums exact.
// Not proven here: that device-event times equal host times (they differ by construction), real CUDA events
// (suites/gpu covers those).
#include <gtest/gtest.h>
#include <mpi.h>
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <regex>

#include "fixtures/compare.h"
#include "fixtures/golden.h"
#include "fixtures/harness/arm_test.h"
#include "fixtures/scenarios.h"
#include "trainer/common/device.h"
#include "trainer/timers/timers.h"

namespace loopgate {
namespace {

constexpr const char* kInterval = "interval-time";

bool same_interval(const TimerInterval& a, const TimerInterval& b) {
  return a.name == b.name && a.seq == b.seq && same_bits(a.seconds, b.seconds);
}

// Every accounting problem of `arm`'s run `r` on this rank, one line each. `saves`: the saves the run made (each
// pauses interval-time, so its window is reported as two intervals).
std::vector<std::string> accounting_problems(const std::string& arm, const RunResult& r, int64_t saves = 0) {
  std::vector<std::string> p;
  const int rank = world_rank();
  auto bad = [&](const std::string& what) { p.push_back(fmt::format("{}: rank {}: {}", arm, rank, what)); };
  const std::vector<TimerInterval>& all = r.timers.intervals;
  // Exactly once, in order: per timer the report stream's sequence numbers are 0, 1, 2, ...
  std::map<std::string, int64_t> next;
  for (const TimerInterval& t : all) {
    int64_t& want = next[t.name];
    if (t.seq != want) bad(fmt::format("timer {} reported seq {} where {} was due (gap, duplicate or reorder)", t.name, t.seq, want));
    want = t.seq + 1;
    if (!(t.seconds >= 0.0) || !std::isfinite(t.seconds)) bad(fmt::format("timer {} seq {}: {} s", t.name, t.seq, hex(t.seconds)));
  }
  // Drained on stop: every window started was reported (one forward-backward and one optimizer window per
  // iteration; one interval-time window per log point plus the last, plus one per save).
  int64_t log_points = 0;
  for (const IterationRecord& rec : r.trace.records) log_points += rec.timer_window_first > 0;
  const int64_t n = r.iterations_done;
  const std::map<std::string, int64_t> want_count = {{"forward-backward", n}, {"optimizer", n}, {kInterval, log_points + 1 + saves}};
  for (const auto& [name, count] : want_count)
    if (next[name] != count) bad(fmt::format("timer {}: {} intervals reported, {} started", name, next[name], count));
  // Whatever the timers are (a replayed iteration's, a save's): per timer, the intervals reported are the ones it
  // timed, so a drain that forgets one timer, or a report that loses its pending intervals, fails.
  std::map<std::string, int64_t> reported;
  for (const TimerInterval& t : all) ++reported[t.name];
  for (const auto& [name, timed] : r.timers.timed)
    if (reported[name] != timed)
      bad(fmt::format("timer {}: {} intervals reported, {} timed", name, reported[name], timed));
  for (const auto& [name, n] : reported)
    if (!r.timers.timed.count(name)) bad(fmt::format("timer {}: {} intervals reported, none timed", name, n));
  // What each iteration's Trace record reported is, in iteration order, a prefix of the run's report stream.
  size_t k = 0;
  for (const IterationRecord& rec : r.trace.records) {
    for (const TimerInterval& t : rec.timer_intervals) {
      if (k >= all.size() || !same_interval(t, all[k]))
        bad(fmt::format("iteration {}: reported {} seq {} ({}) is not interval #{} of the run's stream", rec.iteration,
                        t.name, t.seq, hex(t.seconds), k));
      ++k;
    }
  }
  // The specification's bound (seed PR: "bounded at 1024 pending events"), not the code's own constant.
  constexpr int64_t kSpecMaxPending = 1024;
  if (r.timers.max_pending_events > kSpecMaxPending)
    bad(fmt::format("{} events pending at once (bound {})", r.timers.max_pending_events, kSpecMaxPending));
  // Lossless: the reported interval-time intervals sum, bit for bit, to the recorded total.
  double sum = 0.0;
  for (const TimerInterval& t : all)
    if (t.name == kInterval) sum += t.seconds;
  if (!same_bits(sum, r.timers.interval_total))
    bad(fmt::format("interval-time: reported sum {} != recorded total {}", hex(sum), hex(r.timers.interval_total)));
  return p;
}

std::vector<std::string> accounting_problems(const std::string& arm) { return accounting_problems(arm, clean_run(arm).local); }

// The logged elapsed time of a Megatron line (ms per iteration).
double logged_elapsed_ms(const std::string& line) {
  static const std::regex kElapsed(R"(elapsed time per iteration \(ms\): ([0-9.]+) \|)");
  std::smatch m;
  return std::regex_search(line, m, kElapsed) ? std::stod(m[1]) : -1.0;
}

// One window per log line: on this rank, every log point after the first reports exactly one interval-time
// interval, > 0, covering the window before this log point's (deferred) or its own (eager); the line prints a
// time > 0. Windows are the iterations between log points; the first log line (iteration 1) does not reset, as
// Megatron HEAD's. A save after iteration k pauses the window that holds iteration k + 1: that window is reported
// as one interval more (`saves_after`: the k of each save).
std::vector<std::string> window_problems(const std::string& arm, const RunResult& r,
                                         const std::vector<int64_t>& saves_after = {}) {
  std::vector<std::string> p;
  const bool deferred = find_arm(arm).timers == SyncMode::kDeferred;
  const int rank = world_rank();
  auto bad = [&](int64_t it, const std::string& what) {
    p.push_back(fmt::format("{}: rank {} iteration {}: {}", arm, rank, it, what));
  };
  std::vector<const IterationRecord*> logs;
  for (const IterationRecord& rec : r.trace.records)
    if (rec.rank == rank && rec.timer_window_first > 0) logs.push_back(&rec);
  std::vector<std::pair<int64_t, int64_t>> windows;  // the timers' windows closed at each log point
  int64_t start = 1;
  for (const IterationRecord* rec : logs) {
    windows.emplace_back(start, rec->iteration);
    start = rec->iteration + 1;
  }
  for (size_t i = 0; i < logs.size(); ++i) {
    const IterationRecord& rec = *logs[i];
    std::pair<int64_t, int64_t> want = windows[i];
    if (deferred && i > 0) want = windows[i - 1];
    if (!deferred && i > 0 && logs[0]->iteration == 1 && i == 1) want.first = 1;  // no reset at iteration 1
    if (rec.timer_window_first != want.first || rec.timer_window_last != want.second)
      bad(rec.iteration, fmt::format("time covers iterations {}-{}, expected {}-{}", rec.timer_window_first,
                                     rec.timer_window_last, want.first, want.second));
    int n_interval = 0;
    for (const TimerInterval& t : rec.timer_intervals) {
      if (t.name != kInterval) continue;
      ++n_interval;
      if (!(t.seconds > 0.0)) bad(rec.iteration, fmt::format("interval-time window of {} s", hex(t.seconds)));
    }
    int64_t pauses = 0;
    for (int64_t k : saves_after) pauses += want.first <= k + 1 && k + 1 <= want.second;
    if (i > 0 && n_interval != 1 + pauses)
      bad(rec.iteration, fmt::format("{} interval-time intervals in one line, expected {} (one window, {} save pause(s))",
                                     n_interval, 1 + pauses, pauses));
  }
  if (rank == world_size() - 1) {
    for (size_t i = 0; i < r.log_lines.size(); ++i)
      if (!(logged_elapsed_ms(r.log_lines[i]) > 0.0))
        bad(i < logs.size() ? logs[i]->iteration : -1, "log line's elapsed time is not > 0: " + r.log_lines[i]);
  }
  return p;
}

// ---- the lagging device: a seeded random 0-3 log windows behind the host ----

RunConfig lagged_config() {
  RunConfig c = gate_config();
  c.train_iters = heavy_fixture() ? 6 : 16;
  c.log_interval = 2;
  c.event_lag.seed = 20261130;
  c.event_lag.max_windows = 3;
  return c;
}

const ScenarioResult& lagged_run(const std::string& arm) { return run_scenario("timers-lagged", lagged_config(), arm); }

// ---- the 1024-event bound: a log window long enough to exceed it (the tiny LR model: iterations are cheap) ----

RunConfig bound_config() {
  // One microbatch: a level-1 timer's events per iteration do not depend on the split.
  RunConfig c = lr_case_config(gate_fixture(), find_lr_case("cosine-skipped-steps"), /*iters=*/520,
                               /*microbatches=*/1);
  c.faults = nullptr;    // a clean run
  c.log_interval = 520;  // 520 iterations of one level-1 timer = 1040 events before the first log point
  return c;
}

const ScenarioResult& bound_run(const std::string& arm) { return run_scenario("timers-bound", bound_config(), arm); }

std::vector<std::string> bound_problems(const std::string& arm) {
  std::vector<std::string> p;
  const RunResult& r = bound_run(arm).local;
  // The specification's bound (seed PR: "bounded at 1024 pending events"), not the code's own constant.
  constexpr int64_t kSpecMaxPending = 1024;
  if (r.timers.max_pending_events > kSpecMaxPending)
    p.push_back(fmt::format("{}: rank {}: {} events pending at once over a 520-iteration window (bound {})", arm,
                            world_rank(), r.timers.max_pending_events, kSpecMaxPending));
  if (r.timers.max_pending_events < kSpecMaxPending)
    p.push_back(fmt::format("{}: rank {}: only {} events ever pending: the bound was not exercised", arm, world_rank(),
                            r.timers.max_pending_events));
  auto a = accounting_problems(arm, r);
  p.insert(p.end(), a.begin(), a.end());
  return p;
}

// A report waits when, and only when, the window due was not complete: the first report once; later ones when
// the device was two or more windows behind (one window behind is what a lag of one window absorbs).
std::vector<std::string> lag_wait_problems(const std::string& arm, const ScenarioResult& s) {
  std::vector<std::string> p;
  const std::vector<int>& lags = s.local.timers.event_lags;
  int64_t k = 0;
  for (const IterationRecord& rec : s.trace.records) {
    if (rec.rank != world_rank() || rec.timer_window_first == 0) continue;
    auto it = rec.reads_per_site.find("timers");
    const int64_t waits = it == rec.reads_per_site.end() ? 0 : it->second;
    if (k >= static_cast<int64_t>(lags.size())) {
      p.push_back(fmt::format("{}: rank {}: log point {} has no simulated lag", arm, world_rank(), k + 1));
      break;
    }
    const int64_t want = k == 0 ? 1 : (lags[k] >= 2 ? 1 : 0);
    if (waits != want)
      p.push_back(fmt::format("{}: rank {} iteration {}: {} timer wait(s) with the device {} window(s) behind, expected {}",
                              arm, world_rank(), rec.iteration, waits, lags[k], want));
    ++k;
  }
  return p;
}

// ---- tests on real runs ----

class Timers : public ArmTest {};

TEST_P(Timers, EveryIntervalOnceInOrderBoundedDrainedAndSumExact) {
  for (const std::string& arm : {std::string("baseline"), GetParam()}) {
    auto p = accounting_problems(arm);
    EXPECT_TRUE(p.empty()) << problem_list(p);
  }
}

TEST_P(Timers, OneWindowPerLogLineCoveringThePreviousWindow) {
  for (const std::string& arm : {std::string("baseline"), GetParam()}) {
    auto p = window_problems(arm, clean_run(arm).local);
    EXPECT_TRUE(p.empty()) << problem_list(p);
  }
}

// The first report blocks once (it has no earlier value to stand in for it; the log line divides by it), then
// reports lag without waiting. Eager (host) timers never wait on events; they synchronize at every start/stop.
TEST_P(Timers, FirstReportBlocksOnceThenNever) {
  const ScenarioResult& s = clean_run(GetParam());
  const bool deferred = find_arm(GetParam()).timers == SyncMode::kDeferred;
  // CPU events lag by construction, so the first report must wait exactly once. Real device events may already
  // be complete when the first report comes (the device was not behind): then it waits at most once. Either
  // way no later report waits (the device is never two windows behind here), and the first line has a time.
  const bool events_lag_by_construction = !gate_config().model.device.is_cuda();
  const int64_t first = deferred ? 1 : 0;
  if (events_lag_by_construction) {
    EXPECT_EQ(s.local.timers.first_report_waits, first) << GetParam() << ": rank " << world_rank();
  } else {
    EXPECT_LE(s.local.timers.first_report_waits, first) << GetParam() << ": rank " << world_rank();
  }
  EXPECT_EQ(s.local.timers.lag_waits, 0) << GetParam() << ": rank " << world_rank();
  if (!deferred) return;
  for (const IterationRecord& rec : s.trace.records) {
    auto it = rec.reads_per_site.find("timers");
    const int64_t waits = it == rec.reads_per_site.end() ? 0 : it->second;
    if (rec.iteration == 1 && !events_lag_by_construction) {
      EXPECT_LE(waits, 1) << GetParam() << ": iteration 1 rank " << rec.rank << ": timers waits";
    } else {
      EXPECT_EQ(waits, rec.iteration == 1 ? 1 : 0)
          << GetParam() << ": iteration " << rec.iteration << " rank " << rec.rank << ": timers waits";
    }
  }
}

// A device 0-3 windows behind (CPU simulation, seeded): still one window per line, never 0, never two merged;
// every interval once, in order; a wait exactly where the due window was not complete, counted in the ledger.
std::vector<std::string> deferred_timer_arms() {
  std::vector<std::string> out;
  for (const std::string& a : gate_arms())
    if (find_arm(a).timers == SyncMode::kDeferred) out.push_back(a);
  return out;
}

class TimersLagged : public ArmTest {};
// --lg_arms naming only arms with eager timers leaves no arm here: the table shows '-', not a failure.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TimersLagged);

// The bound holds on a window of 1080 events per timer, and nothing is lost to it.
TEST_P(TimersLagged, AtMost1024EventsPendingOnALongWindow) {
  if (gate_fixture() != "single")
    GTEST_SKIP() << "the 520-iteration window runs on single (EventTimer's bound does not depend on the layout)";
  auto p = bound_problems(GetParam());
  EXPECT_TRUE(p.empty()) << problem_list(p);
}

TEST_P(TimersLagged, LaggingDeviceStillOneWindowPerLineAndWaitsOnlyWhenBehind) {
  const ScenarioResult& s = lagged_run(GetParam());
  auto p = window_problems(GetParam(), s.local);
  auto a = accounting_problems(GetParam(), s.local);
  auto w = lag_wait_problems(GetParam(), s);
  p.insert(p.end(), a.begin(), a.end());
  p.insert(p.end(), w.begin(), w.end());
  EXPECT_TRUE(p.empty()) << problem_list(p);
  int behind = 0;
  for (int lag : s.local.timers.event_lags) behind += lag >= 2;
  // Exercised on some rank (each rank draws its own lags; dp64's few log points leave some ranks never behind).
  int behind_any = behind;
  MPI_Allreduce(MPI_IN_PLACE, &behind_any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_GT(behind_any, 0) << "the seeded lags never put a device two windows behind: the wait path was not exercised";
  if (world_rank() == 0 && GetParam() == deferred_timer_arms().back())
    std::printf("lagging device (seed %llu): %zu log points, device >= 2 windows behind at %d; every line one window\n",
                static_cast<unsigned long long>(lagged_config().event_lag.seed), s.local.timers.event_lags.size(), behind);
}

// ---- a save inside a window: what each window covers ----

// Saves after iterations 3 and 6, inside the log windows 3-4 and 5-6 (log interval 2), each 1024 s long on the
// timers' clock (RunConfig::simulated_save_seconds: a CPU save of this model takes milliseconds, and no sleep).
constexpr double kSimulatedSaveSeconds = 1024.0;

const ScenarioResult& save_run(const std::string& arm) {
  RunConfig c = gate_config();
  c.train_iters = 8;
  c.log_interval = 2;
  c.save_interval = 3;
  c.save_dir = fmt::format("{}/timers-save-{}", launch_dir(), arm);
  c.simulated_save_seconds = kSimulatedSaveSeconds;
  return run_scenario("timers-save", c, arm);
}

// Megatron's save_checkpoint_and_time stops interval-time before the save and starts it after: each save is timed
// by save-checkpoint alone, and no interval-time window holds it.
std::vector<std::string> save_window_problems(const std::string& arm, const RunResult& r) {
  std::vector<std::string> p;
  auto bad = [&](const std::string& what) { p.push_back(fmt::format("{}: rank {}: {}", arm, world_rank(), what)); };
  int64_t saves = 0;
  for (const TimerInterval& t : r.timers.intervals) {
    if (t.name == "save-checkpoint") {
      ++saves;
      if (!(t.seconds >= kSimulatedSaveSeconds))
        bad(fmt::format("save-checkpoint seq {}: {} s, shorter than the save's {} s", t.seq, t.seconds, kSimulatedSaveSeconds));
    }
    if (t.name == kInterval && !(t.seconds < kSimulatedSaveSeconds))
      bad(fmt::format("interval-time seq {}: {} s: the window holds a save's {} s (stopped after the save?)", t.seq,
                      t.seconds, kSimulatedSaveSeconds));
  }
  if (saves != 2) bad(fmt::format("{} save-checkpoint intervals, expected 2 (after iterations 3 and 6)", saves));
  return p;
}

TEST_P(Timers, SaveTimeStaysOutOfTheWindowOpenAtTheSave) {
  if (heavy_fixture()) GTEST_SKIP() << "dp64: shown on the smaller fixtures (the window rule does not depend on the layout)";
  if (gate_config().model.device.is_cuda())
    GTEST_SKIP() << "CPU simulation: a save's 1024 s lives on the host clock, which CUDA events do not read";
  for (const std::string& arm : {std::string("baseline"), GetParam()}) {
    const RunResult& r = save_run(arm).local;
    auto p = save_window_problems(arm, r);
    auto a = accounting_problems(arm, r, /*saves=*/2);
    auto w = window_problems(arm, r, /*saves_after=*/{3, 6});
    p.insert(p.end(), a.begin(), a.end());
    p.insert(p.end(), w.begin(), w.end());
    EXPECT_TRUE(p.empty()) << problem_list(p);
  }
}

// Replayed (--cuda-graph iteration): a replayed iteration's level-1 timers start and stop between its graph's
// segments (capture.h cut), so the accounting holds for every iteration, the replayed ones included.
class TimersGraph : public ArmTest {};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TimersGraph);

TEST_P(TimersGraph, EveryIntervalOnceInOrderReplayedIterationsIncluded) {
  if (heavy_fixture()) GTEST_SKIP() << "dp64: shown on the smaller fixtures (the cuda_graph gate replays on dp64)";
  const RunResult& r = clean_graph_run(GetParam()).local;
  EXPECT_TRUE(r.graph.error.empty()) << r.graph.error;
  EXPECT_GE(r.graph.replays, r.iterations_done - 2) << GetParam() << ": every iteration from the third replays";
  auto p = accounting_problems(GetParam(), r);
  EXPECT_TRUE(p.empty()) << problem_list(p);
}

INSTANTIATE_TEST_SUITE_P(Arms, Timers, ::testing::ValuesIn(gate_arms()),
                         [](const auto& info) { return param_name(info.param); });
INSTANTIATE_TEST_SUITE_P(Arms, TimersLagged, ::testing::ValuesIn(deferred_timer_arms()),
                         [](const auto& info) { return param_name(info.param); });
INSTANTIATE_TEST_SUITE_P(Arms, TimersGraph, ::testing::ValuesIn(graph_arms()),
                         [](const auto& info) { return param_name(info.param); });

// ---- the registry on a FakeClock ----

// 1000 forward-backward windows of (k % 7 + 1)/64 s and 1000 optimizer windows of (k % 5 + 1)/128 s through
// Timers (device-event kind), logged every 600 iterations. The "device" completes nothing for the first 700
// iterations, so each queue reaches its 1024-event bound and the oldest interval is waited for; every interval
// still comes out once, in order, exact.
TEST(Timers, FakeClockThousandIntervalsThroughTheRegistrySumExactlyWithin1024Pending) {
  FakeClock clock(1024.0);
  ClockEventSource events(&clock);
  TimersConfig cfg;
  cfg.kind = TimerKind::kEvent;
  cfg.log_level = 2;
  ::loopgate::Timers timers(cfg, &clock, &events);  // the registry (Timers unqualified is this file's fixture)
  auto& fb = dynamic_cast<EventTimer&>(timers("forward-backward", 1));
  auto& opt = dynamic_cast<EventTimer&>(timers("optimizer", 1));
  const double fb_total = 3997.0 / 64.0;    // 142 * (1+...+7) + (1+...+6) = 3997 sixty-fourths
  const double opt_total = 3000.0 / 128.0;  // 200 * (1+...+5) = 3000 hundred-twenty-eighths
  double fb_logged = 0.0, opt_logged = 0.0;
  for (int k = 0; k < 1000; ++k) {
    fb.start(); clock.advance((k % 7 + 1) / 64.0); fb.stop();
    opt.start(); clock.advance((k % 5 + 1) / 128.0); opt.stop();
    clock.advance(1.0 / 256.0);
    if (k >= 700 && k % 97 == 96) events.resolve_upto(events.recorded() - 3);  // late, partial catch-ups
    if (k % 600 == 599) {  // a long log interval; the first log point's values are previews (reported again next)
      const double f = fb.elapsed(), o = opt.elapsed();
      if (!fb.last_was_preview()) fb_logged += f;
      if (!opt.last_was_preview()) opt_logged += o;
    }
  }
  timers.drain();
  fb_logged += fb.elapsed();
  opt_logged += opt.elapsed();
  EXPECT_EQ(fb_logged, fb_total) << hex(fb_logged) << " vs " << hex(fb_total);
  EXPECT_EQ(opt_logged, opt_total) << hex(opt_logged) << " vs " << hex(opt_total);
  const auto all = timers.take_reported();
  ASSERT_EQ(all.size(), 2000u);
  double fb_sum = 0.0, opt_sum = 0.0;
  for (int k = 0; k < 1000; ++k) {
    const TimerInterval& f = all[k];        // by timer name, then seq
    const TimerInterval& o = all[1000 + k];
    EXPECT_TRUE(f.name == "forward-backward" && f.seq == k && f.seconds == (k % 7 + 1) / 64.0) << "fb #" << k << ": " << f.name << " seq " << f.seq << " " << hex(f.seconds);
    EXPECT_TRUE(o.name == "optimizer" && o.seq == k && o.seconds == (k % 5 + 1) / 128.0) << "opt #" << k << ": " << o.name << " seq " << o.seq << " " << hex(o.seconds);
    fb_sum += f.seconds;
    opt_sum += o.seconds;
  }
  EXPECT_EQ(fb_sum, fb_total);
  EXPECT_EQ(opt_sum, opt_total);
  // The specification's bound, not EventTimer::kMaxPendingEvents (a change could raise the constant with the code).
  EXPECT_LE(fb.max_pending_seen(), 1024u);
  EXPECT_LE(opt.max_pending_seen(), 1024u);
  EXPECT_GT(fb.forced_waits() + opt.forced_waits(), 0) << "the 1024-event bound was never reached: not exercised";
  // Nothing had completed at the first log point: each timer's first report waited once for its window.
  EXPECT_EQ(fb.first_report_waits(), 1);
  EXPECT_EQ(opt.first_report_waits(), 1);
}

// Gate power: the seed's first form of the deferred timers — report whatever has completed — must be rejected on
// a device that runs behind: it gives lines with no window (0.0) and lines with two.
TEST(GatePower, TimersRejectsWhateverCompletedReports) {
  const std::string arm = "defect-timer-whatever-completed";
  auto p = window_problems(arm, lagged_run(arm).local);
  size_t empty = 0, doubled = 0;
  for (const std::string& x : p) {
    empty += x.find(": 0 interval-time intervals in one line, expected 1") != std::string::npos;
    doubled += x.find(": 2 interval-time intervals in one line, expected 1") != std::string::npos;
  }
  EXPECT_GT(empty + doubled, 0u) << "the timers gate accepted whatever-completed reports on a lagging device: " << problem_list(p);
  if (world_rank() == 0 && !p.empty())
    std::printf("rejected as expected (%zu line(s) with no window, %zu with two on rank 0): %s\n", empty, doubled,
                problem_list(p, 4).c_str());
}

// Gate power, one planted defect per property: each must be rejected, for its own reason.
void expect_rejected(const std::string& arm, const std::vector<std::string>& p, const std::string& reason) {
  size_t hits = 0;
  for (const std::string& x : p) hits += x.find(reason) != std::string::npos;
  EXPECT_GT(hits, 0u) << "the timers gate accepted " << arm << " (no problem mentions '" << reason << "'): " << problem_list(p);
  if (hits > 0 && world_rank() == 0) std::printf("%s rejected as expected: %s\n", arm.c_str(), problem_list(p, 2).c_str());
}

TEST(GatePower, TimersRejectsDroppedInterval) {
  expect_rejected("defect-drop-timer-interval", accounting_problems("defect-drop-timer-interval"), "was due");
}

TEST(GatePower, TimersRejectsDuplicatedInterval) {
  expect_rejected("defect-duplicate-timer-interval", accounting_problems("defect-duplicate-timer-interval"), "was due");
}

TEST(GatePower, TimersRejectsReorderedIntervals) {
  expect_rejected("defect-reorder-timer-intervals", accounting_problems("defect-reorder-timer-intervals"), "was due");
}

TEST(GatePower, TimersRejectsAZeroWindow) {
  const std::string arm = "defect-zero-timer-window";
  expect_rejected(arm, window_problems(arm, clean_run(arm).local), "interval-time window of 0x0p+0 s");
}

// On the lagging device its first window is incomplete: not waiting for it is a first report of nothing (a 0.0
// line where this rank alone prints) — caught as a missing wait on every rank.
TEST(GatePower, TimersRejectsAFirstReportThatDoesNotWait) {
  const std::string arm = "defect-timer-first-no-wait";
  expect_rejected(arm, lag_wait_problems(arm, lagged_run(arm)), "0 timer wait(s)");
}

// A replayed iteration whose timer actions ran at the first replay only: the intervals of the later ones are missing.
TEST(GatePower, TimersRejectsAGraphTimerArmedOnce) {
  if (heavy_fixture()) GTEST_SKIP() << "dp64: shown on the smaller fixtures";
  const std::string arm = "defect-graph-timer-armed-once";
  expect_rejected(arm, accounting_problems(arm, clean_graph_run(arm).local), "intervals reported");
}

TEST(GatePower, TimersRejectsAnUnboundedQueue) {
  if (gate_fixture() != "single") GTEST_SKIP() << "the bound's window runs on single";
  expect_rejected("defect-timer-unbounded", bound_problems("defect-timer-unbounded"), "events pending at once");
}

// `loopgate ab --arms A,A:bare` prices loopgate's bookkeeping by switching it off for alternate phases of one run
// (TrainSession::run). That measures something only if "off" is off and moves no number: a bare segment's
// iterations count no host read; a deferred arm's level-1 timers report no interval for them (an eager arm's keep
// their synchronizing host timers: those are Megatron's Timer.start/stop, the loop under test); the segment after
// counts and times again; and every log point logs what the arm logs alone, bit for bit.
class Bare : public ::testing::TestWithParam<std::string> {};

TEST_P(Bare, SegmentCountsNoReadTimesNothingAtLevel1AndKeepsTheNumbers) {
  if (gate_fixture() != "single")
    GTEST_SKIP() << "runs on single: the switch is per rank and does not depend on the layout";
  const std::string arm = GetParam();
  RunConfig c = on_gate_device(gate_config());
  c.train_iters = 12;
  c.log_interval = 4;
  c.param_checksums = true;
  RunGroups g = pooled_run_groups(c);
  set_run_device(g.config.model.device);
  TrainSession session(g.config, find_arm(arm), g.groups, world_rank());
  for (int p = 0; p < 3; ++p) session.run(find_arm(arm), 4, /*instrumented=*/p != 1);  // iterations 5-8 bare
  const RunResult r = session.finish();
  set_run_device(c10::Device(c10::kCPU));
  const Trace alternating = gather_trace(r, MPI_COMM_WORLD);

  std::vector<std::string> bad;
  for (const IterationRecord& rec : alternating.records) {
    const bool bare = rec.iteration >= 5 && rec.iteration <= 8;
    int64_t reads = 0;
    for (const auto& [site, n] : rec.reads_per_site) reads += n;
    if (bare != (reads == 0))
      bad.push_back(fmt::format("iteration {} rank {} ({}): {} host read(s) counted", rec.iteration, rec.rank,
                                bare ? "bare" : "instrumented", reads));
  }
  int64_t level1 = 0;
  for (const TimerInterval& t : r.timers.intervals) level1 += t.name == "forward-backward";
  const bool eager = find_arm(arm).timers == SyncMode::kEager;
  const int64_t want = eager ? 12 : 8;  // eager: Megatron's host timers every iteration; deferred: not in 5-8
  if (level1 != want)
    bad.push_back(fmt::format("{} forward-backward interval(s) reported, want {}", level1, want));
  EXPECT_TRUE(bad.empty()) << problem_list(bad);
  auto m = compare_fields(run_scenario("bare-ref", c, arm).trace, alternating,
                          {"lm_loss", "params_norm", "grad_norm", "num_zeros", "learning_rate", "loss_scale", "skipped",
                           "param_checksum_after"});
  EXPECT_TRUE(m.empty()) << describe(m, arm + " alone", "with iterations 5-8 bare");
}

INSTANTIATE_TEST_SUITE_P(Arms, Bare, ::testing::Values("baseline", "onesync"),
                         [](const auto& info) { return param_name(info.param); });

}  // namespace
}  // namespace loopgate
