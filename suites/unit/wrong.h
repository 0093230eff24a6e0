// The unit tests' mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 makes wrong() 1, which every hand-computed
// expectation adds (or negates), so every test that uses it must fail; unset, wrong() is 0.
#pragma once

#include <cstdlib>

namespace loopgate {

inline int wrong() {
  static const int w = std::getenv("LOOPGATE_WRONG_EXPECTATIONS") ? 1 : 0;
  return w;
}

}  // namespace loopgate
