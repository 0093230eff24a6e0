// What the protocol families share (protocol.h ProtocolBase).
#include "trainer/loop/protocol.h"

#include <ATen/ATen.h>

#include "trainer/common/device.h"
#include "trainer/common/error.h"
#include "trainer/loop/mutation.h"

namespace loopgate {

std::vector<double> lr_table(const SegmentStart& start, const Mutation& m) {
  OptimizerParamScheduler s(start.scheduler.config());  // from step 0: the device indexes by its total step count
  std::vector<double> table;
  for (int64_t k = 0; k <= start.train_iters; ++k) {
    table.push_back(static_cast<float>(m.step_lr(s.get_lr())));  // the float the step multiplies by
    s.step(start.samples_per_step);
  }
  return table;
}

ProtocolBase::ProtocolBase(const SiteContext& c, LoopTimers& timers)
    : c_(c), timers_(timers), nan_check_(c), exit_(c) {
  nan_count_ = at::zeros({1}, on_run_device(at::kFloat));
  zero_ = at::zeros({1}, on_run_device(at::kFloat));
}

ProtocolBase::~ProtocolBase() = default;

std::unique_ptr<AsyncRead> ProtocolBase::make_log_read(Site site) const {
  const RunConfig& r = c_.config;
  const Mutation& m = c_.arm.mutated();
  return handed_through<made::LogRead>(
      m, make_async_read(c_.ledger, site,
                         handed_through<made::ReadCopyStream>(
                             m, make_copy_stream(c_.ledger, site, r.async_emulation, r.stress, c_.rank))));
}

void ProtocolBase::begin_segment(const SegmentStart& start) {
  window_.begin(start.window, /*carries_abort=*/replayable() != nullptr);
}

HandOver ProtocolBase::hand_over(std::optional<int64_t> save_after) {
  HandOver h;
  h.steps = device_steps();  // first: the count a save's scheduler catches up with
  if (save_after) h.window = saved_window(*save_after);
  return h;
}

bool ProtocolBase::exit_vote(int64_t iteration, bool log_point, const LogOutputs& log) {
  return exit_.vote(iteration, log_point, log.exit_vote);
}

}  // namespace loopgate
