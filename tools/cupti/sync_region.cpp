// The injection library's region and iterations (sync_region.h).
#include "tools/cupti/sync_region.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "trainer/measure/sync_table_file.h"

namespace loopgate::cupti {
namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

thread_local std::vector<std::string> t_stack;  // the NVTX ranges open on this thread, outermost first

}  // namespace

bool SyncRegion::configure(std::string* why) {
  roi_ = env_or(sync_file::kEnvRoi, "");
  iter_prefix_ = env_or(sync_file::kEnvIterPrefix, "iteration");
  alternate_ = env_or(sync_file::kEnvOverheadAb, "") == "1";
  if (roi_.rfind("iters:", 0) != 0) return true;
  long long a = 0, b = -1;
  if (std::sscanf(roi_.c_str() + 6, "%lld-%lld", &a, &b) != 2 || a < 1 || b < a) {
    *why = "LOOPGATE_CUPTI_ROI '" + roi_ + "': expected iters:A-B with 1 <= A <= B";
    return false;
  }
  roi_first_ = a;
  roi_last_ = b;
  return true;
}

bool SyncRegion::in_region() const {
  if (roi_.empty()) return true;
  if (roi_ == "profiler") return profiler_on_.load();
  if (iteration_roi()) {
    const int64_t it = iteration_.load();
    return it >= roi_first_ && it <= roi_last_;
  }
  return roi_depth_.load() > 0;
}

std::optional<bool> SyncRegion::begin_marked(int64_t n) {
  iteration_.store(n);
  if (!alternate_) return std::nullopt;
  const bool region = in_region();
  bool counted = false;
  {
    std::lock_guard<std::mutex> lock(ab_mu_);
    counted = ab_.begin(n, region, now_ms());
  }
  alternate_counted_.store(counted);
  return counted || !region;  // an uncounted iteration runs without callbacks
}

void SyncRegion::end_marked() {
  if (alternate_) {
    std::lock_guard<std::mutex> lock(ab_mu_);
    ab_.restart(now_ms());
  }
  if (in_roi()) iterations_seen_.fetch_add(1);
}

void SyncRegion::push(const char* name, bool markers_on) {
  std::string n = name ? name : "";  // an unnamed range (NCCL's own) names no site
  if (nvtx_roi() && n == roi_) roi_depth_.fetch_add(1);
  if (!n.empty() && n.rfind(iter_prefix_, 0) == 0) begin_nvtx_iteration(markers_on);
  t_stack.push_back(std::move(n));
}

void SyncRegion::pop() {
  if (t_stack.empty()) return;
  if (nvtx_roi() && t_stack.back() == roi_) roi_depth_.fetch_sub(1);
  t_stack.pop_back();
}

void SyncRegion::mark(const char* name, bool markers_on) {
  if (name && std::string(name).rfind(iter_prefix_, 0) == 0) begin_nvtx_iteration(markers_on);
}

void SyncRegion::begin_nvtx_iteration(bool markers_on) {
  if (markers_on) return;  // the function marker counts iterations
  if (!in_roi()) return;   // iteration markers outside the region do not count
  iteration_.store(iterations_seen_.fetch_add(1) + 1);
}

std::string SyncRegion::innermost_range() const {
  for (auto it = t_stack.rbegin(); it != t_stack.rend(); ++it) {
    if (it->empty() || (!roi_.empty() && *it == roi_)) continue;
    if (it->rfind(iter_prefix_, 0) == 0) continue;
    return *it;
  }
  return "";
}

std::string SyncRegion::describe() const {
  return roi_.empty()           ? "whole process"
         : roi_ == "profiler"   ? "cuProfilerStart..Stop"
         : iteration_roi()      ? "marked iterations " + std::to_string(roi_first_) + "-" + std::to_string(roi_last_)
                                : "NVTX range \"" + roi_ + "\"";
}

nlohmann::json SyncRegion::overhead_ab() const {
  if (!alternate_) return nullptr;
  std::lock_guard<std::mutex> lock(ab_mu_);
  return ab_.json();
}

}  // namespace loopgate::cupti
