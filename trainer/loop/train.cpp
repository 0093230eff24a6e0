// The training loop under test. `train` reads top to bottom like Megatron's train(): for each iteration,
// train_step, then training_log, then the exit decision. Every place the host may wait on the device goes
// through the arm's loop protocol (protocol.h), chosen once per arm segment; no host read happens here except
// through the Ledger. The numerics path (forward/backward, grad reductions, optimizer) is the same code for every
// arm; the protocols use their own tensors and collectives.
#include "trainer/loop/train.h"

#include <ATen/ATen.h>

#include <array>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <random>

#include "trainer/common/device.h"
#include "trainer/common/error.h"
#include "trainer/capture/capture.h"
#if LOOPGATE_HAS_CUDA
#include "trainer/timers/device_cuda.h"
#endif
#include "trainer/measure/ledger.h"
#include "trainer/measure/op_counter.h"
#include "trainer/timers/timers.h"
#include "trainer/loop/digest_taps.h"
#include "trainer/loop/mutation.h"
#include "trainer/measure/async_copy.h"
#include "trainer/loop/protocol.h"
#include "trainer/model/gpt.h"
#include "trainer/optim/clip_grads.h"
#include "trainer/optim/grad_buffer.h"
#include "trainer/parallel/checked_comm.h"
#include "trainer/parallel/recorded_comm.h"
#include "trainer/pipeline/schedules.h"

namespace loopgate {
namespace {

// The run's groups: stressed innermost (--stress on a GPU), checked, digested, recorded outside (the fingerprints
// are the check's, not the loop's).
ProcessGroups run_groups(const RunConfig& c, const ProcessGroups& g, const std::shared_ptr<CollectiveLog>& log,
                         const std::shared_ptr<DigestLog>& digests, int rank) {
  ProcessGroups out = g;
#if LOOPGATE_HAS_CUDA
  if (c.stress.on && c.model.device.is_cuda()) {  // each collective behind a seeded, rank-asymmetric delay
    const uint64_t seed = c.stress.seed * 1000003ULL + static_cast<uint64_t>(rank) * 7919ULL;
    out = {stressed_comm(out.world, seed), stressed_comm(out.tp, seed + 1), stressed_comm(out.dp, seed + 2),
           stressed_comm(out.pp, seed + 3), stressed_comm(out.mp, seed + 4)};
  }
#else
  (void)rank;
#endif
  if (c.check_collectives) out = checked_groups(out);
  if (digests) out = digested_groups(out, digests);
  return log ? recorded_groups(out, log) : out;
}

struct StepOutcome {
  at::Tensor loss;  // [1] token-weighted lm loss of the global batch (last stage; undefined elsewhere)
  OptimizerStepResult step;
  bool skipped = false;
  Decision decision;
  std::optional<LogInputs> inputs;  // training_log's inputs, computed once (onesync reads them with the step)
};

// A replayed log point whose read was issued but not yet landed: its record, step and inputs wait for the next
// iteration's replay to be launched (log_read_trails), so the device does not idle while the host makes the line.
struct TrailingLogPoint {
  IterationRecord rec;
  StepOutcome step;
  LogInputs in;
};

// ---- state of one run on one rank ----
struct Loop {
  const RunConfig& cfg;
  const Arm* arm;  // the arm of the current segment (TrainSession::run may change it between segments)
  std::shared_ptr<CollectiveLog> collectives;  // record_collectives: what the groups carried, per iteration
  std::shared_ptr<DigestLog> digests;          // --digests: every boundary's digest (digests.h)
  std::vector<std::array<DigestLog::NameId, 3>> digest_names;  // per parameter, filled by digest_param_names
  ProcessGroups groups;  // the run's groups: recorded (record_collectives), checked (check_collectives)
  int rank;
  Layout layout;
  GptStage stage;
  std::unique_ptr<GradBuffer> buffer;
  std::unique_ptr<Adam> adam;
  GradScalerPtr scaler;
  std::unique_ptr<OptimizerParamScheduler> scheduler;
  RerunStateMachine rerun;
  Ledger ledger;
  std::unique_ptr<LoopProtocol> protocol;  // the arm's loop protocol; rebuilt when the arm changes
  std::unique_ptr<ModuleTap> tap;          // the stage's module tap: digests or a mutation's module change
  std::unique_ptr<Upload> upload;          // the batch's host-to-device copies (async_copy.h)
  Schedule schedule;
  std::unique_ptr<CaptureSession> capture;  // the capture probe (RunConfig::capture), GPU only
  std::unique_ptr<IterationGraph> graph;    // --cuda-graph iteration (RunConfig::cuda_graph_iteration)
  bool in_graph = false;                    // inside the graph's body: timers cut it, no checksum reads
  Batch static_batch;                       // the graph's batch buffers, refilled before each replay
  std::string graph_schedule;               // the captured iteration's executed schedule (the Trace's)
  LogInputs graph_inputs;  // the captured iteration's log inputs: tensors every replay rewrites in place
  std::optional<TrailingLogPoint> trailing;  // a log point whose read trails the next replay (log_read_trails)
  int num_micro = 0;
  int64_t consumed_samples = 0;
  int64_t next_iteration = 0;  // 0-based: iterations done so far
  int64_t arm_since = 0;       // 0-based: the first iteration of the current arm's segment
  bool ended = false;          // abort, exit vote, or a capture probe that stopped the run
  RunResult result;

