// How an iteration lands in a run's result (run_result.h).
#include "trainer/loop/run_result.h"

namespace loopgate {

void RunResult::add_iteration(const IterationRecord& rec, const LogOutputs& log, bool log_point,
                              const std::function<void(const std::string&)>& print) {
  trace.records.push_back(rec);
  if (log_point) record_log_point(trace.records.back(), log);
  if (log.line) {
    log_lines.push_back(*log.line);
    if (print) print(*log.line);
  }
  iterations_done = rec.iteration;
}

void RunResult::learn_window(const std::vector<WindowStep>& steps) {
  if (steps.empty() || trace.records.empty()) return;
  IterationRecord last = trace.records.back();  // backfill_window takes the window's last record apart
  trace.records.pop_back();
  backfill_window(trace.records, last, steps);
  trace.records.push_back(std::move(last));
}

void RunResult::add_abort(IterationRecord rec, int code) {
  rec.skipped = true;
  trace.records.push_back(std::move(rec));
  exit_code = code;
}

void RunResult::add_late_abort(const IterationRecord& rec, const LateAbort& abort) {
  trace.records.push_back(rec);
  iterations_done = abort.fault_iteration - 1;  // the steps that took effect, as an eager loop's
  exit_code = abort.exit_code;
  iterations_past_fault = rec.iteration - abort.fault_iteration;
  trace.iterations_past_fault = iterations_past_fault;  // the Trace says it too
}

}  // namespace loopgate
