// What a log point gives the loop, and the one builder every protocol family's training_log ends in: the values
// a family read (each in its own way) become Megatron's line and the Trace's fields here, the same for all.
// Megatron origin: training.py training_log.
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainer/timers/timers.h"
#include "trainer/loop/bundle.h"
#include "trainer/loop/config.h"
#include "trainer/loop/log_stats.h"
#include "trainer/loop/log_window.h"
#include "trainer/loop/loop_timers.h"
#include "trainer/loop/sites.h"
#include "trainer/loop/trace.h"

namespace loopgate {

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

// The device stats (log_stats.h), read from the table. A deferred family's batched read: the logged rows into `bundle`
// in table order, `kinds` of them (a bundle casts each run of one dtype once, so a family may keep the counts apart
// from the floats); a logged value this rank does not hold rides a reduced read as absent (every rank's bundle lines
// up in the MAX) and is left out of an unreduced one. Landing: each row from the read's values, NaN where it did not
// ride, as the baseline's read would give it. Eager: the baseline's reads, each logged row it holds at its own site.
void add_log_stats(Bundle& bundle, const LogInputs& in, const RunConfig& config, bool reduced,
                   StatKinds kinds = StatKinds::kAll);
void land_log_stats(const std::map<std::string, double>& read, LogValues& out);
void read_log_stats_eager(const SiteContext& c, const LogInputs& in, LogValues& out);

// A log point's record: its values and the timers' report.
void record_log_point(IterationRecord& rec, const LogOutputs& log);

}  // namespace loopgate
