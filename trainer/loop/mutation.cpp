// Mutation's defaults (mutation.h).
#include "trainer/loop/mutation.h"

#include "trainer/loop/arms.h"
#include "trainer/loop/rerun.h"

namespace loopgate {

void Mutation::bank_nan(RerunStateMachine& rerun, const at::Tensor& value) const { rerun.bank_value(value); }

Comm* rerun_vote_group(const Mutation& m, ProcessGroups& groups) {
  Comm* group = groups.world.get();
  m.wrap(made::RerunVoteGroup{group, groups});
  return group;
}

Comm* exit_vote_group(const Mutation& m, ProcessGroups& groups) {
  Comm* group = groups.world.get();
  m.wrap(made::ExitVoteGroup{group, groups});
  return group;
}

CommPtr grad_stats_group(const Mutation& m, ProcessGroups& groups) {
  CommPtr group = groups.mp;
  m.wrap(made::GradStatsGroup{group, groups});
  return group;
}

const Mutation& no_mutation() {
  static const Mutation none;
  return none;
}

const Mutation& Arm::mutated() const { return mutation ? *mutation : no_mutation(); }

}  // namespace loopgate
