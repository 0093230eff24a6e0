// Loss scalers for fp16 (and --loss-scale): Megatron's ConstantGradScaler and DynamicGradScaler
// (megatron/core/optimizer/grad_scaler.py), with every piece of state a DEVICE tensor so update() runs as
// tensor ops and the sync-free loop never reads found_inf on the host. bf16 without --loss-scale has no
// scaler at all; scale_one() is the constant 1.0 Megatron returns from get_loss_scale() then (_scale_one).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace loopgate {

// Megatron: MixedPrecisionOptimizer._scale_one, the loss scale when there is no grad scaler. float32 [1].
at::Tensor scale_one(c10::Device device);

// Megatron: MegatronGradScaler. scale() is a float32 [1] device tensor.
class GradScaler {
 public:
  virtual ~GradScaler() = default;
  virtual bool is_dynamic() const = 0;
  // The current scale. update() REPLACES this tensor (as Megatron rebinds self._scale) rather than writing
  // into it, so a tensor banked for a later read keeps the value it had when banked.
  const at::Tensor& scale() const { return scale_; }
  // Megatron: inv_scale = scale.double().reciprocal().float().
  at::Tensor inv_scale() const;
  // found_inf: [1] or 0-dim device tensor, any dtype; > 0 means a non-finite grad was seen this step.
  virtual void update(const at::Tensor& found_inf) = 0;

 protected:
  at::Tensor scale_;
};

// Megatron: ConstantGradScaler (--loss-scale X): update is a no-op.
class ConstantGradScaler : public GradScaler {
 public:
  ConstantGradScaler(double loss_scale, c10::Device device);
  bool is_dynamic() const override { return false; }
  void update(const at::Tensor& found_inf) override;
};

struct DynamicGradScalerConfig {  // defaults: arguments.py and megatron/core/optimizer/__init__.py
  double initial_scale = 4294967296.0;  // --initial-loss-scale 2**32
  double min_scale = 1.0;               // --min-loss-scale
  double growth_factor = 2.0;           // hard-coded in Megatron
  double backoff_factor = 0.5;          // hard-coded in Megatron
  int64_t growth_interval = 1000;       // --loss-scale-window
  int64_t hysteresis = 2;               // --hysteresis
};

// Megatron: DynamicGradScaler. On an inf: growth tracker -> 0, hysteresis tracker -1, and once it is <= 0 the
// scale backs off (never below min_scale). On a clean step: growth tracker +1; after growth_interval clean steps
// in a row the scale grows and the hysteresis tracker is restored. A single clean step does NOT restore
// hysteresis — only a growth does.
class DynamicGradScaler : public GradScaler {
 public:
  DynamicGradScaler(const DynamicGradScalerConfig& config, c10::Device device);
  bool is_dynamic() const override { return true; }
  void update(const at::Tensor& found_inf) override;
  // int64 [1] device tensors (Megatron keeps them as Python ints; state_dict names growth_tracker and
  // hysteresis_tracker).
  const at::Tensor& growth_tracker() const { return growth_tracker_; }
  const at::Tensor& hysteresis_tracker() const { return hysteresis_tracker_; }
  const DynamicGradScalerConfig& config() const { return config_; }

 private:
  DynamicGradScalerConfig config_;
  at::Tensor min_scale_;  // float32 [1], Megatron keeps min_scale as a CUDA tensor too
  at::Tensor growth_tracker_;
  at::Tensor hysteresis_tracker_;
};

using GradScalerPtr = std::unique_ptr<GradScaler>;

// Megatron's config.grad_scale_func = optimizer.scale_loss: the loss times the scale, before backward. Without a
// scaler that scale is 1.0, so there is none (no kernel).
std::function<at::Tensor(const at::Tensor& loss)> grad_scale_func(const GradScaler* scaler);

// Megatron's get_megatron_optimizer: a dynamic scaler (fp16), a constant one (--loss-scale > 0), or none (bf16).
GradScalerPtr make_grad_scaler(bool dynamic, const DynamicGradScalerConfig& config, double loss_scale,
                               c10::Device device);

}  // namespace loopgate
