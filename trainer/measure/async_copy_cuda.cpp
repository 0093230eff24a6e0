// The GPU form of the asynchronous read (async_copy.h; LOOPGATE_HAS_CUDA builds only): a pinned buffer, a
// non-blocking device-to-host copy on the current stream, and one CUDA event that guards the buffer.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAStream.h>

#include <limits>
#include <random>

#include "trainer/measure/async_copy.h"
#include "trainer/measure/op_counter.h"

namespace loopgate {
namespace {

constexpr double kCyclesPerMs = 2.0e6;  // about 2 GHz (an H200's SM clock)

class StressedComm final : public ForwardingComm {
 public:
  StressedComm(CommPtr inner, uint64_t seed) : ForwardingComm(std::move(inner)), rng_(seed) {}
  void all_reduce(at::Tensor& t, ReduceOp op) override {
    stress_sleep(rng_);
    inner_->all_reduce(t, op);
  }
  at::Tensor all_gather(const at::Tensor& t) override {
    stress_sleep(rng_);
    return inner_->all_gather(t);
  }
  at::Tensor reduce_scatter(const at::Tensor& t, ReduceOp op) override {
    stress_sleep(rng_);
    return inner_->reduce_scatter(t, op);
  }
  void broadcast(at::Tensor& t, int root) override {
    stress_sleep(rng_);
    inner_->broadcast(t, root);
  }
  void send(const at::Tensor& t, int peer) override {
    stress_sleep(rng_);
    inner_->send(t, peer);
  }
  void send_recv(const at::Tensor& s, int sp, at::Tensor& r, int rp) override {
    stress_sleep(rng_);
    inner_->send_recv(s, sp, r, rp);
  }

 private:
  std::mt19937_64 rng_;
};

class CudaRead final : public AsyncRead {
 public:
  CudaRead(Ledger& ledger, Site site, const DeviceStress& stress, uint64_t seed)
      : ledger_(ledger), site_(site), stress_(stress.on), rng_(seed) {}
  void issue(const at::Tensor& values) override {
    OpCounter::Suspend host_side;  // the copy engine's work
    const at::Tensor v = values.detach().reshape({-1});
    if (!buffer_.defined() || buffer_.numel() != v.numel() || buffer_.scalar_type() != v.scalar_type())
      buffer_ = at::empty({v.numel()}, at::TensorOptions().dtype(v.scalar_type()).pinned_memory(true));
    if (stress_) {  // poisoned before its reuse, then the copy waits behind 1..4 ms of spinning
      buffer_.fill_(std::numeric_limits<double>::quiet_NaN());
      stress_sleep(rng_);
    }
    buffer_.copy_(v, /*non_blocking=*/true);
    event_.record(c10::cuda::getCurrentCUDAStream());
  }
  void wait() override {
    ledger_.record_read(site_, buffer_.numel());  // first: CUPTI attributes the wait to this site
    event_.synchronize();
  }
  std::vector<double> values() const override {
    const at::Tensor d = buffer_.to(at::kDouble);  // host to host: no device work
    const double* p = d.data_ptr<double>();
    return std::vector<double>(p, p + d.numel());
  }

 private:
  Ledger& ledger_;
  Site site_;
  bool stress_;
  std::mt19937_64 rng_;
  at::Tensor buffer_;
  at::cuda::CUDAEvent event_;
};

}  // namespace

void stress_sleep(std::mt19937_64& rng) { at::cuda::sleep(static_cast<int64_t>(kCyclesPerMs * (1 + rng() % 4))); }

CommPtr stressed_comm(CommPtr inner, uint64_t seed) { return std::make_shared<StressedComm>(std::move(inner), seed); }

std::unique_ptr<AsyncRead> make_cuda_async_read(Ledger& ledger, Site site, const DeviceStress& stress, uint64_t seed) {
  return std::make_unique<CudaRead>(ledger, site, stress, seed);
}

}  // namespace loopgate
