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
#include "trainer/loop/run_result.h"
#include "trainer/loop/loop_timers.h"
#include "trainer/loop/trace.h"
#include "trainer/model/config.h"
#include "trainer/optim/adam.h"
#include "trainer/optim/grad_scaler.h"
#include "trainer/optim/scheduler.h"
#include "trainer/parallel/comm.h"
#include "trainer/parallel/layout.h"

namespace loopgate {


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
