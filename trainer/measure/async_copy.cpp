// The CPU forms of the asynchronous copies and their emulation (async_copy.h); the GPU form is async_copy_cuda.cpp.
#include "trainer/measure/async_copy.h"

#include <ATen/ATen.h>

#include <limits>
#include <random>

#include "trainer/common/device.h"
#include "trainer/measure/op_counter.h"

namespace loopgate {
namespace {

// A CPU rank: the copy is done when issued; the wait is the read the loop would make on a GPU.
class CpuRead : public AsyncRead {
 public:
  CpuRead(Ledger& ledger, Site site) : ledger_(ledger), site_(site) {}
  void issue(const at::Tensor& values) override {
    OpCounter::Suspend host_side;  // the copy engine's work, not a kernel
    buffer_ = values.detach().to(at::kDouble).reshape({-1}).clone();
  }
  void wait() override { ledger_.record_read(site_, buffer_.numel()); }
  std::vector<double> values() const override {
    const at::Tensor c = buffer_.contiguous();
    const double* p = c.data_ptr<double>();
    return std::vector<double>(p, p + c.numel());
  }

 protected:
  Ledger& ledger_;
  Site site_;
  at::Tensor buffer_;
};

// A CPU rank that behaves as a device running behind the host: each copy lands at its wait, or (seeded) at its
// issue; until then the buffer holds NaN. An issue while the last copy has not landed loses that copy: a race.
class EmulatedRead final : public CpuRead {
 public:
  EmulatedRead(Ledger& ledger, Site site, uint64_t seed) : CpuRead(ledger, site), rng_(seed) {}
  void issue(const at::Tensor& values) override {
    OpCounter::Suspend host_side;
    if (pending_) ledger_.record_async_race();  // rewritten before its copy landed
    landing_ = values.detach().to(at::kDouble).reshape({-1}).clone();
    buffer_ = at::full_like(landing_, std::numeric_limits<double>::quiet_NaN());
    pending_ = true;
    if (rng_() % 4 == 0) land();  // the device had caught up: the copy lands at once
  }
  void wait() override {
    if (pending_) land();
    CpuRead::wait();
  }

 private:
  void land() {
    buffer_ = landing_;
    pending_ = false;
  }
  std::mt19937_64 rng_;
  at::Tensor landing_;
  bool pending_ = false;
};

}  // namespace

std::unique_ptr<AsyncRead> make_async_read(Ledger& ledger, Site site, const AsyncEmulation& emulation,
                                           const DeviceStress& stress, int rank) {
  auto seeded = [&](uint64_t seed) { return seed ^ (static_cast<uint64_t>(rank) << 20) ^ static_cast<uint64_t>(site); };
#if LOOPGATE_HAS_CUDA
  if (run_device().is_cuda()) return make_cuda_async_read(ledger, site, stress, seeded(stress.seed));
#else
  (void)stress;
#endif
  if (!emulation.on) return std::make_unique<CpuRead>(ledger, site);
  return std::make_unique<EmulatedRead>(ledger, site, seeded(emulation.seed));
}

at::Tensor upload(const std::vector<double>& values, const at::TensorOptions& options) {
  OpCounter::Suspend host_side;  // built on the host; the copy engine moves it
  const at::ScalarType dtype = options.has_dtype() ? options.dtype().toScalarType() : at::kDouble;
  at::Tensor host = at::tensor(values, at::TensorOptions().dtype(at::kDouble)).to(dtype);
  return upload(host, options.device());
}

at::Tensor upload(const at::Tensor& host, c10::Device device) {
  if (!device.is_cuda()) return host;
  // Pinned, so the copy is asynchronous; LibTorch's host allocator keeps the buffer until the copy is done.
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

}  // namespace loopgate
