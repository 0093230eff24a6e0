// The CUPTI engine: subscription, per-call timing, classification, tallies, and the text tables.
// Ground truth for the classification: CUDA "API synchronization behavior" (docs/design.md "GPU facts") —
// synchronize calls block; synchronous memcpys with a host side return only when done; async memcpys block
// when the host side is pageable; D2D copies do not block the host.
#include "trainer/measure/cupti_core.h"
#include "trainer/measure/sync_table_file.h"


#include <algorithm>
#include <cstdarg>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

namespace loopgate {

void SyncTally::add(const SyncTally& o) {
  synchronizes += o.synchronizes;
  sync_memcpys += o.sync_memcpys;
  pageable_async += o.pageable_async;
  stalls += o.stalls;
  driver_calls += o.driver_calls;
  kernel_launches += o.kernel_launches;
  graph_launches += o.graph_launches;
  copies += o.copies;
  blocked_ms += o.blocked_ms;
  sync_ms += o.sync_ms;
  if (o.max_call_ms > max_call_ms) {
    max_call_ms = o.max_call_ms;
    slowest_call = o.slowest_call;
  }
}

namespace cupti {

const char* call_kind_name(CallKind kind) {
  switch (kind) {
    case CallKind::kSynchronize: return "synchronize";
    case CallKind::kSyncMemcpy: return "sync-memcpy";
    case CallKind::kPageableAsync: return "pageable-async";
    case CallKind::kOther: return "other";
  }
  return "other";
}

// ---- classification ----

bool is_pageable_host(const void* p) {
  if (p == nullptr) return false;
  unsigned int type = 0;
  // Pinned (cuMemHostAlloc / registered) and device memory answer; plain malloc memory does not.
  CUresult rc = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(p));
  return rc != CUDA_SUCCESS;
}

namespace {

bool pageable_in(CUmemorytype type, const void* host, CUdeviceptr unified) {
  if (type == CU_MEMORYTYPE_HOST) return is_pageable_host(host);
  if (type == CU_MEMORYTYPE_UNIFIED) return is_pageable_host(reinterpret_cast<const void*>(unified));
  return false;
}

// A synchronous 2D/3D copy (CUDA_MEMCPY2D or CUDA_MEMCPY3D) returns only when done if either side is host.
template <class Copy>
bool touches_host(const Copy* c) {
  return c != nullptr && (c->srcMemoryType == CU_MEMORYTYPE_HOST || c->dstMemoryType == CU_MEMORYTYPE_HOST ||
                          c->srcMemoryType == CU_MEMORYTYPE_UNIFIED || c->dstMemoryType == CU_MEMORYTYPE_UNIFIED);
}

bool pageable_2d(const CUDA_MEMCPY2D* c) {
  return c != nullptr && (pageable_in(c->srcMemoryType, c->srcHost, c->srcDevice) ||
                          pageable_in(c->dstMemoryType, c->dstHost, c->dstDevice));
}

bool pageable_3d(const CUDA_MEMCPY3D* c) {
  return c != nullptr && (pageable_in(c->srcMemoryType, c->srcHost, c->srcDevice) ||
                          pageable_in(c->dstMemoryType, c->dstHost, c->dstDevice));
}

// Unified-address copy (cuMemcpy / cuMemcpyAsync): a host side exists if either pointer is not device memory.
bool unified_has_host(CUdeviceptr dst, CUdeviceptr src) {
  auto is_device = [](CUdeviceptr p) {
    unsigned int type = 0;
    return cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) == CUDA_SUCCESS &&
           (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_ARRAY);
  };
  return !is_device(dst) || !is_device(src);
}

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

uint64_t now_ns() {
  using namespace std::chrono;
  return static_cast<uint64_t>(duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count());
}

}  // namespace

