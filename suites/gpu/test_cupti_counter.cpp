// The CUPTI sync counter on a real GPU (docs/design.md "Sync accounting"): each kind of host read, issued behind
// queued device work (so ordering bugs are loud), is counted where the ledger says it happened —
// ledger.read = 1 synchronize, ledger.device_scalar = 1 synchronize, at::full = 0 — and a non_blocking copy
// into PAGEABLE memory is caught as a hidden stall: no synchronize call, but a pageable async copy that blocked
// the host. Profile mode (docs/profile.md): device idle after a host sync is sync-starved, idle while the host
// merely dawdles is other idle. Skips (does not fail) when CUPTI cannot subscribe (another profiler holds it) or
// no GPU is found.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "trainer/common/error.h"
#include "trainer/measure/cupti_counter.h"
#include "trainer/timers/device_cuda.h"
#include "trainer/measure/ledger.h"

namespace loopgate {
namespace {

at::TensorOptions cuda(at::ScalarType t) { return at::TensorOptions().dtype(t).device(at::kCUDA); }

// ~10-20 ms of bf16 matmuls on an H200, so the host runs far ahead of the device.
at::Tensor queue_work(int matmuls = 10) {
  static at::Tensor a = at::randn({8192, 8192}, cuda(at::kBFloat16)).div_(90.0);
  at::Tensor x = a;
  for (int i = 0; i < matmuls; ++i) x = at::matmul(x, a);
  return x;
}

class CuptiCounterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
    queue_work(1);  // warm-up: cuBLAS handle, allocator, kernels load outside the counted region
    at::empty({1}, cuda(at::kFloat)).fill_(0);
    cuda_device_synchronize();
    CuptiSyncCounter& c = CuptiSyncCounter::instance();
    if (!c.active() && !c.start()) GTEST_SKIP() << "CUPTI sync counter unavailable: " << c.why();
    // Pay first-use costs before the host must run ahead of the device: CUPTI's first callbacks, and CUDA's lazy
    // module loading (cuLibraryLoadData, 50-250 ms on first launch of each kernel) for every kernel the tests use.
    at::Tensor warm = queue_work(2);
    Ledger scratch;
    scratch.read(Site::kGradNorm, warm.select(0, 0).select(0, 0).to(at::kFloat).reshape({1}));
    cuda_device_synchronize();
    c.reset();
    set_current_iteration(0);
  }
  void TearDown() override { set_current_site("startup"); }
  static SyncTally at_site(const char* site) { return CuptiSyncCounter::instance().at(0, site); }
};

TEST_F(CuptiCounterTest, LedgerReadIsOneSynchronize) {
  Ledger ledger;
  at::Tensor x = queue_work();
  ledger.read(Site::kGradNorm, x.select(0, 0).select(0, 0).to(at::kFloat).reshape({1}));
  SyncTally t = at_site("grad_norm");
  EXPECT_EQ(t.syncs(), ledger.count(0, Site::kGradNorm)) << "ledger and CUPTI disagree at grad_norm";
  EXPECT_EQ(t.synchronizes, 1);
  EXPECT_GT(t.blocked_ms, 1.0) << "a read behind ~10 queued matmuls must block the host";
}

TEST_F(CuptiCounterTest, DeviceScalarFromHostIsOneSynchronize) {
  Ledger ledger;
  queue_work();
  ledger.device_scalar(Site::kLossAccumSeed, 0.0, cuda(at::kFloat));  // torch.tensor([0.0], device='cuda')
  SyncTally t = at_site("loss_accum_seed");
  EXPECT_EQ(t.syncs(), 1);
  EXPECT_EQ(t.syncs(), ledger.count(0, Site::kLossAccumSeed));
}

TEST_F(CuptiCounterTest, FullIsNoSync) {
  queue_work();
  set_current_site("test_full");
  at::Tensor s = at::full({1}, 0.0, cuda(at::kFloat));  // the value rides in the kernel arguments
  at::Tensor z = at::zeros({1}, cuda(at::kFloat));
  z.fill_(1.0);
  SyncTally t = at_site("test_full");
  EXPECT_EQ(t.syncs(), 0);
  EXPECT_EQ(t.pageable_async, 0);
  cuda_device_synchronize();
}

