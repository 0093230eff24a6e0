// Launch starvation (docs/profile.md): from a device timeline (kernels, copies, memsets with start/end times),
// the host's blocking calls (enter/exit) and the iterations' windows, how long the device was busy in each
// iteration, how long it idled, and how much of that idle followed a host sync ("sync-starved": the host was
// blocked until the device drained, and the device then waited for the host's next launch). The seed measured
// this with Nsight: launch-starved time -108.3 ms/iteration against a step-time delta of -105.8 ms.
// Plain C++ (no CUDA): the CUPTI counter's profile mode collects the inputs on a GPU; unit tests build them by
// hand and from a simulated device. Not here: collecting anything, or deciding which iterations are steady.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace loopgate {

// ---- inputs: one clock for all three (CUPTI's timestamps on a GPU), nanoseconds ----

enum class DeviceWorkKind { kKernel, kMemcpy, kMemset };

struct DeviceInterval {
  int64_t start_ns = 0, end_ns = 0;  // [start, end); end <= start is ignored
  DeviceWorkKind kind = DeviceWorkKind::kKernel;
  uint32_t stream = 0;
  int64_t launched_ns = 0;   // when the host's launch call for it returned; 0: unknown
  uint32_t correlation = 0;  // CUPTI's correlation id, joining it to its launch call; 0: none
};

struct HostSyncCall {  // a driver call that blocked the host on the device (synchronize, sync or pageable copy)
  int64_t enter_ns = 0, exit_ns = 0;
};

struct IterationWindow {  // [begin, end): from this iteration's begin to the next one's (or the end of the run)
  int64_t iteration = 0;
  int64_t begin_ns = 0, end_ns = 0;
};

struct DeviceProfile {
  std::vector<DeviceInterval> intervals;
  std::vector<HostSyncCall> syncs;
  std::vector<IterationWindow> windows;
  int64_t dropped_records = 0;  // activity records CUPTI could not deliver (busy time is then a lower bound)
  int64_t launch_times = 0;     // intervals whose launch call was joined (launched_ns set)
};

// ---- the analysis ----

// Per iteration. busy = the UNION of the device intervals across streams, clipped to the window (two kernels
// overlapping on two streams are busy once); idle = window - busy. Sync-starved: an idle gap [g0, g1) of the
// device's whole timeline that contains a host sync's exit counts as sync-starved from max(g0, that sync's enter)
// to g1 (the earliest such start when several syncs exit in it). The sync left the launch queue empty, so the
// device stays starved while the host trails: each later gap whose next work was launched only at or after the
// gap began (launched_ns >= g0: the device waited for the launch) is sync-starved too, until the first work that
// was already issued when the device reached it (the host leads again; also when launched_ns is unknown).
// Everything is clipped to the window; other idle = idle - sync-starved. So a gap that began while the host was
// still doing other work is "other" until the host entered the sync, and idle with no sync before it in the
// drain is all "other" (the host was simply slower than the device). Launch-starved, a wider view: every idle gap
// whose next work was launched only at or after the gap began (the device waited for the host, sync or not; what
// Nsight calls launch starvation), plus the sync-starved part of any other gap. sync-starved <= launch-starved <=
// idle.
struct StarvationRow {
  int64_t iteration = 0;
  double window_ms = 0, busy_ms = 0, idle_ms = 0, launch_starved_ms = 0, sync_starved_ms = 0, other_idle_ms = 0;
  int64_t kernels = 0, copies = 0;  // intervals starting in the window (copies: memcpys and memsets)
  int64_t syncs = 0;                // host syncs exiting in the window
};

// The time fields of a row, in the table's order (for code that summarises each of them alike).
inline constexpr double StarvationRow::*kStarvationTimes[] = {
    &StarvationRow::window_ms,         &StarvationRow::busy_ms,         &StarvationRow::idle_ms,
    &StarvationRow::launch_starved_ms, &StarvationRow::sync_starved_ms, &StarvationRow::other_idle_ms};

// One row per window, in the windows' order (a window with no device work is a row of idle time).
std::vector<StarvationRow> analyze_starvation(const std::vector<DeviceInterval>& intervals,
                                              const std::vector<HostSyncCall>& syncs,
                                              const std::vector<IterationWindow>& windows);
inline std::vector<StarvationRow> analyze_starvation(const DeviceProfile& p) {
  return analyze_starvation(p.intervals, p.syncs, p.windows);
}

// The rows past the first `skip_first` and before the last `skip_last` (the first iterations load kernels and
// grow the allocator; a run's last window ends at the end of the run, not at a next iteration's begin). All
// rows when that would leave none.
std::vector<StarvationRow> steady_rows(const std::vector<StarvationRow>& rows, size_t skip_first = 1,
                                       size_t skip_last = 1);

// Median and mean of every field over `rows` (iteration: the count of rows).
struct StarvationSummary {
  size_t iterations = 0;
  StarvationRow median, mean;
};
StarvationSummary summarize_starvation(const std::vector<StarvationRow>& rows);

// The per-iteration table (up to max_rows rows, then "..."), and the summary as two lines (median, mean).
std::string format_starvation_table(const std::vector<StarvationRow>& rows, const std::string& title,
                                    size_t max_rows = 40);
std::string format_starvation_summary(const StarvationSummary& s, const std::string& label);

}  // namespace loopgate
