// The activity recorder (cupti_profile.h). Record layouts are CUPTI 13's (cupti_activity.h): CUpti_ActivityKernel10,
// CUpti_ActivityMemcpy6, CUpti_ActivityMemset4; only start, end, streamId and correlationId are read, through the generic
// CUpti_Activity kind switch, so any other kind in a buffer is skipped.
#include "trainer/measure/cupti_profile.h"

#include <cupti.h>

#include <cstdlib>

namespace loopgate::cupti {
namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;  // ~40k kernel records: a flush every ~10 iterations on an H200
constexpr size_t kBufferAlign = 8;                 // CUPTI's requirement (ACTIVITY_RECORD_ALIGNMENT)

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};

std::string cupti_text(CUptiResult rc) {
  const char* s = nullptr;
  cuptiGetResultString(rc, &s);
  return s ? s : ("CUPTI error " + std::to_string(static_cast<int>(rc)));
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;  // as many as fit
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;  // no memory: CUPTI drops records (counted) rather than failing
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t /*size*/, size_t valid) {
  if (buffer == nullptr) return;
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) != CUPTI_SUCCESS) dropped = 0;
  ActivityRecorder::instance().add_buffer(buffer, valid, static_cast<int64_t>(dropped));
  std::free(buffer);
}

template <class Record>
DeviceInterval interval_of(const CUpti_Activity* r, DeviceWorkKind kind) {
  const auto* x = reinterpret_cast<const Record*>(r);
  return {static_cast<int64_t>(x->start), static_cast<int64_t>(x->end), kind, x->streamId, /*launched_ns=*/0,
          x->correlationId};
}

// A kernel, copy or memset as an interval; false for any other record (or one without both timestamps).
bool to_interval(const CUpti_Activity* r, DeviceInterval* out) {
  switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL:
      *out = interval_of<CUpti_ActivityKernel10>(r, DeviceWorkKind::kKernel);
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      *out = interval_of<CUpti_ActivityMemcpy6>(r, DeviceWorkKind::kMemcpy);
      break;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      *out = interval_of<CUpti_ActivityMemset4>(r, DeviceWorkKind::kMemset);
      break;
    default:
      return false;
  }
  return out->start_ns > 0 && out->end_ns > out->start_ns;
}

}  // namespace

int64_t timestamp_ns() {
  uint64_t t = 0;
  return cuptiGetTimestamp(&t) == CUPTI_SUCCESS ? static_cast<int64_t>(t) : 0;
}

ActivityRecorder& ActivityRecorder::instance() {
  static ActivityRecorder* recorder = new ActivityRecorder();  // never destroyed: CUPTI's thread may outlive main
  return *recorder;
}

bool ActivityRecorder::start(std::string* why) {
  if (active_.load()) return true;
  if (!callbacks_registered_) {
    const CUptiResult rc = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (rc != CUPTI_SUCCESS) {
      if (why) *why = "cuptiActivityRegisterCallbacks failed: " + cupti_text(rc);
      return false;
    }
    callbacks_registered_ = true;
  }
  for (size_t i = 0; i < sizeof(kKinds) / sizeof(kKinds[0]); ++i) {
    const CUptiResult rc = cuptiActivityEnable(kKinds[i]);
    if (rc != CUPTI_SUCCESS) {
      for (size_t j = 0; j < i; ++j) cuptiActivityDisable(kKinds[j]);
      if (why) *why = "cuptiActivityEnable(kind " + std::to_string(static_cast<int>(kKinds[i])) + ") failed: " +
                      cupti_text(rc) + " (another activity client, e.g. the PyTorch profiler or Nsight?)";
      return false;
    }
  }
  active_.store(true);
  return true;
}

void ActivityRecorder::stop() {
  if (!active_.exchange(false)) return;
  for (CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

void ActivityRecorder::flush() {
  if (callbacks_registered_) cuptiActivityFlushAll(0);  // calls buffer_completed here: never under mu_
}

void ActivityRecorder::add_buffer(uint8_t* buffer, size_t valid_bytes, int64_t dropped_records) {
  std::vector<DeviceInterval> parsed;
  CUpti_Activity* record = nullptr;
  while (valid_bytes > 0 && cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    DeviceInterval i;
    if (to_interval(record, &i)) parsed.push_back(i);
  }
  std::lock_guard<std::mutex> lock(mu_);
  intervals_.insert(intervals_.end(), parsed.begin(), parsed.end());
  dropped_ += dropped_records;
}

std::vector<DeviceInterval> ActivityRecorder::intervals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return intervals_;
}

int64_t ActivityRecorder::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

void ActivityRecorder::reset() {
  flush();
  std::lock_guard<std::mutex> lock(mu_);
  intervals_.clear();
  dropped_ = 0;
}

}  // namespace loopgate::cupti
