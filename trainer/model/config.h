// Model and data configuration of the mini-GPT: plain structs with defaults (one config per
// component). The default model is small enough that 64 CPU ranks on 2 cores run it in seconds.
// Megatron: --num-layers/--hidden-size/--num-attention-heads/--seq-length/--ffn-hidden-size,
// --micro-batch-size/--global-batch-size, --untie-embeddings-and-output-weights (inverted here).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>

#include "trainer/common/error.h"
#include "trainer/parallel/layout.h"

namespace loopgate {

struct ModelConfig {
  int vocab = 256;
  int hidden = 64;
  int heads = 4;
  int layers = 4;
  int seq = 32;
  int ffn = 0;  // 0 -> 4 * hidden (Megatron's default ffn_hidden_size)
  uint64_t init_seed = 1234;
  double init_std = 0.02;
  bool tie_embeddings = true;  // Megatron default: output layer shares the word embedding
  at::ScalarType dtype = at::kFloat;  // params (bf16 on the GPU tier; Adam keeps fp32 main params)
  c10::Device device{c10::kCPU};       // where params, activations and data live

  int ffn_size() const { return ffn > 0 ? ffn : 4 * hidden; }
  int head_dim() const { return hidden / heads; }
};

struct DataConfig {
  int micro_batch = 2;
  int global_batch = 8;
  uint64_t data_seed = 4321;
};

// Megatron get_num_microbatches(): global_batch / (micro_batch * dp).
inline int num_microbatches(const DataConfig& d, const Layout& layout) {
  int per_step = d.micro_batch * layout.dp();
  LG_INPUT_CHECK(d.micro_batch >= 1 && d.global_batch >= 1 && d.global_batch % per_step == 0,
                 "global batch {} is not divisible by micro batch {} x dp {} = {}", d.global_batch, d.micro_batch,
                 layout.dp(), per_step);
  return d.global_batch / per_step;
}

}  // namespace loopgate
