// The training loop under test: one `train` / `train_step` for every arm. Each host-sync site is a named policy
// (trainer/loop/sites.h) whose eager or deferred form the arm selects, so the loop body is the same for all arms.
// Megatron: training.py train(), train_step(), training_log(), checkpoint_and_decide_exit().
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer/instrument/capture.h"
#include "trainer/instrument/fault.h"
#include "trainer/loop/arms.h"
#include "trainer/loop/rerun.h"
#include "trainer/loop/sites.h"
#include "trainer/loop/trace.h"
#include "trainer/model/config.h"
#include "trainer/optim/adam.h"
#include "trainer/optim/grad_scaler.h"
#include "trainer/optim/scheduler.h"
#include "trainer/parallel/comm.h"
#include "trainer/parallel/layout.h"

namespace loopgate {

// Everything one run needs; named fixtures (fixtures/fixtures.h) return one of these.
struct RunConfig {
  std::string fixture = "single";
  LayoutConfig layout;
  ModelConfig model;
  DataConfig data;
  int64_t train_iters = 10;
  int log_interval = 1;                    // --log-interval (Megatron default 100)
  bool log_params_norm = true;             // --log-params-norm
  OptimizerStepConfig optim;               // --clip-grad, --log-num-zeros-in-grad
  double weight_decay = 0.01;
  SchedulerIters schedule;                 // --lr, --min-lr, --lr-decay-style, --lr-warmup-iters, ...
  double loss_scale = 0.0;                 // --loss-scale: 0 = none (bf16 style, constant 1.0)
  bool dynamic_loss_scale = false;         // fp16-style dynamic scaler
  DynamicGradScalerConfig dynamic_scaler;
  RerunConfig rerun;                       // --rerun-mode, outcome on a confirmed fault
  std::vector<FaultSpec> faults;           // --inject
  double exit_duration_in_mins = 0.0;      // --exit-duration-in-mins (0 = off)
  // Deterministic clock for the exit vote in tests: train time = iterations * this (0 = wall clock). Rank
  // `fast_clock_rank` runs its clock `fast_clock_factor` times faster, so the MAX vote matters.
  double simulated_minutes_per_iteration = 0.0;
  int fast_clock_rank = -1;
  double fast_clock_factor = 1.0;
  int64_t bucket_size = 0;                 // grad-buffer bucket size in elements (0 = default)
  CommOptions comm;                        // reduction order (kPermuted for the distributional gate)
  CaptureSpec capture;                     // CUDA-graph capture probe of one region (GPU only; off by default)
  // --cuda-graph iteration: the non-log iterations of an arm that reads nothing between log points (zerosync)
  // replayed as one CUDA graph (capture.h); other arms run eagerly. On a CPU device (tests only; the CLI refuses
  // it) the operator-stream check stands in (op_stream.h).
  bool cuda_graph_iteration = false;
  // CPU simulation of a device running behind the host: timer events complete a seeded random 0..max_windows
  // log windows late (0 = off). What a GPU does and a lockstep CPU rank cannot show (issue 13, item 2).
  struct EventLag {
    uint64_t seed = 0;
    int max_windows = 0;
  } event_lag;
  bool param_checksums = false;            // a parameter checksum before and after each step (a Trace or gate)
  bool count_launches = false;             // operators dispatched per site per iteration (OpCounter; --syncs, gates)
  // Called on the last rank at each log point with the Megatron line (print_rank_last), as it is made.
  std::function<void(const std::string& line)> print_log_line;
};

struct RunResult {
  Trace trace;                     // this rank's records
  int exit_code = 0;               // 0, or the rerun machine's abort code
  int64_t iterations_done = 0;
  bool exited_on_duration = false;
  std::vector<std::string> log_lines;  // Megatron-format lines printed on this rank (print_rank_last)
  TimerSummary timers;  // every interval reported, in report order; waits; pending bound
  CaptureVerdict capture;                // the capture probe's verdict on this rank (attempted = false: off)
  GraphReport graph;                     // --cuda-graph iteration on this rank (on = false: off)
  // zerosync: an abort verdict reaches the host at the next log point; the iterations it ran past the fault
  // (every step masked) — the arm's one behavioural difference from the baseline, which stops at the fault.
  int64_t iterations_past_fault = 0;
};

// Runs `config.train_iters` iterations of `arm` on this rank. `groups` come from make_*_groups for the layout.
RunResult train(const RunConfig& config, const Arm& arm, ProcessGroups& groups, int world_rank);

// One run on one rank whose arm may change between segments: the model, optimizer, scheduler, rerun machine
// and data stream carry on, the arm's site policies (timers, accumulators) are rebuilt. `loopgate ab` alternates
// arms in phases this way — sound only because the arms are bit-identical, which it checks.
class TrainSession {
 public:
  TrainSession(const RunConfig& config, const Arm& first_arm, ProcessGroups& groups, int world_rank);
  ~TrainSession();
  TrainSession(const TrainSession&) = delete;
  TrainSession& operator=(const TrainSession&) = delete;
  // The next `iterations` (at most up to config.train_iters) under `arm`. False once the run has ended (abort,
  // exit vote, the last iteration). `instrumented` false: the ledger counts nothing and a deferred arm's level-1
  // timers record nothing (Sites), so `ab --arms A,A:bare` prices loopgate's bookkeeping; the numbers are the same.
  bool run(const Arm& arm, int64_t iterations, bool instrumented = true);
  int64_t iterations_done() const;
  RunResult finish();  // drains the timers; call once, at the end

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Megatron's log line (without the timestamp prefix, which is added when printed); exposed for tests.
struct LogFields {
  int64_t iteration = 0, train_iters = 0, consumed_samples = 0, global_batch = 0;
  double elapsed_ms_per_iteration = 0.0, learning_rate = 0.0, loss_scale = 0.0;
  bool has_loss = false;
  double lm_loss = 0.0;
  bool has_grad_norm = false, has_num_zeros = false, has_params_norm = false;
  double grad_norm = 0.0, num_zeros = 0.0, params_norm = 0.0;
  int64_t skipped = 0, nan = 0;
};
std::string format_log_line(const LogFields& f);

}  // namespace loopgate
