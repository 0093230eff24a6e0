// The judged rows of `loopgate compare` (tools/loopgate/compare.cpp prints them): early lm loss / params norm
// identity, LR identity, NaN and skipped iterations, the grad norm / num zeros spread. Every field a row judges is
// listed once in compared_fields(): the rows read their fields from that list, and the known-answer matrix
// (suites/unit/test_compare_known_answers.cpp) plants a difference in each one, so a field judged without a
// known answer fails a test.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/analysis/megatron_log.h"
#include "tools/analysis/stats.h"
#include "tools/loopgate/ab.h"
#include "tools/loopgate/step_time_options.h"

namespace loopgate {

enum class CompareResult { kPass, kFail, kNotRun, kInfo };
const char* compare_result_name(CompareResult r);  // "PASS" | "FAIL" | "NOT RUN" | "INFO"

struct CompareRow {
  std::string check;
  CompareResult result = CompareResult::kNotRun;
  std::string detail;
  std::vector<std::string> problems;  // one line each: what differs, where, both values
  std::vector<std::string> notes;     // what was not compared and why
};

struct CompareRun {
  char side;  // 'A' or 'B'
  RunLog log;
};

// How a field is judged: identical at iterations 1..--early; identical wherever both sides logged it; a count
// that must be 0 in every run; over the whole run (>= 2 runs a side), identical where the baseline reproduces the
// field, else within the spread rule. The early-identity fields are judged over the whole run too.
enum class FieldRule { kEarlyIdentity, kIdentity, kZeroCount, kSpread };

struct ComparedField {
  std::string name;  // as the problems print it: "lm loss", "number of nan iterations", ...
  FieldRule rule;
  std::optional<LoggedValue> RunEntry::*value = nullptr;  // a logged value, or
  std::optional<int64_t> RunEntry::*count = nullptr;      // an interval counter
};
const std::vector<ComparedField>& compared_fields();

// The spread rule's factor for a noisy iteration with this many runs on the smaller side: |mean A - mean B| may reach
// this many times the within-side range. 1 (the seed's rule) from 7 runs a side; larger below, where the seed's
// rule calls up to 22 % of an A/A pair's noisy iterations different.
double spread_factor(int runs_per_side);

// The four judged rows, in table order (the step-time row is compare.cpp's: informational).
std::vector<CompareRow> judged_rows(const std::vector<CompareRun>& runs, int64_t early);

// The step-time row (compare.cpp, informational): windows pooled per side, the verdict with runs as units.
struct StepTimeRow {
  CompareRow row;
  bool ran = false;
  AbSamples a, b;
  AbStats stats;
  StepTimeVerdict verdict;
};
StepTimeRow step_time_row(const std::vector<CompareRun>& runs, const StepTimeOptions& step, double alpha);

// The table (a row per check, a footer with the verdict), then every problem and note; the rows as JSON.
void print_compare_table(const std::vector<CompareRow>& rows, bool ok);
void print_compare_problems(const std::vector<CompareRow>& rows);
nlohmann::json compare_rows_json(const std::vector<CompareRow>& rows);

}  // namespace loopgate
