// The training loop under test: one `train` / `train_step` for every arm. How the host-sync sites read is the arm's
// loop protocol (trainer/loop/protocol.h), chosen once per arm segment, so the loop body is the same for all arms.
// Megatron: training.py train(), train_step(), training_log(), checkpoint_and_decide_exit().
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer/capture/capture.h"
#include "trainer/loop/arms.h"
#include "trainer/loop/config.h"
#include "trainer/loop/rerun.h"
#include "trainer/loop/loop_timers.h"
#include "trainer/loop/trace.h"
#include "trainer/model/config.h"
#include "trainer/optim/adam.h"
#include "trainer/optim/grad_scaler.h"
#include "trainer/optim/scheduler.h"
#include "trainer/parallel/comm.h"
#include "trainer/parallel/layout.h"

namespace loopgate {


struct RunResult {
  Trace trace;                     // this rank's records
  int exit_code = 0;               // 0, or the rerun machine's abort code
  int64_t iterations_done = 0;
  bool exited_on_duration = false;
  bool exited_on_interval = false;  // --exit-interval ended the run (after its save, with --save)
  // The parameters as the run leaves them (RunConfig::param_checksums; 0 when not asked): a step taken after the
  // last record (a replay launched behind a log point whose read then ended the run) shows only here.
  uint64_t final_param_checksum = 0;
  std::vector<std::string> log_lines;  // Megatron-format lines printed on this rank (print_rank_last)
  TimerSummary timers;  // every interval reported, in report order; waits; pending bound
  CaptureVerdict capture;                // the capture probe's verdict on this rank (attempted = false: off)
  GraphReport graph;                     // --cuda-graph iteration on this rank (on = false: off)
  // zerosync: an abort verdict reaches the host at the next log point; the iterations it ran past the fault
  // (every step masked) — the arm's one behavioural difference from the baseline, which stops at the fault.
  int64_t iterations_past_fault = 0;
  // --async-emulation: asynchronous reads issued into their buffer before the last copy landed (async_copy.h).
  int64_t async_races = 0;
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
  // timers record nothing (LoopTimers), so `ab --arms A,A:bare` prices loopgate's bookkeeping; the numbers are the same.
  // `digests` false: a run with RunConfig::digests takes none in these iterations (`ab --arms A,A:digests`).
  bool run(const Arm& arm, int64_t iterations, bool instrumented = true, bool digests = true);
  int64_t iterations_done() const;
  RunResult finish();  // drains the timers; call once, at the end

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};


}  // namespace loopgate