CallKind classify_driver_call(CUpti_CallbackId cbid, const void* params) {
  switch (cbid) {
    // -- synchronize calls --
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize:
      return CallKind::kSynchronize;

    // -- synchronous copies with a host side: return only once the copy is done --
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2_ptds:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2_ptds:
    case CUPTI_DRIVER_TRACE_CBID_cu64MemcpyDtoH:
    case CUPTI_DRIVER_TRACE_CBID_cu64MemcpyHtoD:
      return CallKind::kSyncMemcpy;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds: {
      auto* p = static_cast<const cuMemcpy_params*>(params);
      return p != nullptr && unified_has_host(p->dst, p->src) ? CallKind::kSyncMemcpy : CallKind::kOther;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2_ptds:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2_ptds: {
      auto* p = static_cast<const cuMemcpy2D_v2_params*>(params);  // same layout for every variant: pCopy
      return p && touches_host(p->pCopy) ? CallKind::kSyncMemcpy : CallKind::kOther;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2_ptds: {
      auto* p = static_cast<const cuMemcpy3D_v2_params*>(params);
      return p && touches_host(p->pCopy) ? CallKind::kSyncMemcpy : CallKind::kOther;
    }

    // -- async copies: block when the host side is pageable --
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz: {
      auto* p = static_cast<const cuMemcpyDtoHAsync_v2_params*>(params);  // {dstHost, srcDevice, n, stream}
      return p && is_pageable_host(p->dstHost) ? CallKind::kPageableAsync : CallKind::kOther;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz: {
      auto* p = static_cast<const cuMemcpyHtoDAsync_v2_params*>(params);  // {dstDevice, srcHost, n, stream}
      return p && is_pageable_host(p->srcHost) ? CallKind::kPageableAsync : CallKind::kOther;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz: {
      auto* p = static_cast<const cuMemcpyAsync_params*>(params);
      if (p == nullptr) return CallKind::kOther;
      return is_pageable_host(reinterpret_cast<const void*>(p->dst)) ||
                     is_pageable_host(reinterpret_cast<const void*>(p->src))
                 ? CallKind::kPageableAsync
                 : CallKind::kOther;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2_ptsz: {
      auto* p = static_cast<const cuMemcpy2DAsync_v2_params*>(params);
      return p && pageable_2d(p->pCopy) ? CallKind::kPageableAsync : CallKind::kOther;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2_ptsz: {
      auto* p = static_cast<const cuMemcpy3DAsync_v2_params*>(params);
      return p && pageable_3d(p->pCopy) ? CallKind::kPageableAsync : CallKind::kOther;
    }
    default:
      return CallKind::kOther;
  }
}

LaunchKind launch_kind(CUpti_CallbackId cbid) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync:
      return LaunchKind::kKernel;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
      return LaunchKind::kGraph;
    default:
      return LaunchKind::kNone;
  }
}

double slow_call_us_from_env() {
  const char* v = std::getenv(sync_file::kEnvSlowUs);
  if (v == nullptr || *v == '\0') return 500.0;
  return std::atof(v);
}

// ---- the engine ----

namespace {

thread_local bool t_in_callback = false;  // our own driver queries inside a callback must not recurse

void CUPTIAPI engine_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                              const void* cbdata) {
  if (t_in_callback) return;
  static_cast<Engine*>(userdata)->on_callback(domain, cbid, cbdata);
}

std::string cupti_error_text(CUptiResult rc) {
  const char* s = nullptr;
  cuptiGetResultString(rc, &s);
  return s ? s : ("CUPTI error " + std::to_string(static_cast<int>(rc)));
}

}  // namespace

bool Engine::start(const char* name, Hooks* hooks, bool want_nvtx, std::string* why) {
  if (active_.load()) return true;
  int driver_version = 0;
  if (cuDriverGetVersion(&driver_version) != CUDA_SUCCESS || driver_version == 0) {
    if (why) *why = "no CUDA driver: cuDriverGetVersion failed (no GPU on this machine?)";
    return false;
  }
  hooks_ = hooks;
  char old_name[256] = {0};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = name;
  params.oldSubscriberName = old_name;
  params.oldSubscriberSize = sizeof(old_name);
  CUptiResult rc = cuptiSubscribe_v2(&subscriber_, engine_callback, this, &params);
  if (rc != CUPTI_SUCCESS) {
    if (why) {
      if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        *why = std::string("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: another CUPTI client is subscribed (") +
               (old_name[0] ? old_name : "name not given") +
               "): the PyTorch profiler, Nsight, or the loopgate injection library (CUDA_INJECTION64_PATH)";
      } else {
        *why = "cuptiSubscribe failed: " + cupti_error_text(rc);
      }
    }
    subscriber_ = nullptr;
    return false;
  }
  rc = enable_driver_calls();
  if (rc == CUPTI_SUCCESS && want_nvtx) rc = cuptiEnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_NVTX);
  if (rc != CUPTI_SUCCESS) {
    if (why) *why = "cuptiEnableDomain failed: " + cupti_error_text(rc);
    cuptiUnsubscribe(subscriber_);
    subscriber_ = nullptr;
    return false;
  }
  active_.store(true);
  return true;
}

bool counted_call_name(const char* name, bool launches) {
  if (name == nullptr) return false;
  auto starts = [&](const char* p) { return std::strncmp(name, p, std::strlen(p)) == 0; };
  if (starts("cuMemcpy") || starts("cu64Memcpy") || std::strstr(name, "Synchronize") != nullptr) return true;
  if (starts("cuProfilerStart") || starts("cuProfilerStop")) return true;
  // Allocation can block: cuMemFree waits for the device, pinned host allocation maps pages.
  if (starts("cuMemAlloc") || starts("cuMemFree") || starts("cuMemHostAlloc") || starts("cuMemHostRegister") ||
      starts("cuMemHostUnregister"))
    return true;
  return launches && (starts("cuLaunch") || starts("cuGraphLaunch"));
}

// Every driver call by default: each one is timed, so a call that blocks without being a "sync" still shows.
// Counted calls only: one callback per call that can block (and per launch, if asked).
CUptiResult Engine::enable_driver_calls() {
  if (!counted_only_) return cuptiEnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API);
  if (counted_ids_.empty()) {
    for (int id = 1; id < static_cast<int>(CUPTI_DRIVER_TRACE_CBID_SIZE); ++id) {
      const char* name = nullptr;
      if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, static_cast<uint32_t>(id), &name) != CUPTI_SUCCESS) continue;
      if (counted_call_name(name, count_launches_)) counted_ids_.push_back(static_cast<CUpti_CallbackId>(id));
    }
  }
  CUptiResult last = CUPTI_ERROR_INVALID_PARAMETER;  // none enabled
  int enabled = 0;
  for (const CUpti_CallbackId id : counted_ids_) {
    // An id this driver does not have is refused; the others still count.
    last = cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, id);
    enabled += last == CUPTI_SUCCESS;
  }
  return enabled > 0 ? CUPTI_SUCCESS : last;
}

