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
#include "trainer/loop/log_window.h"
#include "trainer/loop/loop_timers.h"
#include "trainer/loop/sites.h"
#include "trainer/loop/trace.h"

namespace loopgate {

// The values a log point read, however its family read them: from the protocols to the record, copied once.
struct LogValues {
  double lm_loss = NAN;  // the average over advanced iterations; NaN: no loss on this rank (or none advanced)
  double learning_rate = NAN, loss_scale = NAN, grad_norm = NAN, num_zeros = NAN, params_norm = NAN;
  double elapsed_ms_per_iteration = 0.0;
  int64_t skipped = 0, nan = 0;
};

struct LogOutputs {
  std::optional<std::string> line;  // printed on the last rank only (print_rank_last)
  LogValues values;
  std::vector<TimerInterval> timer_intervals;
  TimerWindow timer_window;  // the iterations the logged elapsed time covers
  bool exit_vote = false;    // the duration vote, where it rode this log point's batched read
  // A family whose host learns a step's outcome only at the next log point: per iteration since the previous log
  // point, oldest first (empty elsewhere); and an abort that is due.
  std::vector<WindowStep> window;
  std::optional<LateAbort> abort;
};

// The line (on the last rank, unless `print` is false) and the outputs; takes the timers' report since the
// previous log point.
LogOutputs log_point_outputs(const SiteContext& c, const LogInputs& in, const LogValues& v, LoopTimers& timers,
                             bool print = true);

// A log point's record: its values and the timers' report.
void record_log_point(IterationRecord& rec, const LogOutputs& log);

}  // namespace loopgate
