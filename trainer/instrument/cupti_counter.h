// The CUPTI sync counter, in-process form (docs/design.md "Sync accounting"): CUPTI driver-domain callbacks count
// what really blocked the host — cu*Synchronize (context, stream, event), synchronous memcpys, and async
// memcpys whose host side is pageable (no synchronize call, but the copy blocks: the seed's hidden stall) —
// and time EVERY driver call from API enter to exit, so a call that blocks without being a "sync" shows up as
// blocked time. Each call is attributed to (loopgate::current_iteration(), loopgate::current_site()) on the
// calling thread, the same keys the host-read ledger counts under, so the gates can check ledger == CUPTI.
// This header is plain C++ (no CUDA headers); the implementation (cupti_counter.cpp, cupti_core.cpp) is
// compiled only where the CUDA toolkit is found. One CUPTI subscriber per process: when another tool holds it
// (the PyTorch profiler, Nsight, our injection library) or no driver is present, start() says so and returns
// false, and tests skip rather than fail.
// Profile mode (opt-in, docs/profile.md): CUPTI activity records of kernels, copies and memsets, the CUPTI-clock
// enter/exit of every blocking call, and iteration windows, for the launch-starvation analysis (starvation.h).
// Not here: the injection form for unmodified processes (tools/cupti/sync_inject.cpp).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trainer/instrument/starvation.h"

namespace loopgate {

// What happened at one (iteration, site).
struct SyncTally {
  int64_t synchronizes = 0;    // cuCtxSynchronize / cuStreamSynchronize / cuEventSynchronize (+ _v2, _ptsz)
  int64_t sync_memcpys = 0;    // cuMemcpy{DtoH,HtoD,,2D,3D,AtoH,HtoA}[_v2][_ptds]: return only when done
  int64_t pageable_async = 0;  // cuMemcpy*Async with a pageable host side: blocks, emits no synchronize
  int64_t stalls = 0;          // any other driver call that blocked >= the slow-call threshold
  int64_t driver_calls = 0;    // every driver call attributed here
  int64_t kernel_launches = 0; // cuLaunchKernel[Ex] / cuLaunchCooperativeKernel / cuLaunch* (+ _ptsz): one kernel each
  int64_t graph_launches = 0;  // cuGraphLaunch (+ _ptsz): a whole CUDA graph in one call
  int64_t copies = 0;          // cuMemcpy* / cuMemset* calls of any kind: stream work that is not a kernel
  double blocked_ms = 0.0;     // host time inside every driver call (enter -> exit)
  double sync_ms = 0.0;        // of which inside the synchronizes, sync memcpys and pageable copies
  double max_call_ms = 0.0;
  std::string slowest_call;    // driver function of max_call_ms

  int64_t syncs() const { return synchronizes + sync_memcpys; }  // what the ledger's reads should equal
  void add(const SyncTally& o);
};

using SyncTable = std::map<int64_t, std::map<std::string, SyncTally>>;  // iteration -> site -> tally

// The counter keys by the ledger's iteration, which is Megatron's minus one (the loop's begin_iteration comes
// before Megatron's increment; setup is -1). Re-keyed by Megatron's iteration, as Traces are.
inline SyncTable by_megatron_iteration(const SyncTable& t) {
  SyncTable out;
  for (const auto& [iteration, sites] : t) out[iteration + 1] = sites;
  return out;
}

// Profile windows key by the ledger's iteration too; re-keyed by Megatron's.
inline DeviceProfile by_megatron_iteration(DeviceProfile p) {
  for (IterationWindow& w : p.windows) ++w.iteration;
  return p;
}

// One driver function's totals over the whole counted region (diagnostics: which calls blocked).
struct DriverCallTally {
  std::string function;
  std::string counted_as;  // "synchronize", "sync-memcpy", "pageable-async", "other"
  int64_t calls = 0;
  double total_ms = 0.0, max_ms = 0.0;
};

class CuptiSyncCounter {
 public:
  // The process's one counter (CUPTI allows one subscriber per process).
  static CuptiSyncCounter& instance();

  // Subscribes and starts counting. False (and why() says why: "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
  // another CUPTI client is subscribed (<name>)", "no CUDA driver", "built without CUPTI") when it cannot.
  bool start();
  void stop();  // unsubscribes; the counts stay readable
  bool active() const;
  const std::string& why() const;
  static bool compiled_in();  // false in builds without the CUDA toolkit

  // Iteration attribution: by default loopgate::current_iteration() (the ledger sets it); a caller outside
  // the loop may pin one (>= 0) or return to the default (-1).
  void set_iteration(int64_t iteration);
  // Pause/resume counting without unsubscribing (e.g. around setup).
  void set_paused(bool paused);
  // Calls slower than this (default 0.5 ms, or LOOPGATE_CUPTI_SLOW_US) count as stalls.
  void set_slow_call_us(double us);

  SyncTable table() const;
  SyncTally at(int64_t iteration, const std::string& site) const;
  std::vector<DriverCallTally> driver_calls() const;  // sorted by total time, largest first
  void reset();  // the tables, and the profile's records

  // ---- profile mode: off unless started; the counts above are the same either way ----
  // Records device intervals (CUPTI activity: CONCURRENT_KERNEL, MEMCPY, MEMSET), the CUPTI-clock enter/exit of
  // every blocking call (the kinds counted as syncs above: synchronizes, sync memcpys, pageable copies), and
  // iteration windows: one timestamp at every set_current_iteration (the ledger's begin_iteration), taken through
  // error.h's iteration observer, so the loop holds no profiling code. A window runs from its iteration's begin
  // to the next iteration's (a repeated begin of the same iteration, as graph_step's, is one window), or to
  // end_profile_window / stop_profile. Needs start() first; false with why() when CUPTI refuses.
  bool start_profile();
  void end_profile_window();  // the open window ends now (an A/B phase's end; setup that follows is no window)
  void stop_profile();        // ends the open window, stops the activity records, flushes them
  bool profiling() const;
  // Everything recorded so far, after a flush: ended windows only, keyed by the ledger's iteration.
  DeviceProfile profile();

 private:
  CuptiSyncCounter();
  ~CuptiSyncCounter();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The per-site per-iteration table (rows: sites; columns: iterations, up to max_columns; then total, per-iter,
// pageable, stalls, blocked ms). `iterations` fixes the columns (empty: every iteration in the table).
std::string format_sync_table(const SyncTable& table, const std::string& title,
                              const std::vector<int64_t>& iterations = {}, size_t max_columns = 12);
std::string format_driver_calls(const std::vector<DriverCallTally>& calls, size_t max_rows = 12);

}  // namespace loopgate
