// One reported interval of one timer: the unit a Trace holds ("timer intervals reported at this iteration").
// Its own header so the Trace (and its JSON reader, fuzzed without LibTorch: suites/fuzz/) needs no c10.
// Not here: the timers themselves (timers.h).
#pragma once
#include <cstdint>
#include <string>

namespace loopgate {

struct TimerInterval {
  std::string name;
  int64_t seq = 0;        // 0, 1, 2, ... per timer, in start order
  double seconds = 0.0;
};

}  // namespace loopgate
