// Unit tests for the launch-starvation analysis (trainer/instrument/starvation.h) on hand-built timelines, each
// chosen so one wrong reading of the definition gives a different number, and on a simulated device: a host that
// pays a fixed cost per launch, a device that runs kernels serially, a bounded launch queue and syncs that block
// the host until the device drains. Removing the syncs must shrink sync-starved time by the step-time delta (the
// seed: -108.3 ms starved against -105.8 ms step). Planted defects each test was seen to catch: docs/profile.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>

#include "trainer/instrument/starvation.h"

namespace loopgate {
namespace {

// Timelines are written in milliseconds; the analysis takes nanoseconds.
int64_t ns(double ms) { return static_cast<int64_t>(ms * 1e6); }
DeviceInterval kernel(double from, double to, uint32_t stream = 7) {
  return {ns(from), ns(to), DeviceWorkKind::kKernel, stream};
}
DeviceInterval copy(double from, double to, uint32_t stream = 7) {
  return {ns(from), ns(to), DeviceWorkKind::kMemcpy, stream};
}
HostSyncCall sync(double enter, double exit) { return {ns(enter), ns(exit)}; }
IterationWindow window(int64_t iteration, double from, double to) { return {iteration, ns(from), ns(to)}; }

constexpr double kTol = 1e-9;

// ---- hand-built timelines ----

TEST(Starvation, OverlappingKernelsOnTwoStreamsAreBusyOnce) {
  // stream 1 busy 10-50, stream 2 busy 30-70 and a copy 40-45 inside both: the device is busy 10-70, i.e. 60 ms.
  const auto rows = analyze_starvation({kernel(10, 50, 1), kernel(30, 70, 2), copy(40, 45, 3)}, {},
                                       {window(0, 0, 100)});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0].window_ms, 100.0, kTol);
  EXPECT_NEAR(rows[0].busy_ms, 60.0, kTol) << "busy is the union across streams, not the sum (95)";
  EXPECT_NEAR(rows[0].idle_ms, 40.0, kTol);
  EXPECT_EQ(rows[0].kernels, 2);
  EXPECT_EQ(rows[0].copies, 1);
}

TEST(Starvation, KernelSpanningAWindowBoundaryIsSplitBetweenIterations) {
  const auto rows = analyze_starvation({kernel(80, 130)}, {}, {window(0, 0, 100), window(1, 100, 200)});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_NEAR(rows[0].busy_ms, 20.0, kTol) << "clipped to the window";
  EXPECT_NEAR(rows[1].busy_ms, 30.0, kTol);
  EXPECT_NEAR(rows[0].idle_ms + rows[1].idle_ms, 150.0, kTol);
  EXPECT_EQ(rows[0].kernels, 1) << "a kernel counts where it starts";
  EXPECT_EQ(rows[1].kernels, 0);
  EXPECT_GE(rows[1].idle_ms, 0.0);
}

TEST(Starvation, GapHoldingASyncExitIsSyncStarvedFromTheGapsStart) {
  // The host enters a synchronize at 10 behind a kernel that ends at 40, returns at 41, and launches the next
  // kernel at 60: the device idles 40-60 because the host was blocked, all of it sync-starved.
  const auto rows = analyze_starvation({kernel(0, 40), kernel(60, 100)}, {sync(10, 41)}, {window(0, 0, 100)});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0].idle_ms, 20.0, kTol);
  EXPECT_NEAR(rows[0].sync_starved_ms, 20.0, kTol) << "from max(gap start 40, enter 10) to 60";
  EXPECT_NEAR(rows[0].other_idle_ms, 0.0, kTol);
  EXPECT_EQ(rows[0].syncs, 1);
}

TEST(Starvation, SyncEnteredAfterTheGapBeganStarvesOnlyFromItsEnter) {
  // The device drained at 40 while the host was still busy elsewhere; the host synchronized at 50 (returning at
  // once) and launched at 60: 40-50 is other idle, 50-60 sync-starved.
  const auto rows = analyze_starvation({kernel(0, 40), kernel(60, 100)}, {sync(50, 50.5)}, {window(0, 0, 100)});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0].idle_ms, 20.0, kTol);
  EXPECT_NEAR(rows[0].sync_starved_ms, 10.0, kTol);
  EXPECT_NEAR(rows[0].other_idle_ms, 10.0, kTol);
}

