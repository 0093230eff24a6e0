// A GPT pipeline stage (Megatron GPTModel on one rank): vocab-parallel embedding + learned positions on the
// first stage, this stage's transformer layers (TP attention and MLP, optional sequence parallel), final
// layernorm + tied output layer + vocab-parallel cross entropy on the last stage. No dropout, no fusions.
// Shapes: s = seq, b = micro batch, h = hidden, V = vocab, nh = heads; activations [s, b, h], or [s/tp, b, h]
// between TP regions under sequence parallel.
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

#include "trainer/model/config.h"
#include "trainer/model/module_tap.h"
#include "trainer/model/param.h"
#include "trainer/parallel/comm.h"
#include "trainer/parallel/layout.h"

namespace loopgate {

// One transformer layer's tensors (handles shared with GptStage::params).
struct GptLayer {
  int index = 0;  // global layer number
  at::Tensor input_ln_w, input_ln_b;
  at::Tensor qkv_w, qkv_b;    // column parallel: [3h/tp, h], [3h/tp]
  at::Tensor proj_w, proj_b;  // row parallel: [h, h/tp], [h]
  at::Tensor mlp_ln_w, mlp_ln_b;
  at::Tensor fc1_w, fc1_b;    // column parallel: [ffn/tp, h], [ffn/tp]
  at::Tensor fc2_w, fc2_b;    // row parallel: [h, ffn/tp], [h]
};

struct GptStage {
  ModelConfig cfg;
  Layout layout;
  Coord coord;
  ProcessGroups groups;
  Params params;  // registration order (the grad buffer reverses it)
  at::Tensor word_embeddings;      // first stage: [V/tp, h]
  at::Tensor position_embeddings;  // first stage: [s, h]
  std::vector<GptLayer> layers;
  at::Tensor final_ln_w, final_ln_b;  // last stage
  at::Tensor output_weight;           // last stage: [V/tp, h] (= word_embeddings when tied and pp == 1)
  ModuleTap* tap = nullptr;           // watches every module boundary (module_tap.h); null: none

  bool is_first_stage() const { return coord.pp == 0; }
  bool is_last_stage() const { return coord.pp == layout.pp() - 1; }
};

// Builds this rank's stage: layout-independent init (init.h), then binds the per-layer handles.
GptStage gpt_build(const ModelConfig& cfg, const Layout& layout, int world_rank, const ProcessGroups& groups);

// input: tokens [s, b] long on the first stage, else the previous stage's activation [s(/tp), b, h].
// labels: [s, b] long, used on the last stage only.
// Returns the activation for the next stage [s(/tp), b, h], or on the last stage the per-token loss [s, b] fp32.
at::Tensor gpt_forward(GptStage& stage, const at::Tensor& input, const at::Tensor& labels);

// Shape of the activation passed between stages (Megatron get_tensor_shapes): [s(/tp if SP), b, h].
std::vector<int64_t> gpt_activation_shape(const GptStage& stage, int micro_batch);

// Looks up a local param by its name (nullptr when this rank does not hold it).
const Param* gpt_find_param(const GptStage& stage, const std::string& name);

}  // namespace loopgate