bool Engine::set_runtime_calls(bool on, std::string* why) {
  if (!active_.load()) return !on;
  const CUptiResult rc = cuptiEnableDomain(on ? 1 : 0, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API);
  if (rc == CUPTI_SUCCESS) return true;
  if (why) *why = "cuptiEnableDomain(runtime) failed: " + cupti_error_text(rc);
  return false;
}

bool Engine::set_driver_calls(bool on) {
  if (!active_.load()) return false;
  return (on ? enable_driver_calls() : cuptiEnableDomain(0, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API)) == CUPTI_SUCCESS;
}

void Engine::stop() {
  if (!active_.exchange(false)) return;
  cuptiEnableDomain(0, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API);
  cuptiUnsubscribe(subscriber_);
  subscriber_ = nullptr;
}

void Engine::on_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata) {
  if (!active_.load(std::memory_order_relaxed)) return;
  if (domain == CUPTI_CB_DOMAIN_NVTX) {
    t_in_callback = true;
    hooks_->on_nvtx(cbid, cbdata);
    t_in_callback = false;
    return;
  }
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    const auto* r = static_cast<const CUpti_CallbackData*>(cbdata);
    if (r->callbackSite == CUPTI_API_EXIT) hooks_->on_issue(r->correlationId);
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* d = static_cast<const CUpti_CallbackData*>(cbdata);
  if (d->callbackSite == CUPTI_API_ENTER) {
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart) hooks_->on_profiler(true);
    if (d->correlationData) *d->correlationData = now_ns();  // cheap: the time is what we measure
    return;
  }
  const uint64_t t1 = now_ns();
  const uint64_t t0 = d->correlationData ? *d->correlationData : t1;
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop) hooks_->on_profiler(false);
  if (paused_.load(std::memory_order_relaxed)) return;
  const double ms = static_cast<double>(t1 - t0) / 1e6;
  t_in_callback = true;
  const CallKind kind = classify_driver_call(cbid, d->functionParams);
  if (kind != CallKind::kOther) hooks_->on_blocking_call(kind, t1 - t0);
  hooks_->on_driver_call(cbid, d->functionParams, kind);
  const bool copy = d->functionName && (std::strncmp(d->functionName, "cuMemcpy", 8) == 0 ||
                                        std::strncmp(d->functionName, "cuMemset", 8) == 0);
  if (copy || launch_kind(cbid) != LaunchKind::kNone) hooks_->on_issue(d->correlationId);
  int64_t iteration = 0;
  std::string site;
  const bool counted = hooks_->attribute(kind, ms, &iteration, &site);
  t_in_callback = false;
  if (!counted) return;

  const double slow = slow_ms_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  SyncTally& t = table_[iteration][site];
  ++t.driver_calls;
  switch (launch_kind(cbid)) {
    case LaunchKind::kKernel: ++t.kernel_launches; break;
    case LaunchKind::kGraph: ++t.graph_launches; break;
    case LaunchKind::kNone: break;
  }
  if (copy) ++t.copies;
  t.blocked_ms += ms;
  switch (kind) {
    case CallKind::kSynchronize: ++t.synchronizes; t.sync_ms += ms; break;
    case CallKind::kSyncMemcpy: ++t.sync_memcpys; t.sync_ms += ms; break;
    case CallKind::kPageableAsync: ++t.pageable_async; t.sync_ms += ms; break;
    case CallKind::kOther: if (ms >= slow) ++t.stalls; break;
  }
  if (ms > t.max_call_ms) {
    t.max_call_ms = ms;
    t.slowest_call = d->functionName ? d->functionName : "?";
  }
  DriverCallTally& c = calls_[cbid];
  if (c.calls == 0) {
    c.function = d->functionName ? d->functionName : "?";
    c.counted_as = call_kind_name(kind);
  } else if (kind != CallKind::kOther) {
    c.counted_as = call_kind_name(kind);  // async copies: pageable at least once
  }
  ++c.calls;
  c.total_ms += ms;
  c.max_ms = std::max(c.max_ms, ms);
}

