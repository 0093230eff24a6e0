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

#include "trainer/measure/starvation.h"
#include "trainer/measure/sync_table.h"

namespace loopgate {

// Profile windows key by the ledger's iteration too; re-keyed by Megatron's.
inline DeviceProfile by_megatron_iteration(DeviceProfile p) {
  for (IterationWindow& w : p.windows) ++w.iteration;
  return p;
}

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
  // to the next iteration's (a repeated begin of the same iteration, as replay_step's, is one window), or to
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

}  // namespace loopgate
