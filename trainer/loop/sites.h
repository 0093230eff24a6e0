// The host-sync sites of the training loop, each with an eager form (baseline: read now) and a deferred form
// (sync-free: keep on device, read later in one batched read). The loop calls the same verbs for every arm;
// the arm's SyncMode per site picks the form. Every host read goes through the Ledger, tagged with its site.
// Megatron origins: rerun_state_machine.py validate_result/_reduce_any; common_utils.py reduce_max_stat,
// logical_and, calc_params_l2_norm; training.py training_log, checkpoint_and_decide_exit; timers.py.
#pragma once
#include <ATen/core/Tensor.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainer/instrument/ledger.h"
#include "trainer/instrument/timers.h"
#include "trainer/loop/arms.h"
#include "trainer/loop/rerun.h"
#include "trainer/optim/adam.h"
#include "trainer/parallel/comm.h"

namespace loopgate {

struct RunConfig;

// Values for one batched read: device scalars (or host doubles) packed into one tensor, MAX-reduced over the
// world in one collective, read once. Absent values are -inf, so the MAX picks the rank that has one; a MIN
// rides as the MAX of its negation; a NaN on any rank stays NaN (a flag rides beside it: NCCL's max drops NaN).
// Host values are packed on the host and reach the device in one pinned, non-blocking copy (no kernel, no
// sync): the batched read must not launch more than the eager reads it replaces.
class Bundle {
 public:
  void add(const std::string& key, const at::Tensor& value);  // any dtype, one element
  void add_host(const std::string& key, double value);
  void add_absent(const std::string& key);
  bool empty() const { return device_keys_.empty() && host_keys_.empty(); }
  // One all-reduce (MAX over `world`) unless `reduce` is false, then one read at `site`.
  std::map<std::string, double> resolve(Ledger& ledger, Site site, Comm& world, bool reduce = true);
  at::Tensor packed(Ledger& ledger) const;  // [n] double on the run's device: device values, then host values
  std::vector<std::string> keys() const;    // in packed() order

 private:
  std::vector<std::string> device_keys_, host_keys_;
  std::vector<at::Tensor> device_values_;
  std::vector<double> host_values_;
};

// What the loop hands to training_log each iteration (Megatron's arguments).
struct LogInputs {
  at::Tensor loss;         // [1] fp32 global-batch lm loss (last stage), undefined elsewhere
  at::Tensor grad_norm;    // [1] fp32, -1 when the step was skipped; undefined when no step ran
  at::Tensor num_zeros;    // [1] int64
  at::Tensor loss_scale;   // [1] fp32
  at::Tensor params_norm;  // [1] fp32 (computed every iteration with --log-params-norm, as Megatron)
  double learning_rate = 0.0;
  bool skipped = false;
  int64_t iteration = 0, train_iters = 0, consumed_samples = 0, global_batch = 0;
  bool log_point = false;
  // onesync: the values were already read in the iteration's one read.
  const std::map<std::string, double>* pre_read = nullptr;
};

// The iterations (1-based, inclusive) a reported interval-time value covers.
struct TimerWindow {
  int64_t first = 0, last = 0;
};

// What the timers did over a run (Sites::finish).
struct TimerSummary {
  std::vector<TimerInterval> intervals;  // every interval reported, in report order
  double interval_total = 0.0;           // sum of the interval-time intervals
  int64_t first_report_waits = 0;        // deferred: the first report's wait (0 or 1)
  int64_t lag_waits = 0;                 // deferred: later reports that waited (device > 1 window behind)
  int64_t max_pending_events = 0;        // the most events any EventTimer held pending (bound 1024); 0 eager
  std::vector<int> event_lags;           // RunConfig::event_lag: the simulated lag at each log point
};

struct LogOutputs {
  std::optional<std::string> line;  // printed on the last rank only (print_rank_last)
  double lm_loss = NAN, grad_norm = NAN, num_zeros = NAN, params_norm = NAN, learning_rate = NAN, loss_scale = NAN;
  bool nan_iteration = false;
  std::vector<TimerInterval> timer_intervals;
  TimerWindow timer_window;  // the iterations the logged elapsed time covers
  bool exit_vote = false;  // the duration vote if it rode this log point's batched read
};

class Sites {
 public:
  Sites(const Arm& arm, const RunConfig& config, Ledger& ledger, ProcessGroups& groups, int world_rank);
  ~Sites();

