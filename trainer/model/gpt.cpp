// The GPT stage: building blocks first (embedding, linears, attention, MLP, layer), then the stage.
// Megatron: core/models/gpt/gpt_model.py, transformer/transformer_layer.py, tensor_parallel/layers.py.
#include "trainer/model/gpt.h"

#include <ATen/ATen.h>

#include <cmath>

#include "trainer/common/error.h"
#include "trainer/model/cross_entropy.h"
#include "trainer/model/init.h"
#include "trainer/model/mappings.h"

namespace loopgate {
namespace {

constexpr double kLayerNormEps = 1e-5;

// ---- module boundaries (module_tap.h) ----

// f(input) as module `site`: with a tap, both forward boundaries pass through it, and hooks hand it the grads of
// the output and of the input as the backward reaches them.
template <typename F>
at::Tensor module(GptStage& st, ModuleSite site, const at::Tensor& input, F f) {
  ModuleTap* tap = st.tap;
  if (!tap) return f(input);
  at::Tensor in = tap->at(site, Boundary::kForwardInput, input);
  if (in.requires_grad())
    in.register_hook([tap, site](const at::Tensor& g) { return tap->at(site, Boundary::kBackwardOutput, g); });
  at::Tensor out = tap->at(site, Boundary::kForwardOutput, f(in));
  if (out.requires_grad())
    out.register_hook([tap, site](const at::Tensor& g) { return tap->at(site, Boundary::kBackwardInput, g); });
  return out;
}

// ---- vocab-parallel embedding (Megatron 8.5) + learned positions ----

// tokens: [s, b] long -> [s, b, h], or [s/tp, b, h] under SP
at::Tensor embedding_forward(GptStage& st, const at::Tensor& tokens) {
  Comm& tp = *st.groups.tp;
  const int64_t part = st.word_embeddings.size(0);
  const int64_t start = st.coord.tp * part;
  at::Tensor out;
  if (tp.size() == 1) {
    out = at::embedding(st.word_embeddings, tokens);
  } else {
    // Ids outside this rank's vocab slice look up row 0 and are zeroed; the all-reduce fills them in.
    at::Tensor mask = (tokens < start).logical_or(tokens >= start + part);
    at::Tensor local = (tokens - start).masked_fill(mask, 0);
    out = at::embedding(st.word_embeddings, local).masked_fill(mask.unsqueeze(-1), 0.0);
  }
  out = reduce_from_tensor_model_parallel_region(out, tp);  // [s, b, h]
  const int64_t s = tokens.size(0);
  out = out + st.position_embeddings.narrow(0, 0, s).unsqueeze(1);
  // Megatron LanguageModelEmbedding: with learned positions it all-reduces, adds them, then scatters to SP.
  if (st.layout.sequence_parallel()) out = scatter_to_sequence_parallel_region(out, tp);
  return out;
}

// ---- column / row parallel linear (Megatron 8.2, 8.3) ----

// x: [s(/tp), b, in] -> [s, b, out/tp]. Under SP the sequence is gathered first and the input grad is
// reduce-scattered back; otherwise the input grad is all-reduced (copy_to's backward).
at::Tensor column_parallel_linear(GptStage& st, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  Comm& tp = *st.groups.tp;
  at::Tensor total = st.layout.sequence_parallel() ? gather_from_sequence_parallel_region(x, tp, true)
                                                   : copy_to_tensor_model_parallel_region(x, tp);
  return b.defined() ? at::linear(total, w, b) : at::linear(total, w);
}

// x: [s, b, in/tp] -> [s(/tp), b, out]. The bias is added after the reduction (on the sequence shard under
// SP, which is why its grad needs the TP all-reduce of finalize_model_grads).
at::Tensor row_parallel_linear(GptStage& st, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  Comm& tp = *st.groups.tp;
  at::Tensor partial = at::linear(x, w);
  at::Tensor out = st.layout.sequence_parallel() ? reduce_scatter_to_sequence_parallel_region(partial, tp)
                                                 : reduce_from_tensor_model_parallel_region(partial, tp);
  return out + b;
}

at::Tensor layernorm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return at::layer_norm(x, {x.size(-1)}, w, b, kLayerNormEps);
}

// ---- attention over this rank's heads ----

// qkv: [s, b, nh/tp * 3 * hd] laid out per head as [q, k, v] -> context [s, b, nh/tp * hd]
at::Tensor causal_self_attention(const at::Tensor& qkv, int head_dim) {
  const int64_t s = qkv.size(0), b = qkv.size(1);
  const int64_t nh = qkv.size(2) / (3 * head_dim);
  at::Tensor per_head = qkv.view({s, b, nh, 3, head_dim});
  auto heads_first = [](const at::Tensor& t) { return t.permute({1, 2, 0, 3}); };  // [b, nh, s, hd]
  at::Tensor q = heads_first(per_head.select(3, 0));
  at::Tensor k = heads_first(per_head.select(3, 1));
  at::Tensor v = heads_first(per_head.select(3, 2));
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)).mul(1.0 / std::sqrt(static_cast<double>(head_dim)));
  at::Tensor future = at::ones({s, s}, qkv.options().dtype(at::kBool)).triu(1);
  at::Tensor probs = at::softmax(scores.masked_fill(future, -INFINITY), -1);  // [b, nh, s, s]
  at::Tensor ctx = at::matmul(probs, v);                                      // [b, nh, s, hd]
  return ctx.permute({2, 0, 1, 3}).reshape({s, b, nh * head_dim});
}

