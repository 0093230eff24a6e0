// CudaEventSource and the device synchronize (LOOPGATE_HAS_CUDA builds only).
#include "trainer/timers/device_cuda.h"

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <unordered_map>
#include <vector>

#include "trainer/common/error.h"

namespace loopgate {
namespace {

void cuda_check(cudaError_t rc, const char* what) {
  LG_CHECK(rc == cudaSuccess, "{}: {}", what, cudaGetErrorString(rc));
}

// Events are reused once released: a run holds only its timers' pending events, however long it runs.
class CudaEventSource final : public EventSource {
 public:
  ~CudaEventSource() override {
    for (const auto& [id, e] : live_) cudaEventDestroy(e);
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
  }
  int64_t record() override {
    cudaEvent_t e;
    if (free_.empty()) {
      cuda_check(cudaEventCreate(&e), "cudaEventCreate");
    } else {
      e = free_.back();
      free_.pop_back();
    }
    cuda_check(cudaEventRecord(e, c10::cuda::getCurrentCUDAStream().stream()), "cudaEventRecord");
    live_[next_id_] = e;
    return next_id_++;
  }
  bool query(int64_t id) override {
    cudaError_t rc = cudaEventQuery(at(id));
    if (rc == cudaErrorNotReady) return false;
    cuda_check(rc, "cudaEventQuery");
    return true;
  }
  void synchronize(int64_t id) override {
    if (query(id)) return;
    ++blocking_waits_;
    cuda_check(cudaEventSynchronize(at(id)), "cudaEventSynchronize");
  }
  double seconds_between(int64_t a, int64_t b) override {
    float ms = 0.0f;
    cuda_check(cudaEventElapsedTime(&ms, at(a), at(b)), "cudaEventElapsedTime");
    return static_cast<double>(ms) / 1000.0;
  }
  int64_t blocking_waits() const override { return blocking_waits_; }
  void release(int64_t id) override {
    free_.push_back(at(id));
    live_.erase(id);
  }

 private:
  cudaEvent_t at(int64_t id) const {
    auto it = live_.find(id);
    LG_CHECK(it != live_.end(), "CUDA event id {}: never recorded or already released", id);
    return it->second;
  }
  std::unordered_map<int64_t, cudaEvent_t> live_;
  std::vector<cudaEvent_t> free_;  // released, ready to record again
  int64_t next_id_ = 0;
  int64_t blocking_waits_ = 0;
};

}  // namespace

std::unique_ptr<EventSource> make_cuda_event_source() { return std::make_unique<CudaEventSource>(); }

void cuda_device_synchronize() { cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

}  // namespace loopgate
