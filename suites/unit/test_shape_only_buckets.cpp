// The shape-only grad-bucket layout that `loopgate run` checks `--inject ...,bucket=K` against
// (stage_param_numels + layout_grad_buckets, no model built) must be the layout GradBuffer builds from the real
// parameters: same bucket count and members on every rank of every fixture layout, for several bucket sizes.
// Plus hand-computed layouts (the default model on one rank: 3 buckets per layer + 1 for the embeddings).
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every hand-computed expectation, so every test here fails.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>

#include "suites/unit/wrong.h"
#include "trainer/model/init.h"
#include "trainer/optim/grad_buffer.h"
#include "trainer/parallel/comm_mpi.h"

namespace loopgate {
namespace {

TEST(ShapeOnlyBuckets, HandComputedLayouts) {
  // Reverse registration order; a bucket closes at >= size elements; the first param closes the last bucket.
  const BucketLayout a = layout_grad_buckets({3, 4, 5}, 4);
  EXPECT_EQ(a.num_buckets(), 3 + wrong());
  EXPECT_EQ(a.members, (std::vector<std::vector<int>>{{2}, {1}, {0 + wrong()}}));
  EXPECT_EQ(a.offset, (std::vector<int64_t>{9, 5, 0 + wrong()}));
  const BucketLayout b = layout_grad_buckets({3, 4, 5}, 9);
  EXPECT_EQ(b.members, (std::vector<std::vector<int>>{{2, 1}, {0 + wrong()}}));
  EXPECT_EQ(b.ranges, (std::vector<std::pair<int64_t, int64_t>>{{0, 9}, {9, 3 + wrong()}}));
  EXPECT_EQ(layout_grad_buckets({3, 4, 5}, 100).num_buckets(), 1 + wrong());
}

TEST(ShapeOnlyBuckets, DefaultModelOnOneRankHasThreeBucketsPerLayerPlusOne) {
  // hidden 64: per layer fc2 (16384 + 64) closes one bucket, fc1 (256 + 16384) a second, layernorms + proj +
  // qkv (128 + 4160 + 12480) a third; the embeddings (2048 + 16384) close the last.
  const ModelConfig cfg;
  const Layout single = Layout::build(1, {1, 1, false});
  EXPECT_EQ(layout_grad_buckets(stage_param_numels(cfg, single, 0), kDefaultBucketSize).num_buckets(),
            3 * cfg.layers + 1 + wrong());
  // PP=2: each stage holds 2 layers; the last stage adds the final layernorm and the tied output copy.
  const Layout pp2 = Layout::build(2, {1, 2, false});
  const std::vector<int64_t> last = stage_param_numels(cfg, pp2, 1);
  EXPECT_EQ(last.back(), int64_t{256} * 64 + wrong());  // output_layer.weight: vocab x hidden
  EXPECT_EQ(last.size(), 2u * 12 + 2 + 1 + static_cast<size_t>(wrong()));
}

// The CLI's count against GradBuffer built from the real parameters, member for member.
TEST(ShapeOnlyBuckets, EqualsGradBufferOnEveryFixtureLayout) {
  struct Case {
    const char* name;
    int world;
    LayoutConfig lc;
    bool tied;
  };
  const Case cases[] = {{"single", 1, {1, 1, false}, true},    {"tp2sp", 2, {2, 1, true}, true},
                        {"pp2", 2, {1, 2, false}, true},       {"pp2-untied", 2, {1, 2, false}, false},
                        {"pp2tp2dp2", 8, {2, 2, true}, true},  {"dp64", 64, {1, 1, false}, true},
                        {"pp4", 4, {1, 4, false}, true}};
  const CommPtr self = make_mpi_comm(MPI_COMM_SELF);
  int compared = 0;
  for (const Case& c : cases) {
    ModelConfig cfg;
    cfg.tie_embeddings = c.tied;
    const Layout layout = Layout::build(c.world, c.lc);
    for (int r = 0; r < c.world; r += c.world == 64 ? 63 : 1) {  // dp64: every rank holds the same stage
      const Params params = init_stage_params(cfg, layout, r);
      const std::vector<int64_t> numels = stage_param_numels(cfg, layout, r);
      ASSERT_EQ(numels.size(), params.size()) << c.name << " rank " << r;
      for (size_t i = 0; i < params.size(); ++i)
        EXPECT_EQ(numels[i], params[i].value.numel()) << c.name << " rank " << r << " " << params[i].name;
      for (int64_t size : {int64_t{1}, int64_t{1000}, kDefaultBucketSize, int64_t{1} << 20}) {
        const GradBuffer built(params, self, {size});
        const BucketLayout shape_only = layout_grad_buckets(numels, size);
        ASSERT_EQ(shape_only.num_buckets(), built.num_buckets() + wrong()) << c.name << " rank " << r << " size " << size;
        for (int k = 0; k < built.num_buckets(); ++k)
          EXPECT_EQ(shape_only.members[static_cast<size_t>(k)], built.bucket_params(k)) << c.name << " rank " << r;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 4 * (1 + 2 + 2 + 2 + 8 + 2 + 4));
}

}  // namespace
}  // namespace loopgate
