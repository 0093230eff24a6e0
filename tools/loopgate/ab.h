// Step-time A/B for people: samples per window from run files (timestamps between log lines, or the elapsed
// field), and the report — an nccl-tests-style table plus tools/analysis/stats.h's sentence — that `loopgate ab`,
// `loopgate compare` and any other source of samples (an in-process phase runner) print the same way.
// Not here: the statistics themselves (tools/analysis/stats.h) or reading files (tools/analysis/megatron_log.h).
#pragma once
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/analysis/megatron_log.h"
#include "tools/analysis/stats.h"
#include "tools/loopgate/step_time_options.h"

namespace loopgate {


// One side's samples: milliseconds per iteration, one per window, warm-up windows already dropped.
struct AbSamples {
  std::string label;                 // "A", "B"
  std::vector<std::string> names;    // files (or arms, phases) the samples came from
  std::string source;                // how they were measured, e.g. "timestamps (wall clock between log lines)"
  std::vector<double> samples;
  int64_t windows = 0, dropped = 0;  // before dropping; dropped as warm-up
  std::vector<std::string> notes;    // e.g. which iterations the dropped windows covered, fallbacks taken
};

// The windows of one run. InputError naming the file when it has no step times, or a timestamp goes backwards.
AbSamples step_time_samples(const RunLog& run, const StepTimeOptions& o, const std::string& label);
// InputError naming the side when fewer than 2 windows are left after the warm-up.
void require_samples(const AbSamples& s, const StepTimeOptions& o);
// A note when A and B measured step time differently (timestamps on one side, a logged field on the other: wall
// clock between printed lines against the loop's own timer), "" when they agree.
std::string mixed_sources_note(const AbSamples& a, const AbSamples& b);
// Several runs of one side pooled (their windows side by side; each run's warm-up dropped on its own).
AbSamples pool_samples(const std::vector<AbSamples>& runs, const std::string& label);

// Header once, a row per side (runs, source, windows, dropped, samples, median, min, max), the files and notes,
// then a footer: U, p and method, shift and CI, ratio, and the sentence.
// `descriptive`: the samples are windows of runs (not independent): the sentence describes, it gives no verdict.
void print_ab_report(std::FILE* out, const AbSamples& a, const AbSamples& b, const AbStats& s, bool descriptive = false);
// Each run's median window: the unit of step_time_verdict (stats.h).
std::vector<double> run_medians(const std::vector<AbSamples>& runs);
nlohmann::json ab_stats_json(const AbStats& s);
nlohmann::json ab_report_json(const AbSamples& a, const AbSamples& b, const AbStats& s);

// The --json file opened before any work (InputError naming the flag when it cannot be written); null if no path.
std::unique_ptr<std::ofstream> open_json_output(const std::string& path);

}  // namespace loopgate
