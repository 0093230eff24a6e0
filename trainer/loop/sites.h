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
#include "trainer/loop/config.h"
#include "trainer/loop/rerun.h"
#include "trainer/optim/adam.h"
#include "trainer/parallel/comm.h"

namespace loopgate {


// Values for one batched read: device scalars (or host doubles) packed into one tensor, MAX-reduced over the
// world in one collective, read once. Absent values are -inf, so the MAX picks the rank that has one; a MIN
// rides as the MAX of its negation; a NaN on any rank stays NaN (a flag rides beside it: NCCL's max drops NaN).
// Host values are packed on the host and reach the device in pinned, non-blocking copies (no kernel, no sync): the
// batched read must not launch more than the eager reads it replaces. Values keep the order they were added in,
// on every rank — a key one rank holds on the device and another holds as absent (a host -inf) must meet itself
// in the MAX.
class Bundle {
 public:
  void add(const std::string& key, const at::Tensor& value);  // any dtype, one element
  void add_all(const std::string& prefix, const at::Tensor& values);  // n elements, keys prefix@0 .. prefix@n-1
  void add_host(const std::string& key, double value);
  void add_absent(const std::string& key);
  bool empty() const { return keys_.empty(); }
  // One all-reduce (MAX over `world`) unless `reduce` is false, then one read at `site`.
  std::map<std::string, double> resolve(Ledger& ledger, Site site, Comm& world, bool reduce = true);
  at::Tensor packed(Ledger& ledger) const;  // [n] double on the run's device, in the order added
  const std::vector<std::string>& keys() const { return keys_; }

 private:
  struct Part {
    at::Tensor device;          // device values (double), or
    std::vector<double> host;   // a run of host values
  };
  std::vector<std::string> keys_;
  std::vector<Part> parts_;
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
  bool exit_vote = false;
  // zerosync, at a log point: per iteration of the window since the previous log point (oldest first), whether
  // its step was skipped and whether the rerun vote found a fault; and whether an abort is due, from which fault.
  std::vector<bool> window_skipped, window_fault;
  bool abort = false;
  int64_t fault_iteration = 0;  // 1-based  // the duration vote if it rode this log point's batched read
};

class Sites {
 public:
  // `instrumented` false (`ab --arms A,A:bare`): a deferred arm's level-1 timers record no events (the interval
  // timer stays: the log line's elapsed time is Megatron's level 0). An eager arm's level-1 timers stay either way:
  // their synchronizes are Megatron's Timer.start/stop, the loop under test, not loopgate's bookkeeping.
  Sites(const Arm& arm, const RunConfig& config, Ledger& ledger, ProcessGroups& groups, int world_rank,
        bool instrumented = true);
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

  // ---- zerosync: the iteration's decisions stay on the device; the host reads at log points only ----
  // A zerosync segment begins: the LR table (the scheduler's LR after k successful steps, k = 0..train_iters, as
  // the float32 the step uses), the successful steps so far, and the 0-based iteration it starts at.
  void start_on_device(const std::vector<double>& lr_table, int64_t steps_done, int64_t next_iteration);
  // The rerun vote over the world (SUM of every rank's banked verdicts), never read: true masks this step, and
  // every later one once an abort is due (the host learns it at the next log point).
  // `late`: this step is masked only by an earlier abort (a fault masks the next one): a policy of a planted defect.
  at::Tensor device_vote(RerunStateMachine& rerun, bool late = false);
  const at::Tensor& device_lr() const { return lr_now_; }  // float32 [1]: the LR the next step uses
  // After the step, in place (a CUDA graph replays these kernels): update_successful over TP x PP, the step
  // count and the next LR, the log window's counters, loss sum and per-iteration skip / fault flags, the abort.
  void device_after_step(const at::Tensor& local_update_successful, const at::Tensor& loss);
  int64_t read_steps_done();  // a zerosync segment ends (one read: the host's scheduler takes over)

  // ---- commit 4: timers ----
  void timer_start(const std::string& name);
  void timer_stop(const std::string& name);
  void start_interval_timer();
  // Drains every timer (stop of the timer set): every interval ever reported, in report order, and counters.
  TimerSummary finish();

  // ---- commits 2, 3, 5: training_log and the batched read ----
  LogOutputs training_log(const LogInputs& in);
  // zerosync's: the accumulation happened on the device (device_after_step); at a log point the counters, the LR,
  // the window's skip and fault flags and the abort ride the one batched read.
  LogOutputs training_log_on_device(const LogInputs& in);
  // The device tensors a replayed iteration reads and writes in place (--cuda-graph iteration; capture.h).
  GraphState device_state() const;
  // checkpoint_and_decide_exit: --exit-duration-in-mins vote. Eager: every iteration. Deferred: from `log`.
  bool exit_vote(int64_t iteration, bool log_point, const LogOutputs& log);

 private:
  bool exit_flag_local(int64_t iteration) const;
  Timer* level1_timer(const std::string& name);  // null: left out (not instrumented); unknown names fail
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
  double elapsed_ms_per_iteration(std::map<std::string, double>& v) const;
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
  // zerosync's device state: persistent tensors updated in place only (graph replays write the same storage).
  // log_state_ (float64, read whole at a log point): [code of slot 0 .. k-1, aborted]; slot s holds fault +
  // skipped / 2 + non-finite loss / 4 of the window's s-th iteration, from which the host counts advanced, skipped
  // and NaN iterations and finds the first fault. codes_ and aborted_ are views into it.
  at::Tensor lr_table_, lr_now_, steps_done_, slot_, fault_now_;
  at::Tensor log_state_, codes_, aborted_;
  int64_t window_begin_ = 0;  // 0-based first iteration of the window since the last log point
};

}  // namespace loopgate