TEST_F(CuptiCounterTest, PageableNonBlockingCopyIsAHiddenStall) {
  at::Tensor y = at::randn({1 << 20}, cuda(at::kFloat));
  at::Tensor pageable = at::empty({1 << 20}, at::kFloat);
  at::Tensor pinned = at::empty({1 << 20}, at::TensorOptions().dtype(at::kFloat).pinned_memory(true));
  cuda_device_synchronize();

  queue_work();
  set_current_site("test_pinned_copy");
  pinned.copy_(y, /*non_blocking=*/true);
  set_current_site("test_pageable_copy");
  queue_work();
  pageable.copy_(y, /*non_blocking=*/true);
  set_current_site("startup");
  cuda_device_synchronize();

  SyncTally pg = at_site("test_pageable_copy"), pn = at_site("test_pinned_copy");
  EXPECT_EQ(pg.synchronizes, 0) << "no synchronize call: that is what makes the stall hidden";
  EXPECT_GE(pg.pageable_async, 1);
  EXPECT_GT(pg.sync_ms, 1.0) << "the pageable copy must have blocked the host behind the queued matmuls";
  EXPECT_EQ(pn.synchronizes, 0);
  EXPECT_EQ(pn.pageable_async, 0);
  EXPECT_LT(pn.blocked_ms, pg.blocked_ms);
  std::printf("%s", format_sync_table(CuptiSyncCounter::instance().table(), "CUPTI: copies behind queued work").c_str());
}

// Launch counting, the measure of "no syncs traded for launches": each eager elementwise op is one kernel launch;
// a captured CUDA graph of the same ops is one graph launch per replay and no kernel launch.
TEST_F(CuptiCounterTest, KernelLaunchesOnePerKernelAndAGraphReplayIsOneGraphLaunch) {
  at::Tensor x = at::zeros({1024}, cuda(at::kFloat));
  set_current_site("test_eager_launches");
  for (int i = 0; i < 5; ++i) x.add_(1.0);
  set_current_site("startup");
  SyncTally eager = at_site("test_eager_launches");
  EXPECT_EQ(eager.kernel_launches, 5) << "five add_ kernels";
  EXPECT_EQ(eager.graph_launches, 0);

  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  {
    c10::cuda::CUDAStreamGuard guard(side);  // graphs are captured on a non-default stream
    at::cuda::CUDAGraph graph;
    graph.capture_begin();
    for (int i = 0; i < 3; ++i) x.add_(1.0);
    graph.capture_end();
    set_current_site("test_graph_launches");
    graph.replay();
    graph.replay();
    set_current_site("startup");
    cuda_device_synchronize();
  }
  SyncTally g = at_site("test_graph_launches");
  EXPECT_EQ(g.graph_launches, 2) << "two replays";
  EXPECT_EQ(g.kernel_launches, 0) << "a replay launches no kernel from the host";
  Ledger ledger;
  EXPECT_EQ(ledger.read(Site::kGradNorm, x.narrow(0, 0, 1)).at(0), 5.0 + 3.0 + 3.0)
      << "capture does not run the ops; each replay does";
}

TEST_F(CuptiCounterTest, SecondSubscriberIsRefusedWithAReason) {
  // The counter is the process's one subscriber; starting it again is a no-op, not a second subscription.
  EXPECT_TRUE(CuptiSyncCounter::instance().start());
}

// ---- profile mode: launch starvation (trainer/measure/starvation.h) ----

// Profile mode on for each test; iteration 0's window runs from the test's set_current_iteration(0) to its
// end_profile_window. The tensors and the kernels the tests launch are made and loaded before profiling starts.
class CuptiProfileTest : public CuptiCounterTest {
 protected:
  void SetUp() override {
    CuptiCounterTest::SetUp();
    if (IsSkipped()) return;
    scratch_ = at::zeros({1024}, cuda(at::kFloat));
    scratch_.add_(1.0);  // loads add_'s kernel now (lazy loading would stall the host inside the window)
    cuda_device_synchronize();
    CuptiSyncCounter& c = CuptiSyncCounter::instance();
    c.reset();
    if (!c.start_profile()) GTEST_SKIP() << "CUPTI profile mode unavailable: " << c.why();
  }
  void TearDown() override {
    CuptiSyncCounter::instance().stop_profile();
    CuptiCounterTest::TearDown();
  }
  // Iteration 0's row, the whole table in *table for messages.
  static StarvationRow row_zero(std::string* table) {
    const DeviceProfile p = CuptiSyncCounter::instance().profile();
    EXPECT_EQ(p.dropped_records, 0);
    const std::vector<StarvationRow> rows = analyze_starvation(p);
    *table = format_starvation_table(rows, "profile: " + std::to_string(p.intervals.size()) + " device intervals (" +
                                               std::to_string(p.launch_times) + " with a launch time), " +
                                               std::to_string(p.syncs.size()) + " host syncs");
    for (const StarvationRow& r : rows)
      if (r.iteration == 0) return r;
    ADD_FAILURE() << "no window for iteration 0\n" << *table;
    return {};
  }
  at::Tensor scratch_;
};