// ---- transformer layer ----

// hidden: [s(/tp), b, h] -> same
at::Tensor transformer_layer_forward(GptStage& st, const GptLayer& L, const at::Tensor& hidden) {
  const int l = L.index;
  at::Tensor x = module(st, {l, "input_layernorm"}, hidden,
                        [&](const at::Tensor& in) { return layernorm(in, L.input_ln_w, L.input_ln_b); });
  at::Tensor qkv = module(st, {l, "self_attention.linear_qkv"}, x, [&](const at::Tensor& in) {
    return column_parallel_linear(st, in, L.qkv_w, L.qkv_b);  // [s, b, 3h/tp]
  });
  at::Tensor ctx = module(st, {l, "self_attention.core_attention"}, qkv, [&](const at::Tensor& in) {
    return causal_self_attention(in, st.cfg.head_dim());  // [s, b, h/tp]
  });
  at::Tensor attn = module(st, {l, "self_attention.linear_proj"}, ctx,
                           [&](const at::Tensor& in) { return row_parallel_linear(st, in, L.proj_w, L.proj_b); });
  at::Tensor h1 = hidden + attn;
  at::Tensor y = module(st, {l, "pre_mlp_layernorm"}, h1,
                        [&](const at::Tensor& in) { return layernorm(in, L.mlp_ln_w, L.mlp_ln_b); });
  at::Tensor fc1 = module(st, {l, "mlp.linear_fc1"}, y, [&](const at::Tensor& in) {
    return at::gelu(column_parallel_linear(st, in, L.fc1_w, L.fc1_b));  // [s, b, ffn/tp]
  });
  at::Tensor mlp = module(st, {l, "mlp.linear_fc2"}, fc1,
                          [&](const at::Tensor& in) { return row_parallel_linear(st, in, L.fc2_w, L.fc2_b); });
  return h1 + mlp;
}

// ---- output layer + loss ----

// hidden: [s(/tp), b, h], labels: [s, b] -> per-token loss [s, b]
at::Tensor output_and_loss(GptStage& st, const at::Tensor& hidden, const at::Tensor& labels) {
  at::Tensor x = module(st, {-1, "final_layernorm"}, hidden,
                        [&](const at::Tensor& in) { return layernorm(in, st.final_ln_w, st.final_ln_b); });
  at::Tensor logits = module(st, {-1, "output_layer"}, x, [&](const at::Tensor& in) {
    return column_parallel_linear(st, in, st.output_weight, at::Tensor());  // [s, b, V/tp]
  });
  return module(st, {-1, "loss"}, logits, [&](const at::Tensor& in) {
    return vocab_parallel_cross_entropy(in, labels, *st.groups.tp);
  });
}

// ---- binding params to the stage ----

