// CudaEventSource and the device synchronize (LOOPGATE_HAS_CUDA builds only).
#include "trainer/instrument/device_cuda.h"

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <vector>

#include "trainer/common/error.h"

namespace loopgate {
namespace {

void cuda_check(cudaError_t rc, const char* what) {
  LG_CHECK(rc == cudaSuccess, "{}: {}", what, cudaGetErrorString(rc));
}

class CudaEventSource final : public EventSource {
 public:
  ~CudaEventSource() override {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  int64_t record() override {
    cudaEvent_t e;
    cuda_check(cudaEventCreate(&e), "cudaEventCreate");
    cuda_check(cudaEventRecord(e, c10::cuda::getCurrentCUDAStream().stream()), "cudaEventRecord");
    events_.push_back(e);
    return static_cast<int64_t>(events_.size()) - 1;
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

 private:
  cudaEvent_t at(int64_t id) const {
    LG_CHECK(id >= 0 && id < static_cast<int64_t>(events_.size()), "unknown CUDA event id {}", id);
    return events_[static_cast<size_t>(id)];
  }
  std::vector<cudaEvent_t> events_;
  int64_t blocking_waits_ = 0;
};

}  // namespace

std::unique_ptr<EventSource> make_cuda_event_source() { return std::make_unique<CudaEventSource>(); }

void cuda_device_synchronize() { cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

}  // namespace loopgate
