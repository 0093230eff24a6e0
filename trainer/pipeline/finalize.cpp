// finalize_model_grads: DP bucket sync, SP grads over TP, tied embedding over PP.
#include "trainer/pipeline/finalize.h"

#include <ATen/ATen.h>

#include "trainer/common/error.h"

namespace loopgate {
namespace {

// Megatron _allreduce_non_tensor_model_parallel_grads: flatten, one all-reduce (SUM) over TP, copy back.
void allreduce_sequence_parallel_grads(GptStage& st, GradBuffer& grads) {
  if (st.groups.tp->size() == 1) return;
  std::vector<at::Tensor> views;
  for (size_t i = 0; i < st.params.size(); ++i)
    if (st.params[i].sp_grad_reduce) views.push_back(grads.param_grad(static_cast<int>(i)));
  if (views.empty()) return;
  std::vector<at::Tensor> flat_parts;
  for (const at::Tensor& v : views) flat_parts.push_back(v.reshape({-1}));
  at::Tensor flat = at::cat(flat_parts);
  st.groups.tp->all_reduce(flat);
  int64_t off = 0;
  for (at::Tensor& v : views) {
    v.view({-1}).copy_(flat.narrow(0, off, v.numel()));
    off += v.numel();
  }
}

// Megatron _allreduce_word_embedding_grads: the embedding group is {first, last} stage of the pp group. The
// stages in between join the pp all-reduce with zeros, which sums the same two grads without a second group.
void allreduce_word_embedding_grads(GptStage& st, GradBuffer& grads) {
  if (!st.cfg.tie_embeddings || st.layout.pp() == 1) return;
  at::Tensor g;
  for (size_t i = 0; i < st.params.size(); ++i)
    if (st.params[i].embedding_tied) g = grads.param_grad(static_cast<int>(i));
  if (!g.defined()) {
    LG_CHECK(!st.is_first_stage() && !st.is_last_stage(), "stage {} lacks its tied embedding param", st.coord.pp);
    g = at::zeros({st.cfg.vocab / st.layout.tp(), st.cfg.hidden},
                  at::TensorOptions().dtype(at::kFloat).device(st.cfg.device));
  }
  st.groups.pp->all_reduce(g);
}

}  // namespace

void finalize_model_grads(GptStage& st, GradBuffer& grads, const FinalizeOptions& options) {
  grads.finish_grad_sync();
  if (options.reduce_sp_grads && st.layout.sequence_parallel()) allreduce_sequence_parallel_grads(st, grads);
  allreduce_word_embedding_grads(st, grads);
}

}  // namespace loopgate
