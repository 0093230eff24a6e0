// Adam on fp32 main params (Apex/TE FusedAdam, adam_w_mode: decoupled weight decay, bias correction on) and
// the mixed-precision step around it (Megatron megatron/core/optimizer/optimizer.py MixedPrecisionOptimizer.step,
// as reached through ChainedOptimizer.step). Nothing here reads a value on the host: a found_inf step is skipped
// by MASKING — every piece of optimizer state keeps its old value through at::where(found_inf, old, new), and the
// step counter lives on the device and does not advance — instead of Megatron's `if found_inf (read on the host): return`.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "trainer/capture/capture.h"
#include "trainer/model/param.h"
#include "trainer/optim/grad_buffer.h"
#include "trainer/optim/grad_scaler.h"
#include "trainer/parallel/comm.h"

namespace loopgate {

// ---- Adam ----

// The operator-count site of a masked step's own work (the skip mask, the clip coefficient kept at 1 on a skipped
// step, the step count's advance): a fixed few per iteration, counted apart from the numerics path, which is then
// the same operators in every arm (sync_budget's numerics check allows it nothing more than the baseline's).
inline constexpr const char* kStepMaskSite = "step_mask";

struct AdamConfig {  // Megatron defaults: arguments.py --adam-beta1/--adam-beta2/--adam-eps
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool bias_correction = true;  // FusedAdam default
};

// Megatron's default param-group policy (optimizer/__init__.py _get_param_groups): "Do not regularize biases and
// norm parameters" — name ends with ".bias" or the tensor is 1-D. Such params get wd_mult 0, the rest 1.
bool no_weight_decay_cond(const std::string& name, const at::Tensor& value);

class Adam {
 public:
  // Copies every param's value to an fp32 main param (Megatron Float16OptimizerWithFloat16Params keeps these
  // masters; the model params may be bf16). tp_rank / is_first_pp_stage decide which grads count in the norm
  // (Megatron _filter_grads_for_norm). `offsets`: where each param's elements start in the main grads' flat buffer
  // (GradBuffer's layout); empty: one after another in registration order.
  Adam(const Params& params, const AdamConfig& config = {}, int tp_rank = 0, bool is_first_pp_stage = true,
       std::vector<int64_t> offsets = {});

  // One AdamW update of every main param with its main grad (fp32, same order as the params):
  //   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g;  m^ = m/(1-b1^t);  v^ = v/(1-b2^t)
  //   p = p - lr * (m^ / (sqrt(v^) + eps) + wd*wd_mult*p)
  // (Apex multi_tensor_adam ADAM_MODE_1, constants in float as the kernel has them). wd is the scheduler's
  // get_wd(); each param's group wd_mult (0 or 1) is applied here, as Megatron's scheduler step does.
  // main_grads must be laid out as this Adam's offsets say.
  void step(const MainGrads& main_grads, double lr, double wd);
  // Masked form: where `skip` (bool [1] device) is true, params, exp_avg, exp_avg_sq and the step count keep
  // their old values. `lr_device` (float32 [1], optional) replaces `lr`: an LR the host never reads (zerosync).
  void step(const MainGrads& main_grads, double lr, double wd, const at::Tensor& skip,
            const at::Tensor* lr_device = nullptr);

  // Megatron: _copy_main_params_to_model_params (fp32 main -> model dtype). Kept separate from step().
  void copy_main_to_model(Params& params) const;

  size_t size() const { return main_params_.size(); }
  const std::vector<at::Tensor>& main_params() const { return main_params_; }
  const std::vector<at::Tensor>& exp_avg() const { return exp_avg_; }
  const std::vector<at::Tensor>& exp_avg_sq() const { return exp_avg_sq_; }
  const at::Tensor& step_count() const { return step_; }  // int64 [1] device
  // Every tensor a step writes in place, by name: each param's main copy and moments, then the step count (what a
  // checkpoint holds and a replayed iteration writes; capture.h GraphState).
  GraphState state() const;
  double wd_mult(size_t i) const { return wd_mult_[i]; }
  bool counts_in_norm(size_t i) const { return counts_in_norm_[i]; }
  const AdamConfig& config() const { return config_; }

