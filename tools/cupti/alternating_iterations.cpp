#include "tools/cupti/alternating_iterations.h"

namespace loopgate::cupti {

bool AlternatingIterations::begin(int64_t n, bool in_region, double now_ms) {
  if (open_) {
    (open_counted_ ? counted_ms_ : uncounted_ms_).push_back(now_ms - open_at_ms_);
    iteration_ms_.push_back(now_ms - open_at_ms_);
    iteration_counted_.push_back(open_counted_);
  }
  open_ = in_region;
  if (!in_region) return false;
  if (first_ < 0) first_ = n;
  open_counted_ = (n - first_) % 2 == 0;
  open_at_ms_ = now_ms;
  return open_counted_;
}

nlohmann::json AlternatingIterations::json() const {
  return {{"counted_ms", counted_ms_}, {"uncounted_ms", uncounted_ms_}, {"iteration_ms", iteration_ms_},
          {"iteration_counted", iteration_counted_}};
}

}  // namespace loopgate::cupti
