// Unit tests for the launch-starvation analysis (trainer/measure/starvation.h) on hand-built timelines, each
// chosen so one wrong reading of the definition gives a different number, and on a simulated device: a host that
// pays a fixed cost per launch, a device that runs kernels serially, a bounded launch queue and syncs that block
// the host until the device drains. Removing the syncs must shrink sync-starved time by the step-time delta (the
// seed: -108.3 ms starved against -105.8 ms step). Planted defects each test was seen to catch: docs/profile.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>

#include "trainer/measure/starvation.h"

namespace loopgate {
namespace {

// Timelines are written in milliseconds; the analysis takes nanoseconds.
int64_t ns(double ms) { return static_cast<int64_t>(ms * 1e6); }
DeviceInterval kernel(double from, double to, uint32_t stream = 7) {
  return {ns(from), ns(to), DeviceWorkKind::kKernel, stream};
}
// A kernel the host's launch call issued at `launched` (the CUPTI join on a GPU).
DeviceInterval launched(double from, double to, double launched) {
  DeviceInterval k = kernel(from, to);
  k.launched_ns = ns(launched);
  return k;
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
  EXPECT_NEAR(rows[0].launch_starved_ms, 20.0, kTol) << "sync-starved is launch-starved too, launch time or not";
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

TEST(Starvation, GapsWhileTheHostTrailsAfterASyncAreSyncStarvedUntilItLeadsAgain) {
  // A sync drains the device at 40 and returns at 41; the host then launches at 50, 60 and 70 kernels that each run
  // 5 ms, so the device waits for every launch (gaps 40-50, 55-60, 65-70). The kernel launched at 70 is long
  // (75-120) and the host issues the next two at 80 and 90, ahead of the device: 120-121 (its start lags its
  // issue) is not starved, and the host's later trailing (gap 126-130 for a kernel issued at 130) follows no sync.
  const auto rows = analyze_starvation({kernel(0, 40), launched(50, 55, 50), launched(60, 65, 60),
                                        launched(70, 120, 70), launched(121, 126, 80), launched(130, 135, 130)},
                                       {sync(10, 41)}, {window(0, 0, 140)});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0].idle_ms, 10 + 5 + 5 + 1 + 4 + 5, kTol);
  EXPECT_NEAR(rows[0].sync_starved_ms, 10 + 5 + 5, kTol) << "the drain: 40-50, 55-60, 65-70";
  EXPECT_NEAR(rows[0].other_idle_ms, 1 + 4 + 5, kTol) << "after the host led again at 120; the tail 135-140";
  EXPECT_NEAR(rows[0].launch_starved_ms, 10 + 5 + 5 + 4, kTol)
      << "every gap the device waited for a launch, the trailing one after the drain (126-130) too; not 120-121 "
         "(issued at 80) nor the tail (no next work)";
}

TEST(Starvation, DrainEndsWhereWorkWasIssuedBeforeTheDeviceReachedIt) {
  // Same drain, but the second kernel after the sync was issued at 52, before the first one ended at 55: the host
  // leads from there (the gap 55-60 is latency), so only 40-50 is sync-starved; the gap 65-70 after it, though
  // waited for, belongs to no drain.
  const auto rows = analyze_starvation({kernel(0, 40), launched(50, 55, 50), launched(60, 65, 52),
                                        launched(70, 80, 70)},
                                       {sync(10, 41)}, {window(0, 0, 80)});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0].sync_starved_ms, 10.0, kTol);
  EXPECT_NEAR(rows[0].other_idle_ms, 10.0, kTol);
}

TEST(Starvation, WorkOverlappingTheSpanIssuedEarlyEndsTheDrain) {
  // After the sync's gap, a second stream's kernel issued at 30 (before the drain) overlaps the first one: the
  // host had work queued, so the later waited-for gap 70-75 is other idle. Without the launch time (0) the drain
  // also ends there: an unknown launch never extends a drain.
  DeviceInterval overlap_early = launched(55, 62, 30);
  overlap_early.stream = 8;
  for (int64_t known : {1, 0}) {
    DeviceInterval first = launched(50, 60, 50);
    if (!known) overlap_early.launched_ns = 0;
    const auto rows = analyze_starvation({kernel(0, 40), first, overlap_early, launched(75, 80, 75)},
                                         {sync(10, 41)}, {window(0, 0, 80)});
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_NEAR(rows[0].sync_starved_ms, 10.0, kTol) << "launch time known: " << known;
    EXPECT_NEAR(rows[0].other_idle_ms, 13.0, kTol) << "launch time known: " << known;
  }
}

// ---- a simulated device ----

