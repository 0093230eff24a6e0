// The batched read (Bundle): its MAX over ranks keeps a NaN whatever the backend's max does with one. NCCL's max
// drops a NaN against -inf (found on 2 x H200, pp2: a NaN loss logged as -inf); Open MPI's keeps it. The fake
// group below stands for a second rank and reduces MAX the way fmax does (NaN loses), like NCCL.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "suites/unit/two_rank_comm.h"
#include "trainer/measure/ledger.h"
#include "trainer/loop/bundle.h"

namespace loopgate {
namespace {

// A 2-rank group seen from rank 0: all_reduce MAX combines with the other rank's tensor through fmax.
class FmaxPeerComm final : public TwoRankComm {
 public:
  explicit FmaxPeerComm(at::Tensor peer) : peer_(std::move(peer)) {}
  void all_reduce(at::Tensor& t, ReduceOp op) override {
    ASSERT_EQ(op, ReduceOp::kMax);
    const int64_t n = peer_.numel();
    at::Tensor peer = t.numel() == n ? peer_ : at::cat({peer_, at::zeros({t.numel() - n}, peer_.options())});
    t.copy_(at::fmax(t, peer.to(t.scalar_type())));
    ++calls_;
  }
  int64_t calls() const override { return calls_; }
  void restart(const CommOptions&) override { calls_ = 0; }

 private:
  at::Tensor peer_;
  int64_t calls_ = 0;
};

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Bundle, MaxOverRanksKeepsANanThatTheBackendsMaxWouldDrop) {
  // This rank has the loss (NaN) and a grad norm; the peer has no loss (-inf, as add_absent) and a larger norm.
  Bundle b;
  b.add("loss_total", at::full({1}, std::nan(""), at::kFloat));
  b.add("grad_norm", at::full({1}, 2.0, at::kFloat));
  FmaxPeerComm peer(at::tensor({-kInf, 3.0}, at::kDouble));
  ASSERT_EQ(at::fmax(at::full({1}, std::nan("")), at::full({1}, -kInf)).item<double>(), -kInf)
      << "the fake group must drop NaN as NCCL's max does, or this test proves nothing";
  Ledger ledger;
  auto read = make_async_read(ledger, Site::kBatchedLogRead, {}, {}, 0);
  auto v = b.resolve(*read, peer);
  EXPECT_TRUE(std::isnan(v["loss_total"])) << "a NaN loss became " << v["loss_total"];
  EXPECT_EQ(v["grad_norm"], 3.0);
  EXPECT_EQ(peer.calls(), 1) << "the NaN flag must ride in the same collective";
  EXPECT_EQ(ledger.count(0, Site::kBatchedLogRead), 1);
}

TEST(Bundle, MaxOverRanksIsUnchangedWithoutNan) {
  Bundle b;
  b.add("a", at::full({1}, 1.5, at::kFloat));
  b.add_absent("b");
  FmaxPeerComm peer(at::tensor({-kInf, 7.25}, at::kDouble));
  Ledger ledger;
  auto read = make_async_read(ledger, Site::kBatchedLogRead, {}, {}, 0);
  auto v = b.resolve(*read, peer);
  EXPECT_EQ(v["a"], 1.5);
  EXPECT_EQ(v["b"], 7.25);
}

}  // namespace
}  // namespace loopgate
