// Vocab-parallel cross entropy as one autograd Function, forward and backward side by side.
#include "trainer/model/cross_entropy.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

namespace loopgate {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  // logits: [s, b, V/tp], target: [s, b] -> loss [s, b]
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits_in, const at::Tensor& target,
                            int64_t comm) {
    Comm& tp = *reinterpret_cast<Comm*>(comm);
    at::Tensor logits = logits_in.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
    at::Tensor logits_max = std::get<0>(logits.max(-1)).contiguous();  // [s, b]
    tp.all_reduce(logits_max, ReduceOp::kMax);
    logits.sub_(logits_max.unsqueeze(-1));
    // This rank owns vocab ids [start, start + V/tp).
    const int64_t part = logits.size(-1);
    const int64_t start = tp.rank() * part;
    at::Tensor target_mask = (target < start).logical_or(target >= start + part);  // [s, b] not mine
    at::Tensor masked_target = (target - start).masked_fill(target_mask, 0);
    at::Tensor predicted = logits.gather(-1, masked_target.unsqueeze(-1)).squeeze(-1).masked_fill(target_mask, 0.0)
                               .contiguous();
    at::Tensor exp_logits = logits.exp_();
    at::Tensor sum_exp = exp_logits.sum(-1).contiguous();
    tp.all_reduce(predicted);
    tp.all_reduce(sum_exp);
    at::Tensor loss = sum_exp.log() - predicted;
    ctx->saved_data["softmax"] = exp_logits.div_(sum_exp.unsqueeze(-1));
    ctx->saved_data["target_mask"] = target_mask;
    ctx->saved_data["masked_target"] = masked_target;
    ctx->saved_data["dtype"] = static_cast<int64_t>(logits_in.scalar_type());
    return loss;
  }

  // grad_logits = (softmax - onehot(target on this rank)) * grad_loss
  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    at::Tensor grad = ctx->saved_data["softmax"].toTensor().clone();
    at::Tensor target_mask = ctx->saved_data["target_mask"].toTensor();
    at::Tensor masked_target = ctx->saved_data["masked_target"].toTensor();
    at::Tensor owned = target_mask.logical_not().to(at::kFloat).unsqueeze(-1);  // [s, b, 1]
    grad.scatter_add_(-1, masked_target.unsqueeze(-1), -owned);
    grad.mul_(grad_out[0].unsqueeze(-1));
    auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {grad.to(dtype), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& target, Comm& tp) {
  return VocabParallelCrossEntropy::apply(logits, target, reinterpret_cast<int64_t>(&tp));
}

}  // namespace loopgate