// One iteration: `launches` kernels, their lengths cycling through `kernel_ns`, each costing the host `launch` to
// issue; the device starts a kernel `latency` after its launch returns or when the previous kernel ends, whichever
// is later. At most `queue_depth` kernels are outstanding (CUDA's launch queue: a full queue blocks the launch, so
// a loop without syncs is paced by the device). `syncs` evenly spaced synchronizes each block the host until the
// device drains, then cost `sync_cost` more. Each kernel carries its launch time, as the CUPTI join gives it.
struct SimulatedLoop {
  int launches = 100, syncs = 0, iterations = 14, queue_depth = 64;
  int64_t launch = 6000, latency = 2000, sync_cost = 3000;  // ns
  std::vector<int64_t> kernel_ns = {20000, 8000, 8000, 8000};
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
      device_free = start + s.kernel_ns[static_cast<size_t>(k) % s.kernel_ns.size()];
      outstanding.push_back(device_free);
      p.intervals.push_back({start, device_free, DeviceWorkKind::kKernel, 7, /*launched_ns=*/host});
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

// Mean step time and sync-starved time per iteration, with and without syncs, over the steady iterations.
struct SimulatedDeltas {
  StarvationSummary with_syncs, without;
  std::string tables;
  double step() const { return with_syncs.mean.window_ms - without.mean.window_ms; }
  double starved() const { return with_syncs.mean.sync_starved_ms - without.mean.sync_starved_ms; }
};
SimulatedDeltas simulated_deltas(SimulatedLoop with_syncs, int syncs) {
  SimulatedLoop without = with_syncs;
  with_syncs.syncs = syncs;
  without.syncs = 0;
  const auto a = steady_rows(analyze_starvation(simulate(with_syncs)), 2, 1);
  const auto b = steady_rows(analyze_starvation(simulate(without)), 2, 1);
  return {summarize_starvation(a), summarize_starvation(b),
          format_starvation_table(a, "with syncs") + format_starvation_table(b, "without")};
}

TEST(Starvation, SimulatedDeviceSyncStarvedDeltaMatchesTheStepDelta) {
  const SimulatedDeltas d = simulated_deltas(SimulatedLoop{}, 5);
  // The device needs 25 x 20 + 75 x 8 = 1100 us per iteration and the host 600 us: without syncs the device never
  // idles; each sync then costs one drain-to-next-kernel gap of sync_cost + launch + latency = 11 us.
  EXPECT_NEAR(d.without.mean.window_ms, 1.100, 1e-6) << "no syncs: paced by the device";
  EXPECT_NEAR(d.without.mean.idle_ms, 0.0, 1e-6);
  EXPECT_GT(d.step(), 0.040) << "five syncs per iteration must cost step time";
  EXPECT_NEAR(d.starved(), d.step(), 0.10 * d.step())
      << "sync-starved delta " << d.starved() << " ms vs step delta " << d.step() << " ms\n" << d.tables;
  EXPECT_EQ(d.with_syncs.median.syncs, 5);
}

TEST(Starvation, SimulatedHostTrailingAfterEachSyncIsAllSyncStarved) {
  // The H200's shape (docs/profile.md): runs of kernels shorter than a launch. Each block is nine 3 us kernels
  // and one 60 us kernel: the device needs 870 us per iteration, the host 600 us, so without syncs the host leads
  // and the device never idles. A sync after a long kernel empties the queue; the host then trails through the
  // next block (11 us before its first kernel, 3 us before each of the other nine) until the long kernel lets it
  // lead again. Every one of those gaps is the sync's cost; counting only the first (11 us of 38 us) would put
  // over two thirds of the step delta in "other".
  SimulatedLoop loop;
  loop.kernel_ns = {3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 60000};
  const SimulatedDeltas d = simulated_deltas(loop, 5);
  EXPECT_NEAR(d.without.mean.idle_ms, 0.0, 1e-6) << d.tables;
  EXPECT_NEAR(d.step(), 5 * 0.038, 1e-6) << "five drains of 11 + 9 x 3 us\n" << d.tables;
  EXPECT_NEAR(d.starved(), d.step(), 0.10 * d.step())
      << "sync-starved delta " << d.starved() << " ms vs step delta " << d.step() << " ms\n" << d.tables;
  EXPECT_NEAR(d.with_syncs.mean.launch_starved_ms - d.without.mean.launch_starved_ms, d.step(), 0.10 * d.step())
      << d.tables;
}

TEST(Starvation, SimulatedHostBoundLoopLaunchStarvedDeltaMatchesTheStepDelta) {
  // Host-bound, as the H200's default model and onesync at 2048x4x1024 (docs/profile.md): 4 us kernels behind
  // 6 us launches, so the device waits for every launch with or without syncs. The syncs add their round trips to
  // the host's path and the device waits that much longer: the launch-starved delta is the step delta. The
  // sync-starved delta is not: after a sync the host never leads again before the next one, so all of the
  // with-syncs arm's launch starvation lies in drains, the part it would have had anyway included.
  SimulatedLoop loop;
  loop.kernel_ns = {4000};
  const SimulatedDeltas d = simulated_deltas(loop, 5);
  EXPECT_NEAR(d.without.mean.busy_ms, 0.400, 1e-6) << d.tables;
  EXPECT_NEAR(d.without.mean.launch_starved_ms, d.without.mean.idle_ms, 1e-6) << "all idle waits for a launch";
  EXPECT_GT(d.step(), 0.020) << d.tables;
  EXPECT_NEAR(d.with_syncs.mean.launch_starved_ms - d.without.mean.launch_starved_ms, d.step(), 0.10 * d.step())
      << d.tables;
  EXPECT_GT(d.starved(), 2 * d.step()) << "sync-starved counts the drains whole\n" << d.tables;
}

}  // namespace
}  // namespace loopgate
