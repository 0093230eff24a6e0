// Grad norm, clip, zero count and the model-parallel stat reductions: see clip_grads.h. Shapes: every grad is
// any shape, fp32 (Megatron's main grads); every returned stat is a [1] tensor on the grads' device.
#include "trainer/optim/clip_grads.h"

#include <ATen/ATen.h>

#include "trainer/common/error.h"

namespace loopgate {

namespace {

c10::Device device_of(const std::vector<at::Tensor>& ts, c10::Device fallback) {
  return ts.empty() ? fallback : ts.front().device();
}

// Megatron: utils.local_multi_tensor_l2_norm (the fallback of multi_tensor_l2norm): the L2 norm of the
// per-tensor L2 norms = the L2 norm of the concatenation, accumulated in fp32. float32 [1].
at::Tensor multi_tensor_l2norm(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> norms;
  norms.reserve(ts.size());
  for (const at::Tensor& t : ts) norms.push_back(at::norm(t.to(at::kFloat)));
  return at::norm(at::stack(norms)).reshape({1});
}

}  // namespace

// ---- grad norm, clip, zeros ----

// Megatron: clip_grads.py get_grad_norm_fp32, norm_type 2, device branch (TE multi_tensor_scale_tensor present).
at::Tensor get_grad_norm_fp32(const std::vector<at::Tensor>& grads_for_norm, Comm& group, c10::Device device_if_empty) {
  const c10::Device device = device_of(grads_for_norm, device_if_empty);
  at::Tensor total_norm = at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(device));
  if (!grads_for_norm.empty()) {
    total_norm = multi_tensor_l2norm(grads_for_norm).pow(2.0);  // Megatron: grad_norm ** norm_type
  }
  group.all_reduce(total_norm, ReduceOp::kSum);
  return total_norm.pow(1.0 / 2.0);  // Megatron: total_norm.pow(1.0 / norm_type)
}

// Megatron: `max_norm / (total_norm + 1.0e-6)` then `clip_coeff.clamp_max_(1.0)`. For a tensor right operand
// Python's `/` is Tensor.__rtruediv__ = reciprocal() * other, so that is the form here.
at::Tensor clip_coeff_fp32(double max_norm, const at::Tensor& total_norm) {
  return (total_norm.to(at::kFloat) + 1.0e-6).reciprocal().mul(max_norm).clamp_max(1.0).reshape({1});
}

// Megatron: clip_grads.py clip_grad_by_total_norm_fp32, tensor branch: multiply always (by 1.0 when no clip).
void clip_grad_by_total_norm_fp32(std::vector<at::Tensor>& grads, double max_norm, const at::Tensor& total_norm) {
  if (grads.empty()) return;
  const at::Tensor clip_coeff = clip_coeff_fp32(max_norm, total_norm);
  for (at::Tensor& g : grads) g.mul_(clip_coeff);  // multi_tensor_scale_tensor: out = in * scale
}

// Megatron: clip_grads.py count_zeros_fp32 (int64 accumulation since a01a6c5fe9).
at::Tensor count_zeros_fp32(const std::vector<at::Tensor>& grads, Comm& group, c10::Device device_if_empty) {
  const c10::Device device = device_of(grads, device_if_empty);
  at::Tensor total_num_zeros = at::zeros({1}, at::TensorOptions().dtype(at::kLong).device(device));
  for (const at::Tensor& g : grads) {
    total_num_zeros = at::count_nonzero(g).neg().add(g.numel()) + total_num_zeros;  // (numel - nonzero) + total
  }
  group.all_reduce(total_num_zeros, ReduceOp::kSum);
  return total_num_zeros;
}

at::Tensor count_zeros_fp32(const at::Tensor& flat, const std::vector<at::Tensor>& not_counted, Comm& group) {
  at::Tensor total_num_zeros = at::count_nonzero(flat).neg().add(flat.numel());
  for (const at::Tensor& g : not_counted) total_num_zeros = total_num_zeros - at::count_nonzero(g).neg().add(g.numel());
  total_num_zeros = total_num_zeros.reshape({1});
  group.all_reduce(total_num_zeros, ReduceOp::kSum);
  return total_num_zeros;
}

// ---- model-parallel stats ----

// Megatron: common_utils.py calc_params_l2_norm (dense, non-distributed-optimizer path).
at::Tensor calc_params_l2_norm(const Params& params, const std::vector<at::Tensor>& values, Comm& mp, int tp_rank,
                               bool is_first_pp_stage) {
  LG_CHECK(params.size() == values.size(), "calc_params_l2_norm: {} params but {} values", params.size(),
           values.size());
  std::vector<at::Tensor> counted;
  c10::Device device = c10::kCPU;
  for (size_t i = 0; i < params.size(); ++i) {
    device = values[i].device();
    const bool shared = params[i].embedding_tied && !is_first_pp_stage;  // Megatron: param_is_not_shared
    if (!params[i].counts_in_norm(tp_rank) || shared) continue;          // param_is_not_tensor_parallel_duplicate
    counted.push_back(values[i]);
  }
  at::Tensor norm_2 = at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(device));
  if (!counted.empty()) norm_2 = multi_tensor_l2norm(counted).pow(2.0);  // Megatron: _compute_norm_2
  mp.all_reduce(norm_2, ReduceOp::kSum);
  // Megatron: `norm_2` read on the host, then `** 0.5` — the root is taken on a Python float (double).
  return norm_2.to(at::kDouble).pow(0.5);
}

at::Tensor calc_params_l2_norm(const Params& params, Comm& mp, int tp_rank, bool is_first_pp_stage) {
  std::vector<at::Tensor> values;
  values.reserve(params.size());
  for (const Param& p : params) values.push_back(p.value.detach().to(at::kFloat));  // _get_param_data: .float()
  return calc_params_l2_norm(params, values, mp, tp_rank, is_first_pp_stage);
}

at::Tensor absent_stat(c10::Device device) {
  return at::full({1}, -1.0, at::TensorOptions().dtype(at::kFloat).device(device));
}

// Megatron: common_utils.py reduce_max_stat_across_model_parallel_group, minus the H2D copy and the reads.
at::Tensor reduce_max_stat(const at::Tensor& stat, Comm& mp) {
  at::Tensor out = stat.detach().to(at::kFloat).reshape({1}).clone();
  mp.all_reduce(out, ReduceOp::kMax);
  return out;
}

// Megatron: common_utils.py logical_and_across_model_parallel_group: MIN over {0, 1} is AND.
at::Tensor logical_and(const at::Tensor& flag, Comm& mp) {
  at::Tensor out = flag.detach().reshape({1}).ne(0).to(at::kInt);
  mp.all_reduce(out, ReduceOp::kMin);
  return out.to(at::kBool);
}

}  // namespace loopgate
