// The training loop under test. `train` reads top to bottom like Megatron's train(): for each iteration,
// train_step, then training_log, then the exit decision. Every place the host may wait on the device goes
// through the arm's loop protocol (protocol.h), chosen once per arm segment; no host read happens here except
// through the Ledger. The numerics path (forward/backward, grad reductions, optimizer) is the same code for every
// arm; the protocols use their own tensors and collectives.
#include "trainer/loop/train.h"

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <utility>

#include "trainer/common/device.h"
#include "trainer/common/error.h"
#include "trainer/loop/batches.h"
#include "trainer/loop/checkpoint.h"
#include "trainer/loop/instruments.h"
#include "trainer/loop/mutation.h"
#include "trainer/loop/protocol.h"
#include "trainer/loop/step_driver.h"
#include "trainer/measure/async_copy.h"
#include "trainer/measure/ledger.h"
#include "trainer/measure/op_counter.h"
#include "trainer/model/gpt.h"
#include "trainer/optim/clip_grads.h"
#include "trainer/optim/grad_buffer.h"
#include "trainer/pipeline/schedules.h"

namespace loopgate {
namespace {

// The current arm's segment: its timers, what select_protocol and select_schedule chose for it, and where it began.
struct Segment {
  const Arm* arm;                          // TrainSession::run may change it between segments
  std::unique_ptr<LoopTimers> timers;      // Megatron's timers, as the arm reads them (eager or deferred)
  std::unique_ptr<LoopProtocol> protocol;  // the arm's loop protocol (over the timers)
  Schedule schedule;                       // the layout's pipeline schedule, as the arm's mutation leaves it
  int64_t since = 0;                       // 0-based: the segment's first iteration
};

// ---- state of one run on one rank ----
struct Loop {
  const RunConfig& cfg;
  Ledger ledger;
  Instruments instruments;  // loopgate's own: checksums, digests, collective records, counts, the capture probe
  ProcessGroups groups;     // the run's groups, as the instruments wrap them
  int rank;
  GptStage stage;
  Batches batches;  // Megatron's get_batch (batches.h)
  std::unique_ptr<GradBuffer> buffer;
  std::unique_ptr<Adam> adam;
  GradScalerPtr scaler;
  std::unique_ptr<OptimizerParamScheduler> scheduler;
  RerunStateMachine rerun;
  Segment seg;
  std::unique_ptr<StepDriver> driver;  // eager, or --cuda-graph iteration's replays (step_driver.h)
  int64_t consumed_samples = 0;
  int64_t next_iteration = 0;  // 0-based: iterations done so far
  bool ended = false;          // abort, exit vote, or a capture probe that stopped the run
  RunResult result;

