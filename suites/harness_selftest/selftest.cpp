// Self-tests of the MPI gtest harness. Only SelfTest.Passes should pass; the others are registered in CTest as
// expected failures whose output must name the failing rank or carry the watchdog's line, that end within their
// limit, and that leave no process behind (suites/harness_selftest/expect_failure.sh); Arms/SkipAfterRejection
// (below) by the line its skip prints.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <thread>

#include "fixtures/harness/arm_test.h"
#include "trainer/common/error.h"
#include "trainer/parallel/comm_mpi.h"

namespace {
int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
}  // namespace

TEST(SelfTest, Passes) {
  int one = 1, sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(sum, size);
}

TEST(SelfTest, FailsOnRankTwo) {
  EXPECT_NE(world_rank(), 2) << "expected failure planted on rank 2";
}

TEST(SelfTest, HangsOnRankThree) {
  loopgate::set_current_site("selftest-hang");
  if (world_rank() == 3) std::this_thread::sleep_for(std::chrono::seconds(600));
  MPI_Barrier(MPI_COMM_WORLD);  // the other ranks wait here for rank 3 forever
}

TEST(SelfTest, ThrowsOnRankOne) {
  if (world_rank() == 1) throw loopgate::Error("planted exception on rank 1");
  MPI_Barrier(MPI_COMM_WORLD);  // rank 1 never arrives: the harness must abort rather than hang
}

// A crash (here a write through a null pointer) on one rank: its line names the rank, the signal and the test,
// then its stack; the job ends (the other ranks' MPI sees the death) rather than hanging.
TEST(SelfTest, CrashesOnRankOne) {
  if (world_rank() == 1) {
    volatile int* nowhere = nullptr;
    *nowhere = 1;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// ---- the hangs a loop change can cause: each must fail within the progress limit, name the rank ----

namespace {
// A collective on the loop's own Comm (progress is counted there, as in a real run), over the world.
loopgate::CommPtr world_comm() {
  static loopgate::CommPtr c = loopgate::make_mpi_comm(MPI_COMM_WORLD);
  return c;
}
void loop_all_reduce(int64_t n) {
  at::Tensor t = at::ones({n});
  world_comm()->all_reduce(t);
}
}  // namespace

// Rank 1 skips a collective the others make, then waits in the next one: no rank progresses.
TEST(SelfTest, SkipsACollectiveOnRankOne) {
  loopgate::set_current_scenario("selftest-skip arm planted");
  loopgate::set_current_site("selftest-skip");
  if (world_rank() != 1) loop_all_reduce(4);
  world_comm()->barrier();
  loop_all_reduce(4);
}

// Rank 1 leaves the job mid-test; the others wait for it in a collective.
TEST(SelfTest, ExitsEarlyOnRankOne) {
  loopgate::set_current_site("selftest-exit");
  if (world_rank() == 1) std::_Exit(0);
  loop_all_reduce(4);
}

// Ranks issue the same collective with different sizes.
TEST(SelfTest, MismatchedCollectiveSizes) {
  loopgate::set_current_site("selftest-sizes");
  loop_all_reduce(world_rank() == 1 ? 1024 : 4);
  loop_all_reduce(4);
}

// Ranks issue two collectives in different orders.
TEST(SelfTest, MismatchedCollectiveOrder) {
  loopgate::set_current_site("selftest-order");
  if (world_rank() == 1) {
    world_comm()->barrier();
    loop_all_reduce(4);
  } else {
    loop_all_reduce(4);
    world_comm()->barrier();
  }
}

// ArmTest's skip (fixtures/harness/arm_test.h, --lg_skip_rejected_arms=1): the arm fails its first test on rank 1
// alone, and every rank must skip its second, which meets the peers in a barrier: a rank that went by its own
// verdict would skip while the other waits there.
class SkipAfterRejection : public loopgate::ArmTest {};
TEST_P(SkipAfterRejection, FailsOnRankOne) { EXPECT_NE(world_rank(), 1) << "expected failure planted on rank 1"; }
TEST_P(SkipAfterRejection, MeetsEveryRank) { MPI_Barrier(MPI_COMM_WORLD); }
INSTANTIATE_TEST_SUITE_P(Arms, SkipAfterRejection, ::testing::Values("planted"));
