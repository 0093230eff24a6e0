// A model parameter as the optimizer, the grad buffer and the norms see it: the tensor this rank holds plus the
// facts Megatron keeps as attributes on the parameter (tensor_model_parallel, sequence_parallel, shared).
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace loopgate {

struct Param {
  std::string name;          // full-model name, e.g. "layers.2.mlp.fc1.weight" (same on every layout)
  at::Tensor value;          // this rank's shard, requires_grad (model dtype)
  bool tp_sharded = false;   // split across TP (Megatron: tensor_model_parallel); else replicated over TP
  int64_t tp_dim = -1;       // dim along which it is split when tp_sharded
  bool sp_grad_reduce = false;  // grad must be all-reduced over TP under sequence parallel (layernorm, row bias)
  bool embedding_tied = false;  // word embedding (first stage) / output weight (last stage) tied over PP
  // Megatron param.shared: the last stage's copy of the tied word embedding (pp > 1). Its grad equals the first
  // stage's after finalize_model_grads, so norms and counts should skip it (Megatron param_is_not_shared).
  bool shared = false;
  // Megatron's param_is_not_tensor_parallel_duplicate: count this param in norms only once per TP group.
  bool counts_in_norm(int tp_rank) const { return tp_sharded || tp_rank == 0; }
};

using Params = std::vector<Param>;

}  // namespace loopgate