at::Tensor require(const GptStage& st, const std::string& name) {
  const Param* p = gpt_find_param(st, name);
  LG_CHECK(p != nullptr, "stage {} has no parameter {}", st.coord.pp, name);
  return p->value;
}

}  // namespace

std::string module_name(const ModuleSite& site) {
  return site.layer < 0 ? std::string(site.module) : "layers." + std::to_string(site.layer) + "." + site.module;
}

const Param* gpt_find_param(const GptStage& st, const std::string& name) {
  for (const Param& p : st.params)
    if (p.name == name) return &p;
  return nullptr;
}

GptStage gpt_build(const ModelConfig& cfg, const Layout& layout, int world_rank, const ProcessGroups& groups) {
  LG_CHECK(groups.tp && groups.pp && groups.dp, "gpt_build: process groups not set");
  LG_CHECK(groups.tp->size() == layout.tp() && groups.pp->size() == layout.pp() && groups.dp->size() == layout.dp(),
           "gpt_build: groups (tp {} pp {} dp {}) do not match layout {}", groups.tp->size(), groups.pp->size(),
           groups.dp->size(), layout.describe());
  GptStage st;
  st.cfg = cfg;
  st.layout = layout;
  st.coord = layout.coord(world_rank);
  st.groups = groups;
  st.params = init_stage_params(cfg, layout, world_rank);
  if (st.is_first_stage()) {
    st.word_embeddings = require(st, "embedding.word_embeddings.weight");
    st.position_embeddings = require(st, "embedding.position_embeddings.weight");
  }
  for (int l = 0; l < cfg.layers; ++l) {
    if (stage_of_layer(cfg, layout.pp(), l) != st.coord.pp) continue;
    std::string p = "layers." + std::to_string(l) + ".";
    GptLayer L;
    L.index = l;
    L.input_ln_w = require(st, p + "input_layernorm.weight");
    L.input_ln_b = require(st, p + "input_layernorm.bias");
    L.qkv_w = require(st, p + "self_attention.linear_qkv.weight");
    L.qkv_b = require(st, p + "self_attention.linear_qkv.bias");
    L.proj_w = require(st, p + "self_attention.linear_proj.weight");
    L.proj_b = require(st, p + "self_attention.linear_proj.bias");
    L.mlp_ln_w = require(st, p + "pre_mlp_layernorm.weight");
    L.mlp_ln_b = require(st, p + "pre_mlp_layernorm.bias");
    L.fc1_w = require(st, p + "mlp.fc1.weight");
    L.fc1_b = require(st, p + "mlp.fc1.bias");
    L.fc2_w = require(st, p + "mlp.fc2.weight");
    L.fc2_b = require(st, p + "mlp.fc2.bias");
    st.layers.push_back(L);
  }
  if (st.is_last_stage()) {
    st.final_ln_w = require(st, "final_layernorm.weight");
    st.final_ln_b = require(st, "final_layernorm.bias");
    // Tied on one stage: the output layer uses the word embedding itself (its grads add up in one tensor).
    const bool same_tensor = cfg.tie_embeddings && layout.pp() == 1;
    st.output_weight = same_tensor ? st.word_embeddings : require(st, "output_layer.weight");
  }
  return st;
}

at::Tensor gpt_forward(GptStage& st, const at::Tensor& input, const at::Tensor& labels) {
  at::Tensor hidden = st.is_first_stage() ? module(st, {-1, "embedding"}, input,
                                                    [&](const at::Tensor& in) { return embedding_forward(st, in); })
                                          : input;
  for (const GptLayer& L : st.layers) hidden = transformer_layer_forward(st, L, hidden);
  if (!st.is_last_stage()) return hidden;
  LG_CHECK(labels.defined(), "gpt_forward: the last stage needs labels");
  return output_and_loss(st, hidden, labels);
}

std::vector<int64_t> gpt_activation_shape(const GptStage& st, int micro_batch) {
  int64_t s = st.cfg.seq / (st.layout.sequence_parallel() ? st.layout.tp() : 1);
  return {s, micro_batch, st.cfg.hidden};
}

}  // namespace loopgate
