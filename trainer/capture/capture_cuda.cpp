// The CUDA side of the capture probe (LOOPGATE_HAS_CUDA builds only): LibTorch's CUDAGraph, which routes the
// region's allocations into a private pool that lives as long as the graph (the session keeps it to the end
// of the run).
// A probed run runs entirely on one non-default stream, set when the session is made (before the grad buffer
// creates the parameters' AccumulateGrad nodes, which keep the stream current at their creation): CUDA graphs
// must be captured on a non-default stream, and a backward whose AccumulateGrad nodes live on the legacy stream
// cannot be captured ("operation would make the legacy stream depend on a capturing blocking stream", measured).
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <fmt/format.h>

#include <optional>
#include <string>

#include "trainer/capture/capture.h"

namespace loopgate {
namespace {

class CudaCaptureSession final : public CaptureSession {
 public:
  CudaCaptureSession() : run_stream_(c10::cuda::getStreamFromPool()) {
    at::cuda::CUDAEvent ready;  // the run's stream starts after everything already queued (model init)
    ready.record(c10::cuda::getCurrentCUDAStream());
    ready.block(run_stream_);
    guard_.emplace(run_stream_);
  }
  ~CudaCaptureSession() override {
    (void)cudaStreamSynchronize(run_stream_.stream());  // after the run: the next one starts on the default stream
    guard_.reset();
  }

  void begin() override {
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
  }

  void replay() override { graph_->replay(); }

 private:
  c10::cuda::CUDAStream run_stream_;
  std::optional<c10::cuda::CUDAStreamGuard> guard_;
  std::unique_ptr<at::cuda::CUDAGraph> graph_;  // kept to the end of the run: its pool holds region tensors
};

// --cuda-graph iteration: one CUDAGraph per arm segment, captured in global mode on the run's stream (set at
// construction, before the grad buffer exists, as for the probe), replayed on every later replayable iteration.
class CudaIterationGraph final : public IterationGraph {
 public:
  CudaIterationGraph() : run_stream_(c10::cuda::getStreamFromPool()) {
    at::cuda::CUDAEvent ready;
    ready.record(c10::cuda::getCurrentCUDAStream());
    ready.block(run_stream_);
    guard_.emplace(run_stream_);
    report_.on = true;
  }
  ~CudaIterationGraph() override {
    (void)cudaStreamSynchronize(run_stream_.stream());
    graph_.reset();
    guard_.reset();
  }

  void run(int64_t iteration, const std::function<void()>& body, const GraphState&) override {
    if (off_) {
      body();
      return;
    }
    if (!graph_) {
      auto g = std::make_unique<at::cuda::CUDAGraph>();
      std::string error;
      g->capture_begin({0, 0}, cudaStreamCaptureModeGlobal);
      try {
        body();
        g->capture_end();
      } catch (const std::exception& e) {
        try {
          g->capture_end();  // ends the invalidated capture; throws, as expected here
        } catch (const std::exception&) {
        }
        (void)cudaGetLastError();
        const std::string what = e.what();
        error = what.substr(0, what.find('\n'));
      }
      if (!every_rank(error.empty())) {  // a graph some rank lacks would wait forever on its NCCL peers
        off_ = true;
        report_.error = fmt::format("iteration {} did not capture on every rank{}{}", iteration,
                                    error.empty() ? "" : ": ", error);
        body();  // capture ran none of the work: do it eagerly
        return;
      }
      graph_ = std::move(g);
      report_.captured_at = iteration;
      ++report_.captures;
    }
    graph_->replay();
    ++report_.replays;
  }

  void reset() override {
    if (graph_) (void)cudaStreamSynchronize(run_stream_.stream());  // its last replay is done with the pool
    graph_.reset();
  }
  bool off() const override { return off_; }

 private:
  c10::cuda::CUDAStream run_stream_;
  std::optional<c10::cuda::CUDAStreamGuard> guard_;
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
  bool off_ = false;
};

}  // namespace

std::unique_ptr<CaptureSession> make_cuda_capture_session() { return std::make_unique<CudaCaptureSession>(); }
std::unique_ptr<IterationGraph> make_cuda_iteration_graph() { return std::make_unique<CudaIterationGraph>(); }

}  // namespace loopgate
