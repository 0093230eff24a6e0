// Layout-independent init: full-size draws in canonical order, then TP slice, then PP selection.
#include "trainer/model/init.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "trainer/common/error.h"

namespace loopgate {

// ---- the canonical full-model parameter list ----

std::vector<ParamSpec> gpt_param_specs(const ModelConfig& cfg) {
  const int64_t h = cfg.hidden, v = cfg.vocab, f = cfg.ffn_size();
  std::vector<ParamSpec> s;
  auto add = [&](std::string name, std::vector<int64_t> shape, ParamInit init, int64_t tp_dim, bool sp,
                 ParamHome home, int layer) {
    s.push_back(ParamSpec{std::move(name), std::move(shape), init, tp_dim, sp, home, layer});
  };
  // Vocab-parallel embedding: rows split over TP (Megatron 8.5). Position embedding replicated.
  add("embedding.word_embeddings.weight", {v, h}, ParamInit::kNormal, 0, false, ParamHome::kFirstStage, -1);
  add("embedding.position_embeddings.weight", {cfg.seq, h}, ParamInit::kNormal, -1, false, ParamHome::kFirstStage,
      -1);
  for (int l = 0; l < cfg.layers; ++l) {
    std::string p = "layers." + std::to_string(l) + ".";
    auto layer = [&](const std::string& n, std::vector<int64_t> shape, ParamInit init, int64_t tp_dim, bool sp) {
      add(p + n, std::move(shape), init, tp_dim, sp, ParamHome::kLayer, l);
    };
    // Layernorms and row-parallel biases are replicated over TP and see only s/tp tokens under SP.
    layer("input_layernorm.weight", {h}, ParamInit::kOnes, -1, true);
    layer("input_layernorm.bias", {h}, ParamInit::kZeros, -1, true);
    // QKV rows are laid out per head as [heads, 3, head_dim], so a contiguous TP slice holds whole heads.
    layer("self_attention.linear_qkv.weight", {3 * h, h}, ParamInit::kNormal, 0, false);
    layer("self_attention.linear_qkv.bias", {3 * h}, ParamInit::kZeros, 0, false);
    layer("self_attention.linear_proj.weight", {h, h}, ParamInit::kScaledNormal, 1, false);
    layer("self_attention.linear_proj.bias", {h}, ParamInit::kZeros, -1, true);
    layer("pre_mlp_layernorm.weight", {h}, ParamInit::kOnes, -1, true);
    layer("pre_mlp_layernorm.bias", {h}, ParamInit::kZeros, -1, true);
    layer("mlp.fc1.weight", {f, h}, ParamInit::kNormal, 0, false);
    layer("mlp.fc1.bias", {f}, ParamInit::kZeros, 0, false);
    layer("mlp.fc2.weight", {h, f}, ParamInit::kScaledNormal, 1, false);
    layer("mlp.fc2.bias", {h}, ParamInit::kZeros, -1, true);
  }
  add("final_layernorm.weight", {h}, ParamInit::kOnes, -1, true, ParamHome::kLastStage, -1);
  add("final_layernorm.bias", {h}, ParamInit::kZeros, -1, true, ParamHome::kLastStage, -1);
  if (!cfg.tie_embeddings)
    add("output_layer.weight", {v, h}, ParamInit::kNormal, 0, false, ParamHome::kLastStage, -1);
  return s;
}

// ---- step 1: full-size draws ----

std::vector<at::Tensor> init_full_model(const ModelConfig& cfg, const std::vector<ParamSpec>& specs) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(cfg.init_seed);
  // Megatron scaled_init_method_normal: output projections of each block use std / sqrt(2 * layers).
  const double scaled_std = cfg.init_std / std::sqrt(2.0 * cfg.layers);
  std::vector<at::Tensor> full;
  full.reserve(specs.size());
  for (const ParamSpec& s : specs) {
    at::Tensor t = at::empty(s.shape, at::TensorOptions().dtype(at::kFloat));
    switch (s.init) {
      case ParamInit::kNormal: t.normal_(0.0, cfg.init_std, gen); break;
      case ParamInit::kScaledNormal: t.normal_(0.0, scaled_std, gen); break;
      case ParamInit::kZeros: t.zero_(); break;
      case ParamInit::kOnes: t.fill_(1.0); break;
    }
    full.push_back(t);
  }
  return full;
}

// ---- step 2: TP slice ----

at::Tensor shard_tensor_parallel(const at::Tensor& full, const ParamSpec& spec, int tp, int tp_rank) {
  if (spec.tp_dim < 0 || tp == 1) return full.clone();
  int64_t n = full.size(spec.tp_dim);
  LG_INPUT_CHECK(n % tp == 0, "{}: dim {} of size {} is not divisible by tp={}", spec.name, spec.tp_dim, n, tp);
  return full.narrow(spec.tp_dim, tp_rank * (n / tp), n / tp).contiguous();
}

// ---- step 3: PP selection ----

