// The asynchronous copies: the read, the CPU forms of its copy stream and their emulation, the uploads
// (async_copy.h); the GPU copy stream is async_copy_cuda.cpp.
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

// A read: one buffer on the host (pinned on a GPU), filled through its copy stream.
class StreamRead final : public AsyncRead {
 public:
  StreamRead(Ledger& ledger, Site site, std::unique_ptr<CopyStream> stream)
      : ledger_(ledger), site_(site), stream_(std::move(stream)) {}
  void issue(const at::Tensor& values) override {
    OpCounter::Suspend host_side;  // the copy engine's work
    const at::Tensor v = values.detach().reshape({-1});
    if (!buffer_.defined() || buffer_.numel() != v.numel() || buffer_.scalar_type() != v.scalar_type())
      buffer_ = at::empty({v.numel()}, at::TensorOptions().dtype(v.scalar_type()).pinned_memory(v.is_cuda()));
    stream_->copy(buffer_, v);
    stream_->keep(v);  // the caller may let `values` go before the copy reads it
  }
  void wait() override {
    ledger_.record_read(site_, buffer_.numel());  // first: CUPTI attributes the wait to this site
    stream_->wait();
  }
  std::vector<double> values() const override {
    const at::Tensor d = buffer_.to(at::kDouble).contiguous();  // host to host: no device work
    const double* p = d.data_ptr<double>();
    return std::vector<double>(p, p + d.numel());
  }

 private:
  Ledger& ledger_;
  Site site_;
  std::unique_ptr<CopyStream> stream_;
  at::Tensor buffer_;
};

// A CPU rank: the copy is done when issued; the wait is the read the loop would make on a GPU.
class CpuCopyStream final : public CopyStream {
 public:
  void copy(at::Tensor& dest, const at::Tensor& source) override { dest.copy_(source); }
  void keep(const at::Tensor&) override {}
  void wait() override {}
};

// A CPU rank that behaves as a device running behind the host: each copy lands at the wait, or (seeded) at once,
// and reads its source then; until it lands, its buffer holds NaN. A copy issued into a buffer whose copy has not
// landed is a race (the earlier copy is lost), and so is one whose source's memory was let go before it landed
// (neither kept nor held by anyone: a device's allocator would have handed it to the next tensor).
class EmulatedCopyStream final : public CopyStream {
 public:
  EmulatedCopyStream(Ledger& ledger, uint64_t seed) : ledger_(ledger), rng_(seed) {}
  void copy(at::Tensor& dest, const at::Tensor& source) override {
    for (auto it = pending_.begin(); it != pending_.end();)
      if (it->dest.is_same(dest)) {
        ledger_.record_async_race();  // rewritten before its copy landed
        it = pending_.erase(it);
      } else {
        ++it;
      }
    if (dest.is_floating_point()) dest.fill_(std::numeric_limits<double>::quiet_NaN());
    pending_.push_back({dest, source.storage().getWeakStorageImpl(), source.storage_offset(), source.sizes().vec(),
                        source.strides().vec(), source.options()});
    if (rng_() % 4 == 0) land();  // the device had caught up: the copy lands at once
  }
  void keep(const at::Tensor& source) override { kept_.push_back(source); }
  void wait() override { land(); }

 private:
  struct Pending {
    at::Tensor dest;
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;  // the source's memory, unless it was let go
    int64_t offset;
    std::vector<int64_t> sizes, strides;
    at::TensorOptions options;
  };
  void land() {
    OpCounter::Suspend host_side;  // the copy engine's work
    for (Pending& p : pending_) {
      c10::intrusive_ptr<c10::StorageImpl> held = p.storage.lock();
      if (!held) {  // handed on before the copy read it: the buffer keeps the poison
        ledger_.record_async_race();
        continue;
      }
      at::Tensor source = at::empty({0}, p.options).set_(c10::Storage(std::move(held)), p.offset, p.sizes, p.strides);
      p.dest.copy_(source);
    }
    pending_.clear();
    kept_.clear();
  }
  Ledger& ledger_;
  std::mt19937_64 rng_;
  std::vector<Pending> pending_;
  std::vector<at::Tensor> kept_;  // kept until the copies land
};

// A CPU rank's upload: the "device" tensor is memory of its own, as on a GPU, so a stage rewritten after its copy
// changes nothing here (the copy landed at once).
class CpuUpload : public Upload {
 public:
  at::Tensor copy(const at::Tensor& host) override { return copy_from(upload_stage(host, c10::Device(c10::kCPU))); }

 protected:
  static at::Tensor copy_from(const at::Tensor& stage) {
    OpCounter::Suspend host_side;  // the copy engine's work, not a kernel
    return stage.clone();
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
    const at::Tensor stage = upload_stage(host, c10::Device(c10::kCPU));  // the production stage, watched
    {
      std::lock_guard<std::mutex> lock(mu_);  // a wait may come from the autograd thread's hooks
      in_flight_.push_back({stage, stage._version()});
    }
    return copy_from(stage);
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

std::unique_ptr<CopyStream> make_copy_stream(Ledger& ledger, Site site, const AsyncEmulation& emulation,
                                             const DeviceStress& stress, int rank) {
  auto seeded = [&](uint64_t seed) { return seed ^ (static_cast<uint64_t>(rank) << 20) ^ static_cast<uint64_t>(site); };
#if LOOPGATE_HAS_CUDA
  if (run_device().is_cuda()) return make_cuda_copy_stream(stress, seeded(stress.seed));
#else
  (void)stress;
#endif
  if (!emulation.on) return std::make_unique<CpuCopyStream>();
  return std::make_unique<EmulatedCopyStream>(ledger, seeded(emulation.seed));
}

std::unique_ptr<AsyncRead> make_async_read(Ledger& ledger, Site site, std::unique_ptr<CopyStream> stream) {
  return std::make_unique<StreamRead>(ledger, site, std::move(stream));
}

std::unique_ptr<AsyncRead> make_async_read(Ledger& ledger, Site site, const AsyncEmulation& emulation,
                                           const DeviceStress& stress, int rank) {
  return make_async_read(ledger, site, make_copy_stream(ledger, site, emulation, stress, rank));
}

at::Tensor upload(const std::vector<double>& values, const at::TensorOptions& options) {
  OpCounter::Suspend host_side;  // built on the host; the copy engine moves it
  const at::ScalarType dtype = options.has_dtype() ? options.dtype().toScalarType() : at::kDouble;
  at::Tensor host = at::tensor(values, at::TensorOptions().dtype(at::kDouble)).to(dtype);
  return upload(host, options.device());
}

at::Tensor upload_stage(const at::Tensor& host, c10::Device device) {
  // Pinned, so the copy is asynchronous; LibTorch's host allocator keeps the buffer until the copy is done.
  return device.is_cuda() ? host.pin_memory() : host;
}

at::Tensor upload(const at::Tensor& host, c10::Device device) {
  const at::Tensor stage = upload_stage(host, device);
  return device.is_cuda() ? stage.to(device, /*non_blocking=*/true) : stage;
}

}  // namespace loopgate
