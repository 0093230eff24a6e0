// The exact values of a real run, as loopgate's Python shim records them (tools/cupti/loopgate_pyshim/
// loopgate_values.py writes values.RANK.json, format "loopgate-values/1", into each run's folder): one RunEntry per
// call of the log function with exact bits, the host clock when each call returned, and the digests of the
// parameters and optimizer state after the first steps and at exit. `loopgate pair` judges these instead of the
// printed digits; its timer row reads the clocks. Malformed files are InputErrors naming the file.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/analysis/megatron_log.h"

namespace loopgate {

// One call of the log function (Megatron's training_log).
struct LogCall {
  int64_t iteration = 0;
  double clock = 0;    // seconds (time.perf_counter) when the call returned: the end of a log point's window
  bool first = false;  // Megatron's is_first_iteration: that log point does not reset the timer window
};

// A bitwise digest of every tensor after one step ("1", "2", ..., or "end": at exit).
struct StepDigest {
  std::string step;
  std::vector<std::pair<std::string, std::string>> tensors;  // name -> blake2b of the raw bytes (hex)
};

struct RunValues {
  std::string path;
  int rank = 0;
  RunLog exact;                  // kind kShimValues: every log call's values as exact bits
  std::vector<LogCall> calls;    // in call order
  std::vector<StepDigest> digests;
};

RunValues run_values_from_json(const nlohmann::json& j, const std::string& name);
// A run's numbers from any file `loopgate compare` reads: a shim values file (its exact RunLog), or else read_run's
// kinds (a Megatron log, golden values, a Trace).
RunLog read_any_run(const std::string& path);
// Every values.RANK.json in `dir`, by rank (none: empty).
std::vector<RunValues> read_values_folder(const std::string& dir);

// Where two runs' digests first part: the first step (in the order recorded) with a tensor whose digest differs,
// and that tensor. Empty when they agree at every step both recorded.
struct DigestParting {
  std::string step, tensor;
  size_t differing = 0;  // tensors that differ at that step
};
std::optional<DigestParting> first_parting(const std::vector<StepDigest>& a, const std::vector<StepDigest>& b);

}  // namespace loopgate
