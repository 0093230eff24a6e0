// Gradient norm, clipping and zero count (Megatron megatron/core/optimizer/clip_grads.py) and the model-parallel
// stat reductions (megatron/training/utils/common_utils.py). Every function here returns a DEVICE tensor and
// reads nothing on the host: Megatron's host reads (clip_grads.py L138, L275; common_utils.py L213, L291,
// L309) are exactly what the loop's ledger takes over, so the caller decides when a value reaches the host.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <vector>

#include "trainer/model/param.h"
#include "trainer/parallel/comm.h"

namespace loopgate {

// ---- grad norm, clip, zeros (clip_grads.py) ----

// L2 norm over the grads of every rank in the group: local sum of squares, all-reduce SUM over `group`, sqrt.
// The caller passes only grads that count (Megatron _filter_grads_for_norm: counts_in_norm(tp_rank) and not the
// shared tied-embedding copy). `group` is the grad-stats group: model-parallel (TP x PP) for the plain optimizer.
// Returns float32 [1] (HEAD's device branch: total_norm.pow(1/2) stays a tensor). A rank with no grads still
// joins the all-reduce, with zeros on `device_if_empty`.
at::Tensor get_grad_norm_fp32(const std::vector<at::Tensor>& grads_for_norm, Comm& group,
                              c10::Device device_if_empty = c10::kCPU);

// g <- g * min(1, max_norm / (total_norm + 1e-6)) for every grad, in place, always multiplying (HEAD's tensor
// branch: clip_coeff.clamp_max_(1.0), then multi_tensor_scale). A NaN norm therefore makes the grads NaN.
void clip_grad_by_total_norm_fp32(std::vector<at::Tensor>& grads, double max_norm, const at::Tensor& total_norm);

// The clip coefficient exactly as Megatron forms it: `max_norm / (total_norm + 1e-6)` on a tensor is
// (total_norm + 1e-6).reciprocal() * max_norm (torch Tensor.__rtruediv__), then clamp_max(1.0). float32 [1].
at::Tensor clip_coeff_fp32(double max_norm, const at::Tensor& total_norm);

// Number of zero entries over the grads of every rank in the group (all-reduce SUM). int64 [1].
// Same grad set as the norm; Megatron counts after clipping.
at::Tensor count_zeros_fp32(const std::vector<at::Tensor>& grads, Comm& group,
                            c10::Device device_if_empty = c10::kCPU);
// The same count over the grads of `flat` except those in `not_counted` (views of it): the flat buffer's zeros
// less theirs, in int64, so the same integer in a few kernels instead of a few per grad.
at::Tensor count_zeros_fp32(const at::Tensor& flat, const std::vector<at::Tensor>& not_counted, Comm& group);

// ---- model-parallel stats (common_utils.py) ----

// Megatron: calc_params_l2_norm. values[i] is the tensor measured for params[i] (the fp32 main param under
// bf16, else the model param). Skips TP duplicates (counts_in_norm) and, when this is not the first pipeline
// stage, the tied output-embedding copy (Megatron's `shared`). Squared norms all-reduced SUM over `mp`, then
// the square root taken in float64 — Megatron does `norm_2` read on the host, then `** 0.5` in Python doubles — so the result is
// float64 [1] holding those exact bits.
at::Tensor calc_params_l2_norm(const Params& params, const std::vector<at::Tensor>& values, Comm& mp, int tp_rank,
                               bool is_first_pp_stage = true);
// Same, measuring each param's own value (as float).
at::Tensor calc_params_l2_norm(const Params& params, Comm& mp, int tp_rank, bool is_first_pp_stage = true);

// The value Megatron substitutes for "no stat on this rank" (None -> -1.0) before reduce_max_stat.
at::Tensor absent_stat(c10::Device device);

// Megatron: reduce_max_stat_across_model_parallel_group. A float32 [1] copy of `stat`, all-reduced MAX over `mp`
// so ranks without the stat (-1.0) receive it. The caller's tensor is not modified. -1.0 after the reduction
// means "None" (no rank had it).
at::Tensor reduce_max_stat(const at::Tensor& stat, Comm& mp);

// Megatron: logical_and_across_model_parallel_group. An int32 [1] copy of `flag` (!= 0 -> 1), all-reduced MIN
// over `mp`; returned as bool [1].
at::Tensor logical_and(const at::Tensor& flag, Comm& mp);

}  // namespace loopgate
