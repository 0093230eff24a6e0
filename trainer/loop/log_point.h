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
#include "trainer/loop/trace.h"

namespace loopgate {

// A step whose outcome the host learns only at the next log point (the on-device family).
struct WindowStep {
  bool skipped = false;
  const char* verdict = nullptr;  // the rerun verdict the vote found there ("abort", "skip_step"); null: none
};

// An abort the host learns at a log point after its fault's iteration (every step since ran masked).
struct LateAbort {
  int64_t fault_iteration = 0;  // 1-based
  int exit_code = 0;
};

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

// A log window as a save finds it between log points, the same for every family: what the next line averages and
// counts since the last log point, so that a run loaded from the save continues it (checkpoint.h), whichever family
// saved and whichever loads.
struct LogWindow {
  bool has_loss = false;  // an advanced iteration's loss is in the sum (on the rank that holds the loss)
  float loss_sum = 0.0f;  // the advanced iterations' fp32 loss sum, as Megatron's total_loss_dict holds it
  int64_t advanced = 0, skipped = 0, nan = 0;
  // An abort the on-device family found in the window, due at its next log point: the fault's 1-based iteration
  // and exit code (0: none). Only that family can carry it to the next log point.
  int64_t abort_at = 0;
  int abort_code = 0;
  // The outcomes of the window's steps that only the save's read taught the host (the on-device family), oldest
  // first: for the saving run's records; not saved.
  std::vector<WindowStep> steps;
};

// A window's step counts since the last log point: the one set the three families keep on the host (the
// checkpoint carries them in LogWindow).
struct WindowCounts {
  int64_t advanced = 0, skipped = 0, nan = 0;
  void restore(const LogWindow& w) {
    advanced = w.advanced;
    skipped = w.skipped;
    nan = w.nan;
  }
  void into(LogWindow& w) const {
    w.advanced = advanced;
    w.skipped = skipped;
    w.nan = nan;
  }
  void clear() { *this = WindowCounts{}; }
};

// The line (on the last rank, unless `print` is false) and the outputs; takes the timers' report since the
// previous log point.
LogOutputs log_point_outputs(const SiteContext& c, const LogInputs& in, const LogValues& v, LoopTimers& timers,
                             bool print = true);

// A log point's record: its values and the timers' report.
void record_log_point(IterationRecord& rec, const LogOutputs& log);

}  // namespace loopgate