int stage_of_layer(const ModelConfig& cfg, int pp, int layer) {
  LG_INPUT_CHECK(cfg.layers % pp == 0, "{} layers cannot be split evenly over pp={} stages", cfg.layers, pp);
  return layer / (cfg.layers / pp);
}

bool spec_on_stage(const ParamSpec& spec, const ModelConfig& cfg, int pp, int stage) {
  switch (spec.home) {
    case ParamHome::kFirstStage: return stage == 0;
    case ParamHome::kLastStage: return stage == pp - 1;
    case ParamHome::kLayer: return stage_of_layer(cfg, pp, spec.layer) == stage;
  }
  return false;
}

namespace {

Param make_param(const ParamSpec& spec, const at::Tensor& shard, const ModelConfig& cfg, const Layout& layout) {
  Param p;
  p.name = spec.name;
  p.value = shard.to(cfg.device, cfg.dtype).detach();  // CPU float: no copy
  p.value.set_requires_grad(true);
  p.tp_sharded = spec.tp_dim >= 0 && layout.tp() > 1;
  p.tp_dim = p.tp_sharded ? spec.tp_dim : -1;
  p.sp_grad_reduce = spec.sp_grad_reduce && layout.sequence_parallel();
  return p;
}

}  // namespace

std::vector<StageParamShape> stage_param_shapes(const ModelConfig& cfg, const Layout& layout, int world_rank) {
  LG_INPUT_CHECK(cfg.hidden % cfg.heads == 0, "hidden {} is not divisible by heads {}", cfg.hidden, cfg.heads);
  LG_INPUT_CHECK(cfg.heads % layout.tp() == 0, "heads {} are not divisible by tp={}", cfg.heads, layout.tp());
  LG_INPUT_CHECK(cfg.vocab % layout.tp() == 0, "vocab {} is not divisible by tp={} (no vocab padding here)",
                 cfg.vocab, layout.tp());
  LG_INPUT_CHECK(!layout.sequence_parallel() || cfg.seq % layout.tp() == 0,
                 "sequence parallel needs seq {} divisible by tp={}", cfg.seq, layout.tp());
  const Coord c = layout.coord(world_rank);
  const std::vector<ParamSpec> specs = gpt_param_specs(cfg);
  auto local_shape = [&](const ParamSpec& spec) {
    std::vector<int64_t> shape = spec.shape;
    if (spec.tp_dim >= 0 && layout.tp() > 1) {  // the slice shard_tensor_parallel takes
      const int64_t n = shape[static_cast<size_t>(spec.tp_dim)];
      LG_INPUT_CHECK(n % layout.tp() == 0, "{}: dim {} of size {} is not divisible by tp={}", spec.name, spec.tp_dim,
                     n, layout.tp());
      shape[static_cast<size_t>(spec.tp_dim)] = n / layout.tp();
    }
    return shape;
  };
  std::vector<StageParamShape> out;
  for (size_t i = 0; i < specs.size(); ++i)
    if (spec_on_stage(specs[i], cfg, layout.pp(), c.pp)) out.push_back({i, local_shape(specs[i]), false});
  // Megatron keeps a separate output weight on the last stage, equal to the word embedding at init and kept
  // equal by the tied-grad all-reduce in finalize_model_grads (language_module.py, shared_embedding).
  if (cfg.tie_embeddings && layout.pp() > 1 && c.pp == layout.pp() - 1) out.push_back({0, local_shape(specs[0]), true});
  return out;
}

std::vector<int64_t> stage_param_numels(const ModelConfig& cfg, const Layout& layout, int world_rank) {
  std::vector<int64_t> numels;
  for (const StageParamShape& s : stage_param_shapes(cfg, layout, world_rank)) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    numels.push_back(n);
  }
  return numels;
}

Params init_stage_params(const ModelConfig& cfg, const Layout& layout, int world_rank) {
  const std::vector<StageParamShape> plan = stage_param_shapes(cfg, layout, world_rank);  // validates first
  const Coord c = layout.coord(world_rank);
  const bool tied_over_pp = cfg.tie_embeddings && layout.pp() > 1;
  std::vector<ParamSpec> specs = gpt_param_specs(cfg);
  std::vector<at::Tensor> full = init_full_model(cfg, specs);  // every draw, even for params kept elsewhere
  Params params;
  for (const StageParamShape& s : plan) {
    Param p = make_param(specs[s.spec], shard_tensor_parallel(full[s.spec], specs[s.spec], layout.tp(), c.tp), cfg,
                         layout);
    if (s.spec == 0) p.embedding_tied = tied_over_pp;
    if (s.output_copy) {
      p.name = "output_layer.weight";
      p.shared = true;
    }
    params.push_back(std::move(p));
  }
  return params;
}

std::string full_model_name(const ModelConfig& cfg, const std::string& name) {
  if (cfg.tie_embeddings && name == "output_layer.weight") return "embedding.word_embeddings.weight";
  return name;
}

}  // namespace loopgate
