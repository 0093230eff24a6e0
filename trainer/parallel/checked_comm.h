// A group whose every collective first agrees on what it is. Before each all-reduce, all-gather, reduce-scatter,
// broadcast and barrier the ranks all-gather a fingerprint (operation, dtype, element count, the group's
// collective number, a hash of the loop site issuing it) and compare: a rank that skipped, added or reordered a
// collective is named at its next collective on the group, with what each rank issued, instead of leaving its
// peers waiting in a collective that never matches (torch.distributed's DETAIL debug mode does the same).
// RunConfig::check_collectives (`loopgate run --check-collectives`) wraps the run's groups. Sends and receives are
// not checked: their pair is not the group. Costs one small all-gather and one host read per collective.
#pragma once
#include <string>

#include "trainer/parallel/comm.h"

namespace loopgate {

// `inner` checked under `name` (world, tp, dp, pp, mp): the name the mismatch message gives the group.
CommPtr checked_comm(CommPtr inner, const std::string& name);
// Every group of `groups` checked.
ProcessGroups checked_groups(const ProcessGroups& groups);

}  // namespace loopgate
