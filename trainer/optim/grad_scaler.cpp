// Grad scalers: see grad_scaler.h. update() is Megatron's DynamicGradScaler.update with both branches computed
// and selected by at::where on the device flag — no host read.
#include "trainer/optim/grad_scaler.h"

#include <ATen/ATen.h>

#include "trainer/common/error.h"

namespace loopgate {

namespace {

at::TensorOptions float_on(c10::Device device) { return at::TensorOptions().dtype(at::kFloat).device(device); }
at::TensorOptions long_on(c10::Device device) { return at::TensorOptions().dtype(at::kLong).device(device); }

}  // namespace

at::Tensor scale_one(c10::Device device) { return at::ones({1}, float_on(device)); }

// Megatron: MegatronGradScaler.inv_scale — through double so 1/scale rounds once.
at::Tensor GradScaler::inv_scale() const { return scale_.to(at::kDouble).reciprocal().to(at::kFloat); }

// ---- constant ----

ConstantGradScaler::ConstantGradScaler(double loss_scale, c10::Device device) {
  LG_INPUT_CHECK(loss_scale > 0.0, "ConstantGradScaler: loss scale must be > 0 (got {})", loss_scale);
  scale_ = at::full({1}, loss_scale, float_on(device));
}

void ConstantGradScaler::update(const at::Tensor& /*found_inf*/) {}  // Megatron: ConstantGradScaler.update: pass

// ---- dynamic ----

// Megatron: DynamicGradScaler.__init__ asserts, each as a one-line InputError.
DynamicGradScaler::DynamicGradScaler(const DynamicGradScalerConfig& c, c10::Device device) : config_(c) {
  LG_INPUT_CHECK(c.min_scale > 0.0, "DynamicGradScaler: min_scale must be > 0 (got {})", c.min_scale);
  LG_INPUT_CHECK(c.min_scale <= c.initial_scale, "DynamicGradScaler: min_scale {} must be <= initial_scale {}",
                 c.min_scale, c.initial_scale);
  LG_INPUT_CHECK(c.growth_factor > 1.0, "DynamicGradScaler: growth_factor must be > 1 (got {})", c.growth_factor);
  LG_INPUT_CHECK(c.backoff_factor > 0.0 && c.backoff_factor < 1.0,
                 "DynamicGradScaler: backoff_factor must be in (0, 1) (got {})", c.backoff_factor);
  LG_INPUT_CHECK(c.growth_interval > 0, "DynamicGradScaler: growth_interval must be > 0 (got {})", c.growth_interval);
  LG_INPUT_CHECK(c.hysteresis > 0, "DynamicGradScaler: hysteresis must be > 0 (got {})", c.hysteresis);
  scale_ = at::full({1}, c.initial_scale, float_on(device));
  min_scale_ = at::full({1}, c.min_scale, float_on(device));
  growth_tracker_ = at::zeros({1}, long_on(device));
  hysteresis_tracker_ = at::full({1}, c.hysteresis, long_on(device));
}

// Megatron: DynamicGradScaler.update(found_inf). Python branches on a host bool; here both outcomes are
// computed and the flag selects, so the same numbers come out without reading the flag.
void DynamicGradScaler::update(const at::Tensor& found_inf) {
  const at::Tensor found = found_inf.reshape({1}).gt(0);

  // found_inf branch: reset growth, spend one unit of hysteresis, back off once hysteresis is used up.
  const at::Tensor hysteresis_if_inf = hysteresis_tracker_ - 1;
  const at::Tensor scale_if_inf =
      at::where(hysteresis_if_inf.le(0), at::maximum(scale_ * config_.backoff_factor, min_scale_), scale_);

  // clean branch: count; after growth_interval clean steps, grow and restore hysteresis.
  const at::Tensor growth_counted = growth_tracker_ + 1;
  const at::Tensor grow = growth_counted.eq(config_.growth_interval);
  const at::Tensor growth_if_clean = at::where(grow, at::zeros_like(growth_counted), growth_counted);
  const at::Tensor hysteresis_if_clean =
      at::where(grow, at::full_like(hysteresis_tracker_, config_.hysteresis), hysteresis_tracker_);
  const at::Tensor scale_if_clean = at::where(grow, scale_ * config_.growth_factor, scale_);

  // New tensors, not in-place writes: see GradScaler::scale().
  scale_ = at::where(found, scale_if_inf, scale_if_clean);
  growth_tracker_ = at::where(found, at::zeros_like(growth_counted), growth_if_clean);
  hysteresis_tracker_ = at::where(found, hysteresis_if_inf, hysteresis_if_clean);
}

std::function<at::Tensor(const at::Tensor& loss)> grad_scale_func(const GradScaler* scaler) {
  if (!scaler) return {};
  return [scaler](const at::Tensor& loss) { return (loss * scaler->scale()).reshape(loss.sizes()); };
}

GradScalerPtr make_grad_scaler(bool dynamic, const DynamicGradScalerConfig& config, double loss_scale,
                               c10::Device device) {
  if (dynamic) return std::make_unique<DynamicGradScaler>(config, device);
  if (loss_scale > 0) return std::make_unique<ConstantGradScaler>(loss_scale, device);
  return nullptr;
}

}  // namespace loopgate