  // ---- commit 1: validate_result on each microbatch loss and each grad bucket ----
  void nan_check(RerunStateMachine& rerun, Site site, const at::Tensor& value);
  // The rerun decision at loop exit (_reduce_any): world SUM of the banked flags, one read.
  Decision rerun_decision(RerunStateMachine& rerun);

  // ---- update_successful (logical_and over the model-parallel group) ----
  bool update_successful(const at::Tensor& local_update_successful, bool has_scaler);

  // ---- onesync: the one collective (before optimizer.step) and the one read (after it) ----
  at::Tensor one_read_vote(RerunStateMachine& rerun, bool log_point, int64_t iteration);
  std::map<std::string, double> one_read_resolve(const at::Tensor& update_successful, const LogInputs& in);

  // ---- commit 4: timers ----
  void timer_start(const std::string& name);
  void timer_stop(const std::string& name);
  void start_interval_timer();
  // Drains every timer (stop of the timer set): every interval ever reported, in report order, and counters.
  TimerSummary finish();

  // ---- commits 2, 3, 5: training_log and the batched read ----
  LogOutputs training_log(const LogInputs& in);
  // checkpoint_and_decide_exit: --exit-duration-in-mins vote. Eager: every iteration. Deferred: from `log`.
  bool exit_vote(int64_t iteration, bool log_point, const LogOutputs& log);

 private:
  bool exit_flag_local(int64_t iteration) const;
  double read_scalar(Site site, const at::Tensor& t);
  double reduce_max_stat_eager(Site site, const at::Tensor& stat);  // read + H2D + MAX over mp + 2 reads
  double reduce_max_stat_host(Site site, double local);
  void add_timer_values(Bundle& b, int64_t iteration);
  void publish_timer_report(std::vector<TimerInterval>& now);
  std::map<std::string, double> timer_values_eager(int64_t iteration);

  const Arm& arm_;
  const RunConfig& config_;
  Ledger& ledger_;
  ProcessGroups& groups_;
  int rank_;
  SteadyClock clock_;
  double start_time_ = 0.0;
  std::unique_ptr<ClockEventSource> events_;
  std::unique_ptr<EventSource> device_events_;  // CUDA events on the GPU tier (timers use them when set)
  EventSource* timer_events_ = nullptr;         // the one the deferred timers record on
  WindowLagEventSource* lag_ = nullptr;         // events_, when RunConfig::event_lag simulates a lagging device
  int64_t window_start_ = 1;                    // first iteration of the timers' current window
  std::deque<TimerWindow> closed_windows_;      // deferred: closed, not yet reported
  TimerWindow shown_window_;                    // what this log point's time covers
  std::map<std::string, std::unique_ptr<Timer>> timers_;
  std::vector<TimerInterval> reported_;
  size_t reported_mark_ = 0;  // reported_[mark..] were reported since the last log point
  std::vector<std::string> one_read_keys_;
  at::Tensor one_read_packed_;
  // training_log accumulators (Megatron's total_loss_dict)
  at::Tensor total_loss_;      // eager/deferred: [1] fp32 on device
  at::Tensor zero_;            // deferred: the accumulator's seed, made once (never written)
  float total_loss_host_ = 0;  // onesync: the same fp32 sum, accumulated on the host from the one read
  bool has_total_loss_ = false;
  int64_t advanced_ = 0, skipped_ = 0, nan_ = 0;
  at::Tensor nan_count_;        // deferred nan probe of skipped iterations
  int64_t stale_grad_norm_bits_ = 0;
  double last_grad_norm_ = NAN;
};

}  // namespace loopgate
