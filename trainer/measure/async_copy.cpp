// The CPU forms of the asynchronous copies and their emulation (async_copy.h); the GPU form is async_copy_cuda.cpp.
#include "trainer/measure/async_copy.h"

#include <ATen/ATen.h>

#include <limits>
#include <mutex>
#include <random>

#include "trainer/common/device.h"
#include "trainer/common/error.h"
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

// A CPU rank's upload: the "device" tensor is memory of its own, as on a GPU, so a stage rewritten after its copy
// changes nothing here (the copy landed at once).
class CpuUpload : public Upload {
 public:
  at::Tensor copy(const at::Tensor& host) override {
    OpCounter::Suspend host_side;  // the copy engine's work, not a kernel
    return host.clone();
  }
};

// A CPU rank that behaves as a device running behind the host: each stage is held until the host next waits on
// the device; a stage rewritten by then (its version counter moved) would have fed the device the new values.
class EmulatedUpload final : public CpuUpload {
 public:
  explicit EmulatedUpload(Ledger& ledger) : ledger_(ledger) {
    ledger_.set_wait_observer([this] { landed(); });
  }
  ~EmulatedUpload() override { ledger_.set_wait_observer(nullptr); }
  at::Tensor copy(const at::Tensor& host) override {
    {
      std::lock_guard<std::mutex> lock(mu_);  // a wait may come from the autograd thread's hooks
      in_flight_.push_back({host, host._version()});
    }
    return CpuUpload::copy(host);
  }

 private:
  void landed() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Staged& s : in_flight_)
      if (s.stage._version() != s.version) ledger_.record_async_race();  // rewritten before its copy landed
    in_flight_.clear();
  }
  struct Staged {
    at::Tensor stage;
    int64_t version;
  };
  Ledger& ledger_;
  std::mutex mu_;
  std::vector<Staged> in_flight_;
};

#if LOOPGATE_HAS_CUDA
class CudaUpload final : public Upload {
 public:
  CudaUpload(c10::Device device, const DeviceStress& stress, uint64_t seed)
      : device_(device), stress_(stress.on), rng_(seed) {}
  at::Tensor copy(const at::Tensor& host) override {
    if (stress_) stress_sleep(rng_);  // the copy waits behind it, so the host runs ahead of the copy it issued
    return upload(host, device_);     // an already pinned `host` is the stage itself
  }

 private:
  c10::Device device_;
  bool stress_;
  std::mt19937_64 rng_;
};
#endif

}  // namespace

std::unique_ptr<Upload> make_upload(Ledger& ledger, c10::Device device, const AsyncEmulation& emulation,
                                    const DeviceStress& stress, int rank) {
#if LOOPGATE_HAS_CUDA
  if (device.is_cuda()) return std::make_unique<CudaUpload>(device, stress, stress.seed * 31337ULL + static_cast<uint64_t>(rank));
#else
  (void)stress;
  (void)rank;
#endif
  LG_CHECK(!device.is_cuda(), "make_upload: a CUDA device in a build without the GPU tier");
  if (emulation.on) return std::make_unique<EmulatedUpload>(ledger);
  return std::make_unique<CpuUpload>();
}

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