TEST(Starvation, SyncReturningWhileAnotherStreamIsBusyStarvesNothing) {
  // A stream synchronize returns at 30 while another stream's kernel runs until 50: no idle gap holds the exit,
  // so the idle 50-60 is the host's own slowness.
  const auto rows = analyze_starvation({kernel(0, 20, 1), kernel(10, 50, 2), kernel(60, 100, 1)}, {sync(5, 30)},
                                       {window(0, 0, 100)});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0].idle_ms, 10.0, kTol);
  EXPECT_NEAR(rows[0].sync_starved_ms, 0.0, kTol);
  EXPECT_NEAR(rows[0].other_idle_ms, 10.0, kTol);
}

TEST(Starvation, NoSyncsMeansNoSyncStarvedTime) {
  const auto rows = analyze_starvation({kernel(5, 20), kernel(40, 60), kernel(90, 95)}, {}, {window(0, 0, 100)});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0].busy_ms, 40.0, kTol);
  EXPECT_NEAR(rows[0].idle_ms, 60.0, kTol);
  EXPECT_NEAR(rows[0].sync_starved_ms, 0.0, kTol);
  EXPECT_NEAR(rows[0].other_idle_ms, 60.0, kTol);
  EXPECT_EQ(rows[0].syncs, 0);
}

TEST(Starvation, StarvedGapCrossingIntoTheNextIterationIsSplitAtTheBoundary) {
  // The log-point read at the end of iteration 0 returns at 81; iteration 1 begins at 90 and its first kernel
  // starts at 110: the gap 80-110 is sync-starved, 10 ms of it in iteration 0 and 20 ms in iteration 1.
  const auto rows = analyze_starvation({kernel(0, 80), kernel(110, 150)}, {sync(70, 81)},
                                       {window(0, 0, 90), window(1, 90, 150)});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_NEAR(rows[0].sync_starved_ms, 10.0, kTol);
  EXPECT_NEAR(rows[1].sync_starved_ms, 20.0, kTol);
  EXPECT_NEAR(rows[1].other_idle_ms, 0.0, kTol);
}

TEST(Starvation, EmptyIterationsAreRowsOfIdleTime) {
  EXPECT_TRUE(analyze_starvation({}, {}, {}).empty());
  EXPECT_TRUE(analyze_starvation({kernel(0, 10)}, {sync(0, 11)}, {}).empty()) << "no windows, no rows";
  // No device work at all: every window is idle; a sync's exit sits in the one unbounded gap.
  auto rows = analyze_starvation({}, {sync(20, 25)}, {window(0, 0, 10), window(1, 10, 40)});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_NEAR(rows[0].idle_ms, 10.0, kTol);
  EXPECT_NEAR(rows[0].sync_starved_ms, 0.0, kTol);
  EXPECT_NEAR(rows[1].idle_ms, 30.0, kTol);
  EXPECT_NEAR(rows[1].sync_starved_ms, 20.0, kTol) << "from the sync's enter at 20";
  // Work in iteration 0 only; iteration 1 empty, and a zero-length window.
  rows = analyze_starvation({kernel(2, 8)}, {}, {window(0, 0, 10), window(1, 10, 20), window(2, 20, 20)});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_NEAR(rows[1].busy_ms, 0.0, kTol);
  EXPECT_NEAR(rows[1].idle_ms, 10.0, kTol);
  EXPECT_EQ(rows[1].kernels, 0);
  EXPECT_NEAR(rows[2].window_ms, 0.0, kTol);
  EXPECT_NEAR(rows[2].idle_ms, 0.0, kTol);
}

TEST(Starvation, SummaryAndSteadyRows) {
  std::vector<StarvationRow> rows(5);
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].iteration = static_cast<int64_t>(i);
    rows[i].sync_starved_ms = static_cast<double>(i);  // 0 1 2 3 4
    rows[i].kernels = 10 * static_cast<int64_t>(i);
  }
  const auto steady = steady_rows(rows);
  ASSERT_EQ(steady.size(), 3u);
  EXPECT_EQ(steady.front().iteration, 1);
  EXPECT_EQ(steady.back().iteration, 3);
  EXPECT_EQ(steady_rows(std::vector<StarvationRow>(rows.begin(), rows.begin() + 2)).size(), 2u)
      << "too few rows to drop any: all kept";
  rows[4].sync_starved_ms = 40;  // an outlier moves the mean, not the median
  const StarvationSummary s = summarize_starvation(rows);
  EXPECT_EQ(s.iterations, 5u);
  EXPECT_NEAR(s.median.sync_starved_ms, 2.0, kTol);
  EXPECT_NEAR(s.mean.sync_starved_ms, 46.0 / 5.0, kTol);
  EXPECT_EQ(s.median.kernels, 20);
  const std::string table = format_starvation_table(rows, "title", 3);
  EXPECT_NE(table.find("sync-starved"), std::string::npos);
  EXPECT_NE(table.find("(2 more)"), std::string::npos);
  EXPECT_NE(format_starvation_summary(s, "steady").find("median"), std::string::npos);
}