TEST_F(CuptiProfileTest, IdleAfterAHostSyncIsSyncStarved) {
  set_current_iteration(0);
  queue_work(2);
  cuda_device_synchronize();                                  // the host waits until the device drains...
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // ...then is slow to launch: the device starves
  scratch_.add_(1.0);
  cuda_device_synchronize();
  CuptiSyncCounter::instance().end_profile_window();
  std::string table;
  const StarvationRow r = row_zero(&table);
  EXPECT_GE(r.sync_starved_ms, 4.5) << "5 ms of host sleep after a synchronize\n" << table;
  EXPECT_GE(r.kernels + r.copies, 3) << "two matmuls and an add\n" << table;
  EXPECT_GE(r.syncs, 2) << table;
  EXPECT_GT(r.busy_ms, 0.0) << table;
  EXPECT_NEAR(r.busy_ms + r.sync_starved_ms + r.other_idle_ms, r.window_ms, 1e-6) << table;
  std::printf("%s", table.c_str());
}

TEST_F(CuptiProfileTest, IdleWithoutASyncIsOtherIdle) {
  set_current_iteration(0);
  scratch_.add_(1.0);                                         // microseconds of work, then the device idles
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the host dawdles without waiting on the device
  scratch_.add_(1.0);
  cuda_device_synchronize();
  CuptiSyncCounter::instance().end_profile_window();
  std::string table;
  const StarvationRow r = row_zero(&table);
  EXPECT_GE(r.other_idle_ms, 4.5) << "5 ms of host sleep with no sync before it\n" << table;
  EXPECT_GE(r.launch_starved_ms, 4.5) << "the device waited for the add the sleeping host launched\n" << table;
  EXPECT_LT(r.sync_starved_ms, 0.5) << "only the moments after the final synchronize returns\n" << table;
  EXPECT_GE(r.kernels, 2) << table;
  std::printf("%s", table.c_str());
}

TEST_F(CuptiProfileTest, DeviceStaysSyncStarvedWhileTheHostTrailsUntilItLeads) {
  set_current_iteration(0);
  queue_work(2);
  cuda_device_synchronize();  // the queue is empty now; the host then trails: the device waits for each launch
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    scratch_.add_(1.0);
  }
  queue_work(10);  // ~15-20 ms of matmuls: the host leads again (the adds below are issued while they run)
  for (int i = 0; i < 5; ++i) scratch_.add_(1.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(40));  // the device drains with no sync: other idle
  scratch_.add_(1.0);
  cuda_device_synchronize();
  CuptiSyncCounter::instance().end_profile_window();
  const DeviceProfile p = CuptiSyncCounter::instance().profile();
  EXPECT_GE(p.launch_times, static_cast<int64_t>(p.intervals.size()) * 9 / 10)
      << "each kernel's launch call joined by correlation id: " << p.launch_times << " of " << p.intervals.size();
  std::string table;
  const StarvationRow r = row_zero(&table);
  EXPECT_GE(r.sync_starved_ms, 4.5) << "five 1 ms waits for the trailing host after the synchronize\n" << table;
  EXPECT_LT(r.sync_starved_ms, 10.0) << "not the drain after the matmuls: the host led there\n" << table;
  EXPECT_GE(r.other_idle_ms, 10.0) << "the 40 ms sleep, once the matmuls ended\n" << table;
  EXPECT_GE(r.launch_starved_ms, r.sync_starved_ms + 10.0) << "that sleep waited for a launch too\n" << table;
  std::printf("%s", table.c_str());
}

TEST(CudaEventSource, IntervalsAreOrderedAndPositive) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  auto ev = make_cuda_event_source();
  int64_t a = ev->record();
  queue_work(4);
  int64_t b = ev->record();
  ev->synchronize(b);
  ASSERT_TRUE(ev->query(a));
  EXPECT_GT(ev->seconds_between(a, b), 0.0);
}

}  // namespace
}  // namespace loopgate
