// Pipeline schedules (Megatron core/pipeline_parallel/schedules.py, 9.1-9.4): selected once from the layout
// (select_schedule, as get_forward_backward_func), then run as forward_backward(schedule, ...): every
// microbatch's forward and backward, the p2p between stages, then finalize_model_grads.
// The step order of 1F1B is also exposed as data (schedule_1f1b_order) so it can be unit-tested.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

#include "trainer/model/data.h"
#include "trainer/model/gpt.h"
#include "trainer/optim/grad_buffer.h"
#include "trainer/pipeline/finalize.h"

namespace loopgate {

enum class ScheduleKind { kNoPipelining, k1F1B };

// Megatron 9.4's warmup of 1F1B without interleaving: min(pp - stage - 1, M) forwards before the first backward.
int num_warmup_microbatches(int pp, int stage, int num_microbatches);

struct Schedule {
  ScheduleKind kind = ScheduleKind::kNoPipelining;
  // 1F1B's warmup forwards on `stage` (clamped to 0..M; Megatron's interleaved schedule has its own rule). No effect
  // without pipelining.
  int (*num_warmup)(int pp, int stage, int num_microbatches) = num_warmup_microbatches;
  const char* name() const { return kind == ScheduleKind::k1F1B ? "1f1b" : "no-pipelining"; }
};

// pp == 1 -> forward_backward_no_pipelining; pp > 1 -> 1F1B without interleaving.
Schedule select_schedule(const Layout& layout);

struct ScheduleStep {
  char op = 'F';       // 'F' forward, 'B' backward
  int microbatch = 0;
  bool operator==(const ScheduleStep& o) const { return op == o.op && microbatch == o.microbatch; }
};
std::string to_string(const std::vector<ScheduleStep>& steps);  // "F0 F1 B0 F2 B1 ..."

// The order one stage runs its steps in (Megatron 9.4): warmup = min(pp - stage - 1, M) forwards, then
// M - warmup (forward, backward) pairs, then warmup backwards.
std::vector<ScheduleStep> schedule_1f1b_order(int pp, int stage, int num_microbatches);
std::vector<ScheduleStep> schedule_no_pipelining_order(int num_microbatches);  // F0 B0 F1 B1 ...

// What the training loop plugs in. Every member is optional.
struct ScheduleHooks {
  // Last stage, right after microbatch `mb`'s loss: report = [sum of token losses, token count] fp32 (the
  // loop's per-microbatch NaN check site).
  std::function<void(int mb, const at::Tensor& report)> on_microbatch_loss;
  // Grad scaler (Megatron grad_scale_func), applied to the last stage's loss before backward; identity if empty.
  std::function<at::Tensor(const at::Tensor& loss)> scale_loss;
  std::function<void(int mb)> on_forward_start;
  std::function<void(int mb)> on_backward_start;
  FinalizeOptions finalize;
};

struct ForwardBackwardResult {
  std::vector<at::Tensor> loss_reports;  // last stage: one [2] fp32 per microbatch; empty elsewhere
  std::vector<ScheduleStep> executed;    // the steps this stage ran, in order
};

// One step's forward and backward over every microbatch of `batch`, then finalize_model_grads. `grads` must be
// built from stage.params and zeroed by the caller (Megatron zero_grad_buffer runs in train_step).
// Per microbatch the backward objective is token_sum / token_count / num_microbatches (Megatron 9.2), so after
// the DP average the grads are those of the token mean over the global batch.
ForwardBackwardResult forward_backward(const Schedule& schedule, GptStage& stage, GradBuffer& grads,
                                       const Batch& batch, const ScheduleHooks& hooks = {});

}  // namespace loopgate
