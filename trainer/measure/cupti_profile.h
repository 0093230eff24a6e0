// CUPTI activity records for the sync counter's profile mode (starvation.h, docs/profile.md): kernels
// (CONCURRENT_KERNEL, so kernels on different streams still overlap: the serialising KERNEL kind would change
// what is measured), memcpys and memsets, kept as DeviceIntervals on CUPTI's clock. CUPTI asks for buffers and
// hands them back full (on its own thread, or inside a flush); each is parsed at once and freed.
// Plain C++ header; cupti_profile.cpp needs CUPTI. One recorder per process: CUPTI's activity API is process-wide.
// Not here: host syncs or iteration windows (cupti_counter.cpp), or the analysis.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "trainer/measure/starvation.h"

namespace loopgate::cupti {

class ActivityRecorder {
 public:
  static ActivityRecorder& instance();

  // Registers the buffer callbacks (once per process) and enables the three kinds; false with *why when CUPTI
  // refuses (another activity client, e.g. the PyTorch profiler, or no CUPTI at run time).
  bool start(std::string* why);
  void stop();   // disables the kinds, then a forced flush: every record so far is parsed
  void flush();  // hands back the buffers holding completed records
  bool active() const { return active_.load(); }

  std::vector<DeviceInterval> intervals() const;
  int64_t dropped() const;  // records CUPTI reported dropped (a buffer was not there in time)
  void reset();             // flush, then forget

  // Internal: the buffer-completed callback's body.
  void add_buffer(uint8_t* buffer, size_t valid_bytes, int64_t dropped_records);

 private:
  ActivityRecorder() = default;
  std::atomic<bool> active_{false};
  bool callbacks_registered_ = false;  // cuptiActivityRegisterCallbacks: once per process
  mutable std::mutex mu_;
  std::vector<DeviceInterval> intervals_;
  int64_t dropped_ = 0;
};

// cuptiGetTimestamp: the clock of the activity records, in nanoseconds (0 when CUPTI fails).
int64_t timestamp_ns();

}  // namespace loopgate::cupti
