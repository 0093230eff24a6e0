// The CUDA-graph capture probe (issue 6): "sync-free" means the step body between an arm's host reads can be
// captured into a CUDA graph. One region of one iteration (RunConfig::capture) runs under a stream capture in
// cudaStreamCaptureModeGlobal on the run's (non-default) stream. A host read in the region — a synchronize or a pageable copy,
// also one made from the autograd thread, which global mode covers — makes CUDA refuse; the loop reports the
// error and the ledger site that read, and the run stops there. When every rank captured (a host-only MPI vote
// over MPI_COMM_WORLD), each replays its graph once, so the run goes on with the region's work done and must
// give the same bits as an unprobed run.
// GPU builds only (capture_cuda.cpp); elsewhere make_capture_session() returns nullptr and the loop refuses the
// config with one line.
#pragma once
#include <cstdint>
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
// Host-only vote over MPI_COMM_WORLD: true when every rank passes true.
bool every_rank(bool mine);

}  // namespace loopgate
