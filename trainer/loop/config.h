// The loop's configuration and the values its log line is made of, in one header below the loop's files
// (train.h, the protocols, sites.h and arms.h include it; it includes none of them): RunConfig, what training_log receives
// (LogInputs) and what the Megatron line prints (LogFields).
#pragma once
#include <ATen/core/Tensor.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trainer/capture/capture.h"
#include "trainer/measure/async_copy.h"
#include "trainer/loop/rerun.h"
#include "trainer/model/config.h"
#include "trainer/optim/adam.h"
#include "trainer/optim/grad_scaler.h"
#include "trainer/optim/scheduler.h"
#include "trainer/parallel/comm.h"
#include "trainer/parallel/layout.h"

namespace loopgate {

// Faults handed into a run from outside the trainer (the test side's injector, fixtures/faults/fault.h): a microbatch
// loss or a grad bucket poisoned in place where Megatron validates it, before the check, so the gates can prove
// that every arm detects it as early as the baseline.
class FaultPlan {
 public:
  virtual ~FaultPlan() = default;
  virtual void at_loss(int64_t iteration, int microbatch, int rank, at::Tensor& report) const = 0;
  virtual void at_bucket(int64_t iteration, int bucket, int rank, at::Tensor& grads) const = 0;
  // Whether a fault is planned at `iteration` on any rank (every rank answers alike: a CUDA graph runs it eagerly).
  virtual bool planned_at(int64_t iteration) const = 0;
};

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
  std::shared_ptr<const FaultPlan> faults; // --inject (null: none)
  double exit_duration_in_mins = 0.0;      // --exit-duration-in-mins (0 = off)
  // Checkpoints (trainer/loop/checkpoint.h), Megatron's --save, --save-interval, --load, --exit-interval: a save at
  // each iteration the interval divides and before an exit on --exit-interval or on the duration vote; a run that
  // loads continues after the saved iteration. Saves fall after iteration 1, at log points or between them (check_save_intervals, checkpoint.h).
  std::string save_dir;        // "": no saves
  int64_t save_interval = 0;   // 0: only the save on exit
  std::string load_dir;        // "": from the initial parameters
  int64_t exit_interval = 0;   // 0: none; else the run ends after an iteration it divides
  // Deterministic clock for the exit vote in tests: train time = iterations * this (0 = wall clock). Rank
  // `fast_clock_rank` runs its clock `fast_clock_factor` times faster, so the MAX vote matters.
  double simulated_minutes_per_iteration = 0.0;
  int fast_clock_rank = -1;
  double fast_clock_factor = 1.0;
  int64_t bucket_size = 0;                 // grad-buffer bucket size in elements (0 = default)
  CommOptions comm;                        // reduction order (kPermuted for the distributional gate)
  CpuComm cpu_comm = CpuComm::kMpi;        // the CPU groups' backend (comm.h); the GPU tier's is NCCL
  CaptureSpec capture;                     // CUDA-graph capture probe of one region (GPU only; off by default)
  // --cuda-graph iteration: the iterations of an arm that reads nothing between log points (zerosync), log points
  // included, replayed as one CUDA graph (capture.h); other arms run eagerly. On a CPU device (tests only; the CLI
  // refuses it) the operator-stream check stands in (op_stream.h).
  bool cuda_graph_iteration = false;
  // CPU simulation of a device running behind the host: timer events complete a seeded random 0..max_windows
  // log windows late (0 = off). What a GPU does and a lockstep CPU rank cannot show.
  struct EventLag {
    uint64_t seed = 0;
    int max_windows = 0;
  } event_lag;
  // CPU simulation of a large checkpoint write: each save takes this many seconds more on the timers' clock (0 =
  // off; ignored with device events). A CPU save of the tiny model takes a few ms, too little for a check to tell
  // whether the window open at the save left the save's time out (Megatron's save_checkpoint_and_time).
  double simulated_save_seconds = 0.0;
  // --async-emulation: on CPU, asynchronous reads land late (at their wait or, seeded, at their issue) and hold
  // NaN until then, and the timers' events lag 0..3 log windows (event_lag): a read or a timer that does not wait
  // for its copy or event sees poison, as it would on a device that runs behind (async_copy.h).
  AsyncEmulation async_emulation;
  // --stress (GPU): each asynchronous read's buffer poisoned and its copy delayed behind a seeded sleep kernel.
  DeviceStress stress;
  // --check-collectives: every collective of the run's groups first agrees on a fingerprint, so a rank that
  // skips or reorders one is named at its next collective instead of hanging (trainer/parallel/checked_comm.h).
  bool check_collectives = false;
  // --record-collectives: the Trace lists every collective and transfer each rank issued, per iteration
  // (trainer/parallel/recorded_comm.h); host bookkeeping only, no device read.
  bool record_collectives = false;
  // --digests: a bit-exact digest of every module boundary, reduced grad, clipped grad, optimizer state, loss and
  // collective, per iteration and microbatch, in the Trace (trainer/measure/digests.h); no read until the run ends.
  bool digests = false;
  bool param_checksums = false;            // a parameter checksum before and after each step (a Trace or gate)
  bool count_launches = false;             // operators dispatched per site per iteration (OpCounter; --syncs, gates)
  // Called on the last rank at each log point with the Megatron line (print_rank_last), as it is made.
  std::function<void(const std::string& line)> print_log_line;
};

// The LR schedule the run's flags give (Megatron's get_optimizer_param_scheduler): --lr and the rest, over
// --train-iters at the global batch.
inline SchedulerConfig scheduler_config(const RunConfig& c) {
  SchedulerIters si = c.schedule;
  si.train_iters = c.train_iters;
  si.global_batch_size = c.data.global_batch;
  si.weight_decay = c.weight_decay;
  return from_iters(si);
}

// What the loop hands to training_log each iteration (Megatron's arguments).
struct LogInputs {
  at::Tensor loss;         // [1] fp32 global-batch lm loss (last stage), undefined elsewhere
  at::Tensor grad_norm;    // [1] fp32, -1 when the step was skipped; undefined when no step ran
  at::Tensor num_zeros;    // [1] int64
  at::Tensor loss_scale;   // [1] fp32
  at::Tensor params_norm;  // [1] fp32 (computed every iteration with --log-params-norm, as Megatron)
  double learning_rate = 0.0;
  bool skipped = false;
  int64_t iteration = 0, train_iters = 0, consumed_samples = 0, global_batch = 0;
  bool log_point = false;
};

// The values a log point read, however its family read them: from the protocols to the record, copied once.
struct LogValues {
  double lm_loss = NAN;  // the average over advanced iterations; NaN: no loss on this rank (or none advanced)
  double learning_rate = NAN, loss_scale = NAN, grad_norm = NAN, num_zeros = NAN, params_norm = NAN;
  double elapsed_ms_per_iteration = 0.0;
  int64_t skipped = 0, nan = 0;
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