  Loop(const RunConfig& c, const Arm& a, ProcessGroups& g, int r)
      : cfg(c), arm(&a), collectives(c.record_collectives ? std::make_shared<CollectiveLog>() : nullptr),
        digests(c.digests ? std::make_shared<DigestLog>() : nullptr), groups(run_groups(c, g, collectives, digests, r)),
        rank(r),
        layout(Layout::build(groups.world->size(), c.layout)), stage(gpt_build(c.model, layout, r, groups)),
        rerun(c.rerun), protocol(select_protocol(a, c, ledger, groups, r)), schedule(select_schedule(layout)) {}
};

MainGrads main_grads(Loop& L) {
  MainGrads grads{L.buffer->data(), {}};
  for (size_t i = 0; i < L.stage.params.size(); ++i) grads.views.push_back(L.buffer->param_grad(static_cast<int>(i)));
  return grads;
}

// Only when asked (RunConfig::param_checksums: a Trace or a gate): on a GPU each one is a device-to-host copy.
uint64_t params_checksum(Loop& L) {
  if (!L.cfg.param_checksums || L.in_graph) return 0;  // a graph's are taken around its replay (graph_step)
  std::vector<at::Tensor> values;
  for (const Param& p : L.stage.params) values.push_back(p.value);
  return L.ledger.checksum(values);  // a diagnostic read of the Trace, not a loop site
}

// Megatron's get_batch: the host batch, then one pinned, non-blocking copy per tensor — no host sync. (A plain
// .to(cuda) from pageable memory is a copy plus a stream synchronize: 8 unledgered syncs per iteration, caught by
// CUPTI.)
Batch get_batch(Loop& L, int64_t iteration) {
  Batch b = make_host_batch(L.cfg.model, L.cfg.data, L.layout, L.rank, iteration);
  for (Microbatch& m : b.microbatches) {
    m.tokens = L.upload->copy(m.tokens);
    m.labels = L.upload->copy(m.labels);
  }
  return b;
}

// ---- the grad-ready and loss hooks: fault injection, then the NaN check site ----
ScheduleHooks make_hooks(Loop& L, int64_t iteration) {
  ScheduleHooks hooks;
  hooks.on_microbatch_loss = [&L, iteration](int mb, const at::Tensor& report) {
    at::Tensor r = report;  // poisoned in place: the reported loss is what Megatron validates
    if (L.cfg.faults) L.cfg.faults->at_loss(iteration, mb, L.rank, r);
    L.protocol->nan_check(L.rerun, Site::kNanCheckLoss, r.select(0, 0));
  };
  if (L.digests) {  // the module boundaries' records learn their microbatch and direction
    hooks.on_forward_start = [&L](int mb) { L.digests->set_phase(DigestPhase::kForward, mb); };
    hooks.on_backward_start = [&L](int mb) { L.digests->set_phase(DigestPhase::kBackward, mb); };
  }
  L.buffer->before_bucket_ready = [&L, iteration](int bucket, at::Tensor& grads) {
    if (L.cfg.faults) L.cfg.faults->at_bucket(iteration, bucket, L.rank, grads);
  };
  L.buffer->on_bucket_ready = [&L](int, at::Tensor& grads) {
    // Megatron check_grads: the bucket's local (pre-DP) grad norm must be finite.
    ScopedSite scope(site_name(Site::kNanCheckGrad));
    L.protocol->nan_check(L.rerun, Site::kNanCheckGrad, grads.norm());
  };
  // Megatron config.grad_scale_func = optimizer.scale_loss: loss * get_loss_scale() before backward. Without a
  // scaler that scale is 1.0, so it is left out (no kernel).
  if (L.scaler) {
    hooks.scale_loss = [&L](const at::Tensor& loss) { return (loss * L.scaler->scale()).reshape(loss.sizes()); };
  }
  return hooks;
}

// The scheduler's samples per successful step (Megatron: num_microbatches * micro_batch_size * dp).
int64_t scheduler_increment(const Loop& L) { return int64_t{L.num_micro} * L.cfg.data.micro_batch * L.layout.dp(); }

// zerosync: the LR the step uses after k successful steps, k = 0..train_iters, from the port itself (so the logged
// LR keeps its bits, skipped steps included); the device indexes it with its own step count.
std::vector<double> lr_table(const Loop& L) {
  LG_INPUT_CHECK(L.scheduler->config().wd_incr_style == WdIncrStyle::kConstant,
                 "zerosync needs a constant weight decay: the device holds no weight-decay schedule");
  OptimizerParamScheduler s(L.scheduler->config());  // from step 0: the device indexes by its total step count
  std::vector<double> table;
  for (int64_t k = 0; k <= L.cfg.train_iters; ++k) {
    table.push_back(static_cast<float>(L.arm->mutated().step_lr(s.get_lr())));  // the float the step multiplies by
    s.step(scheduler_increment(L));
  }
  return table;
}

// A segment of the current arm begins: the arm's mutation sees the schedule and the masked write (none: Megatron's),
// its protocol the LR table and the steps so far (zerosync's).
void begin_segment(Loop& L) {
  // The model is tapped only while digests are taken or the arm changes a module: a tap costs host time per module.
  const bool tapped = (L.digests && L.digests->enabled()) || L.arm->mutated().changes_modules();
  if (tapped && !L.tap) L.tap = make_loop_tap(&L.arm, L.digests.get());
  L.stage.tap = tapped ? L.tap.get() : nullptr;
  L.schedule = select_schedule(L.layout);
  L.arm->mutated().schedule(L.schedule);
  L.adam->set_masked_write(L.arm->mutated().masked_write());
  L.protocol->begin_segment([&L] { return lr_table(L); }, L.scheduler->num_steps() / scheduler_increment(L),
                            L.next_iteration);
}

// The level-1 timers record events on the stream. Inside a graph's body they are the graph's cut actions
// (capture.h): run between the captured stretches of work at every replay, not captured once and never re-armed.
void timer_action(Loop& L, std::function<void()> action) {
  if (!L.in_graph) return action();
  L.graph->cut(L.arm->mutated().graph_timer_action(std::move(action)));
}
void timer_start(Loop& L, const char* name) {
  timer_action(L, [&L, name] { L.protocol->timers().start(name); });
}
void timer_stop(Loop& L, const char* name) {
  timer_action(L, [&L, name] { L.protocol->timers().stop(name); });
}

// Builds the optimizer side of the run: grad buffer, Adam, grad scaler, LR schedule (Megatron setup_model_and_optimizer).
void setup(Loop& L) {
  const RunConfig& cfg = L.cfg;
  if (cfg.cuda_graph_iteration) {  // first, as the probe: the graph's stream before the grad buffer's hooks exist
    LG_INPUT_CHECK(!cfg.capture.enabled(), "--cuda-graph iteration and --capture-probe: one at a time");
    L.graph = make_iteration_graph(cfg.model.device.is_cuda());
  }
  if (cfg.capture.enabled()) {  // first: the run moves to the probe's stream before the grad buffer's hooks exist
    LG_INPUT_CHECK(cfg.model.device.is_cuda(), "the capture probe needs --device cuda (CUDA graphs)");
    LG_INPUT_CHECK(cfg.capture.iteration <= cfg.train_iters, "capture probe iteration {} is past --train-iters {}",
                   cfg.capture.iteration, cfg.train_iters);
    L.capture = make_capture_session();
    LG_INPUT_CHECK(L.capture != nullptr, "the capture probe: this loopgate was built without the GPU tier");
  }
  LG_INPUT_CHECK(!(cfg.digests && cfg.cuda_graph_iteration),
                 "--digests with --cuda-graph iteration: a replayed iteration runs no host code to digest it");
  L.upload = L.arm->mutated().batch_upload(
      make_upload(L.ledger, cfg.model.device, cfg.async_emulation, cfg.stress, L.rank));
  L.num_micro = num_microbatches(cfg.data, L.layout);
  GradBufferConfig bcfg;
  if (cfg.bucket_size > 0) bcfg.bucket_size = cfg.bucket_size;
  L.buffer = std::make_unique<GradBuffer>(L.stage.params, L.arm->mutated().grad_sync_group(L.groups.dp), bcfg);
  L.adam = std::make_unique<Adam>(L.stage.params, AdamConfig{}, L.stage.coord.tp, L.stage.is_first_stage(),
                                  main_grads(L).offsets());  // laid out as the grad buffer
  if (cfg.dynamic_loss_scale) {
    L.scaler = std::make_unique<DynamicGradScaler>(cfg.dynamic_scaler, run_device());
  } else if (cfg.loss_scale > 0) {
    L.scaler = std::make_unique<ConstantGradScaler>(cfg.loss_scale, run_device());
  }
  SchedulerIters si = cfg.schedule;
  si.train_iters = cfg.train_iters;
  si.global_batch_size = cfg.data.global_batch;
  si.weight_decay = cfg.weight_decay;
  L.scheduler = std::make_unique<OptimizerParamScheduler>(from_iters(si));

  begin_segment(L);
  L.result.trace.arm = L.arm->name;
  L.result.trace.fixture = cfg.fixture;
  L.result.trace.world = L.groups.world->size();
}

LogInputs log_inputs(Loop& L, const StepOutcome& s, bool log_point);

// Thrown out of train_step when a probed region could not be captured on some rank: the run stops there.
struct CaptureStopped {};

// Runs `body`; under the CUDA-graph capture probe when RunConfig::capture names this region and iteration.
// Every rank must capture before any replays (the graphs hold NCCL kernels that need every peer).
template <class Body>
void region(Loop& L, int64_t iteration, const char* name, Body&& body) {
  const CaptureSpec& spec = L.cfg.capture;
  if (!L.capture || spec.region != name || spec.iteration != iteration + 1) {
    body();
    return;
  }
  CaptureVerdict& v = L.result.capture;
  v.attempted = true;
  v.region = name;
  v.iteration = iteration + 1;
  const size_t before = L.ledger.records().size();
  L.capture->begin();
  try {
    body();
    L.capture->end();
    v.captured = true;
  } catch (const std::exception& e) {
    L.capture->abandon();
    const std::string what = e.what();
    v.error = what.substr(0, what.find('\n'));
  }
  const std::vector<ReadRecord>& reads = L.ledger.records();
  v.reads_in_region = static_cast<int64_t>(reads.size() - before);
  if (reads.size() > before) v.site = site_name(reads[before].site);
  if (!every_rank(v.captured)) throw CaptureStopped{};  // a graph captured here is simply never replayed
  L.capture->replay();
  v.replayed = true;
}

// A rerun decision that is not "proceed", in the Trace.
void note_verdict(IterationRecord& rec, int64_t iteration, VerdictPhase phase, const Decision& d) {
  rec.fault_verdicts.push_back({iteration + 1, phase, action_name(d.action)});
}

// optimizer.step at the scheduler's LR (or the one the protocol hands it), masked by the gate where it has a mask.
OptimizerStepResult step_optimizer(Loop& L, int64_t iteration, const StepGate& gate) {
  MainGrads grads = main_grads(L);
  double lr = L.scheduler->get_lr();
  lr = L.arm->mutated().step_lr(lr);
  if (gate.host_lr) lr = *gate.host_lr;
  OptimizerStepResult r;
  region(L, iteration, "optimizer", [&] {
    r = optimizer_step(*L.adam, L.scaler.get(), grads, L.stage.params, *L.groups.mp, L.cfg.optim, lr,
                       L.scheduler->get_wd(), gate.mask.defined() ? &gate.mask : nullptr, gate.device_lr,
                       L.arm->mutated().found_inf_reduction(L.groups));
  });
  return r;
}

// The last stage's lm loss: [sum, count] summed over microbatches, all-reduced over DP (undefined elsewhere).
at::Tensor reduce_loss(Loop& L, const ForwardBackwardResult& fb) {
  if (fb.loss_reports.empty()) return {};
  at::Tensor val = at::stack(fb.loss_reports).sum(0);
  L.groups.dp->all_reduce(val);
  return (val[0] / val[1]).reshape({1});
}

// ---- --digests outside the model: the grads, the step, the loss (digests.h) ----

// Parameter i's record names: the parameter's, then its two Adam moments' (interned at the first call, digests.h).
const std::array<DigestLog::NameId, 3>& digest_param_names(Loop& L, size_t i) {
  for (size_t k = L.digest_names.size(); k < L.stage.params.size(); ++k) {
    const std::string& name = L.stage.params[k].name;
    L.digest_names.push_back(
        {L.digests->name_id(name), L.digests->name_id(name + ".exp_avg"), L.digests->name_id(name + ".exp_avg_sq")});
  }
  return L.digest_names.at(i);
}

// After the backward: every parameter's grad as reduced, the clip's input. Hashed now: the clip scales them in place.
void digest_reduced_grads(Loop& L) {
  if (!L.digests || L.in_graph) return;
  for (size_t i = 0; i < L.stage.params.size(); ++i) {
    const DigestLog::NameId name = digest_param_names(L, i)[0];
    const at::Tensor g = L.buffer->param_grad(static_cast<int>(i));
    L.digests->set_phase(DigestPhase::kGradReduction);
    L.digests->add(name, "output", g);
    L.digests->set_phase(DigestPhase::kClip);
    L.digests->add(name, "input", g);
  }
  L.digests->flush();
}

// After the step: the clipped grads (the clip's output, the optimizer's input), the grad norm, the main params and
// Adam's moments; then the reduced loss.
void digest_step(Loop& L, const StepOutcome& out) {
  if (!L.digests || L.in_graph) return;
  if (out.step.grad_norm.defined()) {
    L.digests->set_phase(DigestPhase::kClip);
    L.digests->add("grad_norm", "output", out.step.grad_norm);
    for (size_t i = 0; i < L.adam->size(); ++i) {
      const auto& names = digest_param_names(L, i);
      const at::Tensor g = L.buffer->param_grad(static_cast<int>(i));
      L.digests->set_phase(DigestPhase::kClip);
      L.digests->add(names[0], "output", g);
      L.digests->set_phase(DigestPhase::kOptimizer);
      L.digests->add(names[0], "input", g);
      L.digests->add(names[0], "output", L.adam->main_params()[i]);
      L.digests->add(names[1], "output", L.adam->exp_avg()[i]);
      L.digests->add(names[2], "output", L.adam->exp_avg_sq()[i]);
    }
  }
  L.digests->set_phase(DigestPhase::kLog);
  if (out.loss.defined()) L.digests->add("lm_loss", "output", out.loss);
  L.digests->flush();
}

// The run's digests, read once after the last iteration, into this rank's records.
void attach_digests(Loop& L) {
  if (!L.digests) return;
  ScopedSite site("diagnostic_digests");  // a read outside every iteration, named apart for CUPTI
  std::map<int64_t, std::vector<DigestRecord>> by_iteration;
  for (DigestRecord& d : L.digests->collect()) by_iteration[d.iteration].push_back(std::move(d));
  const Coord& c = L.stage.coord;
  for (IterationRecord& r : L.result.trace.records) {
    r.digests = by_iteration[r.iteration];
    r.coord = fmt::format("tp {}, pp {}, dp {}", c.tp, c.pp, c.dp);
  }
}

// ---- train_step: Megatron training.py train_step, in its order ----
// `staged`: the graph's static batch (graph_step); null: this iteration's batch is made here.
StepOutcome train_step(Loop& L, int64_t iteration, bool log_point, IterationRecord& rec, const Batch* staged) {
  StepOutcome out;
  L.ledger.begin_iteration(iteration);
  ScopedSite numerics("numerics");  // work outside any site: the numerics path, the same in every arm
  L.rerun.begin_iteration(iteration);

  // ==== TRAINING SECTION: the numerics path, identical for every arm ====
  timer_start(L, "forward-backward");
  const Batch batch = staged ? *staged : get_batch(L, iteration);
  ForwardBackwardResult fb;
  region(L, iteration, "forward_backward", [&] {
    L.buffer->zero();
    fb = forward_backward(L.schedule, L.stage, *L.buffer, batch, make_hooks(L, iteration));
  });
  timer_stop(L, "forward-backward");
  digest_reduced_grads(L);

  // The rerun decision (should_run_forward_backward at loop exit) comes before optimizer.step: the host reads it,
  // or the device keeps it as the step's mask.
  const StepGate gate = L.protocol->before_step(L.rerun, iteration, log_point);
  rec.param_checksum_before = params_checksum(L);
  out.decision = gate.decision;
  if (!out.decision.proceed()) {
    note_verdict(rec, iteration, VerdictPhase::kBeforeStep, out.decision);
    rec.param_checksum_after = rec.param_checksum_before;
    out.skipped = true;
    if (out.decision.action == Decision::Action::kAbort) return out;
  }
  timer_start(L, "optimizer");
  if (!out.skipped) out.step = step_optimizer(L, iteration, gate);
  timer_stop(L, "optimizer");
  rec.param_checksum_after = params_checksum(L);
  out.loss = reduce_loss(L, fb);
  digest_step(L, out);
  rec.schedule = to_string(fb.executed);
  // ==== end of the numerics path ====

  // update_successful over TP x PP; the LR schedule then advances (by the global batch) on success only.
  StepDone done{iteration, log_point, L.scaler != nullptr, out.skipped, out.step.update_successful, out.loss,
                [&]() -> const LogInputs& {
                  if (!out.inputs) out.inputs = log_inputs(L, out, log_point);
                  return *out.inputs;
                }};
  const StepVerdict verdict = L.protocol->after_step(L.rerun, done);
  if (verdict.decision) {
    out.decision = *verdict.decision;
    if (!out.decision.proceed()) note_verdict(rec, iteration, verdict.phase, out.decision);
    if (out.decision.action == Decision::Action::kAbort) return out;
  }
  if (!verdict.update_successful) return out;  // only the device knows (it steps its own count)
  out.skipped = !*verdict.update_successful;
  if (L.arm->mutated().scheduler_steps(*verdict.update_successful)) L.scheduler->step(scheduler_increment(L));
  return out;
}

// What training_log receives (Megatron computes params norm in train() every iteration when logging it).
LogInputs log_inputs(Loop& L, const StepOutcome& s, bool log_point);

// ---- --cuda-graph iteration ----

// The first two iterations (warm-up: cuBLAS, NCCL and the allocator initialise lazily), an arm's first iteration
// after it took over (its buffers, e.g. the rerun bank, settle their sizes: a graph captured while one grows keeps
// the freed storage) and iterations a planned fault hits (the injector decides on the host) run eagerly; the rest
// replay, log points too: their one read comes after the replay, from the graph's own outputs (graph_inputs).
bool replays_as_graph(const Loop& L, int64_t iteration) {
  return L.graph && !L.graph->off() && !L.protocol->reads_between_log_points() && iteration >= 2 &&
         iteration > L.arm_since && !(L.cfg.faults && L.cfg.faults->planned_at(iteration));
}

// The graph reads its batch from static buffers: each replay's batch is copied in first, outside the graph
// (get_batch's pinned host-to-device copy, then one device copy per tensor).
void stage_batch(Loop& L, int64_t iteration) {
  Batch b = get_batch(L, iteration);
  if (L.static_batch.microbatches.empty()) {
    L.static_batch = std::move(b);
    return;
  }
  for (size_t m = 0; m < b.microbatches.size(); ++m) {
    L.static_batch.microbatches[m].tokens.copy_(b.microbatches[m].tokens);  // device to device: never blocks
    L.static_batch.microbatches[m].labels.copy_(b.microbatches[m].labels);
  }
}

// Every persistent tensor a replayed iteration reads or writes (capture.h GraphState).
GraphState graph_state(const Loop& L) {
  GraphState s;
  for (size_t i = 0; i < L.stage.params.size(); ++i) s.emplace_back(fmt::format("param{}", i), L.stage.params[i].value);
  s.emplace_back("grad_buffer", L.buffer->data());
  for (size_t i = 0; i < L.adam->size(); ++i) {
    s.emplace_back(fmt::format("adam.main{}", i), L.adam->main_params()[i]);
    s.emplace_back(fmt::format("adam.exp_avg{}", i), L.adam->exp_avg()[i]);
    s.emplace_back(fmt::format("adam.exp_avg_sq{}", i), L.adam->exp_avg_sq()[i]);
  }
  s.emplace_back("adam.step", L.adam->step_count());
  if (L.scaler) s.emplace_back("scaler.scale", L.scaler->scale());
  for (auto& e : L.rerun.device_state()) s.push_back(std::move(e));
  for (auto& e : L.protocol->device_state()) s.push_back(std::move(e));
  for (size_t m = 0; m < L.static_batch.microbatches.size(); ++m) {
    s.emplace_back(fmt::format("batch{}.tokens", m), L.static_batch.microbatches[m].tokens);
    s.emplace_back(fmt::format("batch{}.labels", m), L.static_batch.microbatches[m].labels);
  }
  return s;
}

// An iteration of an arm that reads nothing between log points: train_step's device work and the log inputs,
// captured once and replayed (capture.h); the host's bookkeeping, the Trace's checksums and a log point's read
// (training_log, from graph_inputs) stay outside.
StepOutcome graph_step(Loop& L, int64_t iteration, IterationRecord& rec) {
  L.ledger.begin_iteration(iteration);
  ScopedSite numerics("numerics");
  L.rerun.begin_iteration(iteration);
  stage_batch(L, iteration);
  rec.param_checksum_before = params_checksum(L);  // forward-backward leaves the parameters alone
  L.protocol->timers().start("cuda-graph");
  L.graph->run(iteration + 1, [&] {
    struct InGraph {
      Loop& L;
      explicit InGraph(Loop& l) : L(l) { L.in_graph = true; }
      ~InGraph() { L.in_graph = false; }
    } in_graph(L);
    const StepOutcome out = train_step(L, iteration, /*log_point=*/false, rec, &L.static_batch);
    L.graph_inputs = log_inputs(L, out, /*log_point=*/false);  // Megatron's params norm, every iteration
  }, graph_state(L));
  L.protocol->timers().stop("cuda-graph");
  if (rec.schedule.empty()) {
    rec.schedule = L.graph_schedule;  // a replay runs no host code: the captured iteration's
  } else {
    L.graph_schedule = rec.schedule;
  }
  rec.param_checksum_after = params_checksum(L);
  return {};
}

LogInputs log_inputs(Loop& L, const StepOutcome& s, bool log_point) {
  LogInputs in;
  in.loss = s.loss;
  in.grad_norm = s.step.grad_norm;
  in.num_zeros = s.step.num_zeros;
  {
    ScopedSite scope(site_name(Site::kLossScale));
    in.loss_scale = get_loss_scale(L.scaler.get(), run_device());
  }
  if (L.cfg.log_params_norm) {
    ScopedSite scope(site_name(Site::kParamsNorm));
    in.params_norm = calc_params_l2_norm(L.stage.params, *L.groups.mp, L.stage.coord.tp, L.stage.is_first_stage());
  }
  in.learning_rate = L.scheduler->get_lr();
  in.skipped = s.skipped;
  in.log_point = log_point;
  return in;
}

// A record's host reads and operators per site for ledger iteration `iteration`. With operators counted, an
// operator that would synchronize on CUDA outside the ledger (OpCounter::syncs: a data-dependent output size,
// item()) is a host read at its site too: what CUPTI would count on a GPU, seen on CPU whatever its spelling.
void note_site_counts(Loop& L, IterationRecord& rec, int64_t iteration) {
  rec.reads_per_site = L.ledger.counts_by_name(iteration);
  if (L.collectives) {
    rec.collectives = L.collectives->take(iteration);
    rec.collective_groups = recorded_group_names(L.groups);
  }
  if (!L.cfg.count_launches) return;
  rec.launches_per_site = OpCounter::instance().counts(iteration);
  if (L.ledger.counting())
    for (const auto& [site, n] : OpCounter::instance().syncs(iteration)) rec.reads_per_site[site] += n;
}

void record_iteration(Loop& L, IterationRecord& rec, const StepOutcome& step, const LogOutputs& log, bool log_point) {
  rec.consumed_samples = L.consumed_samples;
  if (L.protocol->reads_between_log_points()) rec.skipped = step.skipped;  // else from the device, at its log point
  if (log_point) {
    rec.lm_loss = log.lm_loss;
    rec.grad_norm = log.grad_norm;
    rec.num_zeros = log.num_zeros;
    rec.params_norm = log.params_norm;
    rec.learning_rate = log.learning_rate;
    rec.loss_scale = log.loss_scale;
    rec.nan = log.nan_iteration;
    rec.timer_intervals = log.timer_intervals;
    rec.timer_window_first = log.timer_window.first;
    rec.timer_window_last = log.timer_window.last;
  }
  if (log.line) {
    L.result.log_lines.push_back(*log.line);
    if (L.cfg.print_log_line) L.cfg.print_log_line(*log.line);  // at its log point, as Megatron prints it
  }
  note_site_counts(L, rec, rec.iteration - 1);
  L.result.trace.records.push_back(rec);
  L.result.iterations_done = rec.iteration;
}

void record_abort(Loop& L, IterationRecord& rec, const Decision& d, int64_t iteration) {
  rec.skipped = true;
  note_site_counts(L, rec, iteration);
  L.result.trace.records.push_back(rec);
  L.result.exit_code = d.exit_code;
}

// zerosync, at a log point: the window's iterations learn whether their step was skipped and whether the vote found
// a fault (the host knew neither before); `rec` is this log point's own record, not yet in the Trace.
void backfill_window(Loop& L, IterationRecord& rec, const LogOutputs& log) {
  const bool abort = L.cfg.rerun.on_fault == FaultOutcome::kAbort || L.cfg.rerun.mode == RerunMode::kDisabled;
  const int64_t n = static_cast<int64_t>(log.window_skipped.size());
  std::vector<IterationRecord*> window;
  for (auto it = L.result.trace.records.rbegin(); it != L.result.trace.records.rend(); ++it)
    if (it->iteration > rec.iteration - n) window.insert(window.begin(), &*it);
  window.push_back(&rec);
  for (IterationRecord* r : window) {
    const size_t i = static_cast<size_t>(r->iteration - (rec.iteration - n) - 1);
    r->skipped = log.window_skipped.at(i);
    if (log.window_fault.at(i))
      r->fault_verdicts.push_back({r->iteration, VerdictPhase::kBeforeStep, abort ? "abort" : "skip_step"});
  }
}

// zerosync's abort: Megatron's exit code at the first log point after the fault, on every rank (the read is
// world-wide), the parameters as before the fault's step (every step since was masked). No log line: Megatron
// exits before it logs.
void abort_on_device(Loop& L, IterationRecord& rec, const LogOutputs& log) {
  note_site_counts(L, rec, rec.iteration - 1);
  L.result.trace.records.push_back(rec);
  L.result.iterations_done = log.fault_iteration - 1;  // the steps that took effect, as the baseline's
  L.result.exit_code =
      L.cfg.rerun.mode == RerunMode::kDisabled ? kExitCodeUncaughtError : L.cfg.rerun.abort_exit_code;
  L.result.iterations_past_fault = rec.iteration - log.fault_iteration;
  L.result.trace.iterations_past_fault = L.result.iterations_past_fault;  // the Trace says it too
  L.ended = true;
}

// What follows training_log at an iteration: zerosync's window backfilled (or its abort), the mutation's hook, the
// exit vote, the Trace. False when the run ends here.
bool after_training_log(Loop& L, IterationRecord& rec, const StepOutcome& step, const LogInputs& in,
                        const LogOutputs& log, bool log_point) {
  if (log.has_window) {
    backfill_window(L, rec, log);
    if (log.abort) {
      abort_on_device(L, rec, log);
      return false;
    }
  }
  L.arm->mutated().after_training_log(L.ledger, in);
  rec.exit_decision = L.protocol->exit_vote(rec.iteration, log_point, log);
  record_iteration(L, rec, step, log, log_point);
  if (rec.exit_decision) {
    L.result.exited_on_duration = true;
    L.ended = true;
    return false;
  }
  return true;
}

// Whether log point `done` (1-based) leaves its read in flight behind the next iteration's replay: both replay,
// in this segment, and nothing the read brings could stop that next step (LoopProtocol::log_read_can_trail). Not
// under the capture probe, which captures training_log whole.
bool log_read_trails(const Loop& L, int64_t done, bool graphed, bool log_point, int64_t until) {
  return graphed && log_point && done < until && replays_as_graph(L, done) && L.protocol->log_read_can_trail() &&
         !L.capture;
}

// The trailing log point's read lands (the next replay is launched): its line, then the rest of its iteration,
// with its reads counted at its own iteration. False when the run ends there (an abort; the replay launched
// behind it ran masked).
bool land_trailing_log_point(Loop& L) {
  TrailingLogPoint t = std::move(*L.trailing);
  L.trailing.reset();
  Ledger::CountAs own(L.ledger, t.rec.iteration - 1);
  const LogOutputs log = L.protocol->land_log_read(t.in);
  return after_training_log(L, t.rec, t.step, t.in, log, /*log_point=*/true);
}

// ---- the iterations of train(): train_step, training_log, the exit decision ----
void run_iterations(Loop& L, int64_t until) {
  const RunConfig& cfg = L.cfg;
  const int world_rank = L.rank;
  for (int64_t iteration = L.next_iteration; iteration < until;) {
    const int64_t done = iteration + 1;  // Megatron's `iteration` after the increment: 1-based
    const bool log_point = done % cfg.log_interval == 0 || done == 1;
    IterationRecord rec;
    rec.iteration = done;
    rec.rank = world_rank;
    const bool graphed = replays_as_graph(L, iteration);
    StepOutcome step = graphed ? graph_step(L, iteration, rec) : train_step(L, iteration, log_point, rec, nullptr);
    if (L.trailing && !land_trailing_log_point(L)) break;  // the previous log point's read, behind this replay
    L.rerun.end_iteration();  // from now on results are validated (Megatron skips the job's first iteration)
    if (step.decision.action == Decision::Action::kAbort) {
      record_abort(L, rec, step.decision, iteration);
      L.ended = true;
      break;
    }
    iteration = done;
    L.next_iteration = done;
    L.consumed_samples += cfg.data.global_batch;

    // Everything that follows is diagnostics: the log line, the Trace, the exit decision.
    LogInputs in;
    LogOutputs log;
    bool trails = false;
    in.iteration = done;  // a graph's iteration computed its log inputs inside; at a non-log iteration nothing logs
    if (!graphed || log_point) region(L, done - 1, "training_log", [&] {
      in = graphed ? L.graph_inputs : step.inputs ? *step.inputs : log_inputs(L, step, log_point);
      in.log_point = log_point;
      in.skipped = step.skipped;                    // onesync's inputs were taken before these two were known
      in.learning_rate = L.scheduler->get_lr();
      in.iteration = done;
      in.train_iters = cfg.train_iters;
      in.consumed_samples = L.consumed_samples;
      in.global_batch = cfg.data.global_batch;
      trails = log_read_trails(L, done, graphed, log_point, until);
      if (trails) {
        L.protocol->issue_log_read(in);
      } else {
        log = L.protocol->training_log(in);
      }
    });
    if (trails) {
      L.trailing = TrailingLogPoint{rec, std::move(step), in};  // the rest comes when its read lands
      continue;
    }
    if (!after_training_log(L, rec, step, in, log, log_point)) break;
  }
  LG_CHECK(!L.trailing, "a log point's read trailed past the end of its segment");
}

// Drains the current arm's timers into the result (a run's end, or before another arm takes over).
void finish_protocol(Loop& L) {
  TimerSummary t = L.protocol->finish();
  TimerSummary& all = L.result.timers;
  all.intervals.insert(all.intervals.end(), t.intervals.begin(), t.intervals.end());
  all.interval_total += t.interval_total;
  all.first_report_waits += t.first_report_waits;
  all.lag_waits += t.lag_waits;
  all.max_pending_events = std::max(all.max_pending_events, t.max_pending_events);
  all.event_lags.insert(all.event_lags.end(), t.event_lags.begin(), t.event_lags.end());
}

}  // namespace

// ---- TrainSession: one run, arms changeable between segments ----

struct TrainSession::Impl {
  ScopedSite setup_site{"setup"};
  Loop L;
  bool captured_stop = false;
  Impl(const RunConfig& cfg, const Arm& arm, ProcessGroups& groups, int rank) : L(cfg, arm, groups, rank) {}
};

TrainSession::TrainSession(const RunConfig& cfg, const Arm& first_arm, ProcessGroups& groups, int world_rank) {
  OpCounter::instance().reset();
  OpCounter::instance().set_enabled(cfg.count_launches);
  set_current_iteration(-1);  // setup (model, optimizer) is no iteration's work
  impl_ = std::make_unique<Impl>(cfg, first_arm, groups, world_rank);
  setup(impl_->L);
  impl_->L.protocol->timers().start_interval();
}

TrainSession::~TrainSession() = default;

bool TrainSession::run(const Arm& arm, int64_t iterations, bool instrumented, bool digests) {
  Loop& L = impl_->L;
  if (L.ended) return false;
  // A new arm, or the same one with its instrumentation or digests switched, takes over at this iteration: its own
  // sites, timers and accumulators.
  const bool digests_switch = L.digests && digests != L.digests->enabled();
  if (&arm != L.arm || instrumented != L.ledger.counting() || digests_switch) {
    if (L.digests) L.digests->set_enabled(digests);
    if (L.graph) L.graph->reset();  // the graph holds the old arm's state tensors
    if (const std::optional<int64_t> steps = L.protocol->end_segment())  // the device counted the successful
      L.scheduler->step(scheduler_increment(L) * *steps - L.scheduler->num_steps());  // steps: the host catches up
    finish_protocol(L);
    L.arm = &arm;
    L.arm_since = L.next_iteration;
    L.ledger.set_counting(instrumented);
    L.protocol = select_protocol(arm, L.cfg, L.ledger, L.groups, L.rank, instrumented);
    begin_segment(L);
    L.protocol->timers().start_interval();
  }
  try {
    run_iterations(L, std::min(L.cfg.train_iters, L.next_iteration + iterations));
  } catch (const CaptureStopped&) {
    L.ended = true;  // a probed region did not capture on some rank: its work never ran, stop here
    impl_->captured_stop = true;
  }
  if (L.next_iteration >= L.cfg.train_iters) L.ended = true;
  return !L.ended;
}

int64_t TrainSession::iterations_done() const { return impl_->L.next_iteration; }

RunResult TrainSession::finish() {
  Loop& L = impl_->L;
  if (!impl_->captured_stop) finish_protocol(L);
  L.result.final_param_checksum = params_checksum(L);
  if (L.graph) L.result.graph = L.graph->report();
  attach_digests(L);
  L.result.async_races = L.ledger.async_races();
  OpCounter::instance().set_enabled(false);
  return std::move(L.result);
}

// ---- train: Megatron training.py train() ----
RunResult train(const RunConfig& cfg, const Arm& arm, ProcessGroups& groups, int world_rank) {
  TrainSession session(cfg, arm, groups, world_rank);
  session.run(arm, cfg.train_iters);
  return session.finish();
}

}  // namespace loopgate
