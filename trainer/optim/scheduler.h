// OptimizerParamScheduler: Megatron's learning-rate and weight-decay schedule, ported line for line
// (megatron/core/optimizer_param_scheduler.py get_lr / get_wd / step). Host doubles only: the LR and WD are
// pure functions of a host step count, so this file never touches a tensor. Steps are counted in SAMPLES,
// as Megatron does; from_iters() converts iteration flags the way training.py get_optimizer_param_scheduler
// does. Arithmetic keeps Python's operation order so every value equals the Python float bit for bit.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace loopgate {

// ---- styles (Megatron's --lr-decay-style, --lr-wsd-decay-style, --weight-decay-incr-style) ----
enum class LrDecayStyle { kConstant, kLinear, kCosine, kInverseSquareRoot, kWSD };
enum class WsdDecayStyle { kLinear, kCosine, kExponential, kMinusSqrt };
enum class WdIncrStyle { kConstant, kLinear, kCosine };

// Megatron's flag spellings: "constant", "linear", "cosine", "inverse-square-root", "WSD". InputError otherwise.
LrDecayStyle parse_decay_style(const std::string& s);
// "linear", "cosine", "exponential", "minus_sqrt".
WsdDecayStyle parse_wsd_decay_style(const std::string& s);
// "constant", "linear", "cosine".
WdIncrStyle parse_wd_incr_style(const std::string& s);
const char* to_string(LrDecayStyle s);
const char* to_string(WsdDecayStyle s);
const char* to_string(WdIncrStyle s);

// The constructor arguments of OptimizerParamScheduler, in samples.
struct SchedulerConfig {
  double init_lr = 0.0;  // --lr-warmup-init
  double max_lr = 0.0;   // --lr
  double min_lr = 0.0;   // --min-lr
  // A double because Megatron's lr_warmup_steps is a float when --lr-warmup-fraction is given.
  double lr_warmup_steps = 0.0;
  int64_t lr_decay_steps = 0;
  LrDecayStyle lr_decay_style = LrDecayStyle::kLinear;
  std::optional<int64_t> wsd_decay_steps;  // required by WSD (Megatron asserts it is not None)
  WsdDecayStyle lr_wsd_decay_style = WsdDecayStyle::kExponential;
  double start_wd = 0.01;
  double end_wd = 0.01;
  int64_t wd_incr_steps = 0;
  WdIncrStyle wd_incr_style = WdIncrStyle::kConstant;
};

// Iteration-based flags (--train-iters path of training.py get_optimizer_param_scheduler, and
// arguments.py for the weight-decay start/end defaults).
struct SchedulerIters {
  double lr = 0.0;
  double min_lr = 0.0;
  double lr_warmup_init = 0.0;
  int64_t train_iters = 0;
  std::optional<int64_t> lr_decay_iters;      // defaults to train_iters
  int64_t lr_warmup_iters = 0;
  std::optional<double> lr_warmup_fraction;   // wins over lr_warmup_iters when given
  std::optional<int64_t> lr_wsd_decay_iters;
  LrDecayStyle lr_decay_style = LrDecayStyle::kLinear;
  WsdDecayStyle lr_wsd_decay_style = WsdDecayStyle::kExponential;
  double weight_decay = 0.01;                 // used for both ends when the style is constant
  std::optional<double> start_weight_decay;   // required (and only allowed) for linear/cosine
  std::optional<double> end_weight_decay;
  WdIncrStyle weight_decay_incr_style = WdIncrStyle::kConstant;
  int64_t global_batch_size = 1;
};

// Megatron: training.py get_optimizer_param_scheduler (steps = iters * global_batch_size).
SchedulerConfig from_iters(const SchedulerIters& it);

class OptimizerParamScheduler {
 public:
  // Validates as Megatron's constructor asserts (InputError, one line), then step(0).
  explicit OptimizerParamScheduler(const SchedulerConfig& config);

  // LR and WD of the default param group (no max_lr/min_lr/start_wd/end_wd overrides) at num_steps().
  // The optimizer applies each group's wd_mult itself, as step() does in Megatron.
  double get_lr() const;
  double get_wd() const;
  // Megatron calls this only after a successful update, with increment = num_microbatches *
  // micro_batch_size * data_parallel_size (samples in the global batch).
  void step(int64_t increment);
  int64_t num_steps() const { return num_steps_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  SchedulerConfig config_;
  int64_t num_steps_ = 0;
};

}  // namespace loopgate
