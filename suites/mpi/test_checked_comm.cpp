// The fingerprinted groups (trainer/parallel/checked_comm.h): the same collectives pass with the unchecked
// results; a rank that skips one is named, with what each rank issued, at its next collective — not a hang.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

#include "fixtures/scenarios.h"  // world_rank(), world_size()
#include "trainer/common/error.h"
#include "trainer/parallel/checked_comm.h"
#include "trainer/parallel/comm_mpi.h"
#include "trainer/parallel/layout.h"

namespace loopgate {
namespace {

ProcessGroups dp_groups() {
  LayoutConfig lc;  // every rank data parallel
  return make_mpi_groups(Layout::build(world_size(), lc), MPI_COMM_WORLD);
}

TEST(CheckedComm, MatchingCollectivesPassWithTheSameResults) {
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  ProcessGroups checked = checked_groups(dp_groups());
  at::Tensor t = at::full({4}, static_cast<double>(world_rank() + 1), at::kDouble);
  checked.world->all_reduce(t);
  const double want = world_size() * (world_size() + 1) / 2.0;
  EXPECT_EQ(t[0].item<double>(), want);
  EXPECT_EQ(checked.world->all_gather(at::ones({2}, at::kFloat)).numel(), 2 * world_size());
  checked.world->barrier();
}

TEST(CheckedComm, ARankThatSkipsACollectiveIsNamedAtItsNextOne) {
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  ProcessGroups checked = checked_groups(dp_groups());
  const int last = world_size() - 1;
  std::string message;
  try {
    ScopedSite site(world_rank() == last ? "exit_vote" : "rerun_decision");
    at::Tensor big = at::ones({2048}, at::kFloat), one = at::ones({1}, at::kFloat);
    if (world_rank() != last) checked.world->all_reduce(big);  // the last rank skips this one
    checked.world->all_reduce(one);
  } catch (const Error& e) {
    message = e.what();
  }
  // Every rank fails at the same fingerprint exchange (no rank is left waiting), each naming the others.
  ASSERT_FALSE(message.empty()) << "rank " << world_rank() << ": the skipped collective went unnoticed";
  EXPECT_NE(message.find("collective mismatch on group world"), std::string::npos) << message;
  if (world_rank() == 0) {
    EXPECT_NE(message.find("issued all_reduce(world, 2048 x Float, collective #0) at site 'rerun_decision'"),
              std::string::npos) << message;
    EXPECT_NE(message.find(fmt::format("rank {} (world {}) issued all_reduce(world, 1 x Float, collective #0) from "
                                       "another site", last, last)), std::string::npos) << message;
    std::printf("named as expected: %s\n", message.c_str());
  }
}

}  // namespace
}  // namespace loopgate
