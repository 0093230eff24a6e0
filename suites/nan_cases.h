// The NaN/Inf fault scenarios of the nan_detection gate, shared with the gates that judge the same runs (the
// collectives check reads their recorded collectives): one table, so a shared scenario key always means one config.
#pragma once
#include <string>
#include <vector>

#include "fixtures/scenarios.h"

namespace loopgate {

struct FaultCase {
  std::string name;
  std::string inject;
  FaultOutcome on_fault;
  int64_t iters;
  int64_t detect;      // 1-based iteration every arm must detect at
  bool bad_loss;       // the fault poisons a loss: a skipped iteration counts as a nan iteration
};

// The fixture's cases (fault iterations are 0-based as in --inject; Megatron's iterations are 1-based).
std::vector<FaultCase> fault_cases();
RunConfig case_config(const FaultCase& fc);
// Scenario "nan:<name>" for `arm`.
const ScenarioResult& run_case(const FaultCase& fc, const std::string& arm);

}  // namespace loopgate
