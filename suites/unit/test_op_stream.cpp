// The CPU stand-in for a CUDA graph's replay (trainer/capture/op_stream.h): what it accepts and what it names.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "trainer/capture/op_stream.h"

namespace loopgate {
namespace {

// One "iteration": in-place updates of persistent state, temporaries in between.
struct Toy {
  at::Tensor w = at::ones({4, 4});
  at::Tensor m = at::zeros({4, 4});
  GraphState state() const { return {{"w", w}, {"m", m}}; }
  void step(double lr) {
    at::Tensor g = w.mul(2.0).add(1.0);  // a temporary each time, at whatever address
    m.mul_(0.9).add_(g, 0.1);
    w.sub_(m.mul(lr));
  }
};

TEST(OpStream, TheSameIterationEachTimeReplaysCleanly) {
  Toy t;
  auto g = make_op_stream_check_graph();
  for (int64_t it = 3; it < 8; ++it) g->run(it, [&] { t.step(0.5); }, t.state());
  EXPECT_TRUE(g->report().error.empty()) << g->report().error;
  EXPECT_EQ(g->report().captures, 1);
  EXPECT_EQ(g->report().replays, 5) << "the captured iteration counts: on a GPU it runs as the first replay";
  EXPECT_FALSE(g->off());
}

TEST(OpStream, AHostArgumentThatChangesIsNamed) {
  Toy t;
  auto g = make_op_stream_check_graph();
  for (int64_t it = 3; it < 6; ++it) g->run(it, [&] { t.step(0.5 / static_cast<double>(it)); }, t.state());
  const std::string& e = g->report().error;
  EXPECT_NE(e.find("iteration 4"), std::string::npos) << e;
  EXPECT_NE(e.find("aten::mul"), std::string::npos) << e;
  EXPECT_TRUE(g->off()) << "the first difference is the finding";
}

TEST(OpStream, StateReassignedInsteadOfWrittenInPlaceIsNamed) {
  Toy t;
  auto g = make_op_stream_check_graph();
  g->run(3, [&] { t.step(0.5); }, t.state());
  t.m = t.m.clone();  // what `m_ = m_ * 0.9 + ...` does: a new storage each iteration
  g->run(4, [&] { t.step(0.5); }, t.state());
  EXPECT_NE(g->report().error.find("'m'"), std::string::npos) << g->report().error;
}

TEST(OpStream, ABranchOnTheIterationIsNamed) {
  Toy t;
  auto g = make_op_stream_check_graph();
  for (int64_t it = 3; it < 6; ++it)
    g->run(it, [&] {
      t.step(0.5);
      if (it == 5) t.w.add_(0.0);  // one operator more on one iteration
    }, t.state());
  EXPECT_NE(g->report().error.find("iteration 5"), std::string::npos) << g->report().error;
}

TEST(OpStream, WhichPersistentTensorAnOperatorTouchesCounts) {
  Toy t;
  auto g = make_op_stream_check_graph();
  g->run(3, [&] { t.w.add_(1.0); }, t.state());
  g->run(4, [&] { t.m.add_(1.0); }, t.state());  // same shape, same dtype, another tensor
  EXPECT_FALSE(g->report().error.empty()) << "an operator on m where the captured one wrote w";
}

}  // namespace
}  // namespace loopgate
