// Self-tests of the MPI gtest harness. Only SelfTest.Passes should pass; the others are registered in CTest
// as expected failures whose output must name the failing rank or carry the watchdog's line.
#include <gtest/gtest.h>
#include <mpi.h>

#include <thread>

#include "trainer/common/error.h"

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
