// select_protocol (protocol.h): the arm's family picks the protocol, and the arm's mutation may wrap it.
#include <memory>

#include "trainer/loop/mutation.h"
#include "trainer/loop/protocol.h"

namespace loopgate {

std::unique_ptr<LoopProtocol> select_protocol(const Arm& arm, const RunConfig& config, Ledger& ledger,
                                              ProcessGroups& groups, int world_rank, LoopTimers& timers) {
  const SiteContext c{arm, config, ledger, groups, world_rank};
  std::unique_ptr<LoopProtocol> chosen;
  if (arm.on_device) {
    chosen = make_on_device_protocol(c, timers);
  } else if (arm.one_read) {
    chosen = make_one_read_protocol(c, timers);
  } else {
    chosen = make_per_site_protocol(c, timers);
  }
  arm.mutated().wrap(made::Protocol{chosen, c});
  return chosen;
}

}  // namespace loopgate
