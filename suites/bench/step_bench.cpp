// The step-time benchmarks (step_bench.h).
#include "suites/bench/step_bench.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <mpi.h>

#include <cstdio>
#include <memory>

#include "fixtures/fixtures.h"
#include "suites/bench/idle_source.h"
#include "trainer/common/device.h"
#include "trainer/measure/op_counter.h"
#include "trainer/timers/timers.h"
#include "trainer/loop/arms.h"
#if LOOPGATE_HAS_CUDA
#include "trainer/measure/cupti_counter.h"
#include "trainer/timers/device_cuda.h"
#endif

namespace loopgate::bench {
namespace {

double max_over_ranks(double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return v;
}

bool on_every_rank(bool v) {
  int all = v ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

// ---- the window clock ----

// One window on this rank. GPU: the loop's CUDA event source (events on the current stream), read after an event
// synchronize — the harness's own sync, between windows, never inside one. CPU: the host clock (the device is the
// host: work is done when the call returns). Every rank starts at a barrier, so the ranks' windows cover the
// same work; their times are MAX-reduced by the caller.
class WindowClock {
 public:
  WindowClock() {
#if LOOPGATE_HAS_CUDA
    if (run_device().is_cuda()) events_ = make_cuda_event_source();
#endif
    if (!events_) events_ = std::make_unique<ClockEventSource>(&clock_, /*auto_complete=*/true);
  }
  void start() {
    MPI_Barrier(MPI_COMM_WORLD);
    start_ = events_->record();
  }
  double stop_seconds() {
    const int64_t stop = events_->record();
    events_->synchronize(stop);
    return events_->seconds_between(start_, stop);
  }

 private:
  SteadyClock clock_;
  std::unique_ptr<EventSource> events_;
  int64_t start_ = 0;
};

// ---- counters ----

// Ledger reads per iteration on this rank over Megatron iterations [first, last] of a finished run.
double syncs_per_iteration(const RunResult& r, int rank, int64_t first, int64_t last) {
  int64_t reads = 0;
  for (const IterationRecord& rec : r.trace.records)
    if (rec.rank == rank && rec.iteration >= first && rec.iteration <= last)
      for (const auto& [site, n] : rec.reads_per_site) reads += n;
  return static_cast<double>(reads) / static_cast<double>(last - first + 1);
}

struct LaunchCount {
  double per_iteration = 0.0;
  std::string source;
};

// Launches per iteration over one more window of `session`, untimed (the counters' callbacks cost time). GPU:
// CUPTI's kernel launches + copies when it subscribes on every rank; otherwise (and on CPU) the operators LibTorch
// dispatches (OpCounter, the CPU launch proxy).
LaunchCount count_launch_window(TrainSession& session, const Arm& arm, int64_t window) {
#if LOOPGATE_HAS_CUDA
  std::string cupti_why;
  if (run_device().is_cuda()) {
    CuptiSyncCounter& c = CuptiSyncCounter::instance();
    c.reset();
    const bool started = c.start();
    if (on_every_rank(started)) {
      session.run(arm, window);
      c.stop();
      int64_t launches = 0;
      for (const auto& [iteration, sites] : c.table())
        for (const auto& [site, tally] : sites) launches += tally.kernel_launches + tally.copies;
      return {static_cast<double>(launches) / static_cast<double>(window), "cupti kernel launches + copies"};
    }
    if (started) c.stop();
    cupti_why = started ? "CUPTI unavailable on another rank" : c.why();
  }
#endif
  OpCounter& ops = OpCounter::instance();
  ops.reset();
  ops.set_enabled(true);
  session.run(arm, window);
  ops.set_enabled(false);
  int64_t launches = 0;
  for (const auto& [iteration, sites] : ops.table())
    for (const auto& [site, n] : sites) launches += n;
  std::string source = "operators dispatched (CPU launch proxy)";
#if LOOPGATE_HAS_CUDA
  if (!cupti_why.empty()) source += "; CUPTI: " + cupti_why;
#endif
  return {static_cast<double>(launches) / static_cast<double>(window), source};
}

// ---- the benchmark ----

struct StepCase {
  RunConfig config;  // as it runs on this rank (make_run_groups: the rank's device)
  std::shared_ptr<RunGroups> groups;
  const Arm* arm;
  int64_t window, warmup_windows;
  int rank;
};

void run_step_case(benchmark::State& state, const StepCase& c) {
  ProcessGroups groups = c.groups->groups;  // a session's own copy, as loopgate ab's phases make
  TrainSession session(c.config, *c.arm, groups, c.rank);
  session.run(*c.arm, c.warmup_windows * c.window);
  WindowClock clock;
  const int64_t first = session.iterations_done() + 1;
  for (auto _ : state) {
    clock.start();
    session.run(*c.arm, c.window);
    const double seconds = max_over_ranks(clock.stop_seconds());
    state.SetIterationTime(seconds / static_cast<double>(c.window));
  }
  const int64_t last = session.iterations_done();

  // The counted window: launches, and idle_pct when a profile source is installed.
  IdleSource* idle = idle_source();
  if (idle) idle->begin_window();
  const LaunchCount launches = count_launch_window(session, *c.arm, c.window);
  std::optional<double> idle_pct = idle ? idle->end_window() : std::nullopt;
  const RunResult r = session.finish();
  LG_CHECK(last - first + 1 == static_cast<int64_t>(state.iterations()) * c.window,
           "the run ended early: iterations {}..{} for {} windows of {}", first, last, state.iterations(), c.window);

  state.counters["syncs/iter"] = max_over_ranks(syncs_per_iteration(r, c.rank, first, last));
  state.counters["launches/iter"] = max_over_ranks(launches.per_iteration);
  state.counters["window_iters"] = static_cast<double>(c.window);
  if (on_every_rank(idle_pct.has_value())) state.counters["idle_pct"] = max_over_ranks(*idle_pct);
  state.SetLabel(fmt::format("{}; launches: {}", shape_label(c.config), launches.source));
}

}  // namespace

void register_step_benchmarks(const std::vector<BenchCase>& cases, const BenchFlags& flags, int rank) {
  for (const BenchCase& bc : cases) {
    auto groups = std::make_shared<RunGroups>(make_run_groups(bc.run.config, MPI_COMM_WORLD));
    set_run_device(groups->config.model.device);
    for (const std::string& arm_name : flags.arms) {
      StepCase sc{groups->config, groups, &find_arm(arm_name), bc.window, flags.warmup_windows, rank};
      const std::string name = fmt::format("step/{}/{}/{}", bc.run.config.fixture, bc.config, arm_name);
      benchmark::RegisterBenchmark(name.c_str(),
                                   [sc](benchmark::State& state) {
                                     // An exception must not unwind through Google Benchmark, nor leave the
                                     // other ranks waiting in a collective.
                                     try {
                                       run_step_case(state, sc);
                                     } catch (const std::exception& e) {
                                       std::fprintf(stderr, "loopgate_bench: rank %d: %s\n", sc.rank, e.what());
                                       std::fflush(stderr);
                                       MPI_Abort(MPI_COMM_WORLD, 1);
                                     }
                                   })
          ->UseManualTime()
          ->Iterations(flags.windows)  // fixed: adaptive counts could differ across ranks and hang a collective
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace loopgate::bench
