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

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

// Whether the capture in progress on `stream` holds any work yet (unknown: assume it does).
bool capture_has_work(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  if (cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph) != cudaSuccess || !graph) return true;
  size_t nodes = 0;
  return cudaGraphGetNodes(graph, nullptr, &nodes) != cudaSuccess || nodes > 0;
}

// --cuda-graph iteration: per arm segment, the iteration captured in global mode on the run's stream (set at
// construction, before the grad buffer exists, as for the probe) as CUDAGraphs, one per stretch of work between the
// body's cut actions, sharing one memory pool (replayed in capture order, as make_graphed_callables does); every
// later replayable iteration replays them in turn with the captured actions between them.
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
    steps_.clear();
    guard_.reset();
  }

  void run(int64_t iteration, const std::function<void()>& body, const GraphState&) override {
    if (off_) {
      body();
      return;
    }
    if (steps_.empty()) {
      std::string error;
      capturing_ = true;
      begin_segment();
      try {
        body();
        end_segment();
      } catch (const std::exception& e) {
        abandon_segment();
        const std::string what = e.what();
        error = what.substr(0, what.find('\n'));
      }
      capturing_ = false;
      if (!every_rank(error.empty())) {  // a graph some rank lacks would wait forever on its NCCL peers
        off_ = true;
        steps_.clear();
        report_.error = fmt::format("iteration {} did not capture on every rank{}{}", iteration,
                                    error.empty() ? "" : ": ", error);
        body();  // capture ran none of the work: do it eagerly
        return;
      }
      report_.captured_at = iteration;
      ++report_.captures;
    }
    for (const Step& s : steps_) s.graph ? s.graph->replay() : s.action();
    ++report_.replays;
  }

  void cut(const std::function<void()>& action) override {
    if (!capturing_) {
      action();
      return;
    }
    if (capture_has_work(run_stream_.stream())) {  // else the action joins the ones before this stretch
      end_segment();
      begin_segment();
    }
    steps_.push_back({nullptr, action});
  }

  void reset() override {
    if (!steps_.empty()) (void)cudaStreamSynchronize(run_stream_.stream());  // its last replay is done with the pool
    steps_.clear();
    pool_ = {0, 0};
  }
  bool off() const override { return off_; }

 private:
  struct Step {  // a captured stretch of work, or a host action between two
    std::shared_ptr<at::cuda::CUDAGraph> graph;
    std::function<void()> action;
  };

  void begin_segment() {
    open_ = std::make_shared<at::cuda::CUDAGraph>();
    open_->capture_begin(pool_, cudaStreamCaptureModeGlobal);  // {0, 0}: a new pool, which the later ones share
  }
  void end_segment() {
    open_->capture_end();
    if (pool_.first == 0 && pool_.second == 0) pool_ = open_->pool();
    steps_.push_back({std::move(open_), nullptr});
  }
  void abandon_segment() {
    try {
      if (open_) open_->capture_end();  // ends the invalidated capture; throws, as expected here
    } catch (const std::exception&) {
    }
    open_.reset();
    (void)cudaGetLastError();
    steps_.clear();
  }

  c10::cuda::CUDAStream run_stream_;
  std::optional<c10::cuda::CUDAStreamGuard> guard_;
  std::vector<Step> steps_;                  // the captured iteration, in order: kept to the end (the pool)
  std::shared_ptr<at::cuda::CUDAGraph> open_;  // the stretch being captured
  decltype(std::declval<at::cuda::CUDAGraph&>().pool()) pool_{0, 0};  // LibTorch's MempoolId_t, where it lives
  bool capturing_ = false;
  bool off_ = false;
};

}  // namespace

std::unique_ptr<CaptureSession> make_cuda_capture_session() { return std::make_unique<CudaCaptureSession>(); }
std::unique_ptr<IterationGraph> make_cuda_iteration_graph() { return std::make_unique<CudaIterationGraph>(); }

}  // namespace loopgate
