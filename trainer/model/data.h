// Mock data (Megatron --mock-data analogue): global sample i of iteration `it` is a pure function of
// (data_seed, it, i), so the global batch is identical whatever the layout. A rank takes its samples in
// Megatron's order: the global batch is split over DP ranks (dp rank d gets [d*gbs/dp, (d+1)*gbs/dp)), then
// into microbatches of micro_batch consecutive samples.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "trainer/model/config.h"
#include "trainer/parallel/layout.h"

namespace loopgate {

struct Microbatch {
  at::Tensor tokens;  // [s, b] long: the first seq tokens of each sample
  at::Tensor labels;  // [s, b] long: the same shifted by one (next-token targets)
};

struct Batch {
  std::vector<Microbatch> microbatches;
};

// seq + 1 token ids in [0, vocab) of global sample `sample` at iteration `iteration`.
at::Tensor mock_sample(const ModelConfig& cfg, const DataConfig& data, int64_t iteration, int64_t sample);

// This rank's microbatches for one iteration, on the host (every stage builds them; only the first uses tokens
// and only the last labels). The loop moves them to the device (Megatron's get_batch: pinned, non-blocking;
// trainer/measure/async_copy.h upload).
Batch make_host_batch(const ModelConfig& cfg, const DataConfig& data, const Layout& layout, int world_rank,
                      int64_t iteration);

}  // namespace loopgate