 private:
  void step_impl(const MainGrads& main_grads, double lr, double wd, const at::Tensor* skip,
                 const at::Tensor* lr_device);

  AdamConfig config_;
  std::vector<std::string> names_;
  std::vector<int64_t> offsets_;
  at::Tensor flat_main_, flat_exp_avg_, flat_exp_avg_sq_;  // fp32 [total]: what each step updates
  at::Tensor flat_wd_mult_;                                 // fp32 [total]: each element's param's wd_mult
  at::Tensor new_main_, new_exp_avg_, new_exp_avg_sq_, scratch_;  // fp32 [total]: a step's new values, a temporary
  std::vector<at::Tensor> main_params_, exp_avg_, exp_avg_sq_;  // per param: views of the flat tensors
  std::vector<double> wd_mult_;
  std::vector<bool> counts_in_norm_;
  at::Tensor step_;
};

// ---- the mixed-precision step ----

struct OptimizerStepConfig {
  double clip_grad = 1.0;              // --clip-grad; 0 disables clipping (the norm is still computed)
  bool log_num_zeros_in_grad = false;  // --log-num-zeros-in-grad
  // CPU simulation of a large model (tests only): this many more zero grads counted, after the group's SUM, so a
  // small fixture's count passes 2^24 as an H200 model's does, where the baseline's float32 (reduce_max_stat)
  // keeps only even integers. Every arm alike: it is the numerics path's.
  int64_t simulated_extra_zeros = 0;
};

struct OptimizerStepResult {
  at::Tensor update_successful;  // bool [1]: !found_inf
  at::Tensor grad_norm;          // float32 [1]; -1.0 on a skipped step (Megatron returns None)
  at::Tensor num_zeros;          // int64 [1]; -1 on a skipped step or when not counting (None)
  at::Tensor found_inf;          // float32 [1], 1.0 if any grad in the grad-stats group was non-finite
};

// Megatron: ChainedOptimizer.step over one MixedPrecisionOptimizer, in its order:
//   (1) prepare_grads: with a scaler, unscale the main grads by inv_scale in place and set found_inf if any is
//       non-finite, all-reduce MAX over grad_stats_group, scaler->update(found_inf). No scaler (bf16): no check.
//   (2) found_inf -> skip: here masked (see file comment); grads are then left unscaled but unclipped, as in
//       Megatron.
//   (3) grad norm (always), (4) clip when clip_grad > 0, (5) count zeros when logging,
//   (6) Adam step, then copy main params to the model params.
// Differences from Megatron, both by design: on a skipped step the norm / zero-count all-reduces still run
// (their results are replaced by -1), so the collectives issued do not depend on a value the host never read;
// and every result is a device tensor for the loop's ledger to read.
// scaler may be null (bf16 without --loss-scale). main_grads.views[i] belongs to adam.main_params()[i].
OptimizerStepResult optimizer_step(Adam& adam, GradScaler* scaler, MainGrads& main_grads,
                                   Params& model_params, Comm& grad_stats_group, const OptimizerStepConfig& config,
                                   double lr, double wd, const at::Tensor* veto = nullptr,
                                   const at::Tensor* lr_device = nullptr);

// Megatron: MixedPrecisionOptimizer._unscale_main_grads_and_check_for_nan (minus the host read): float32 [1].
at::Tensor unscale_main_grads_and_check_for_nan(MainGrads& main_grads, const at::Tensor& inv_scale,
                                                Comm& found_inf_group);

// Megatron: get_loss_scale() — the scaler's scale, or 1.0 without one.
at::Tensor get_loss_scale(const GradScaler* scaler, c10::Device device);

}  // namespace loopgate
