// Adam on fp32 main params and the mixed-precision optimizer step: see adam.h. Tensors: each main param,
// grad, exp_avg and exp_avg_sq has its param's shard shape, fp32; flags and counters are [1] device tensors.
#include "trainer/optim/adam.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <ATen/ScalarOps.h>

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

// A host scalar as mul(Tensor, Scalar) hands it to the kernel (a wrapped number), so an out= form takes the same
// kernel with no temporary (LibTorch 1.13's Scalar out= forms compute into a new tensor, then copy).
at::Tensor host_scalar(double x) { return at::native::wrapped_scalar_tensor(x); }

}  // namespace

// ---- Adam ----

bool no_weight_decay_cond(const std::string& name, const at::Tensor& value) {
  return ends_with(name, ".bias") || value.dim() == 1;
}

Adam::Adam(const Params& params, const AdamConfig& config, int tp_rank, bool is_first_pp_stage,
           std::vector<int64_t> offsets)
    : config_(config), offsets_(std::move(offsets)) {
  LG_INPUT_CHECK(config.beta1 >= 0.0 && config.beta1 < 1.0, "Adam: beta1 must be in [0, 1) (got {})", config.beta1);
  LG_INPUT_CHECK(config.beta2 >= 0.0 && config.beta2 < 1.0, "Adam: beta2 must be in [0, 1) (got {})", config.beta2);
  LG_INPUT_CHECK(config.eps >= 0.0, "Adam: eps must be >= 0 (got {})", config.eps);
  LG_INPUT_CHECK(!params.empty(), "Adam: no params");
  int64_t total = 0;
  if (offsets_.empty()) {
    for (const Param& p : params) {
      offsets_.push_back(total);
      total += p.value.numel();
    }
  }
  LG_CHECK(offsets_.size() == params.size(), "Adam: {} offsets for {} params", offsets_.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) total = std::max(total, offsets_[i] + params[i].value.numel());
  const at::TensorOptions fp32 = at::TensorOptions().dtype(at::kFloat).device(params.front().value.device());
  // Elements no param covers stay zero in every tensor: a zero grad leaves them zero.
  flat_main_ = at::zeros({total}, fp32);
  flat_exp_avg_ = at::zeros({total}, fp32);
  flat_exp_avg_sq_ = at::zeros({total}, fp32);
  flat_wd_mult_ = at::zeros({total}, fp32);
  new_main_ = at::empty({total}, fp32);
  new_exp_avg_ = at::empty({total}, fp32);
  new_exp_avg_sq_ = at::empty({total}, fp32);
  scratch_ = at::empty({total}, fp32);
  for (size_t i = 0; i < params.size(); ++i) {
    const Param& p = params[i];
    auto view_of = [&](const at::Tensor& flat) {
      return flat.narrow(0, offsets_[i], p.value.numel()).view(p.value.sizes());
    };
    names_.push_back(p.name);
    main_params_.push_back(view_of(flat_main_));
    main_params_.back().copy_(p.value.detach());  // an fp32 copy: never aliases the model param
    exp_avg_.push_back(view_of(flat_exp_avg_));
    exp_avg_sq_.push_back(view_of(flat_exp_avg_sq_));
    wd_mult_.push_back(no_weight_decay_cond(p.name, p.value) ? 0.0 : 1.0);
    view_of(flat_wd_mult_).fill_(wd_mult_.back());
    // Megatron _filter_grads_for_norm: not a TP duplicate, not the shared tied-embedding copy.
    counts_in_norm_.push_back(p.counts_in_norm(tp_rank) && !(p.embedding_tied && !is_first_pp_stage));
  }
  step_ = at::zeros({1}, at::TensorOptions().dtype(at::kLong).device(flat_main_.device()));
}

void Adam::step(const MainGrads& main_grads, double lr, double wd) {
  step_impl(main_grads, lr, wd, nullptr, nullptr);
}

void Adam::step(const MainGrads& main_grads, double lr, double wd, const at::Tensor& skip,
                const at::Tensor* lr_device) {
  step_impl(main_grads, lr, wd, &skip, lr_device);
}

