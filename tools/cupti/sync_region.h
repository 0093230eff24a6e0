// The injection library's region of interest and its iterations (sync_inject.cpp): which driver calls count and
// at which iteration, from LOOPGATE_CUPTI_ROI, LOOPGATE_CUPTI_ITER and LOOPGATE_CUPTI_AB, and the NVTX ranges open on
// each thread (regions, iteration markers, the fallback site). CUPTI-free.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/cupti/alternating_iterations.h"

namespace loopgate::cupti {

class SyncRegion {
 public:
  // From the environment; false with *why for a LOOPGATE_CUPTI_ROI it cannot read.
  bool configure(std::string* why);

  // Whether a call now counts: inside the region and, under the overhead A/B, in a counted iteration.
  bool in_roi() const { return in_region() && (!alternate_ || alternate_counted_.load()); }
  int64_t iteration() const { return iteration_.load(); }
  int64_t iterations_seen() const { return iterations_seen_.load(); }

  // A marked iteration (loopgate_sync_iteration): the counter follows the marker alone. Under the overhead A/B,
  // begin_marked returns whether the driver callbacks are to be on for it (the caller switches them), and
  // end_marked charges that switch to neither arm.
  std::optional<bool> begin_marked(int64_t n);
  void end_marked();

  // NVTX on the calling thread: a range pushed or popped, a mark. `markers_on`: the marker counts iterations, so an
  // NVTX iteration name begins none.
  void push(const char* name, bool markers_on);
  void pop();
  void mark(const char* name, bool markers_on);
  // The innermost named NVTX range open on the thread, the region's and the iterations' left out ("" if none).
  std::string innermost_range() const;

  void set_profiler(bool on) { profiler_on_.store(on); }  // cuProfilerStart / cuProfilerStop

  // The region as the report names it.
  std::string describe() const;
  const std::string& iteration_prefix() const { return iter_prefix_; }
  nlohmann::json overhead_ab() const;  // null unless the overhead A/B is on

 private:
  bool in_region() const;
  bool iteration_roi() const { return roi_last_ >= roi_first_ && roi_.rfind("iters:", 0) == 0; }
  bool nvtx_roi() const { return !roi_.empty() && roi_ != "profiler" && !iteration_roi(); }
  void begin_nvtx_iteration(bool markers_on);

  std::string roi_;
  std::string iter_prefix_ = "iteration";
  int64_t roi_first_ = 0, roi_last_ = -1;  // ROI "iters:A-B"
  std::atomic<int> roi_depth_{0};
  std::atomic<int64_t> iteration_{0};
  std::atomic<int64_t> iterations_seen_{0};
  // The overhead A/B: whether the current marked iteration is counted, and the durations.
  bool alternate_ = false;
  std::atomic<bool> alternate_counted_{true};
  mutable std::mutex ab_mu_;
  AlternatingIterations ab_;
  std::atomic<bool> profiler_on_{false};  // between cuProfilerStart and cuProfilerStop
};

}  // namespace loopgate::cupti