// ---- a simulated device ----

// One iteration: `launches` kernels (every fourth a long one), each costing the host `launch` to issue; the
// device starts a kernel `latency` after its launch returns or when the previous kernel ends, whichever is
// later. At most `queue_depth` kernels are outstanding (CUDA's launch queue: a full queue blocks the launch, so a
// loop without syncs is paced by the device). `syncs` evenly spaced synchronizes each block the host until the
// device drains, then cost `sync_cost` more.
struct SimulatedLoop {
  int launches = 100, syncs = 0, iterations = 14, queue_depth = 64;
  int64_t launch = 6000, latency = 2000, sync_cost = 3000, short_kernel = 8000, long_kernel = 20000;  // ns
};

DeviceProfile simulate(const SimulatedLoop& s) {
  DeviceProfile p;
  int64_t host = 0, device_free = 0;
  std::deque<int64_t> outstanding;  // end times of launched kernels, oldest first
  for (int it = 0; it < s.iterations; ++it) {
    if (it > 0) p.windows.back().end_ns = host;
    p.windows.push_back({it, host, 0});
    for (int k = 0; k < s.launches; ++k) {
      while (!outstanding.empty() && outstanding.front() <= host) outstanding.pop_front();
      if (static_cast<int>(outstanding.size()) >= s.queue_depth) {  // the launch waits for a free slot
        host = outstanding.front();
        outstanding.pop_front();
      }
      host += s.launch;
      const int64_t start = std::max(host + s.latency, device_free);
      device_free = start + (k % 4 == 0 ? s.long_kernel : s.short_kernel);
      outstanding.push_back(device_free);
      p.intervals.push_back({start, device_free, DeviceWorkKind::kKernel, 7});
      if (s.syncs > 0 && (k + 1) % (s.launches / s.syncs) == 0) {
        const int64_t enter = host;
        host = std::max(host, device_free) + s.sync_cost;
        p.syncs.push_back({enter, host});
        outstanding.clear();
      }
    }
  }
  p.windows.back().end_ns = host;
  return p;
}

TEST(Starvation, SimulatedDeviceSyncStarvedDeltaMatchesTheStepDelta) {
  SimulatedLoop with_syncs, without;
  with_syncs.syncs = 5;
  const auto a = steady_rows(analyze_starvation(simulate(with_syncs)), 2, 1);
  const auto b = steady_rows(analyze_starvation(simulate(without)), 2, 1);
  const StarvationSummary sa = summarize_starvation(a), sb = summarize_starvation(b);
  const double step_delta = sa.mean.window_ms - sb.mean.window_ms;
  const double starved_delta = sa.mean.sync_starved_ms - sb.mean.sync_starved_ms;
  // The device needs 25 x 20 + 75 x 8 = 1100 us per iteration and the host 600 us: without syncs the device never
  // idles; each sync then costs one drain-to-next-kernel gap of sync_cost + launch + latency = 11 us.
  EXPECT_NEAR(sb.mean.window_ms, 1.100, 1e-6) << "no syncs: paced by the device";
  EXPECT_NEAR(sb.mean.idle_ms, 0.0, 1e-6);
  EXPECT_GT(step_delta, 0.040) << "five syncs per iteration must cost step time";
  EXPECT_NEAR(starved_delta, step_delta, 0.10 * step_delta)
      << "sync-starved delta " << starved_delta << " ms vs step delta " << step_delta << " ms\n"
      << format_starvation_table(a, "with syncs") << format_starvation_table(b, "without");
  EXPECT_EQ(sa.median.syncs, 5);
}

}  // namespace
}  // namespace loopgate
