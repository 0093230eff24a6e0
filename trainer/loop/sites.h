// The host-sync sites every protocol family shares, each a small type with its eager form (baseline: read now)
// and its deferred form (sync-free: keep on device, read later) side by side; the arm's SyncMode per site picks
// one. Every host read goes through the Ledger, tagged with its site.
// Megatron origins: rerun_state_machine.py validate_result / _reduce_any; common_utils.py reduce_max_stat,
// logical_and; training.py checkpoint_and_decide_exit.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "trainer/measure/ledger.h"
#include "trainer/timers/timers.h"
#include "trainer/loop/arms.h"
#include "trainer/loop/config.h"
#include "trainer/loop/rerun.h"
#include "trainer/parallel/comm.h"

namespace loopgate {

// What every site works with: the arm's choices, the run, the ledger, the groups and this rank.
struct SiteContext {
  const Arm& arm;
  const RunConfig& config;
  Ledger& ledger;
  ProcessGroups& groups;
  int rank;

  double read_scalar(Site site, const at::Tensor& t) const { return ledger.read(site, t).at(0); }
  bool last_rank() const { return rank == groups.world->size() - 1; }  // Megatron's print_rank_last
};

// Megatron reduce_max_stat_across_model_parallel_group. On a device stat: read (to build the host float), then
// as below. On a host float: torch.tensor([x], float32) (H2D), MAX over TP x PP, `item() == -1` and `item()`.
double reduce_max_stat_eager(const SiteContext& c, Site site, const at::Tensor& stat);
double reduce_max_stat_host(const SiteContext& c, Site site, double local);
// A count as reduce_max_stat's float32 tensor leaves it (a deferred read carries the exact count; see sites.cpp).
double as_reduce_max_stat(double x);

// ---- commit 1: validate_result on each microbatch loss and each grad bucket ----
class NanCheckSite {
 public:
  explicit NanCheckSite(const SiteContext& c) : c_(c) {}
  void check(RerunStateMachine& rerun, Site site, const at::Tensor& value);

 private:
  SiteContext c_;
};

// ---- the rerun decision at loop exit (_reduce_any): world SUM of the banked flags, one read ----
class RerunDecisionSite {
 public:
  explicit RerunDecisionSite(const SiteContext& c) : c_(c) {}
  Decision decide(RerunStateMachine& rerun);

 private:
  SiteContext c_;
};

// ---- update_successful: logical_and over the model-parallel group (TP x PP), one read ----
class UpdateSuccessfulSite {
 public:
  explicit UpdateSuccessfulSite(const SiteContext& c) : c_(c) {}
  bool agree(const at::Tensor& local_update_successful, bool has_scaler);

 private:
  SiteContext c_;
};

// ---- commit 5: checkpoint_and_decide_exit's --exit-duration-in-mins vote ----
class ExitVoteSite {
 public:
  explicit ExitVoteSite(const SiteContext& c);
  bool on() const { return c_.config.exit_duration_in_mins > 0; }
  bool local_flag(int64_t iteration);  // this rank's own clock says the time is up
  // Eager: a world MAX every iteration, read. Deferred: what the log point's batched read carried (`read_vote`).
  bool vote(int64_t iteration, bool log_point, bool read_vote);

 private:
  SiteContext c_;
  SteadyClock clock_;
  double start_time_ = 0.0;
};

}  // namespace loopgate
