// The NaN/Inf fault scenarios (nan_cases.h).
#include "suites/nan_cases.h"

#include <fmt/format.h>

#include <algorithm>

#include "fixtures/faults/fault.h"

namespace loopgate {

std::vector<FaultCase> fault_cases() {
  const RunConfig c = gate_config();
  const int last = world_size() - 1;
  const int micro = num_microbatches(c.data, Layout::build(world_size(), c.layout));
  const int mb = micro > 1 ? 1 : 0;
  // dp64 (~7 s per scenario even for two iterations): one scenario covers the first iteration, a grad bucket on
  // rank 0 and the skip outcome; the last rank's loss and the abort outcome are covered on the other fixtures.
  if (heavy_fixture())
    return {{"first-iteration-then-grad-bucket0-rank0-skip", "iter=0,site=loss,kind=nan;iter=1,site=grad,bucket=0,rank=0",
             FaultOutcome::kSkipStep, 2, 2, false}};
  std::vector<FaultCase> cases = {
      // Iteration 1 poisoned on every rank (not validated), iteration 2 on the last rank's loss: detect at 2.
      {"first-iteration-then-loss-last-abort",
       fmt::format("iter=0,site=loss,kind=nan;iter=1,site=loss,mb={},rank={}", mb, last), FaultOutcome::kAbort, 3, 2,
       true},
      {"grad-bucket0-rank0-skip", "iter=2,site=grad,bucket=0,rank=0", FaultOutcome::kSkipStep, 4, 3, false},
  };
  cases.push_back({"loss-last-rank-inf-skip", fmt::format("iter=2,site=loss,mb={},rank={},kind=inf", mb, last),
                   FaultOutcome::kSkipStep, 4, 3, true});
  cases.push_back({"grad-every-bucket-last-rank-abort", fmt::format("iter=2,site=grad,rank={},kind=inf", last),
                   FaultOutcome::kAbort, 4, 3, false});
  return cases;
}

RunConfig case_config(const FaultCase& fc) {
  RunConfig c = gate_config();
  c.train_iters = fc.iters;
  c.schedule.lr_warmup_iters = std::min<int64_t>(c.schedule.lr_warmup_iters, fc.iters - 1);  // warmup < train
  c.log_interval = 1;
  c.faults = inject(parse_fault_specs(fc.inject));
  c.rerun.on_fault = fc.on_fault;
  return c;
}

const ScenarioResult& run_case(const FaultCase& fc, const std::string& arm) {
  return run_scenario("nan:" + fc.name, case_config(fc), arm);
}

}  // namespace loopgate