// Apex FusedAdam.step (group['step'] += 1, then multi_tensor_adam with adam_w_mode=1) per element, in float:
//   m = beta1*m + (1-beta1)*g;  v = beta2*v + (1-beta2)*g*g
//   denom = sqrtf(v / bc2) + eps;  update = (m / bc1) / denom + decay*p;  p = p - lr*update
// Each operation runs once over the flat tensors: element by element the same float operations as one param at a
// time, so the same bits.
void Adam::step_impl(const MainGrads& main_grads, double lr, double wd, const at::Tensor* skip,
                     const at::Tensor* lr_device) {
  LG_CHECK(main_grads.views.size() == main_params_.size(), "Adam: {} grads for {} params", main_grads.views.size(),
           main_params_.size());
  LG_CHECK(main_grads.flat.sizes() == flat_main_.sizes(), "Adam: a flat grad buffer of {} elements for {}",
           main_grads.flat.numel(), flat_main_.numel());
  LG_CHECK(main_grads.offsets() == offsets_, "Adam: the grads are not laid out as the main params");
  for (size_t i = 0; i < main_params_.size(); ++i)
    LG_CHECK(main_grads.views[i].sizes() == main_params_[i].sizes(), "Adam: grad of {} has shape {} but param {}",
             names_[i], c10::str(main_grads.views[i].sizes()), c10::str(main_params_[i].sizes()));
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

  at::Tensor& p = flat_main_;
  at::Tensor& m = flat_exp_avg_;
  at::Tensor& v = flat_exp_avg_sq_;
  const at::Tensor& g = main_grads.flat;
  // The new values go to buffers kept between steps: on CPU a fresh tensor of every param's elements per operation
  // would be an mmap and page faults each.
  at::Tensor& m_new = new_exp_avg_;
  at::Tensor& v_new = new_exp_avg_sq_;
  at::Tensor& p_new = new_main_;
  at::Tensor& tmp = scratch_;

  at::mul_out(m_new, m, host_scalar(beta1));  // m_new = beta1*m + (1-beta1)*g
  at::mul_out(tmp, g, host_scalar(one_minus_beta1));
  m_new.add_(tmp);
  at::mul_out(v_new, v, host_scalar(beta2));  // v_new = beta2*v + (1-beta2)*g*g
  at::mul_out(tmp, g, host_scalar(one_minus_beta2)).mul_(g);
  v_new.add_(tmp);
  at::div_out(tmp, v_new, bc2).sqrt_().add_(eps);  // denom
  at::div_out(p_new, m_new, bc1).div_(tmp);          // update = m_new/bc1/denom + decay*p
  // Each element's decay, float(wd * wd_mult) with wd_mult 0 or 1: exactly float(wd) or 0.
  at::mul_out(tmp, flat_wd_mult_, host_scalar(as_float(wd)));
  tmp.mul_(p);  // p*decay: the product commutes
  p_new.add_(tmp);
  // A float32 tensor LR multiplies exactly as the float scalar does: the same bits.
  if (lr_device) {
    p_new.mul_(*lr_device);
  } else {
    p_new.mul_(lr_f);
  }
  at::sub_out(p_new, p, p_new);  // p_new = p - lr*update

  if (skip) {  // masked skip: Megatron's `if found_inf_flag: return False, None, None`
    // Written in place by the select itself: one kernel per flat tensor, as the unmasked copy.
    at::where_out(p, keep, p, p_new);
    at::where_out(m, keep, m, m_new);
    at::where_out(v, keep, v, v_new);
  } else {
    p.copy_(p_new);
    m.copy_(m_new);
    v.copy_(v_new);
  }
  step_.copy_(new_step);
}

GraphState Adam::state() const {
  GraphState s;
  for (size_t i = 0; i < size(); ++i) {
    s.emplace_back(fmt::format("adam.main{}", i), main_params_[i]);
    s.emplace_back(fmt::format("adam.exp_avg{}", i), exp_avg_[i]);
    s.emplace_back(fmt::format("adam.exp_avg_sq{}", i), exp_avg_sq_[i]);
  }
  s.emplace_back("adam.step", step_);
  return s;
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
at::Tensor unscale_main_grads_and_check_for_nan(MainGrads& main_grads, const at::Tensor& inv_scale,
                                                Comm& found_inf_group) {
  // Over the flat buffer at once: any non-finite element of any grad, then every grad scaled.
  at::Tensor found_inf = at::isfinite(main_grads.flat).all().logical_not().to(at::kFloat).reshape({1});
  main_grads.flat.mul_(inv_scale);
  // All ranks of the grad-stats group skip together.
  found_inf_group.all_reduce(found_inf, ReduceOp::kMax);
  return found_inf;
}

OptimizerStepResult optimizer_step(Adam& adam, GradScaler* scaler, MainGrads& main_grads,
                                   Params& model_params, Comm& grad_stats_group, const OptimizerStepConfig& config,
                                   double lr, double wd, const at::Tensor* veto, const at::Tensor* lr_device) {
  LG_CHECK(main_grads.views.size() == adam.size(), "optimizer_step: {} grads for {} params", main_grads.views.size(),
           adam.size());
  const c10::Device device = adam.main_params().front().device();
  OptimizerStepResult r;

  // (1) prepare_grads
  if (scaler) {
    r.found_inf = unscale_main_grads_and_check_for_nan(main_grads, scaler->inv_scale(), grad_stats_group);
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
  std::vector<at::Tensor> grads_for_norm, not_counted;
  for (size_t i = 0; i < main_grads.views.size(); ++i)
    (adam.counts_in_norm(i) ? grads_for_norm : not_counted).push_back(main_grads.views[i]);
  const at::Tensor grad_norm = get_grad_norm_fp32(grads_for_norm, grad_stats_group, device);

  // (4) clip; on a skipped step Megatron never clips, so the coefficient becomes 1.
  if (config.clip_grad > 0.0) {
    at::Tensor clip_coeff = clip_coeff_fp32(config.clip_grad, grad_norm);
    if (masked) {
      ScopedSite mask(kStepMaskSite);
      clip_coeff = at::where(found, at::ones_like(clip_coeff), clip_coeff);
    }
    main_grads.flat.mul_(clip_coeff);  // every grad, as multi_tensor_scale over all of them
  }

  // (5) zeros, after clipping, over the same grads as the norm.
  at::Tensor num_zeros = at::full({1}, -1, at::TensorOptions().dtype(at::kLong).device(device));
  if (config.log_num_zeros_in_grad) num_zeros = count_zeros_fp32(main_grads.flat, not_counted, grad_stats_group);
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
