// Layout coordinates and groups against Megatron's formulas (parallel_state.py RankGenerator, order
// tp-cp-ep-dp-pp): tp_rank = r % tp, dp_rank = (r / tp) % dp, pp_rank = r / (tp*dp).
#include <gtest/gtest.h>

#include "trainer/common/error.h"
#include "trainer/parallel/layout.h"

namespace loopgate {
namespace {

struct LayoutCase {
  int tp, pp, dp;
};

class LayoutFormulas : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(LayoutFormulas, CoordinatesAndGroupsMatchMegatron) {
  const LayoutCase c = GetParam();
  const int world = c.tp * c.pp * c.dp;
  Layout l = Layout::build(world, {c.tp, c.pp, false});
  ASSERT_EQ(l.dp(), c.dp);
  for (int r = 0; r < world; ++r) {
    Coord k = l.coord(r);
    EXPECT_EQ(k.tp, r % c.tp) << "rank " << r;
    EXPECT_EQ(k.dp, (r / c.tp) % c.dp) << "rank " << r;
    EXPECT_EQ(k.pp, r / (c.tp * c.dp)) << "rank " << r;
    EXPECT_EQ(l.rank_of(k), r);
    // Megatron: tp groups are consecutive, dp groups stride tp, pp groups stride tp*dp, mp = tp x pp.
    std::vector<int> tp, dp, pp, mp;
    int tp0 = r - r % c.tp;
    for (int i = 0; i < c.tp; ++i) tp.push_back(tp0 + i);
    int base_dp = (r / (c.tp * c.dp)) * c.tp * c.dp + r % c.tp;
    for (int i = 0; i < c.dp; ++i) dp.push_back(base_dp + i * c.tp);
    int base_pp = r % (c.tp * c.dp);
    for (int i = 0; i < c.pp; ++i) pp.push_back(base_pp + i * c.tp * c.dp);
    for (int p : pp)
      for (int i = 0; i < c.tp; ++i) mp.push_back(p - p % c.tp + i);
    std::sort(mp.begin(), mp.end());
    EXPECT_EQ(l.tp_group(r), tp) << "rank " << r;
    EXPECT_EQ(l.dp_group(r), dp) << "rank " << r;
    EXPECT_EQ(l.pp_group(r), pp) << "rank " << r;
    EXPECT_EQ(l.mp_group(r), mp) << "rank " << r;
  }
  EXPECT_TRUE(l.is_last_stage(world - 1));
  EXPECT_TRUE(l.is_first_stage(0));
}

INSTANTIATE_TEST_SUITE_P(Megatron, LayoutFormulas,
                         ::testing::Values(LayoutCase{2, 1, 1}, LayoutCase{1, 2, 1}, LayoutCase{1, 1, 64},
                                           LayoutCase{2, 2, 2}, LayoutCase{4, 2, 1}),
                         [](const auto& info) {
                           return "tp" + std::to_string(info.param.tp) + "pp" + std::to_string(info.param.pp) + "dp" +
                                  std::to_string(info.param.dp);
                         });

// The groups Megatron's docstring and our reference list for tp=2, dp=2, pp=2 (world 8).
TEST(LayoutFormulas, WorldEightExplicitGroups) {
  Layout l = Layout::build(8, {2, 2, true});
  EXPECT_EQ(l.tp_group(5), (std::vector<int>{4, 5}));
  EXPECT_EQ(l.dp_group(5), (std::vector<int>{5, 7}));
  EXPECT_EQ(l.pp_group(5), (std::vector<int>{1, 5}));
  EXPECT_EQ(l.mp_group(6), (std::vector<int>{2, 3, 6, 7}));
  EXPECT_TRUE(l.sequence_parallel());
}

TEST(LayoutFormulas, IndivisibleWorldIsOneLineInputError) {
  try {
    Layout::build(6, {4, 1, false});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("world size 6"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tp*pp = 4*1"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace loopgate
