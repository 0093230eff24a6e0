// Layout-independent initialisation (docs/design.md "Determinism"): every parameter is drawn FULL-SIZE from one
// generator seeded by init_seed in the canonical full-model order, then sliced for this rank's TP shard and
// kept only if it lives on this rank's PP stage. So TP=1/2 and PP=1/2 start from the same model.
// Named steps, in this order because a rank must make every draw (even for layers it will not keep) to stay
// in step with the generator: init_full_model -> shard_tensor_parallel -> split_pipeline_stages.
// Megatron: layers.py _initialize_affine_weight_cpu (full master weight, then split), init_method_normal.
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "trainer/model/config.h"
#include "trainer/model/param.h"
#include "trainer/parallel/layout.h"

namespace loopgate {

enum class ParamInit { kNormal, kScaledNormal, kZeros, kOnes };
enum class ParamHome { kFirstStage, kLayer, kLastStage };

// One full-model parameter: name, full shape, how it is initialised, how it is split over TP and where it
// lives in the pipeline. The list is the same on every layout.
struct ParamSpec {
  std::string name;             // "layers.2.mlp.fc1.weight"
  std::vector<int64_t> shape;   // full size
  ParamInit init = ParamInit::kZeros;
  int64_t tp_dim = -1;          // dim split over TP, -1 = replicated
  bool sp_grad_reduce = false;  // replicated param that sees only s/tp tokens under SP (Megatron 8.4)
  ParamHome home = ParamHome::kLayer;
  int layer = -1;               // global layer index for kLayer
};

// Canonical full-model order (= registration order on a single rank).
std::vector<ParamSpec> gpt_param_specs(const ModelConfig& cfg);

// Every parameter full-size, in spec order, fp32; one random draw per statement (gcc and clang evaluate call
// arguments in opposite orders).
std::vector<at::Tensor> init_full_model(const ModelConfig& cfg, const std::vector<ParamSpec>& specs);

// This TP rank's slice of a full tensor (contiguous copy); replicated specs return the full tensor.
at::Tensor shard_tensor_parallel(const at::Tensor& full, const ParamSpec& spec, int tp, int tp_rank);

// Pipeline stage that holds layer `layer` (layers split evenly; InputError if pp does not divide layers).
int stage_of_layer(const ModelConfig& cfg, int pp, int layer);
bool spec_on_stage(const ParamSpec& spec, const ModelConfig& cfg, int pp, int stage);

// One of this rank's parameters before any tensor exists: which spec it comes from and its local (TP-sliced)
// shape. `output_copy`: the last stage's copy of the tied word embedding when pp > 1.
struct StageParamShape {
  size_t spec = 0;  // index into gpt_param_specs(cfg)
  std::vector<int64_t> shape;
  bool output_copy = false;
};
// This rank's parameters in registration order, shapes only (no draw, no allocation): what init_stage_params
// builds, so a caller can lay out the grad buffer (and validate flags against it) without building the model.
// InputError when the model does not fit the layout (heads, vocab, seq or layers vs tp / pp).
std::vector<StageParamShape> stage_param_shapes(const ModelConfig& cfg, const Layout& layout, int world_rank);
std::vector<int64_t> stage_param_numels(const ModelConfig& cfg, const Layout& layout, int world_rank);

// This rank's parameters (leaves, requires_grad, cfg.dtype) in registration order. With tied embeddings and
// pp > 1 the last stage also gets "output_layer.weight": a copy of the word embedding (Megatron: shared).
Params init_stage_params(const ModelConfig& cfg, const Layout& layout, int world_rank);

// Full-model name whose value/grad a local param equals ("output_layer.weight" -> the word embedding when
// tied). Lets tests map any layout's params onto the single-rank reference.
std::string full_model_name(const ModelConfig& cfg, const std::string& name);

}  // namespace loopgate
