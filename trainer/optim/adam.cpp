// Adam on fp32 main params and the mixed-precision optimizer step: see adam.h. Tensors: each main param,
// grad, exp_avg and exp_avg_sq has its param's shard shape, fp32; flags and counters are [1] device tensors.
#include "trainer/optim/adam.h"

#include <ATen/ATen.h>

#include "trainer/common/error.h"
#include "trainer/common/strings.h"
#include "trainer/optim/clip_grads.h"

namespace loopgate {

namespace {

// A host scalar as the Apex kernel sees it: a float argument (passed back as a double holding that float).
double as_float(double x) { return static_cast<double>(static_cast<float>(x)); }

// Apex multi_tensor_adam: bias_correction = 1 - std::pow(beta, step) with beta a float, computed in double
// (std::pow(float, int) promotes), stored as float. step: int64 [1] device. float32 [1].
at::Tensor bias_correction(double beta_f, const at::Tensor& step) {
  return at::pow(beta_f, step.to(at::kDouble)).neg().add(1.0).to(at::kFloat);
}

}  // namespace

// ---- Adam ----

bool no_weight_decay_cond(const std::string& name, const at::Tensor& value) {
  return ends_with(name, ".bias") || value.dim() == 1;
}

Adam::Adam(const Params& params, const AdamConfig& config, int tp_rank, bool is_first_pp_stage) : config_(config) {
  LG_INPUT_CHECK(config.beta1 >= 0.0 && config.beta1 < 1.0, "Adam: beta1 must be in [0, 1) (got {})", config.beta1);
  LG_INPUT_CHECK(config.beta2 >= 0.0 && config.beta2 < 1.0, "Adam: beta2 must be in [0, 1) (got {})", config.beta2);
  LG_INPUT_CHECK(config.eps >= 0.0, "Adam: eps must be >= 0 (got {})", config.eps);
  LG_INPUT_CHECK(!params.empty(), "Adam: no params");
  for (const Param& p : params) {
    const at::Tensor main = p.value.detach().to(at::kFloat).clone();  // never alias the model param
    names_.push_back(p.name);
    main_params_.push_back(main);
    exp_avg_.push_back(at::zeros_like(main));
    exp_avg_sq_.push_back(at::zeros_like(main));
    wd_mult_.push_back(no_weight_decay_cond(p.name, p.value) ? 0.0 : 1.0);
    // Megatron _filter_grads_for_norm: not a TP duplicate, not the shared tied-embedding copy.
    counts_in_norm_.push_back(p.counts_in_norm(tp_rank) && !(p.embedding_tied && !is_first_pp_stage));
  }
  step_ = at::zeros({1}, at::TensorOptions().dtype(at::kLong).device(main_params_.front().device()));
}

void Adam::step(const std::vector<at::Tensor>& main_grads, double lr, double wd) {
  step_impl(main_grads, lr, wd, nullptr, nullptr);
}

void Adam::step(const std::vector<at::Tensor>& main_grads, double lr, double wd, const at::Tensor& skip,
                const at::Tensor* lr_device) {
  step_impl(main_grads, lr, wd, &skip, lr_device);
}

// Apex FusedAdam.step (group['step'] += 1, then multi_tensor_adam with adam_w_mode=1) per element, in float:
//   m = beta1*m + (1-beta1)*g;  v = beta2*v + (1-beta2)*g*g
//   denom = sqrtf(v / bc2) + eps;  update = (m / bc1) / denom + decay*p;  p = p - lr*update
void Adam::step_impl(const std::vector<at::Tensor>& main_grads, double lr, double wd, const at::Tensor* skip,
                     const at::Tensor* lr_device) {
  LG_CHECK(main_grads.size() == main_params_.size(), "Adam: {} grads for {} params", main_grads.size(),
           main_params_.size());
  // The kernel takes beta1, beta2, eps, lr, decay as float and forms 1-beta in float.
  const float beta1_f = static_cast<float>(config_.beta1);
  const float beta2_f = static_cast<float>(config_.beta2);
  const double beta1 = beta1_f, beta2 = beta2_f;
  const double one_minus_beta1 = static_cast<double>(1.0f - beta1_f);
  const double one_minus_beta2 = static_cast<double>(1.0f - beta2_f);
  const double eps = as_float(config_.eps), lr_f = as_float(lr);

  at::Tensor keep, advance;  // bool [1]: true where this step is skipped; int64 [1]: 1 where it is taken
  if (skip) {
    ScopedSite mask(kStepMaskSite);
    keep = skip->reshape({1}).to(at::kBool);
    advance = keep.logical_not().to(at::kLong);
  }
  const at::Tensor new_step = skip ? step_ + advance : step_ + 1;
  at::Tensor bc1 = at::ones({1}, at::TensorOptions().dtype(at::kFloat).device(step_.device()));
  at::Tensor bc2 = bc1;
  if (config_.bias_correction) {
    bc1 = bias_correction(beta1, new_step);
    bc2 = bias_correction(beta2, new_step);
  }

  for (size_t i = 0; i < main_params_.size(); ++i) {
    at::Tensor& p = main_params_[i];
    at::Tensor& m = exp_avg_[i];
    at::Tensor& v = exp_avg_sq_[i];
    const at::Tensor& g = main_grads[i];
    LG_CHECK(g.sizes() == p.sizes(), "Adam: grad of {} has shape {} but param {}", names_[i], c10::str(g.sizes()),
             c10::str(p.sizes()));
    const double decay = as_float(wd * wd_mult_[i]);

    const at::Tensor m_new = m.mul(beta1).add(g.mul(one_minus_beta1));
    const at::Tensor v_new = v.mul(beta2).add(g.mul(one_minus_beta2).mul(g));
    const at::Tensor denom = v_new.div(bc2).sqrt().add(eps);
    const at::Tensor update = m_new.div(bc1).div(denom).add(p.mul(decay));
    // A float32 tensor LR multiplies exactly as the float scalar does: the same bits.
    const at::Tensor p_new = p.sub(lr_device ? update.mul(*lr_device) : update.mul(lr_f));

    if (skip) {  // masked skip: Megatron's `if found_inf_flag: return False, None, None`
      // Written in place by the select itself: one kernel per tensor, as the unmasked copy (measured on an H200:
      // where-then-copy_ cost a masked arm ~410 kernels per iteration more than the baseline).
      if (!masked_write_) {
        at::where_out(p, keep, p, p_new);
        at::where_out(m, keep, m, m_new);
        at::where_out(v, keep, v, v_new);
      } else {
        masked_write_(p, keep, p_new);
        masked_write_(m, keep, m_new);
        masked_write_(v, keep, v_new);
      }
    } else {
      p.copy_(p_new);
      m.copy_(m_new);
      v.copy_(v_new);
    }
  }
  step_.copy_(new_step);
}

void Adam::copy_main_to_model(Params& params) const {
  LG_CHECK(params.size() == main_params_.size(), "Adam: copy to {} params from {} main params", params.size(),
           main_params_.size());
  for (size_t i = 0; i < params.size(); ++i) params[i].value.detach().copy_(main_params_[i]);  // casts to model dtype
}

// ---- the mixed-precision step ----

at::Tensor get_loss_scale(const GradScaler* scaler, c10::Device device) {
  return scaler ? scaler->scale() : scale_one(device);
}

// Megatron: _unscale_main_grads_and_check_for_nan with torch._amp_foreach_non_finite_check_and_unscale_ spelled
// out in plain ops (LibTorch 1.13 has no CPU kernel for it): the check looks at each grad BEFORE the multiply.
at::Tensor unscale_main_grads_and_check_for_nan(std::vector<at::Tensor>& main_grads, const at::Tensor& inv_scale,
                                                Comm* found_inf_group) {
  at::Tensor found_inf = at::zeros({1}, inv_scale.options().dtype(at::kFloat));
  for (at::Tensor& g : main_grads) {
    const at::Tensor nonfinite = at::isfinite(g).all().logical_not().to(at::kFloat).reshape({1});
    found_inf = at::maximum(found_inf, nonfinite);
    g.mul_(inv_scale);
  }
  // All ranks of the grad-stats group skip together.
  if (found_inf_group) found_inf_group->all_reduce(found_inf, ReduceOp::kMax);
  return found_inf;
}

OptimizerStepResult optimizer_step(Adam& adam, GradScaler* scaler, std::vector<at::Tensor>& main_grads,
                                   Params& model_params, Comm& grad_stats_group, const OptimizerStepConfig& config,
                                   double lr, double wd, const at::Tensor* veto, const at::Tensor* lr_device,
                                   FoundInfReduction found_inf_reduction) {
  LG_CHECK(main_grads.size() == adam.size(), "optimizer_step: {} grads for {} params", main_grads.size(), adam.size());
  const c10::Device device = adam.main_params().front().device();
  OptimizerStepResult r;

  // (1) prepare_grads
  if (scaler) {
    Comm* found_inf_group = found_inf_reduction.narrowed ? found_inf_reduction.group : &grad_stats_group;
    r.found_inf = unscale_main_grads_and_check_for_nan(main_grads, scaler->inv_scale(), found_inf_group);
    scaler->update(r.found_inf);
  } else {
    r.found_inf = at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(device));
  }
  // (2) skip on found_inf, masked. Without a scaler nothing can be found, so no mask (and no extra kernels).
  // A veto (a world-wide fault verdict still on the device, the one-read arm) masks the step like found_inf.
  at::Tensor found = r.found_inf.gt(0);
  if (veto) {
    ScopedSite mask(kStepMaskSite);
    found = found.logical_or(veto->reshape({1}));
  }
  const bool masked = scaler != nullptr || veto != nullptr;
  LG_CHECK(lr_device == nullptr || masked, "optimizer_step: a device LR comes with a device mask (zerosync)");

