// The GPU forms (async_copy.h; LOOPGATE_HAS_CUDA builds only): the read's copy stream (a pooled CUDA stream, the
// events that order it behind the current stream and guard its buffer) and the stress.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <limits>
#include <random>
#include <vector>

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

// A stream from the pool: each copy waits for the current stream's work so far, then runs beside the step after
// it. A kept source is recorded on this stream, so the caching allocator holds its block until the copy is done.
class CudaCopyStream final : public CopyStream {
 public:
  CudaCopyStream(const DeviceStress& stress, uint64_t seed)
      : stream_(at::cuda::getStreamFromPool()), stress_(stress.on), rng_(seed) {}
  void copy(at::Tensor& dest, const at::Tensor& source) override {
    ready_.record(c10::cuda::getCurrentCUDAStream());
    ready_.block(stream_);
    c10::cuda::CUDAStreamGuard on_copy_stream(stream_);
    if (stress_) {  // poisoned before its reuse, then the copy waits behind 1..4 ms of spinning
      if (dest.is_floating_point()) dest.fill_(std::numeric_limits<double>::quiet_NaN());
      stress_sleep(rng_);
      in_flight_.push_back({static_cast<const char*>(source.data_ptr()), source.nbytes(), source.device()});
    }
    dest.copy_(source, /*non_blocking=*/true);
    done_.record(stream_);
  }
  void keep(const at::Tensor& source) override { source.record_stream(stream_); }
  void wait() override {
    if (stress_) overwrite_freed_sources();
    done_.synchronize();
  }

 private:
  struct Source {
    const char* start;
    size_t bytes;
    c10::Device device;
  };
  // --stress: blocks of each source's size taken from the allocator on the current stream until one overlaps the
  // source (up to kTries); that one is overwritten with 0xFF bytes (NaN in every float dtype), as the step's next
  // allocation would. The allocator hands out a source's block only when it was let go unkept.
  void overwrite_freed_sources() {
    constexpr int kTries = 4096;  // 2 MiB of 512-byte blocks: one of the allocator's small segments
    OpCounter::Suspend stress_side;  // the stress's own work, not the loop's
    for (const Source& s : in_flight_) {
      std::vector<at::Tensor> taken;
      const auto bytes = static_cast<int64_t>(s.bytes);
      for (int i = 0; i < kTries; ++i) {
        at::Tensor block = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(s.device));
        const char* p = static_cast<const char*>(block.data_ptr());
        if (p < s.start + s.bytes && s.start < p + s.bytes) {
          block.fill_(0xFF);
          break;
        }
        taken.push_back(std::move(block));
      }
    }
    in_flight_.clear();
  }
  c10::cuda::CUDAStream stream_;
  bool stress_;
  std::mt19937_64 rng_;
  at::cuda::CUDAEvent ready_, done_;
  std::vector<Source> in_flight_;
};

}  // namespace

void stress_sleep(std::mt19937_64& rng) { at::cuda::sleep(static_cast<int64_t>(kCyclesPerMs * (1 + rng() % 4))); }

CommPtr stressed_comm(CommPtr inner, uint64_t seed) { return std::make_shared<StressedComm>(std::move(inner), seed); }

std::unique_ptr<CopyStream> make_cuda_copy_stream(const DeviceStress& stress, uint64_t seed) {
  return std::make_unique<CudaCopyStream>(stress, seed);
}

}  // namespace loopgate
