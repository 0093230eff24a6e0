// The CUDA-graph capture probe: "sync-free" means the step body between an arm's host reads can be
// captured into a CUDA graph. One region of one iteration (RunConfig::capture) runs under a stream capture in
// cudaStreamCaptureModeGlobal on the run's (non-default) stream. A host read in the region — a synchronize or a pageable copy,
// also one made from the autograd thread, which global mode covers — makes CUDA refuse; the loop reports the
// error and the ledger site that read, and the run stops there. When every rank captured (a host-only MPI vote
// over MPI_COMM_WORLD), each replays its graph once, so the run goes on with the region's work done and must
// give the same bits as an unprobed run.
// GPU builds only (capture_cuda.cpp); elsewhere make_capture_session() returns nullptr and the loop refuses the
// config with one line.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace loopgate {

// Which region of which iteration to probe (Megatron's 1-based iteration); region "" = off.
struct CaptureSpec {
  std::string region;  // one of capture_regions()
  int64_t iteration = 2;  // >= 2: iteration 1 warms up kernels, cuBLAS and the allocator outside the capture
  bool enabled() const { return !region.empty(); }
};

// forward_backward: zeroing the grad buffer, the forward-backward schedule with its loss and grad-bucket hooks
// (NaN checks, DP bucket reductions). optimizer: optimizer.step with clipping and its stats (no site reads in
// any arm here: the loop reads them in training_log). training_log: the log inputs (params norm) and
// training_log itself — at a non-log iteration the sync-free arms read nothing there, the baseline its stats.
const std::vector<std::string>& capture_regions();
// Parses "REGION[@ITERATION]" (e.g. forward_backward@3); InputError naming the problem.
CaptureSpec parse_capture_spec(const std::string& text);

struct CaptureVerdict {
  bool attempted = false;
  std::string region;
  int64_t iteration = 0;
  bool captured = false;     // this rank's capture ended without error
  bool replayed = false;     // every rank captured, and this rank's graph ran
  int64_t reads_in_region = 0;  // ledger reads made inside the region on this rank
  std::string site;          // the first of them ("" when none)
  std::string error;         // first line of the CUDA / LibTorch error ("" when captured)
};
std::string describe(const CaptureVerdict& v);  // one line

// Made before the run builds its optimizer side: from then to its destruction the run's work goes to one
// non-default stream (CUDA graphs are captured on one; the grad buffer's AccumulateGrad nodes keep it).
class CaptureSession {
 public:
  virtual ~CaptureSession() = default;
  virtual void begin() = 0;    // capture starts on the run's stream (global mode)
  virtual void end() = 0;      // ends the capture; throws when CUDA refused it
  virtual void abandon() = 0;  // after a throw inside the region: end the capture, clear CUDA's last error
  virtual void replay() = 0;   // runs the graph on the run's stream
};
// nullptr in builds without the GPU tier.
std::unique_ptr<CaptureSession> make_capture_session();

// ---- --cuda-graph iteration ----
// An iteration of an arm that reads nothing between log points, its device work captured once as CUDA graphs (one
// per segment between its timer actions: cut) and replayed on every later iteration, log points too (their one read
// follows the replay). A graph replays the captured kernels with the captured arguments and addresses: it equals
// running the iteration eagerly only if every replayable iteration issues the same operators with the same host
// arguments on the same persistent tensors. On a GPU that is what the gates' bit-identity checks see; the CPU
// stand-in checks it directly, operator by operator (op_stream.h).
struct GraphReport {
  bool on = false;             // RunConfig::cuda_graph asked for it
  int64_t captured_at = 0;     // Megatron iteration of the (last) capture; 0 = never captured
  int64_t captures = 0;        // one per arm segment that replays
  int64_t replays = 0;         // iterations that ran as the graph (the captured one too: captured, then replayed)
  std::string error;           // capture refused on some rank (the run went on eagerly), or the CPU check's finding
};

// The persistent tensors a replay reads and writes (parameters, optimizer and grad buffers, the arm's device
// state, the static batch), by name: the CPU check identifies them in the operator stream and requires each to
// keep its storage across replays (a graph keeps using the captured storage).
using GraphState = std::vector<std::pair<std::string, at::Tensor>>;

class IterationGraph {
 public:
  virtual ~IterationGraph() = default;
  // One replayable iteration (`iteration`: Megatron's). The first call after make / reset captures `body` on
  // every rank and replays it; later calls replay. When capture fails on any rank the body runs eagerly, the
  // graph is off for the rest of the run, and report().error says why (every rank agrees: MPI vote).
  virtual void run(int64_t iteration, const std::function<void()>& body, const GraphState& state) = 0;
  // Inside run()'s body: `action` (a level-1 timer's start or stop, which records an event on the stream) runs at
  // this point of every replay, between the device work before and after it. A GPU cuts the capture here into
  // segments, replayed in turn with the captured iteration's actions between them; an event inside a graph would
  // be recorded once at capture and never re-armed. Outside a capture (the graph off): the action runs now.
  virtual void cut(const std::function<void()>& action) = 0;
  virtual void reset() = 0;  // another arm's state: the next run captures afresh
  virtual bool off() const = 0;
  virtual const GraphReport& report() const { return report_; }

 protected:
  GraphReport report_;
};
// CUDA: LibTorch's CUDAGraph on the run's own non-default stream, set here — make it before the grad buffer
// (as the probe's session). CPU: the operator-stream check (op_stream.h), which runs the body every time.
std::unique_ptr<IterationGraph> make_iteration_graph(bool cuda);
// Host-only vote over MPI_COMM_WORLD: true when every rank passes true.
bool every_rank(bool mine);

}  // namespace loopgate
