// String helpers C++17's std::string lacks (C++20 has starts_with / ends_with; the build stays on 17 for LibTorch
// 1.13's headers).
#pragma once
#include <string>

namespace loopgate {

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace loopgate
