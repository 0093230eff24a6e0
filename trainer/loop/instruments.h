// loopgate's own instruments on a run, beside its numerics and never changing them: the parameters' checksums (a
// Trace's), the digests at every boundary (--digests), what each group carried (record_collectives), the groups'
// checks (--check-collectives; --stress on a GPU), the per-site counts, and the capture probe. The loop calls them
// at a few named points after the numerics, one line each; each is off unless the run asked for it.
#pragma once
#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "trainer/capture/capture.h"
#include "trainer/loop/arms.h"
#include "trainer/loop/config.h"
#include "trainer/loop/trace.h"
#include "trainer/measure/digests.h"
#include "trainer/measure/ledger.h"
#include "trainer/model/gpt.h"
#include "trainer/model/module_tap.h"
#include "trainer/model/param.h"
#include "trainer/optim/adam.h"
#include "trainer/optim/grad_buffer.h"
#include "trainer/parallel/layout.h"
#include "trainer/parallel/recorded_comm.h"
#include "trainer/pipeline/schedules.h"

namespace loopgate {

// Thrown out of a probed region that could not be captured on some rank: the run stops there.
struct CaptureStopped {};

class Instruments {
 public:
  Instruments(const RunConfig& cfg, Ledger& ledger);

  // The run's groups as the instruments see them: stressed innermost (--stress on a GPU), checked, digested,
  // recorded outside (the fingerprints are the check's, not the loop's).
  ProcessGroups wrap(const ProcessGroups& groups, int rank) const;
  DigestLog* digests() const { return digests_.get(); }
  // Digests on or off from here (a run with RunConfig::digests); whether that is a switch.
  bool switch_digests(bool on);
  // The model's tap, while digests are taken or the arm (`*arm`, the current one) changes a module: a tap costs
  // host time per module.
  void tap(GptStage& stage, const Arm* const* arm);
  // The schedule's hooks learn the digests' microbatch and direction.
  void hook(ScheduleHooks& hooks) const;

  // The capture probe (RunConfig::capture), made before the grad buffer: the run moves to the probe's stream.
  void start_capture_probe();
  bool capture_probe() const { return capture_ != nullptr; }
  // Runs `body`, under the capture probe when RunConfig::capture names this region and 0-based iteration. Every
  // rank captures before any replays (the graphs hold NCCL kernels that need every peer); CaptureStopped when one
  // could not.
  void region(int64_t iteration, const char* name, const std::function<void()>& body);

  // Inside a replayed iteration's body: nothing reads or digests (a replay runs no host code); a graph's
  // checksums are taken around its replay.
  class Quiet {
   public:
    explicit Quiet(Instruments& i) : i_(i) { i_.quiet_ = true; }
    ~Quiet() { i_.quiet_ = false; }
    Quiet(const Quiet&) = delete;
    Quiet& operator=(const Quiet&) = delete;

   private:
    Instruments& i_;
  };

  // ---- the named points ----
  // The parameters' checksum (RunConfig::param_checksums; else 0): on a GPU a device-to-host copy.
  uint64_t checksum(const Params& params);
  // After the backward: every grad as reduced, the clip's input (hashed now: the clip scales them in place).
  void grads_reduced(const Params& params, const GradBuffer& buffer);
  // After the step: the clipped grads, the grad norm, the main params and Adam's moments; then the reduced loss.
  void step_taken(const Params& params, const GradBuffer& buffer, const Adam& adam, const at::Tensor& grad_norm,
                  const at::Tensor& loss);
  // A record's host reads and operators per site for ledger iteration `iteration`, and its collectives. With
  // operators counted, an operator that would synchronize on CUDA outside the ledger (OpCounter::syncs: a
  // data-dependent output size, item()) is a host read at its site too: what CUPTI would count on a GPU.
  void note(IterationRecord& rec, int64_t iteration, const ProcessGroups& groups) const;
  // The capture probe's verdict on this rank (attempted = false: off).
  const CaptureVerdict& capture_verdict() const { return verdict_; }
  // The run's end: the digests, read once, into this rank's records.
  void attach_digests(Trace& trace, const Coord& coord);

 private:
  const std::array<DigestLog::NameId, 3>& names(const Params& params, size_t i);

  const RunConfig& cfg_;
  Ledger& ledger_;
  std::shared_ptr<CollectiveLog> collectives_;
  std::shared_ptr<DigestLog> digests_;
  std::vector<std::array<DigestLog::NameId, 3>> names_;  // per parameter: its own, then its two Adam moments'
  std::unique_ptr<ModuleTap> tap_;
  std::unique_ptr<CaptureSession> capture_;
  CaptureVerdict verdict_;
  bool quiet_ = false;
};

}  // namespace loopgate
