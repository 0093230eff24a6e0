// The sync counter's overhead as an A/B inside one process (`loopgate syncs --overhead-ab`): within the region,
// the marked iterations alternate counted (the region's first, third, ...) and uncounted (the driver callbacks
// off, so the iteration runs as it would without the counter), and each iteration's wall time, from its marker to
// the next, goes to its arm. Adjacent iterations share the process, its clocks and its neighbours, which runs do
// not. CUDA-free, so CPU tests pin which arm each duration lands in (suites/unit/test_alternating_iterations.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace loopgate::cupti {

class AlternatingIterations {
 public:
  // Marked iteration `n` begins at `now_ms` (a steady clock); `in_region`: it lies in the counted region. Closes
  // the iteration the previous marker began (its duration to its arm, if it was in the region) and returns
  // whether `n` is counted.
  bool begin(int64_t n, bool in_region, double now_ms);
  // The open iteration starts again at `now_ms`: what the A/B itself does between the marker and here (turning
  // the callbacks on or off, which a plain counted run never does) is charged to neither arm.
  void restart(double now_ms) {
    if (open_) open_at_ms_ = now_ms;
  }
  const std::vector<double>& counted_ms() const { return counted_ms_; }
  const std::vector<double>& uncounted_ms() const { return uncounted_ms_; }
  // Every closed iteration of the region in order: its duration and whether it was counted.
  const std::vector<double>& iteration_ms() const { return iteration_ms_; }
  const std::vector<bool>& iteration_counted() const { return iteration_counted_; }
  // {"counted_ms", "uncounted_ms", "iteration_ms", "iteration_counted"}: what `loopgate syncs` turns into the
  // overhead A/B.
  nlohmann::json json() const;

 private:
  int64_t first_ = -1;  // the region's first marked iteration, once seen
  bool open_ = false, open_counted_ = false;
  double open_at_ms_ = 0;
  std::vector<double> counted_ms_, uncounted_ms_, iteration_ms_;
  std::vector<bool> iteration_counted_;
};

}  // namespace loopgate::cupti
