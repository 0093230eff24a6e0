// How an iteration lands in a run's result (run_result.h).
#include "trainer/loop/run_result.h"

#include <utility>

#include "trainer/common/error.h"

namespace loopgate {

void RunResult::add_iteration(IterationRecord rec, const LogOutputs& log, bool log_point,
                              const std::function<void(const std::string&)>& print) {
  iterations_done = rec.iteration;
  open_.push_back(std::move(rec));
  if (!log_point) return;
  learn(log.window);
  if (log.abort) {  // the parameters are as before the fault's step: every step since ran masked
    iterations_done = log.abort->fault_iteration - 1;  // the steps that took effect, as an eager loop's
    exit_code = log.abort->exit_code;
    iterations_past_fault = open_.back().iteration - log.abort->fault_iteration;
    trace.iterations_past_fault = iterations_past_fault;  // the Trace says it too
  } else {
    record_log_point(open_.back(), log);
    if (log.line) {
      log_lines.push_back(*log.line);
      if (print) print(*log.line);
    }
  }
  commit();
}

void RunResult::close(const std::vector<WindowStep>& steps) {
  learn(steps);
  commit();
}

void RunResult::add_abort(IterationRecord rec, int code) {
  rec.skipped = true;
  open_.push_back(std::move(rec));
  commit();
  exit_code = code;
}

void RunResult::finish() { commit(); }

void RunResult::learn(const std::vector<WindowStep>& steps) {
  if (steps.empty()) return;
  const int64_t first = open_.back().iteration - static_cast<int64_t>(steps.size());  // the one before the window
  size_t learned = 0;
  for (IterationRecord& r : open_) {
    if (r.iteration <= first) continue;
    const WindowStep& step = steps.at(static_cast<size_t>(r.iteration - first - 1));
    r.skipped = step.skipped;
    if (step.verdict) r.fault_verdicts.push_back({r.iteration, VerdictPhase::kBeforeStep, step.verdict});
    ++learned;
  }
  LG_CHECK(learned == steps.size(), "a log window of {} steps found {} open records", steps.size(), learned);
}

void RunResult::commit() {
  for (IterationRecord& r : open_) trace.records.push_back(std::move(r));
  open_.clear();
}

}  // namespace loopgate
