// Where the loop meets the digests (trainer/measure/digests.h) and a mutation's module changes: the stage's
// module tap, and groups that digest every collective's input and output. Built only when asked
// (RunConfig::digests) or when the arm's mutation changes module boundaries; otherwise the model has no tap.
#pragma once
#include <memory>

#include "trainer/loop/arms.h"
#include "trainer/measure/digests.h"
#include "trainer/model/module_tap.h"
#include "trainer/parallel/comm.h"

namespace loopgate {

// The stage's tap: the current arm's mutation changes the boundary first, then the digest records it (null log:
// no digests). `arm` points at the loop's current arm (it changes between segments).
std::unique_ptr<ModuleTap> make_loop_tap(const Arm* const* arm, DigestLog* log);
// Every group's collectives digested into `log` (input before, output after), named like the recorded ones
// with the scope that issued them ("tp#0.all_reduce.sum@numerics").
ProcessGroups digested_groups(const ProcessGroups& groups, const std::shared_ptr<DigestLog>& log);

}  // namespace loopgate
