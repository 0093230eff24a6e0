// Layout-independent init: the TP shards of every layout put back together equal the single-rank model, each
// parameter lives on exactly one PP stage (plus the tied output copy), and the mock data's global batch is
// the same whatever the DP degree.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>

#include "trainer/model/data.h"
#include "trainer/model/init.h"

namespace loopgate {
namespace {

std::map<std::string, at::Tensor> single_rank_model(const ModelConfig& cfg) {
  std::map<std::string, at::Tensor> m;
  for (const Param& p : init_stage_params(cfg, Layout::build(1, {}), 0)) m[p.name] = p.value.detach();
  return m;
}

TEST(ModelInit, ShardsOfEveryLayoutReassembleTheSingleRankModel) {
  ModelConfig cfg;
  auto ref = single_rank_model(cfg);
  for (LayoutConfig lc : {LayoutConfig{2, 1, true}, LayoutConfig{1, 2, false}, LayoutConfig{2, 2, true}}) {
    Layout layout = Layout::build(lc.tp * lc.pp, lc);
    std::map<std::string, std::vector<at::Tensor>> shards;
    std::map<std::string, int64_t> dims;
    for (int r = 0; r < layout.world(); ++r)
      for (const Param& p : init_stage_params(cfg, layout, r)) {
        shards[p.name].push_back(p.value.detach());
        dims[p.name] = p.tp_dim;
      }
    for (auto& [name, parts] : shards) {
      at::Tensor full = dims[name] >= 0 ? at::cat(parts, dims[name]) : parts[0];
      const at::Tensor& want = ref.at(full_model_name(cfg, name));
      EXPECT_TRUE(at::equal(full, want)) << layout.describe() << " " << name;
    }
    EXPECT_EQ(shards.size(), ref.size() + (lc.pp > 1 ? 1 : 0)) << layout.describe();
  }
}

TEST(ModelInit, LayerNormOnesBiasesZero) {
  auto m = single_rank_model(ModelConfig{});
  EXPECT_TRUE(at::equal(m.at("layers.0.input_layernorm.weight"), at::ones({64})));
  EXPECT_EQ(m.at("layers.3.mlp.fc2.bias").abs().sum().item<double>(), 0.0);
  EXPECT_GT(m.at("layers.3.mlp.fc2.weight").abs().sum().item<double>(), 0.0);
}

TEST(ModelData, GlobalBatchIndependentOfDataParallelDegree) {
  ModelConfig cfg;
  DataConfig data{2, 8, 99};
  Batch one = make_host_batch(cfg, data, Layout::build(1, {}), 0, 5);
  ASSERT_EQ(one.microbatches.size(), 4u);
  Layout dp2 = Layout::build(2, {});
  for (int r = 0; r < 2; ++r) {
    Batch b = make_host_batch(cfg, data, dp2, r, 5);
    ASSERT_EQ(b.microbatches.size(), 2u);
    for (int m = 0; m < 2; ++m) {
      EXPECT_TRUE(at::equal(b.microbatches[m].tokens, one.microbatches[2 * r + m].tokens));
      EXPECT_TRUE(at::equal(b.microbatches[m].labels, one.microbatches[2 * r + m].labels));
    }
  }
  const Microbatch& mb = one.microbatches[0];
  EXPECT_TRUE(at::equal(mb.tokens.narrow(0, 1, cfg.seq - 1), mb.labels.narrow(0, 0, cfg.seq - 1)));
  EXPECT_THROW(num_microbatches(DataConfig{2, 6, 1}, Layout::build(2, {})), InputError);
}

}  // namespace
}  // namespace loopgate