  Loop(const RunConfig& c, const Arm& a, ProcessGroups& g, int r)
      : cfg(c), instruments(c, ledger), groups(instruments.wrap(g, r)), rank(r),
        stage(gpt_build(c.model, Layout::build(groups.world->size(), c.layout), r, groups)),
        batches(c, stage.layout, r), rerun(c.rerun),
        seg{&a, nullptr, {}} {}
};

// ---- the grad-ready and loss hooks: fault injection, then the NaN check site ----
ScheduleHooks make_hooks(Loop& L, int64_t iteration) {
  ScheduleHooks hooks;
  hooks.on_microbatch_loss = [&L, iteration](int mb, const at::Tensor& report) {
    at::Tensor r = report;  // poisoned in place: the reported loss is what Megatron validates
    if (L.cfg.faults) L.cfg.faults->at_loss(iteration, mb, L.rank, r);
    L.seg.protocol->nan_check(L.rerun, Site::kNanCheckLoss, r.select(0, 0));
  };
  L.instruments.hook(hooks);
  L.buffer->before_bucket_ready = [&L, iteration](int bucket, at::Tensor& grads) {
    if (L.cfg.faults) L.cfg.faults->at_bucket(iteration, bucket, L.rank, grads);
  };
  L.buffer->on_bucket_ready = [&L](int, at::Tensor& grads) {
    // Megatron check_grads: the bucket's local (pre-DP) grad norm must be finite.
    ScopedSite scope(site_name(Site::kNanCheckGrad));
    L.seg.protocol->nan_check(L.rerun, Site::kNanCheckGrad, grads.norm());
  };
  hooks.scale_loss = grad_scale_func(L.scaler.get());
  return hooks;
}

// The scheduler's samples per successful step (Megatron: num_microbatches * micro_batch_size * dp).
int64_t scheduler_increment(const Loop& L) {
  return int64_t{num_microbatches(L.cfg.data, L.stage.layout)} * L.cfg.data.micro_batch * L.stage.layout.dp();
}

// A family that counts its successful steps on the device hands the count over (one read) where the host's scheduler
// must be the device's: at a save and at the end of its segment.
void catch_up_scheduler(Loop& L, const HandOver& h) {
  if (h.steps) L.scheduler->step(scheduler_increment(L) * *h.steps - L.scheduler->num_steps());
}

// `arm` takes over at 0-based `since` (`instrumented` false: its reads are not counted): its protocol, the schedule
// as its mutation leaves it, the scheduler and the steps so far for its protocol, a new arm's state for the driver,
// and the interval timer started.
void begin_segment(Loop& L, const Arm& arm, bool instrumented, int64_t since, const SavedWindow& window = {}) {
  L.seg.arm = &arm;
  L.ledger.set_counting(instrumented);
  L.seg.protocol.reset();  // it reads the old segment's timers
  L.seg.timers = std::make_unique<LoopTimers>(arm, L.cfg, L.ledger, L.groups, L.rank, instrumented);
  L.seg.protocol = select_protocol(arm, L.cfg, L.ledger, L.groups, L.rank, *L.seg.timers);
  L.seg.since = since;
  L.instruments.tap(L.stage, &L.seg.arm);
  L.seg.schedule = select_schedule(L.stage.layout);
  L.seg.arm->mutated().wrap(made::PipelineSchedule{L.seg.schedule});
  L.seg.protocol->begin_segment({*L.scheduler, scheduler_increment(L), L.next_iteration, L.cfg.train_iters, window});
  L.driver->begin_segment(since, *L.seg.timers);
  L.seg.timers->start_interval(L.next_iteration + 1);
}

// The current arm's segment ends: the host's scheduler catches up with the device's count, the timers are drained.
void end_segment(Loop& L) {
  catch_up_scheduler(L, L.seg.protocol->hand_over(std::nullopt));
  L.result.timers.append(L.seg.timers->finish());
}

// The level-1 timers record events on the stream, through the driver (inside a replayed body at every replay).
void timer_start(Loop& L, const char* name) {
  L.driver->timer_action([&L, name] { L.seg.timers->start(name); });
}
void timer_stop(Loop& L, const char* name) {
  L.driver->timer_action([&L, name] { L.seg.timers->stop(name); });
}

// ---- checkpoints (checkpoint.h): Megatron's save_checkpoint and load_checkpoint ----
TrainState train_state(Loop& L) {
  return {L.stage.params, *L.adam, L.scaler.get(), *L.scheduler, L.consumed_samples, L.next_iteration};
}

// Megatron's save_checkpoint_and_time after `done`, the device's step count and log window so far handed over.
void save(Loop& L, int64_t done) {
  ScopedSite site("checkpoint");
  const HandOver h = L.seg.protocol->hand_over(done);
  catch_up_scheduler(L, h);
  L.result.close(h.window.steps);  // the records since the last log point learn their steps' outcomes
  L.seg.timers->time_save([&] {
    save_train_state(L.cfg, L.rank, L.groups.world->size(), train_state(L), h.window, L.ledger, L.seg.arm->mutated());
  });
}

// optimizer.step at the scheduler's LR (or the one the protocol hands it), masked by the gate where it has a mask.
OptimizerStepResult step_optimizer(Loop& L, int64_t iteration, const StepGate& gate) {
  MainGrads grads = L.buffer->main_grads();
  const double lr = gate.host_lr ? *gate.host_lr : L.seg.arm->mutated().step_lr(L.scheduler->get_lr());
  const CommPtr grad_stats = grad_stats_group(L.seg.arm->mutated(), L.groups);
  OptimizerStepResult r;
  L.instruments.region(iteration, "optimizer", [&] {
    r = optimizer_step(*L.adam, L.scaler.get(), grads, L.stage.params, *grad_stats, L.cfg.optim, lr,
                       L.scheduler->get_wd(), gate.mask.defined() ? &gate.mask : nullptr, gate.device_lr);
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

// What training_log receives (Megatron computes params norm in train() every iteration when logging it).
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

// training_log's inputs at 1-based `done`: the step's values (read with the step where the family read them there),
// the skip and the LR as they stand after it, and the run's position.
LogInputs training_log_inputs(Loop& L, const StepOutcome& step, bool log_point, int64_t done) {
  LogInputs in = step.inputs ? *step.inputs : log_inputs(L, step, log_point);
  in.log_point = log_point;
  in.skipped = step.skipped;  // inputs read with the step predate these two
  in.learning_rate = L.scheduler->get_lr();
  in.iteration = done;
  in.train_iters = L.cfg.train_iters;
  in.consumed_samples = L.consumed_samples;
  in.global_batch = L.cfg.data.global_batch;
  return in;
}

// ---- train_step's work: Megatron training.py train_step, in its order ----
// `staged`: the graph's static batch (a replayed iteration's body); null: this iteration's batch is made here.
StepOutcome step_work(Loop& L, int64_t iteration, bool log_point, IterationRecord& rec, const Batch* staged) {
  StepOutcome out;
  // ==== TRAINING SECTION: the numerics path, identical for every arm ====
  timer_start(L, "forward-backward");
  const Batch batch = staged ? *staged : L.batches.get(iteration);
  ForwardBackwardResult fb;
  L.instruments.region(iteration, "forward_backward", [&] {
    L.buffer->zero();
    fb = forward_backward(L.seg.schedule, L.stage, *L.buffer, batch, make_hooks(L, iteration));
  });
  timer_stop(L, "forward-backward");
  L.instruments.grads_reduced(L.stage.params, *L.buffer);  // before the clip scales them in place

  // The rerun decision (should_run_forward_backward at loop exit) comes before optimizer.step: the host reads it,
  // or the device keeps it as the step's mask.
  const StepGate gate = L.seg.protocol->before_step(L.rerun, iteration, log_point);
  out.decision = gate.decision;
  out.skipped = !out.decision.proceed();
  if (out.decision.action != Decision::Action::kAbort) {
    timer_start(L, "optimizer");
    if (!out.skipped) out.step = step_optimizer(L, iteration, gate);
    timer_stop(L, "optimizer");
    out.loss = reduce_loss(L, fb);
  }
  // ==== end of the numerics path ====

  if (out.skipped)
    rec.fault_verdicts.push_back({rec.iteration, VerdictPhase::kBeforeStep, action_name(out.decision.action)});
  if (out.decision.action == Decision::Action::kAbort) {
    rec.param_checksum_after = rec.param_checksum_before;  // no step
    return out;
  }
  rec.param_checksum_after = L.instruments.checksum(L.stage.params);
  L.instruments.step_taken(L.stage.params, *L.buffer, *L.adam, out.step.grad_norm, out.loss);
  rec.schedule = to_string(fb.executed);

  // update_successful over TP x PP; the LR schedule then advances (by the global batch) on success only.
  StepDone done{iteration, log_point, L.scaler != nullptr, out.skipped, out.step.update_successful, out.loss,
                [&]() -> const LogInputs& {
                  if (!out.inputs) out.inputs = log_inputs(L, out, log_point);
                  return *out.inputs;
                }};
  const StepVerdict verdict = L.seg.protocol->after_step(L.rerun, done);
  if (verdict.decision) {
    out.decision = *verdict.decision;
    if (!out.decision.proceed())
      rec.fault_verdicts.push_back({rec.iteration, verdict.phase, action_name(out.decision.action)});
    if (out.decision.action == Decision::Action::kAbort) return out;
  }
  if (!verdict.update_successful) return out;  // only the device knows (it steps its own count)
  out.skipped = !*verdict.update_successful;
  if (*verdict.update_successful) L.scheduler->step(scheduler_increment(L));
  return out;
}

// The loop's persistent tensors a replayed iteration reads or writes (capture.h GraphState): a checkpoint's, the grad
// buffer and the rerun machine's; the driver adds the protocol's and the static batch.
GraphState graph_state(const Loop& L) {
  GraphState s = checkpoint_state(L.stage.params, *L.adam, L.scaler.get());
  s.emplace_back("grad_buffer", L.buffer->data());
  for (auto& e : L.rerun.device_state()) s.push_back(std::move(e));
  return s;
}

// ---- train_step: Megatron training.py train_step ----
// Its work runs through the driver: now, or replayed from a graph (as a non-log iteration that also computes
// training_log's inputs on the device).
StepOutcome train_step(Loop& L, int64_t iteration, bool log_point, IterationRecord& rec) {
  L.ledger.begin_iteration(iteration);
  ScopedSite numerics("numerics");  // work outside any site: the numerics path, the same in every arm
  L.rerun.begin_iteration(iteration);
  rec.param_checksum_before = L.instruments.checksum(L.stage.params);  // forward-backward leaves them alone
  const auto state = [&L] { return graph_state(L); };  // made only where a replay asks (names per tensor)
  StepOutcome out = L.driver->step(*L.seg.protocol, iteration, rec, state, [&](const Batch* staged) {
    if (!staged) return step_work(L, iteration, log_point, rec, nullptr);
    StepOutcome body = step_work(L, iteration, /*log_point=*/false, rec, staged);
    body.inputs = log_inputs(L, body, /*log_point=*/false);
    return body;
  });
  if (out.replayed) rec.param_checksum_after = L.instruments.checksum(L.stage.params);  // a replay runs no host code
  return out;
}

// The optimizer side of the run: grad buffer, Adam, grad scaler, LR schedule (Megatron's setup_model_and_optimizer).
void setup(Loop& L) {
  const RunConfig& cfg = L.cfg;
  // First, as the probe: the graph's stream before the grad buffer's hooks exist.
  L.driver = make_step_driver(cfg, L.seg.arm->mutated(), L.ledger, L.instruments, L.batches);
  L.instruments.start_capture_probe();  // first: the run moves to its stream before the grad buffer's hooks exist
  const Mutation& m = L.seg.arm->mutated();
  L.batches.upload = handed_through<made::BatchUpload>(
      m, make_upload(L.ledger, cfg.model.device, cfg.async_emulation, cfg.stress, L.rank));
  GradBufferConfig bcfg;
  if (cfg.bucket_size > 0) bcfg.bucket_size = cfg.bucket_size;
  L.buffer = std::make_unique<GradBuffer>(L.stage.params, handed_through<made::GradSyncGroup>(m, L.groups.dp), bcfg);
  L.adam = std::make_unique<Adam>(L.stage.params, AdamConfig{}, L.stage.coord.tp, L.stage.is_first_stage(),
                                  L.buffer->main_grads().offsets());  // laid out as the grad buffer
  L.scaler = make_grad_scaler(cfg.dynamic_loss_scale, cfg.dynamic_scaler, cfg.loss_scale, run_device());
  L.scheduler = std::make_unique<OptimizerParamScheduler>(scheduler_config(cfg));
  check_save_intervals(cfg);
  // A loaded run continues after the saved iteration (and its log window), warming up eagerly before it replays.
  const SavedWindow window = cfg.load_dir.empty() ? SavedWindow{}
      : load_train_state(cfg, L.rank, L.groups.world->size(), train_state(L), L.seg.arm->mutated());
  begin_segment(L, *L.seg.arm, /*instrumented=*/true, cfg.load_dir.empty() ? 0 : L.next_iteration + 1, window);
  L.result.trace.arm = L.seg.arm->name;
  L.result.trace.fixture = cfg.fixture;
  L.result.trace.world = L.groups.world->size();
}

// What follows training_log: the exit vote (Megatron's checkpoint_and_decide_exit saves first, with --save), the
// record into the result (a log point closes the records its window's outcomes, or its abort, were pending for).
// False when the run ends here.
bool after_training_log(Loop& L, IterationRecord& rec, const LogOutputs& log, bool log_point) {
  if (!log.abort) {
    rec.exit_decision = L.seg.protocol->exit_vote(rec.iteration, log_point, log);
    rec.consumed_samples = L.consumed_samples;
  }
  L.instruments.note(rec, rec.iteration - 1, L.groups);
  const int64_t done = rec.iteration;
  const bool exit_decision = rec.exit_decision;
  L.result.add_iteration(std::move(rec), log, log_point, L.cfg.print_log_line);
  if (exit_decision && !L.cfg.save_dir.empty()) save(L, done);
  L.result.exited_on_duration = exit_decision;
  L.ended = log.abort || exit_decision;
  return !L.ended;
}

// What follows training_log for every iteration whose training_log has landed (the driver's, oldest first); false
// when the run ends there.
bool close_landed(Loop& L) {
  for (LandedLog& landed : L.driver->landed(*L.seg.protocol))
    if (!after_training_log(L, landed.rec, landed.log, landed.log_point)) return false;
  return true;
}

// ---- the iterations of train(): train_step, training_log, the exit decision ----
void run_iterations(Loop& L, int64_t until) {
  const RunConfig& cfg = L.cfg;
  for (int64_t iteration = L.next_iteration; iteration < until;) {
    const int64_t done = iteration + 1;  // Megatron's `iteration` after the increment: 1-based
    const bool log_point = done % cfg.log_interval == 0 || done == 1;
    IterationRecord rec;
    rec.iteration = done;
    rec.rank = L.rank;
    StepOutcome step = train_step(L, iteration, log_point, rec);
    if (L.seg.protocol->reads_between_log_points()) rec.skipped = step.skipped;  // else the device's, at its log point
    if (!close_landed(L)) break;  // a log point's read that landed behind this step
    L.rerun.end_iteration();  // from now on results are validated (Megatron skips the job's first iteration)
    if (step.decision.action == Decision::Action::kAbort) {
      L.instruments.note(rec, iteration, L.groups);
      L.result.add_abort(rec, step.decision.exit_code);
      L.ended = true;
      break;
    }
    iteration = done;
    L.next_iteration = done;
    L.consumed_samples += cfg.data.global_batch;

    // Everything that follows is diagnostics: the log line, the Trace, the exit decision. The driver lands the
    // iteration's training_log now or behind the next step.
    L.instruments.region(done - 1, "training_log", [&] {
      L.driver->training_log(*L.seg.protocol, training_log_inputs(L, step, log_point, done), step, std::move(rec),
                             until);
    });
    if (!close_landed(L)) break;
    if (checkpoint_and_decide_exit(cfg, done, [&L, done] { save(L, done); })) {
      L.result.exited_on_interval = L.ended = true;
      break;
    }
  }
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
}

TrainSession::~TrainSession() = default;

bool TrainSession::run(const Arm& arm, int64_t iterations, bool instrumented, bool digests) {
  Loop& L = impl_->L;
  if (L.ended) return false;
  // A new arm, or the same one with its instrumentation or digests switched, takes over at this iteration: its own
  // sites, timers and accumulators.
  const bool digests_switch = L.instruments.switch_digests(digests);
  if (&arm != L.seg.arm || instrumented != L.ledger.counting() || digests_switch) {
    end_segment(L);
    begin_segment(L, arm, instrumented, L.next_iteration);
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
  if (!impl_->captured_stop) L.result.timers.append(L.seg.timers->finish());  // the last arm's timers, drained
  L.result.finish();  // records still open after the last log point commit as they stand
  L.result.final_param_checksum = L.instruments.checksum(L.stage.params);
  L.result.capture = L.instruments.capture_verdict();
  L.instruments.attach_digests(L.result.trace, L.stage.coord);
  L.result.graph = L.driver->report();
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
