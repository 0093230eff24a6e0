// The shared host-sync sites (sites.h). Counts per iteration on the baseline (Megatron HEAD, docs/design.md
// "Megatron semantics the trainer ports"): NaN check 2 reads per microbatch loss and per grad bucket (from the
// second iteration); rerun decision 2 (H2D + read); update_successful 2; exit vote 2. The sites the log line reads
// (grad norm, num zeros, params norm, loss scale, learning rate, loss-accumulator seed, loss report) are counted in
// protocol_per_site.cpp, the timers' in loop_timers.cpp.
#include "trainer/loop/sites.h"

#include <ATen/ATen.h>

#include "trainer/common/device.h"
#include "trainer/loop/mutation.h"

namespace loopgate {
namespace {
at::TensorOptions f32() { return on_run_device(at::kFloat); }
}  // namespace

double reduce_max_stat_eager(const SiteContext& c, Site site, const at::Tensor& stat) {
  return reduce_max_stat_host(c, site, c.read_scalar(site, stat));
}

double reduce_max_stat_host(const SiteContext& c, Site site, double local) {
  ScopedSite scope(site_name(site));
  at::Tensor t = c.ledger.device_scalar(site, local, f32());
  c.groups.mp->all_reduce(t, ReduceOp::kMax);
  c.read_scalar(site, t);
  return c.read_scalar(site, t);
}

// The baseline's num zeros went through reduce_max_stat's float32 tensor: counts above 2^24 keep only their even
// (then multiple-of-4, ...) neighbours. A deferred read carries the exact int64 count, so it rounds on the host
// the same way (rounding is monotonic: the MAX of rounded values is the rounded MAX). Seen on an H200 at
// 2048x8x1024 (docs/performance.md); the CPU gate simulates it (OptimizerStepConfig::simulated_extra_zeros).
double as_reduce_max_stat(double x) { return static_cast<double>(static_cast<float>(x)); }

void NanCheckSite::check(RerunStateMachine& rerun, Site site, const at::Tensor& value) {
  ScopedSite scope(site_name(site));
  if (!rerun.should_validate()) return;  // Megatron: the first iteration is not validated
  if (c_.arm.nan_check == SyncMode::kEager) {
    // validate_result(isnan) then validate_result(isinf): one bool() read each.
    bool bad = c_.read_scalar(site, value.isnan().any()) != 0.0;
    bad = (c_.read_scalar(site, value.isinf().any()) != 0.0) || bad;
    rerun.bank_host(bad, site_name(site));
  } else {
    c_.arm.mutated().bank_nan(rerun, value);  // one copy of the checked value; judged at the decision
  }
}

Decision RerunDecisionSite::decide(RerunStateMachine& rerun) {
  ScopedSite scope(site_name(Site::kRerunDecision));
  if (!rerun.needs_vote()) return rerun.decide(0.0);
  at::Tensor vote;
  if (c_.arm.nan_check == SyncMode::kEager) {
    vote = c_.ledger.device_scalar(Site::kRerunDecision, rerun.host_flag() ? 1.0 : 0.0, f32());  // torch.tensor([b])
  } else {
    vote = rerun.decision_tensor();  // banked verdicts ride the same all-reduce (a new tensor)
  }
  if (Comm* group = rerun_vote_group(c_.arm.mutated(), c_.groups)) group->all_reduce(vote, ReduceOp::kSum);  // _reduce_any
  return rerun.decide(c_.read_scalar(Site::kRerunDecision, vote));
}

bool UpdateSuccessfulSite::agree(const at::Tensor& local, bool has_scaler) {
  ScopedSite scope(site_name(Site::kUpdateSuccessful));
  at::Tensor t;
  if (c_.arm.device_scalars == SyncMode::kEager) {
    // Megatron: optimizer.step returned a Python bool (found_inf read with item() with a scaler), then
    // torch.tensor([update_successful]) (pageable H2D), MIN over TP x PP, then item().
    double host = has_scaler ? c_.read_scalar(Site::kUpdateSuccessful, local) : 1.0;
    t = c_.ledger.device_scalar(Site::kUpdateSuccessful, host, f32());
  } else {
    t = local.to(at::kFloat).reshape({1}).clone();
  }
  c_.groups.mp->all_reduce(t, ReduceOp::kMin);
  return c_.read_scalar(Site::kUpdateSuccessful, t) != 0.0;
}

ExitVoteSite::ExitVoteSite(const SiteContext& c) : c_(c) { start_time_ = clock_.now(); }

bool ExitVoteSite::local_flag(int64_t iteration) {
  if (!on()) return false;
  double minutes;
  if (c_.config.simulated_minutes_per_iteration > 0) {
    double factor = c_.rank == c_.config.fast_clock_rank ? c_.config.fast_clock_factor : 1.0;
    minutes = static_cast<double>(iteration) * c_.config.simulated_minutes_per_iteration * factor;
  } else {
    minutes = (clock_.now() - start_time_) / 60.0;
  }
  return minutes > c_.config.exit_duration_in_mins;
}

bool ExitVoteSite::vote(int64_t iteration, bool log_point, bool read_vote) {
  ScopedSite scope(site_name(Site::kExitVote));
  if (!on()) return false;
  if (c_.arm.exit_vote == SyncMode::kDeferred) return log_point && read_vote;
  at::Tensor done = c_.ledger.device_scalar(Site::kExitVote, local_flag(iteration) ? 1.0 : 0.0, f32());
  if (Comm* group = exit_vote_group(c_.arm.mutated(), c_.groups)) group->all_reduce(done, ReduceOp::kMax);
  return c_.read_scalar(Site::kExitVote, done) != 0.0;
}

}  // namespace loopgate
