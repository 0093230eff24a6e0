// Reads what real runs leave behind into one neutral form (a RunLog: one RunEntry per logged iteration), so
// `loopgate ab` and `loopgate compare` judge Megatron stdout logs, Megatron functional-test golden values and
// loopgate Traces alike. Log values keep their printed text ("identical as printed" compares text at the
// coarser printed precision); Trace values are exact bits. Malformed iteration lines are InputErrors naming
// file:line, never skipped. Not here: statistics (stats.h), verdicts and tables (tools/loopgate/compare.cpp).
//
// Log lines (docs/design.md "Megatron semantics the trainer ports", trainer/loop/log_point.cpp format_log_line):
//   [PREFIX] [ [YYYY-MM-DD HH:MM:SS(.ffffff)]] iteration N/ M | key: value | key: value | ... |
// PREFIX, optional, one of the launchers' rank tags: "[rank7]: " (torch elastic), "[default7]:" (torchrun
// --tee), "[1,7]<stdout>:" (Open MPI --tag-output), "7: " (srun --label). Any other line is noise, unless it holds
// "iteration N/ M |" behind an unrecognised prefix (then an InputError: a real line would be lost).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/loop/trace.h"

namespace loopgate {

// One value as its source gave it.
struct LoggedValue {
  double value = 0.0;
  std::string text;    // as printed (log text, golden "values"); hex(value) when exact
  bool exact = false;  // exact bits (Trace, golden "values_hex") or as printed
};

struct RunEntry {
  int64_t iteration = 0;
  int64_t train_iters = -1;  // the "/ M" of a log line
  int line = 0;              // 1-based line of a log file; 0 for JSON inputs
  std::optional<LoggedValue> lm_loss, params_norm, grad_norm, num_zeros, learning_rate, loss_scale;
  std::optional<LoggedValue> optimizer_lr;  // the LR the optimizer's first param group got (shim values only)
  // Milliseconds per iteration over the iterations this entry covers: the log's "elapsed time per iteration
  // (ms)", a Trace's interval-time window, golden "iteration-time" (seconds) x 1000.
  std::optional<double> elapsed_ms;
  // Iterations counted by this entry: a log line's interval counters; a Trace record's flags (0 or 1).
  std::optional<int64_t> skipped_iterations, nan_iterations;
  std::optional<double> timestamp;  // seconds since 1970-01-01 of the printed (naive, local) date and time
  std::string timestamp_text;       // as printed, without brackets
  std::map<std::string, std::string> other;  // every other key, value as printed (consumed samples, throughput, ...)
};

enum class RunKind { kMegatronLog, kGoldenValues, kTrace, kShimValues };
// "Megatron log" | "golden values" | "loopgate Trace" | "shim values" (run_values.h)
const char* run_kind_name(RunKind kind);

struct RunLog {
  std::string path;
  RunKind kind = RunKind::kMegatronLog;
  std::vector<RunEntry> entries;  // ascending iteration, one per iteration
  int last_rank = -1;             // Trace: the rank whose records were read
  // Megatron log: its "arguments" block (every resolved argument, name -> value as printed); unset if none.
  std::optional<std::map<std::string, std::string>> arguments;

  const RunEntry* find(int64_t iteration) const;
  // Where an entry came from, for messages: "path:line" for logs, "path iteration N" otherwise.
  std::string where(const RunEntry& e) const;
};

// Reads a file, detecting its kind from the content: JSON with "records" -> Trace; JSON whose values are
// metrics with "values" -> golden values; otherwise Megatron log text. A missing file, or one that is none of
// them, is an InputError naming it.
RunLog read_run(const std::string& path);
// The three readers; `name` appears in every error message (the file path).
RunLog parse_megatron_log(const std::string& text, const std::string& name);
RunLog golden_values_run(const nlohmann::json& golden, const std::string& name);
// The last rank's records (Megatron's print_rank_last); metrics at log points (iteration 1 and every record
// that reports timer intervals), where the log line would print them (not a NaN or negative loss average, not a
// skipped step's grad norm: the Trace holds NaN or -1 there); elapsed_ms from the interval-time intervals, interval k spanning the
// iterations between log points k-1 and k.
RunLog trace_run(const Trace& trace, const std::string& name);

// ---- the arguments block ----

// Megatron's print of its resolved arguments, which `loopgate run` prints too:
//   ------------------------ arguments ------------------------
//     NAME ........................................... VALUE      (name padded with dots to 48 columns)
//   -------------------- end of arguments ---------------------
std::string format_arguments_block(const std::map<std::string, std::string>& arguments);
// The first block in `text` (rank prefixes stripped); unset if it has none. Lines inside it that are not
// "  NAME ... VALUE" are other processes' output and skipped; a block with no end line is an InputError.
std::optional<std::map<std::string, std::string>> read_arguments_block(const std::string& text, const std::string& name);

// ---- comparing logged values ----

// Exact bits when both are exact; otherwise both rendered at the coarser printed precision (the finer value
// formatted like the coarser text must give that text). Non-finite values are equal when both are NaN or the
// same infinity.
bool same_logged_value(const LoggedValue& a, const LoggedValue& b);
// `v` formatted like `printed`: scientific with as many mantissa decimals ("1.000000E-07"), or fixed with as
// many decimals ("311.932", "0").
std::string format_like(double v, const std::string& printed);
// How a value was printed, for report rows: "exact bits", "%.6E", "%.3f", ...
std::string printed_format(const LoggedValue& v);

}  // namespace loopgate
