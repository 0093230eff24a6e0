// `loopgate pair --baseline CMD --candidate CMD`: the gate for two real training commands (Megatron-LM's
// pretrain_gpt.py, or `loopgate run`). It runs them as adjacent, alternating phases in one job (A1 B1 A2 B2 ...),
// keeps every log and sync table under --out-dir, and judges them in rows: every run completed, resolved
// arguments identical, iterations 1..K bit-identical, LR identical, no NaN or skipped step, grad norm / num zeros
// spread, a NaN injected into both arms caught before the step alike, host syncs per iteration per site within
// the budget, the step-time verdict and the check flags each arm ran with. Exit 0 no row failed, 1 one failed,
// 2 bad input (before any run). docs/megatron.md says how to point it at a Megatron-LM checkout.
// Each run gets its own folder in $LOOPGATE_PAIR_DIR (log.txt, the counter's syncs.PID.json); a run that leaves a
// Trace there (trace.json, `loopgate run --trace`) is judged on its exact bits, its log on the printed values.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tools/loopgate/step_time_options.h"

namespace loopgate {

struct PairOptions {
  std::string baseline, candidate;  // shell command lines (run by /bin/sh -c)
  int runs = 3;                     // per arm
  std::string out_dir = "loopgate-pair";
  int64_t early = 2;
  std::vector<std::string> allow_args;   // NAME=REASON: an argument that may differ between the arms
  std::vector<std::string> allow_syncs;  // SITE=REASON: a site (substring) whose syncs may grow
  std::string sync_budget;               // a syncs table: the budget instead of the baseline's
  std::string counter = "cupti";         // cupti: each run under the CUDA sync counter; off: tables the run writes
  std::string iter_fn = "megatron.training.training:train_step", iters, inject_lib;
  // Fault specs: per spec, one more run per arm with LOOPGATE_NAN_INJECT set to it and the shim on PYTHONPATH,
  // which injects it into a Python program (tools/cupti/loopgate_pyshim/loopgate_nan.py: Megatron-LM by default).
  std::vector<std::string> nan_inject;
  double run_timeout = 0;  // seconds per run, 0 = none
  // The shim records each run's exact values, digests and log clocks (tools/cupti/loopgate_pyshim/loopgate_values.py):
  // the rows judge bits instead of printed digits, and the timer row has a clock. --values off: the printed log.
  bool values = true;
  std::string log_fn = "megatron.training.training:training_log";
  double timer_tolerance_ms = 5.0, timer_tolerance = 0.05;
  // Restart replay: each arm saved at K and loaded to the end, and the candidate loading the baseline's checkpoint.
  int64_t resume_at = 0;
  std::string save_flags = "--save {dir} --save-interval {k} --exit-interval {k}", load_flags = "--load {dir}";
  bool fail_if_slower = false;
  std::string json_path, junit_path, html_path;
  double alpha = 0.05;
  StepTimeOptions step;
  // A pair's --json from an earlier call: judge the runs it lists, kept in --out-dir, instead of running any (new
  // declarations, a new budget, without the GPU job again).
  std::string rejudge;
  std::string self_exe;
};

CLI::App* add_pair_command(CLI::App& app, PairOptions& o);
int cmd_pair(const PairOptions& o);

}  // namespace loopgate