  // (3) grad norm over the grads that count (Megatron _filter_grads_for_norm).
  std::vector<at::Tensor> grads_for_norm;
  for (size_t i = 0; i < main_grads.size(); ++i) {
    if (adam.counts_in_norm(i)) grads_for_norm.push_back(main_grads[i]);
  }
  const at::Tensor grad_norm = get_grad_norm_fp32(grads_for_norm, grad_stats_group, device);

  // (4) clip; on a skipped step Megatron never clips, so the coefficient becomes 1.
  if (config.clip_grad > 0.0) {
    at::Tensor clip_coeff = clip_coeff_fp32(config.clip_grad, grad_norm);
    if (masked) {
      ScopedSite mask(kStepMaskSite);
      clip_coeff = at::where(found, at::ones_like(clip_coeff), clip_coeff);
    }
    for (at::Tensor& g : main_grads) g.mul_(clip_coeff);
  }

  // (5) zeros, after clipping, over the same grads as the norm.
  at::Tensor num_zeros = at::full({1}, -1, at::TensorOptions().dtype(at::kLong).device(device));
  if (config.log_num_zeros_in_grad) num_zeros = count_zeros_fp32(grads_for_norm, grad_stats_group, device);
  if (config.log_num_zeros_in_grad && config.simulated_extra_zeros > 0) num_zeros.add_(config.simulated_extra_zeros);

  // (6) step_with_ready_grads
  if (masked) {
    adam.step(main_grads, lr, wd, found, lr_device);
  } else {
    adam.step(main_grads, lr, wd);
  }
  adam.copy_main_to_model(model_params);

  r.update_successful = found.logical_not();
  r.grad_norm = at::where(found, at::full_like(grad_norm, -1.0), grad_norm);
  r.num_zeros = at::where(found, at::full_like(num_zeros, -1), num_zeros);
  return r;
}

}  // namespace loopgate
