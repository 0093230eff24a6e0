// The CPU stand-in for a CUDA graph's replay (trainer/capture/op_stream.h): what it accepts and what it names.
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

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

// Cut actions (a replayed iteration's timer starts and stops): run where they stand at the capture; at every later
// run the captured ones run in their place, as a GPU replays them; a different count is named.
TEST(OpStream, CutActionsReplayTheCapturedOnes) {
  Toy t;
  auto g = make_op_stream_check_graph();
  std::vector<std::string> ran;
  for (int64_t it = 3; it < 6; ++it)
    g->run(it, [&] {
      g->cut([&ran, it] { ran.push_back("start@" + std::to_string(it)); });
      t.step(0.5);
      g->cut([&ran, it] { ran.push_back("stop@" + std::to_string(it)); });
    }, t.state());
  EXPECT_TRUE(g->report().error.empty()) << g->report().error;
  EXPECT_EQ(ran, (std::vector<std::string>{"start@3", "stop@3", "start@3", "stop@3", "start@3", "stop@3"}));
  g->run(6, [&] { t.step(0.5); }, t.state());  // no cut: one replay would still run the captured two
  EXPECT_NE(g->report().error.find("cut its work at 0 timer action(s), the captured iteration 3 at 2"),
            std::string::npos) << g->report().error;
  // Off (after a finding), or never capturing: an action runs where it stands.
  std::vector<std::string> now;
  g->run(7, [&] { g->cut([&now] { now.push_back("eager"); }); }, t.state());
  EXPECT_EQ(now, (std::vector<std::string>{"eager"}));
}

// The recorder's callback asks for every operator's inputs: it must be gone once a recording stops, or every later
// operator of the process pays for it.
TEST(OpStream, TheRecordingCallbackIsRemovedWhenItStops) {
  EXPECT_FALSE(at::hasGlobalCallbacks());
  OpStreamRecorder::start({});
  EXPECT_TRUE(at::hasGlobalCallbacks());
  (void)at::ones({2}).add(1.0);
  EXPECT_FALSE(OpStreamRecorder::stop().empty());
  EXPECT_FALSE(at::hasGlobalCallbacks()) << "the recording callback outlived its recording";
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
