// The CUDA side of the capture probe (LOOPGATE_HAS_CUDA builds only): LibTorch's CUDAGraph, which routes the
// region's allocations into a private pool that lives as long as the graph (the session keeps it to the end
// of the run), on a side stream as CUDA graphs require.
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <optional>

#include "trainer/instrument/capture.h"

namespace loopgate {
namespace {

class CudaCaptureSession final : public CaptureSession {
 public:
  void begin() override {
    origin_.emplace(c10::cuda::getCurrentCUDAStream());
    side_.emplace(c10::cuda::getStreamFromPool());
    at::cuda::CUDAEvent ready;  // the side stream starts after everything already queued
    ready.record(*origin_);
    ready.block(*side_);
    guard_.emplace(*side_);
    graph_ = std::make_unique<at::cuda::CUDAGraph>();
    graph_->capture_begin({0, 0}, cudaStreamCaptureModeGlobal);
  }

  void end() override { graph_->capture_end(); }

  void abandon() override {
    try {
      graph_->capture_end();  // ends the invalidated capture and returns the pool; it throws, as expected here
    } catch (const std::exception&) {
    }
    (void)cudaGetLastError();
    guard_.reset();
  }

  void replay() override {
    graph_->replay();
    at::cuda::CUDAEvent done;
    done.record(*side_);
    guard_.reset();
    done.block(*origin_);
  }

  void release() override { guard_.reset(); }

 private:
  std::optional<c10::cuda::CUDAStream> origin_, side_;
  std::optional<c10::cuda::CUDAStreamGuard> guard_;
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
};

}  // namespace

std::unique_ptr<CaptureSession> make_cuda_capture_session() { return std::make_unique<CudaCaptureSession>(); }

}  // namespace loopgate
