// What a log point gives the loop, and the one builder every protocol family's training_log ends in: the values
// a family read (each in its own way) become Megatron's line and the Trace's fields here, the same for all.
// Megatron origin: training.py training_log.
#pragma once
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainer/timers/timers.h"
#include "trainer/loop/config.h"
#include "trainer/loop/loop_timers.h"
#include "trainer/loop/sites.h"

namespace loopgate {

struct LogOutputs {
  std::optional<std::string> line;  // printed on the last rank only (print_rank_last)
  double lm_loss = NAN, grad_norm = NAN, num_zeros = NAN, params_norm = NAN, learning_rate = NAN, loss_scale = NAN;
  bool nan_iteration = false;
  std::vector<TimerInterval> timer_intervals;
  TimerWindow timer_window;  // the iterations the logged elapsed time covers
  bool exit_vote = false;    // the duration vote, where it rode this log point's batched read
  // zerosync, at a log point (has_window): per iteration of the window since the previous log point (oldest
  // first), whether its step was skipped and whether the rerun vote found a fault; and whether an abort is due,
  // from which fault.
  bool has_window = false;
  std::vector<bool> window_skipped, window_fault;
  bool abort = false;
  int64_t fault_iteration = 0;  // 1-based
};

// The values a log point read, however its family read them.
struct LogValues {
  double lm_loss = NAN;  // the average over advanced iterations; NaN: no loss on this rank (or none advanced)
  double learning_rate = NAN, loss_scale = NAN, grad_norm = NAN, num_zeros = NAN, params_norm = NAN;
  double elapsed_ms_per_iteration = 0.0;
  int64_t skipped = 0, nan = 0;
};

// The line (on the last rank, unless `print` is false) and the outputs; takes the timers' report since the
// previous log point.
LogOutputs log_point_outputs(const SiteContext& c, const LogInputs& in, const LogValues& v, LoopTimers& timers,
                             bool print = true);

}  // namespace loopgate
