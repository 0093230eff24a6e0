// OptimizerParamScheduler: see scheduler.h. Every expression below mirrors one line of
// megatron/core/optimizer_param_scheduler.py; keep the operation order (it decides the last bit).
#include "trainer/optim/scheduler.h"

#include <cmath>

#include "trainer/common/error.h"

namespace loopgate {

// ---- style names ----

LrDecayStyle parse_decay_style(const std::string& s) {
  if (s == "constant") return LrDecayStyle::kConstant;
  if (s == "linear") return LrDecayStyle::kLinear;
  if (s == "cosine") return LrDecayStyle::kCosine;
  if (s == "inverse-square-root") return LrDecayStyle::kInverseSquareRoot;
  if (s == "WSD") return LrDecayStyle::kWSD;
  throw InputError("lr decay style '" + s +
                   "' is not supported (choices: constant, linear, cosine, inverse-square-root, WSD)");
}

WsdDecayStyle parse_wsd_decay_style(const std::string& s) {
  if (s == "linear") return WsdDecayStyle::kLinear;
  if (s == "cosine") return WsdDecayStyle::kCosine;
  if (s == "exponential") return WsdDecayStyle::kExponential;
  if (s == "minus_sqrt") return WsdDecayStyle::kMinusSqrt;
  throw InputError("lr WSD decay style '" + s +
                   "' is not supported (choices: linear, cosine, exponential, minus_sqrt)");
}

WdIncrStyle parse_wd_incr_style(const std::string& s) {
  if (s == "constant") return WdIncrStyle::kConstant;
  if (s == "linear") return WdIncrStyle::kLinear;
  if (s == "cosine") return WdIncrStyle::kCosine;
  throw InputError("weight decay increment style '" + s + "' is not supported (choices: constant, linear, cosine)");
}

const char* to_string(LrDecayStyle s) {
  switch (s) {
    case LrDecayStyle::kConstant: return "constant";
    case LrDecayStyle::kLinear: return "linear";
    case LrDecayStyle::kCosine: return "cosine";
    case LrDecayStyle::kInverseSquareRoot: return "inverse-square-root";
    case LrDecayStyle::kWSD: return "WSD";
  }
  return "?";
}

const char* to_string(WsdDecayStyle s) {
  switch (s) {
    case WsdDecayStyle::kLinear: return "linear";
    case WsdDecayStyle::kCosine: return "cosine";
    case WsdDecayStyle::kExponential: return "exponential";
    case WsdDecayStyle::kMinusSqrt: return "minus_sqrt";
  }
  return "?";
}

const char* to_string(WdIncrStyle s) {
  switch (s) {
    case WdIncrStyle::kConstant: return "constant";
    case WdIncrStyle::kLinear: return "linear";
    case WdIncrStyle::kCosine: return "cosine";
  }
  return "?";
}

// ---- iteration flags -> samples ----

// Megatron: training.py get_optimizer_param_scheduler (--train-iters branch); the weight-decay ends come from
// arguments.py (constant style: start = end = --weight-decay, and start/end must not be given).
SchedulerConfig from_iters(const SchedulerIters& it) {
  LG_INPUT_CHECK(it.train_iters > 0, "scheduler: train_iters must be > 0 (got {})", it.train_iters);
  LG_INPUT_CHECK(it.global_batch_size > 0, "scheduler: global_batch_size must be > 0 (got {})", it.global_batch_size);
  SchedulerConfig c;
  c.init_lr = it.lr_warmup_init;
  c.max_lr = it.lr;
  c.min_lr = it.min_lr;
  const int64_t lr_decay_iters = it.lr_decay_iters.value_or(it.train_iters);
  c.lr_decay_steps = lr_decay_iters * it.global_batch_size;
  c.wd_incr_steps = it.train_iters * it.global_batch_size;
  if (it.lr_wsd_decay_iters) c.wsd_decay_steps = *it.lr_wsd_decay_iters * it.global_batch_size;
  if (it.lr_warmup_fraction) {
    c.lr_warmup_steps = *it.lr_warmup_fraction * static_cast<double>(c.lr_decay_steps);  // a float in Python too
  } else {
    c.lr_warmup_steps = static_cast<double>(it.lr_warmup_iters * it.global_batch_size);
  }
  c.lr_decay_style = it.lr_decay_style;
  c.lr_wsd_decay_style = it.lr_wsd_decay_style;
  c.wd_incr_style = it.weight_decay_incr_style;
  if (it.weight_decay_incr_style == WdIncrStyle::kConstant) {
    LG_INPUT_CHECK(!it.start_weight_decay && !it.end_weight_decay,
                   "scheduler: start/end weight decay need a non-constant weight decay increment style");
    c.start_wd = it.weight_decay;
    c.end_wd = it.weight_decay;
  } else {
    LG_INPUT_CHECK(it.start_weight_decay && it.end_weight_decay,
                   "scheduler: weight decay increment style {} needs start and end weight decay",
                   to_string(it.weight_decay_incr_style));
    c.start_wd = *it.start_weight_decay;
    c.end_wd = *it.end_weight_decay;
  }
  return c;
}

// ---- the scheduler ----

// Megatron: OptimizerParamScheduler.__init__ asserts, each as a one-line InputError. The constant-WD check
// (start == end) is asserted lazily in Megatron's get_wd; here it fails at construction instead.
OptimizerParamScheduler::OptimizerParamScheduler(const SchedulerConfig& c) : config_(c) {
  LG_INPUT_CHECK(c.min_lr >= 0.0, "scheduler: min_lr must be >= 0 (got {})", c.min_lr);
  LG_INPUT_CHECK(c.max_lr >= c.min_lr, "scheduler: max_lr {} must be >= min_lr {}", c.max_lr, c.min_lr);
  LG_INPUT_CHECK(c.init_lr <= c.max_lr, "scheduler: lr_warmup_init {} must be <= max_lr {}", c.init_lr, c.max_lr);
  LG_INPUT_CHECK(c.lr_decay_steps > 0, "scheduler: lr_decay_steps must be > 0 (got {})", c.lr_decay_steps);
  LG_INPUT_CHECK(c.lr_warmup_steps < static_cast<double>(c.lr_decay_steps),
                 "scheduler: lr_warmup_steps {} must be < lr_decay_steps {}", c.lr_warmup_steps, c.lr_decay_steps);
  LG_INPUT_CHECK(c.lr_decay_style != LrDecayStyle::kWSD || c.wsd_decay_steps.has_value(),
                 "scheduler: lr decay style WSD needs wsd_decay_steps (--lr-wsd-decay-iters)");
  LG_INPUT_CHECK(c.start_wd >= 0.0, "scheduler: start weight decay must be >= 0 (got {})", c.start_wd);
  LG_INPUT_CHECK(c.end_wd >= c.start_wd, "scheduler: end weight decay {} must be >= start weight decay {}",
                 c.end_wd, c.start_wd);
  LG_INPUT_CHECK(c.wd_incr_style != WdIncrStyle::kConstant || c.start_wd == c.end_wd,
                 "scheduler: constant weight decay needs start == end (got {} and {})", c.start_wd, c.end_wd);
  step(0);  // Megatron: "Set the learning rate"
}

// Megatron: OptimizerParamScheduler.get_wd.
double OptimizerParamScheduler::get_wd() const {
  const SchedulerConfig& c = config_;
  const double start_wd = c.start_wd;
  const double end_wd = c.end_wd;
  if (num_steps_ > c.wd_incr_steps) return end_wd;
  if (c.wd_incr_style == WdIncrStyle::kConstant) return end_wd;
  const double incr_ratio = static_cast<double>(num_steps_) / static_cast<double>(c.wd_incr_steps);
  LG_CHECK(incr_ratio >= 0.0 && incr_ratio <= 1.0, "weight decay incr_ratio {} outside [0, 1]", incr_ratio);
  const double delta_wd = end_wd - start_wd;
  double coeff = 0.0;
  if (c.wd_incr_style == WdIncrStyle::kLinear) {
    coeff = incr_ratio;
  } else {  // cosine
    coeff = 0.5 * (std::cos(M_PI * (1 - incr_ratio)) + 1.0);
  }
  return start_wd + coeff * delta_wd;
}

// Megatron: OptimizerParamScheduler.get_lr (default param group: max_lr / min_lr from the scheduler).
double OptimizerParamScheduler::get_lr() const {
  const SchedulerConfig& c = config_;
  const double max_lr = c.max_lr;
  const double min_lr = c.min_lr;
  const double num_steps = static_cast<double>(num_steps_);  // exact below 2**53, as Python's int -> float

  // Linear warmup; `<=` makes the end of warmup exactly max_lr, continuous with the decay.
  if (c.lr_warmup_steps > 0 && num_steps <= c.lr_warmup_steps) {
    return c.init_lr + ((max_lr - c.init_lr) * num_steps / c.lr_warmup_steps);
  }
  if (c.lr_decay_style == LrDecayStyle::kConstant) return max_lr;
  if (num_steps_ > c.lr_decay_steps) return min_lr;

  if (c.lr_decay_style == LrDecayStyle::kInverseSquareRoot) {
    // Python's max(a, b) keeps a unless b > a.
    const double warmup_steps = c.lr_warmup_steps > 1 ? c.lr_warmup_steps : 1.0;
    const double steps = num_steps_ > 1 ? num_steps : 1.0;
    const double lr = max_lr * std::pow(warmup_steps, 0.5) / std::pow(steps, 0.5);  // Python `**` calls pow()
    return lr > min_lr ? lr : min_lr;
  }

  const double num_steps_after_warmup = num_steps - c.lr_warmup_steps;
  const double decay_steps = static_cast<double>(c.lr_decay_steps) - c.lr_warmup_steps;
  const double decay_ratio = num_steps_after_warmup / decay_steps;
  LG_CHECK(decay_ratio >= 0.0 && decay_ratio <= 1.0, "lr decay_ratio {} outside [0, 1]", decay_ratio);
  const double delta_lr = max_lr - min_lr;

  double coeff = 0.0;
  switch (c.lr_decay_style) {
    case LrDecayStyle::kLinear:
      coeff = 1.0 - decay_ratio;
      break;
    case LrDecayStyle::kCosine:
      coeff = 0.5 * (std::cos(M_PI * decay_ratio) + 1.0);
      break;
    case LrDecayStyle::kWSD: {
      const int64_t wsd_anneal_start = c.lr_decay_steps - *c.wsd_decay_steps;
      if (num_steps_ <= wsd_anneal_start) {
        coeff = 1.0;
      } else {
        const int64_t wsd_steps = num_steps_ - wsd_anneal_start;
        const double wsd_decay_ratio = static_cast<double>(wsd_steps) / static_cast<double>(*c.wsd_decay_steps);
        switch (c.lr_wsd_decay_style) {
          case WsdDecayStyle::kLinear: coeff = 1.0 - wsd_decay_ratio; break;
          case WsdDecayStyle::kCosine: coeff = 0.5 * (std::cos(M_PI * wsd_decay_ratio) + 1.0); break;
          case WsdDecayStyle::kExponential: coeff = (2.0 * std::pow(0.5, wsd_decay_ratio)) - 1.0; break;
          case WsdDecayStyle::kMinusSqrt: coeff = 1.0 - std::sqrt(wsd_decay_ratio); break;
        }
      }
      break;
    }
    case LrDecayStyle::kConstant:
    case LrDecayStyle::kInverseSquareRoot:
      break;  // handled above
  }
  return min_lr + coeff * delta_lr;
}

// Megatron: OptimizerParamScheduler.step. Megatron writes lr / weight_decay into each param group here; our
// optimizer asks get_lr() / get_wd() when it steps, so only the count moves.
void OptimizerParamScheduler::step(int64_t increment) { num_steps_ += increment; }

}  // namespace loopgate
