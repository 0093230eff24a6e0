// The CUPTI engine shared by both forms of the sync counter (in-process: cupti_counter.cpp; injection:
// tools/cupti/sync_inject.cpp). It subscribes to the driver domain (every call timed enter -> exit, through
// CUpti_CallbackData::correlationData), classifies each call (docs/design.md "GPU facts": which calls block),
// and adds it to a SyncTable under the (iteration, site) its Hooks choose on the calling thread. Optionally it
// forwards NVTX callbacks (push/pop/mark) so the injection form can delimit its region, iterations and sites.
// Needs the CUDA toolkit (cupti.h, cuda.h) but no LibTorch; no fmt either, so the injection library stays
// dependency-free.
#pragma once
#include <cuda.h>
#include <cupti.h>  // brings generated_cuda_meta.h (unguarded: never include it again)

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "trainer/measure/sync_table.h"

namespace loopgate::cupti {

enum class CallKind { kOther, kSynchronize, kSyncMemcpy, kPageableAsync };
const char* call_kind_name(CallKind kind);

// Classifies a driver call from its callback id and parameters (at API exit: buffers are still the caller's).
// Async copies query the host pointer's memory type (cuPointerGetAttribute): unregistered = pageable.
CallKind classify_driver_call(CUpti_CallbackId cbid, const void* params);
bool is_pageable_host(const void* p);

// Work a driver call puts on a stream without blocking: one kernel, or one whole CUDA graph. Counted so a
// candidate arm that trades host syncs for launches shows (runtime launches reach the driver's entry points).
enum class LaunchKind { kNone, kKernel, kGraph };
LaunchKind launch_kind(CUpti_CallbackId cbid);

// Where a driver call goes. Called on the calling thread at API exit; return false to drop the call.
class Hooks {
 public:
  virtual ~Hooks() = default;
  // `kind` lets the hook spend more (a backtrace) only on calls that matter.
  virtual bool attribute(CallKind kind, double call_ms, int64_t* iteration, std::string* site) = 0;
  // Every blocking call (kind != kOther) not paused, before attribute(): `call_ns` is its enter -> exit time on
  // the steady clock. The counter's profile mode places it on CUPTI's clock (starvation.h's HostSyncCall).
  virtual void on_blocking_call(CallKind /*kind*/, uint64_t /*call_ns*/) {}
  // A call that may have put work on a stream (a driver launch or copy/memset call; with runtime calls on, every
  // runtime call), at API exit: its correlation id is the one CUPTI's activity record of that work carries.
  virtual void on_issue(uint32_t /*correlation_id*/) {}
  // Every driver call not paused, at API exit, before attribute(): the call itself, for hooks that name what a
  // sync was from the calls before it (the injection library: a small device-to-host copy, then the sync).
  virtual void on_driver_call(CUpti_CallbackId /*cbid*/, const void* /*params*/, CallKind /*kind*/) {}
  virtual void on_nvtx(CUpti_CallbackId /*cbid*/, const void* /*nvtx_data*/) {}
  virtual void on_profiler(bool /*start*/) {}  // cuProfilerStart / cuProfilerStop
};

class Engine {
 public:
  // Subscribes with `name`; false with `*why` set when CUPTI refuses (another subscriber: its name too).
  bool start(const char* name, Hooks* hooks, bool want_nvtx, std::string* why);
  void stop();
  bool active() const { return active_.load(); }
  void set_paused(bool p) { paused_.store(p); }
  // Runtime-domain callbacks too (Hooks::on_issue only): a kernel launched through the runtime may carry the
  // runtime call's correlation id rather than the driver call's. False with *why when CUPTI refuses.
  bool set_runtime_calls(bool on, std::string* why);
  // The driver-call callbacks off and on again while subscribed: an iteration the counter leaves alone costs what
  // it would cost without it (the overhead A/B's uncounted arm). False when CUPTI refuses.
  bool set_driver_calls(bool on);
  void set_slow_call_us(double us) { slow_ms_.store(us / 1000.0); }
  // Before start(): subscribe only to the driver calls that can block the host (synchronizes, copies, host and
  // device allocation, profiler start/stop) and, with `launches`, kernel and graph launches, instead of every
  // driver call. A PyTorch program makes far more other calls (cuCtxGetDevice above all), each one a callback.
  void set_counted_calls_only(bool launches) {
    counted_only_ = true;
    count_launches_ = launches;
  }
  double slow_call_ms() const { return slow_ms_.load(); }

  SyncTable table() const;
  std::vector<DriverCallTally> driver_calls() const;
  void reset();

  // Internal: the CUPTI callback's body.
  void on_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata);

 private:
  CUpti_SubscriberHandle subscriber_ = nullptr;
  Hooks* hooks_ = nullptr;
  std::atomic<bool> active_{false}, paused_{false};
  std::atomic<double> slow_ms_{0.5};
  bool counted_only_ = false, count_launches_ = false;
  std::vector<CUpti_CallbackId> counted_ids_;  // found once: the A/B turns them on every other iteration
  CUptiResult enable_driver_calls();
  mutable std::mutex mu_;
  SyncTable table_;
  std::map<CUpti_CallbackId, DriverCallTally> calls_;
};

// Whether a driver function (by name) is one set_counted_calls_only subscribes to.
bool counted_call_name(const char* name, bool launches);

// Slow-call threshold from LOOPGATE_CUPTI_SLOW_US (default 500 us).
double slow_call_us_from_env();

}  // namespace loopgate::cupti
