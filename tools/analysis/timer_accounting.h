// Timer accounting of a real run: is every interval reported once and in order? Megatron's log line prints
// "elapsed time per iteration (ms)", its interval timer's window divided by the iterations in it. The shim's host
// clock (run_values.h: when each log call returned) measures the same windows independently. Each window the log
// reports (elapsed x iterations since the last log point that reset the timer) is compared with the clock between
// the two log calls that bound it. A report that accumulates without reset, counts a window twice, drops an
// interval or charges a window with another's time (a save's) is off by at least that interval.
// Not compared: a window that opens at the timer's start (the first, and the one after Megatron's first log
// point, which does not reset): the shim has no clock for the timer's start.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tools/analysis/megatron_log.h"
#include "tools/analysis/run_values.h"

namespace loopgate {

struct TimerTolerance {
  double ms = 5.0;      // absolute, plus the print's rounding (0.05 ms x the iterations of the window)
  double share = 0.05;  // of the clock's window
};

struct ReportedWindow {
  int64_t from = 0, to = 0;  // iterations from+1 .. to
  double reported_ms = 0, clock_ms = 0;
  bool compared = false;
};

struct TimerAccounting {
  std::vector<ReportedWindow> windows;
  int lag = 0;               // log points between a window's end and the line that reports it (0 or 1)
  int64_t compared = 0;
  double worst_ms = 0, worst_share = 0;  // the largest |reported - clock| over the compared windows
  std::vector<std::string> problems;
};

// `printed`: the run's log (its elapsed times); `calls`: the shim's log calls of the rank that printed.
TimerAccounting judge_timer(const RunLog& printed, const std::vector<LogCall>& calls, const TimerTolerance& tol);

}  // namespace loopgate
