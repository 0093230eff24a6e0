// Timer accounting of a real run (timer_accounting.h).
#include "tools/analysis/timer_accounting.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace loopgate {
namespace {

double allowed_ms(const ReportedWindow& w, const ReportedWindow& clock, const TimerTolerance& tol) {
  return tol.ms + 0.05 * static_cast<double>(w.to - w.from) + tol.share * clock.clock_ms;
}

// Windows compared, and those whose report is off its clock by more than allowed, each report read `lag` log
// points late.
struct Fit {
  int64_t compared = 0, misfits = 0;
};
Fit fit(const std::vector<ReportedWindow>& w, int lag, const TimerTolerance& tol) {
  Fit f;
  for (size_t k = static_cast<size_t>(lag); k < w.size(); ++k) {
    if (!w[k].compared || !w[k - lag].compared) continue;
    ++f.compared;
    if (std::fabs(w[k].reported_ms - w[k - lag].clock_ms) > allowed_ms(w[k], w[k - lag], tol)) ++f.misfits;
  }
  return f;
}

}  // namespace

TimerAccounting judge_timer(const RunLog& printed, const std::vector<LogCall>& calls, const TimerTolerance& tol) {
  TimerAccounting out;
  std::map<int64_t, LogCall> call_at;  // the last log call of each iteration
  for (const LogCall& c : calls) call_at[c.iteration] = c;
  const LogCall* previous = nullptr;
  int64_t previous_it = 0;
  for (const RunEntry& e : printed.entries) {
    if (!e.elapsed_ms) continue;
    const auto c = call_at.find(e.iteration);
    if (c == call_at.end()) {
      out.problems.push_back(fmt::format("{}: the log reports iteration {}, but the shim saw no log call for it",
                                         printed.where(e), e.iteration));
      continue;
    }
    ReportedWindow w;
    w.to = e.iteration;
    w.compared = previous != nullptr && !previous->first;
    w.from = w.compared ? previous_it : 0;
    w.reported_ms = *e.elapsed_ms * static_cast<double>(w.to - w.from);
    w.clock_ms = previous ? (c->second.clock - previous->clock) * 1000.0 : 0.0;
    out.windows.push_back(w);
    previous = &c->second;
    previous_it = e.iteration;
  }
  // Event-based timers report a window one log point late (the seed's lagged timers). Lag 1 only where it fits every
  // window and lag 0 misfits at least two: one bad window (an interval lost) must not pass as a lag, and windows of
  // equal length fit both (then 0).
  const Fit f0 = fit(out.windows, 0, tol), f1 = fit(out.windows, 1, tol);
  if (f1.compared >= 2 && f1.misfits == 0 && f0.misfits >= 2) out.lag = 1;
  for (size_t k = static_cast<size_t>(out.lag); k < out.windows.size(); ++k) {
    const ReportedWindow& w = out.windows[k];
    const ReportedWindow& clock = out.windows[k - out.lag];
    if (!w.compared || !clock.compared) continue;
    ++out.compared;
    const double error = std::fabs(w.reported_ms - clock.clock_ms);
    const double allowed = allowed_ms(w, clock, tol);
    out.worst_ms = std::max(out.worst_ms, error);
    if (clock.clock_ms > 0) out.worst_share = std::max(out.worst_share, error / clock.clock_ms);
    if (error > allowed)
      out.problems.push_back(fmt::format(
          "iteration {}: the log reports {:.1f} ms for iterations {}-{}; the shim's clock measured {:.1f} ms for the "
          "window it ends (iterations {}-{}{}): off by {:+.1f} ms, beyond {:.1f} ms", w.to, w.reported_ms, w.from + 1,
          w.to, clock.clock_ms, clock.from + 1, clock.to, out.lag ? ", one log point earlier" : "",
          w.reported_ms - clock.clock_ms, allowed));
  }
  return out;
}

}  // namespace loopgate
