// The injection library's region and iterations (tools/cupti/sync_region.h), CUDA-free: which calls count and at
// which iteration. On a GPU the counter asks these on every driver call; a region off by one would count the
// warm-up iterations or lose the last one.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tools/cupti/sync_region.h"
#include "trainer/measure/sync_table_file.h"

namespace loopgate::cupti {
namespace {

// The environment a region reads, set for one test.
struct Env {
  Env(const char* roi, const char* ab = "") {
    setenv(sync_file::kEnvRoi, roi, 1);
    setenv(sync_file::kEnvOverheadAb, ab, 1);
    unsetenv(sync_file::kEnvIterPrefix);
  }
  ~Env() {
    unsetenv(sync_file::kEnvRoi);
    unsetenv(sync_file::kEnvOverheadAb);
  }
};

TEST(SyncRegion, AnIterationRangeCountsItsMarkedIterationsOnly) {
  Env env("iters:3-4");
  SyncRegion r;
  std::string why;
  ASSERT_TRUE(r.configure(&why)) << why;
  EXPECT_EQ(r.describe(), "marked iterations 3-4");
  std::vector<int64_t> counted;
  for (int64_t n = 1; n <= 6; ++n) {
    EXPECT_FALSE(r.begin_marked(n).has_value());  // no overhead A/B: the callbacks stay as they are
    r.end_marked();
    if (r.in_roi()) counted.push_back(r.iteration());
  }
  EXPECT_EQ(counted, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(r.iterations_seen(), 2);
}

TEST(SyncRegion, AnUnreadableRangeIsRefusedWithTheVariable) {
  for (const char* bad : {"iters:4-3", "iters:0-2", "iters:x"}) {
    Env env(bad);
    SyncRegion r;
    std::string why;
    EXPECT_FALSE(r.configure(&why)) << bad;
    EXPECT_NE(why.find("LOOPGATE_CUPTI_ROI"), std::string::npos) << why;
  }
}

TEST(SyncRegion, AnNvtxRegionCountsInsideItsRangeAndNamesTheInnermostOther) {
  Env env("step");
  SyncRegion r;
  std::string why;
  ASSERT_TRUE(r.configure(&why)) << why;
  EXPECT_FALSE(r.in_roi());
  r.push("step", /*markers_on=*/false);
  r.push("iteration 1", false);  // an iteration marker: begins iteration 1, names no site
  r.push("optimizer", false);
  EXPECT_TRUE(r.in_roi());
  EXPECT_EQ(r.iteration(), 1);
  EXPECT_EQ(r.innermost_range(), "optimizer");
  r.pop();
  EXPECT_EQ(r.innermost_range(), "");  // the region's own range and the iteration's are no site
  r.pop();
  r.pop();
  EXPECT_FALSE(r.in_roi());
}

TEST(SyncRegion, TheOverheadAbSwitchesTheCallbacksPerIteration) {
  Env env("iters:2-5", "1");
  SyncRegion r;
  std::string why;
  ASSERT_TRUE(r.configure(&why)) << why;
  std::vector<bool> callbacks, counts;
  for (int64_t n = 1; n <= 6; ++n) {
    const std::optional<bool> on = r.begin_marked(n);
    ASSERT_TRUE(on.has_value());
    callbacks.push_back(*on);
    r.end_marked();
    counts.push_back(r.in_roi());
  }
  // Outside the region the callbacks stay on (nothing to compare there); inside, counted and uncounted alternate.
  EXPECT_EQ(callbacks, (std::vector<bool>{true, true, false, true, false, true}));
  EXPECT_EQ(counts, (std::vector<bool>{false, true, false, true, false, false}));
  EXPECT_FALSE(r.overhead_ab().is_null());
}

}  // namespace
}  // namespace loopgate::cupti
