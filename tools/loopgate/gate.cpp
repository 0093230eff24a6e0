// `loopgate gate` — placeholder until the gate suites land: it refuses rather than claiming checks it does not run.
#include <cstdio>

#include "tools/loopgate/commands.h"

namespace loopgate {
int cmd_gate(const GateOptions&) {
  std::fprintf(stderr, "loopgate gate: the gate suites are not built yet\n");
  return 2;
}
int cmd_golden(const GoldenOptions&) {
  std::fprintf(stderr, "loopgate golden: not built yet\n");
  return 2;
}
}  // namespace loopgate
