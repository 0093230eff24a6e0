// Mock data: one generator per (seed, iteration, sample), seeded through splitmix64 so that neighbouring
// samples get unrelated streams.
#include "trainer/model/data.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace loopgate {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

at::Tensor mock_sample(const ModelConfig& cfg, const DataConfig& data, int64_t iteration, int64_t sample) {
  uint64_t seed = splitmix64(data.data_seed);
  seed = splitmix64(seed ^ static_cast<uint64_t>(iteration));
  seed = splitmix64(seed ^ static_cast<uint64_t>(sample));
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randint(cfg.vocab, {cfg.seq + 1}, gen, at::TensorOptions().dtype(at::kLong));
}

Batch make_host_batch(const ModelConfig& cfg, const DataConfig& data, const Layout& layout, int world_rank,
                      int64_t iteration) {
  const int m_count = num_microbatches(data, layout);
  const int64_t per_dp = data.global_batch / layout.dp();
  const int64_t first = layout.coord(world_rank).dp * per_dp;
  Batch batch;
  for (int m = 0; m < m_count; ++m) {
    std::vector<at::Tensor> samples;
    for (int j = 0; j < data.micro_batch; ++j)
      samples.push_back(mock_sample(cfg, data, iteration, first + m * data.micro_batch + j));
    at::Tensor seqs = at::stack(samples, 1);  // [s+1, b]
    batch.microbatches.push_back({seqs.narrow(0, 0, cfg.seq).contiguous(), seqs.narrow(0, 1, cfg.seq).contiguous()});
  }
  return batch;
}

}  // namespace loopgate
