// forward_step / backward_step (one microbatch each), the p2p helpers, then the two schedules.
// Megatron: schedules.py forward_step, backward_step, forward_backward_no_pipelining,
// forward_backward_pipelining_without_interleaving; p2p_communication.py.
#include "trainer/pipeline/schedules.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <deque>

#include "trainer/common/error.h"

namespace loopgate {

// ---- selection and step order ----

Schedule select_schedule(const Layout& layout) {
  return Schedule{layout.pp() > 1 ? ScheduleKind::k1F1B : ScheduleKind::kNoPipelining};
}

std::string to_string(const std::vector<ScheduleStep>& steps) {
  std::string s;
  for (const ScheduleStep& st : steps) {
    if (!s.empty()) s += ' ';
    s += st.op;
    s += std::to_string(st.microbatch);
  }
  return s;
}

int num_warmup_microbatches(int pp, int stage, int m) { return std::min(pp - stage - 1, m); }

std::vector<ScheduleStep> schedule_1f1b_order(int pp, int stage, int m) {
  const int warmup = num_warmup_microbatches(pp, stage, m);
  std::vector<ScheduleStep> order;
  int f = 0, b = 0;
  for (int i = 0; i < warmup; ++i) order.push_back({'F', f++});
  for (int i = 0; i < m - warmup; ++i) {
    order.push_back({'F', f++});
    order.push_back({'B', b++});
  }
  for (int i = 0; i < warmup; ++i) order.push_back({'B', b++});
  return order;
}

std::vector<ScheduleStep> schedule_no_pipelining_order(int m) {
  std::vector<ScheduleStep> order;
  for (int i = 0; i < m; ++i) {
    order.push_back({'F', i});
    order.push_back({'B', i});
  }
  return order;
}

namespace {

// ---- one microbatch: forward_step / backward_step ----

struct Run {
  const Schedule& schedule;
  GptStage& st;
  GradBuffer& grads;
  const Batch& batch;
  const ScheduleHooks& hooks;
  int num_microbatches;
  ForwardBackwardResult result;
};

// input: undefined on the first stage (tokens come from the batch), else the received activation.
// Returns the activation to send, or on the last stage the loss to backpropagate (a scalar).
at::Tensor forward_step(Run& r, int mb, const at::Tensor& input) {
  if (r.hooks.on_forward_start) r.hooks.on_forward_start(mb);
  r.result.executed.push_back({'F', mb});
  const Microbatch& data = r.batch.microbatches.at(mb);
  at::Tensor out = gpt_forward(r.st, r.st.is_first_stage() ? data.tokens : input, data.labels);
  if (!r.st.is_last_stage()) return out;
  // pretrain_gpt.py loss_func: loss mask all ones; report = [sum of token losses, token count].
  at::Tensor loss_mask = at::ones_like(out);
  at::Tensor loss_sum = (out * loss_mask).sum();
  at::Tensor num_tokens = loss_mask.sum();
  at::Tensor report = at::cat({loss_sum.detach().view({1}), num_tokens.view({1})}).to(at::kFloat);
  r.result.loss_reports.push_back(report);
  if (r.hooks.on_microbatch_loss) r.hooks.on_microbatch_loss(mb, report);
  // schedules.py forward_step_calc_loss (calculate_per_token_loss=False).
  return loss_sum / num_tokens.clamp_min(1.0) / r.num_microbatches;
}

// Returns the grad of the stage's input (undefined on the first stage).
at::Tensor backward_step(Run& r, int mb, const at::Tensor& input, const at::Tensor& output,
                         const at::Tensor& output_grad) {
  if (r.hooks.on_backward_start) r.hooks.on_backward_start(mb);
  r.result.executed.push_back({'B', mb});
  // Megatron leaves no_sync only for the step's last backward, so the bucket all-reduces fire once.
  r.grads.set_grad_sync(mb == r.num_microbatches - 1);
  if (r.st.is_last_stage()) {
    at::Tensor loss = r.hooks.scale_loss ? r.hooks.scale_loss(output) : output;
    torch::autograd::backward({loss});
  } else {
    torch::autograd::backward({output}, {output_grad});
  }
  return input.defined() ? input.grad() : at::Tensor();
}

// ---- p2p between neighbouring stages (p2p_communication.py); pp group rank == stage ----

at::Tensor activation_buffer(const Run& r) {
  return at::empty(gpt_activation_shape(r.st, static_cast<int>(r.batch.microbatches.at(0).tokens.size(1))),
                   at::TensorOptions().dtype(r.st.cfg.dtype).device(r.st.cfg.device));
}

at::Tensor recv_forward(Run& r) {
  if (r.st.is_first_stage()) return at::Tensor();
  at::Tensor t = activation_buffer(r);
  r.st.groups.pp->recv(t, r.st.coord.pp - 1);
  t.set_requires_grad(true);
  return t;
}

void send_forward(Run& r, const at::Tensor& out) {
  if (r.st.is_last_stage()) return;
  r.st.groups.pp->send(out.detach().contiguous(), r.st.coord.pp + 1);
}

at::Tensor recv_backward(Run& r) {
  if (r.st.is_last_stage()) return at::Tensor();
  at::Tensor g = activation_buffer(r);
  r.st.groups.pp->recv(g, r.st.coord.pp + 1);
  return g;
}

void send_backward(Run& r, const at::Tensor& input_grad) {
  if (r.st.is_first_stage()) return;
  r.st.groups.pp->send(input_grad.contiguous(), r.st.coord.pp - 1);
}

at::Tensor send_forward_recv_backward(Run& r, const at::Tensor& out) {
  if (r.st.is_last_stage()) return at::Tensor();
  at::Tensor g = activation_buffer(r);
  r.st.groups.pp->send_recv(out.detach().contiguous(), r.st.coord.pp + 1, g, r.st.coord.pp + 1);
  return g;
}

at::Tensor send_backward_recv_forward(Run& r, const at::Tensor& input_grad) {
  if (r.st.is_first_stage()) return at::Tensor();
  at::Tensor t = activation_buffer(r);
  r.st.groups.pp->send_recv(input_grad.contiguous(), r.st.coord.pp - 1, t, r.st.coord.pp - 1);
  t.set_requires_grad(true);
  return t;
}

// ---- the schedules ----

void forward_backward_no_pipelining(Run& r) {
  for (int mb = 0; mb < r.num_microbatches; ++mb) {
    at::Tensor out = forward_step(r, mb, at::Tensor());
    backward_step(r, mb, at::Tensor(), out, at::Tensor());
  }
}

void forward_backward_pipelining_without_interleaving(Run& r) {
  const int pp = r.st.layout.pp(), stage = r.st.coord.pp, m = r.num_microbatches;
  const int num_warmup = std::clamp(r.schedule.num_warmup(pp, stage, m), 0, m);
  const int num_remaining = m - num_warmup;
  std::deque<std::pair<at::Tensor, at::Tensor>> in_flight;  // (input, output) awaiting backward
  int next_f = 0, next_b = 0;

  for (int i = 0; i < num_warmup; ++i) {  // warmup: forward only
    at::Tensor input = recv_forward(r);
    at::Tensor output = forward_step(r, next_f++, input);
    send_forward(r, output);
    in_flight.emplace_back(input, output);
  }
  at::Tensor input = num_remaining > 0 ? recv_forward(r) : at::Tensor();
  for (int i = 0; i < num_remaining; ++i) {  // steady state: one forward, one backward
    const bool last_iteration = i == num_remaining - 1;
    at::Tensor output = forward_step(r, next_f++, input);
    at::Tensor output_grad = send_forward_recv_backward(r, output);
    in_flight.emplace_back(input, output);
    auto [oldest_in, oldest_out] = in_flight.front();
    in_flight.pop_front();
    at::Tensor input_grad = backward_step(r, next_b++, oldest_in, oldest_out, output_grad);
    if (last_iteration) {
      input = at::Tensor();
      send_backward(r, input_grad);
    } else {
      input = send_backward_recv_forward(r, input_grad);
    }
  }
  for (int i = 0; i < num_warmup; ++i) {  // cooldown: backward only
    auto [oldest_in, oldest_out] = in_flight.front();
    in_flight.pop_front();
    at::Tensor output_grad = recv_backward(r);
    at::Tensor input_grad = backward_step(r, next_b++, oldest_in, oldest_out, output_grad);
    send_backward(r, input_grad);
  }
}

}  // namespace

ForwardBackwardResult forward_backward(const Schedule& schedule, GptStage& stage, GradBuffer& grads,
                                       const Batch& batch, const ScheduleHooks& hooks) {
  Run r{schedule, stage, grads, batch, hooks, static_cast<int>(batch.microbatches.size()), {}};
  LG_CHECK(r.num_microbatches >= 1, "forward_backward: empty batch");
  grads.set_grad_sync(false);  // Megatron no_sync for all but the last backward
  if (schedule.kind == ScheduleKind::k1F1B) {
    forward_backward_pipelining_without_interleaving(r);
  } else {
    LG_CHECK(stage.layout.pp() == 1, "no-pipelining schedule on a layout with pp={}", stage.layout.pp());
    forward_backward_no_pipelining(r);
  }
  grads.set_grad_sync(true);
  finalize_model_grads(stage, grads, hooks.finalize);
  return std::move(r.result);
}

}  // namespace loopgate
