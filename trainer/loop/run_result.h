// What one run leaves on one rank (RunResult), and how each iteration lands in it: the Trace's records, the log
// lines, the exit, and what loopgate's instruments found over the run.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "trainer/capture/capture.h"
#include "trainer/loop/log_point.h"
#include "trainer/loop/loop_timers.h"
#include "trainer/loop/trace.h"

namespace loopgate {

class RunResult {
 public:
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

  // How an iteration lands here. Its record stays open while the host may still learn its step's outcome (the
  // on-device family learns it only at the next log point or save). A log point closes every open record: the
  // window's outcomes applied, a due abort taken (no line then, as Megatron exits before it logs), the records
  // committed to the Trace with the log point's values, and its line handed to `print` at once, as Megatron prints it.
  void add_iteration(IterationRecord rec, const LogOutputs& log, bool log_point,
                     const std::function<void(const std::string&)>& print);
  // A save between log points read the open records' outcomes so far (`steps`, oldest first): they close.
  void close(const std::vector<WindowStep>& steps);
  // One the rerun machine aborted before its step: Megatron's exit code, no line.
  void add_abort(IterationRecord rec, int exit_code);
  // The run ends: records still open (after the last log point) commit as they stand.
  void finish();

 private:
  // The window's outcomes, oldest first, are the last open records' (by iteration).
  void learn(const std::vector<WindowStep>& steps);
  void commit();

  std::vector<IterationRecord> open_;  // iterations since the last close, oldest first
};

}  // namespace loopgate
