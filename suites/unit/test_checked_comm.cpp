// The per-call exchange of --check-collectives (trainer/parallel/checked_comm.h) between two ranks whose loop sites
// differ: its invariant is that the n-th collective on a group matches in operation, dtype and count on every rank,
// whichever site issued it. Rank 1's fingerprint is taken from a CheckedComm of its own; rank 0's group then
// "gathers" both. A rank that skipped a call and issued the next one from another site, with another size, is named
// with both calls; the same call from another site is named as such; the same call from the same site agrees. A
// check whose "same call" included the site (a mismatch ignored when the sites differ) passes the first case: this
// test fails it. Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 expects agreement where there is none.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "suites/unit/two_rank_comm.h"
#include "suites/unit/wrong.h"
#include "trainer/common/error.h"
#include "trainer/parallel/checked_comm.h"

namespace loopgate {
namespace {

// One rank of a two-rank group whose all-gather returns this rank's tensor and the peer's, given beforehand; it
// remembers what this rank gave.
class TwoRankGather final : public TwoRankComm {
 public:
  TwoRankGather(int rank, at::Tensor peer) : TwoRankComm(rank), peer_(std::move(peer)) {}
  at::Tensor all_gather(const at::Tensor& t) override {
    given = t.clone();
    const at::Tensor other = peer_.defined() ? peer_ : t;  // no peer given: the peer agrees
    return rank() == 0 ? at::cat({t, other}) : at::cat({other, t});
  }
  at::Tensor given;

 private:
  at::Tensor peer_;
};

struct Issued {
  const char* site;
  int64_t numel;
};

// Rank 1 issues `peer`, then rank 0 issues `mine` as the group's collective #0; what rank 0's check says ("" when
// the ranks agree).
std::string exchange(Issued mine, Issued peer) {
  auto rank1 = std::make_shared<TwoRankGather>(1, at::Tensor());
  set_current_site(peer.site);
  at::Tensor t1 = at::zeros({peer.numel}, at::kFloat);
  checked_comm(rank1, "world")->all_reduce(t1, ReduceOp::kSum);
  auto rank0 = std::make_shared<TwoRankGather>(0, rank1->given);
  set_current_site(mine.site);
  at::Tensor t0 = at::zeros({mine.numel}, at::kFloat);
  std::string said;
  try {
    checked_comm(rank0, "world")->all_reduce(t0, ReduceOp::kSum);
  } catch (const std::exception& e) {
    said = e.what();
  }
  set_current_site(nullptr);
  return said;
}

TEST(CheckedComm, ASkippedCallFollowedByAnotherSitesCallOfAnotherSizeIsNamed) {
  // Rank 1 skipped the vote (1 float at rerun_decision) and issued the grad norm's (2 floats) as its #0.
  const std::string said = exchange({"rerun_decision", 1}, {"grad_norm", 2});
  EXPECT_EQ(said.empty(), static_cast<bool>(wrong())) << said;
  EXPECT_NE(said.find("collective mismatch on group world: this rank (world 0) issued all_reduce(world, 1 x Float, "
                      "collective #0) at site 'rerun_decision'; rank 1 (world 1) issued all_reduce(world, 2 x Float, "
                      "collective #0) from another site"),
            std::string::npos + wrong())
      << said;
}

TEST(CheckedComm, TheSameCallFromAnotherSiteIsNamed) {
  const std::string said = exchange({"rerun_decision", 1}, {"grad_norm", 1});
  EXPECT_EQ(said.empty(), static_cast<bool>(wrong())) << said;
  EXPECT_NE(said.find("rank 1 (world 1) issued all_reduce(world, 1 x Float, collective #0) from another site"),
            std::string::npos + wrong())
      << said;
}

TEST(CheckedComm, AnotherSizeFromTheSameSiteIsNamed) {
  const std::string said = exchange({"numerics", 64}, {"numerics", 32});
  EXPECT_NE(said.find("rank 1 (world 1) issued all_reduce(world, 32 x Float, collective #0)"),
            std::string::npos + wrong())
      << said;
  EXPECT_EQ(said.find("from another site"), std::string::npos + wrong()) << said;
}

TEST(CheckedComm, TheSameCallFromTheSameSiteAgrees) {
  EXPECT_EQ(exchange({"numerics", 64}, {"numerics", 64}).empty(), !wrong());
}

}  // namespace
}  // namespace loopgate