SyncTable Engine::table() const {
  std::lock_guard<std::mutex> lock(mu_);
  return table_;
}

std::vector<DriverCallTally> Engine::driver_calls() const {
  std::vector<DriverCallTally> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, c] : calls_) out.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](const DriverCallTally& a, const DriverCallTally& b) {
    return a.total_ms > b.total_ms;
  });
  return out;
}

void Engine::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  table_.clear();
  calls_.clear();
}

}  // namespace cupti

// ---- text tables (no fmt: the injection library links nothing but CUDA) ----

namespace {
std::string sfmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string sfmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}
}  // namespace

std::string format_sync_table(const SyncTable& table, const std::string& title, const std::vector<int64_t>& its,
                              size_t max_columns) {
  std::vector<int64_t> iterations = its;
  if (iterations.empty())
    for (const auto& [it, sites] : table) iterations.push_back(it);
  std::set<std::string> sites;
  for (const auto& [it, by_site] : table)
    for (const auto& [site, t] : by_site) sites.insert(site);
  const size_t shown = std::min(iterations.size(), max_columns);
  size_t w = 18;
  for (const std::string& s : sites) w = std::max(w, s.size());
  std::string out = title + "\n";
  out += sfmt("%-*s", static_cast<int>(w), "site (syncs)");
  for (size_t i = 0; i < shown; ++i) out += sfmt(" %5lld", static_cast<long long>(iterations[i]));
  out += sfmt(" %7s %8s %8s %6s %10s %9s %8s %6s\n", "total", "per-iter", "pageable", "stalls", "blocked-ms", "calls",
              "kernels", "graphs");
  std::vector<int64_t> col(shown, 0);
  SyncTally grand;
  const double n_it = iterations.empty() ? 1.0 : static_cast<double>(iterations.size());
  for (const std::string& site : sites) {
    SyncTally sum;
    std::string row = sfmt("%-*s", static_cast<int>(w), site.c_str());
    for (size_t i = 0; i < iterations.size(); ++i) {
      SyncTally t;
      auto it = table.find(iterations[i]);
      if (it != table.end()) {
        auto s = it->second.find(site);
        if (s != it->second.end()) t = s->second;
      }
      sum.add(t);
      if (i < shown) {
        col[i] += t.syncs();
        row += sfmt(" %5lld", static_cast<long long>(t.syncs()));
      }
    }
    if (sum.driver_calls == 0) continue;
    grand.add(sum);
    row += sfmt(" %7lld %8.2f %8lld %6lld %10.3f %9lld %8lld %6lld\n", static_cast<long long>(sum.syncs()),
                static_cast<double>(sum.syncs()) / n_it, static_cast<long long>(sum.pageable_async),
                static_cast<long long>(sum.stalls), sum.blocked_ms, static_cast<long long>(sum.driver_calls),
                static_cast<long long>(sum.kernel_launches), static_cast<long long>(sum.graph_launches));
    out += row;
  }
  out += sfmt("%-*s", static_cast<int>(w), "total");
  for (size_t i = 0; i < shown; ++i) out += sfmt(" %5lld", static_cast<long long>(col[i]));
  out += sfmt(" %7lld %8.2f %8lld %6lld %10.3f %9lld %8lld %6lld\n", static_cast<long long>(grand.syncs()),
              static_cast<double>(grand.syncs()) / n_it, static_cast<long long>(grand.pageable_async),
              static_cast<long long>(grand.stalls), grand.blocked_ms, static_cast<long long>(grand.driver_calls),
              static_cast<long long>(grand.kernel_launches), static_cast<long long>(grand.graph_launches));
  return out;
}

std::string format_driver_calls(const std::vector<DriverCallTally>& calls, size_t max_rows) {
  std::string out = sfmt("%-34s %-15s %8s %10s %9s\n", "driver call", "counted as", "calls", "total-ms", "max-ms");
  for (size_t i = 0; i < calls.size() && i < max_rows; ++i) {
    const DriverCallTally& c = calls[i];
    out += sfmt("%-34s %-15s %8lld %10.3f %9.3f\n", c.function.c_str(), c.counted_as.c_str(),
                static_cast<long long>(c.calls), c.total_ms, c.max_ms);
  }
  return out;
}

}  // namespace loopgate
