// The overhead A/B's bookkeeping (tools/cupti/alternating_iterations.h): which iterations the counter counts,
// and which arm each iteration's duration lands in. A duration in the wrong arm would bias the overhead it reports.
#include <gtest/gtest.h>

#include "tools/cupti/alternating_iterations.h"

namespace loopgate::cupti {
namespace {

TEST(AlternatingIterations, RegionAlternatesFromItsFirstIteration) {
  AlternatingIterations ab;
  std::vector<bool> counted;
  for (int64_t n = 1; n <= 8; ++n) counted.push_back(ab.begin(n, /*in_region=*/n >= 3 && n <= 7, 10.0 * n));
  EXPECT_EQ(counted, (std::vector<bool>{false, false, true, false, true, false, true, false}));
}

TEST(AlternatingIterations, EachDurationGoesToTheArmOfTheIterationItEnds) {
  // Iterations 2..6 in the region: 2, 4, 6 counted and 3 ms long; 3, 5 uncounted and 1 ms long. Iteration 1
  // (before) and 7 (after) are left out.
  AlternatingIterations ab;
  const double starts[] = {0, 5, 8, 9, 12, 13, 16, 30};
  for (int64_t n = 1; n <= 7; ++n) ab.begin(n, n >= 2 && n <= 6, starts[n - 1]);
  ab.begin(8, false, starts[7]);
  EXPECT_EQ(ab.counted_ms(), (std::vector<double>{3, 3, 3}));
  EXPECT_EQ(ab.uncounted_ms(), (std::vector<double>{1, 1}));
  EXPECT_EQ(ab.iteration_ms(), (std::vector<double>{3, 1, 3, 1, 3}));
  EXPECT_EQ(ab.iteration_counted(), (std::vector<bool>{true, false, true, false, true}));
  EXPECT_EQ(ab.json().dump(), R"({"counted_ms":[3.0,3.0,3.0],"iteration_counted":[true,false,true,false,true],)"
                              R"("iteration_ms":[3.0,1.0,3.0,1.0,3.0],"uncounted_ms":[1.0,1.0]})");
}

TEST(AlternatingIterations, TheLastIterationOfTheRunHasNoDuration) {
  AlternatingIterations ab;
  ab.begin(1, true, 0);
  ab.begin(2, true, 4);
  EXPECT_EQ(ab.counted_ms(), (std::vector<double>{4}));
  EXPECT_TRUE(ab.uncounted_ms().empty());  // iteration 2 never ended
}

TEST(AlternatingIterations, TheTogglesTimeIsChargedToNeitherArm) {
  // Each marker at 10 ms steps; turning the callbacks on or off after it takes 4 ms (counted) or 1 ms (uncounted),
  // which a run without the A/B never spends. Both arms then last 10 - toggle ms of work: 6 and 9.
  AlternatingIterations ab;
  for (int64_t n = 1; n <= 5; ++n) {
    const bool counted = ab.begin(n, true, 10.0 * n);
    ab.restart(10.0 * n + (counted ? 4 : 1));
  }
  ab.begin(6, false, 60);
  EXPECT_EQ(ab.counted_ms(), (std::vector<double>{6, 6, 6}));
  EXPECT_EQ(ab.uncounted_ms(), (std::vector<double>{9, 9}));
}

TEST(AlternatingIterations, RestartOutsideTheRegionChangesNothing) {
  AlternatingIterations ab;
  ab.begin(1, false, 0);
  ab.restart(3);
  ab.begin(2, true, 10);
  ab.begin(3, false, 14);
  EXPECT_EQ(ab.counted_ms(), (std::vector<double>{4}));
}

}  // namespace
}  // namespace loopgate::cupti
