// The bookkeeping microbenchmarks (bookkeeping.h). Host code only, on CPU and GPU builds alike; on a GPU run
// (--device cuda) the timers record CUDA events, as the deferred arms' level-1 timers do.
#include "suites/bench/bookkeeping.h"

#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "trainer/common/device.h"
#include "trainer/measure/ledger.h"
#include "trainer/timers/timers.h"
#if LOOPGATE_HAS_CUDA
#include "trainer/timers/device_cuda.h"
#endif

namespace loopgate::bench {
namespace {

// One iteration's ledger work: what Ledger::read / device_scalar / record_sync add around their device work.
void ledger_iteration(benchmark::State& state, bool counting, int reads) {
  Ledger ledger;
  ledger.set_counting(counting);
  int64_t iteration = 0;
  for (auto _ : state) {
    ledger.begin_iteration(iteration);
    for (int i = 0; i < reads; ++i) ledger.record_sync(all_sites()[static_cast<size_t>(i % kNumSites)]);
    benchmark::DoNotOptimize(ledger.counts_by_name(iteration));  // the Trace record's per-site counts
    if (++iteration % 10000 == 0) {  // a 10,000-iteration run's records, then a fresh run: memory stays bounded
      state.PauseTiming();
      ledger.reset();
      state.ResumeTiming();
    }
  }
  state.counters["reads/iter"] = reads;
}

std::unique_ptr<EventSource> run_event_source(SteadyClock& clock) {
#if LOOPGATE_HAS_CUDA
  if (run_device().is_cuda()) return make_cuda_event_source();
#endif
  return std::make_unique<ClockEventSource>(&clock, /*auto_complete=*/true);
}

// One iteration's level-1 timer events: forward-backward and optimizer, start and stop (four events); every 20
// iterations a log point reports both (elapsed + take_reported), as LoopTimers does. Every 10,000 iterations a fresh
// event source and timers (untimed): a source keeps each event it recorded, as over one run.
struct Level1 {
  SteadyClock clock;
  std::unique_ptr<EventSource> events = run_event_source(clock);
  EventTimer fb{"forward-backward", events.get()}, opt{"optimizer", events.get()};
};

void level1_timers(benchmark::State& state) {
  auto t = std::make_unique<Level1>();
  int64_t iteration = 0;
  for (auto _ : state) {
    t->fb.start();
    t->fb.stop();
    t->opt.start();
    t->opt.stop();
    if (++iteration % 20 == 0) {
      for (EventTimer* timer : {&t->fb, &t->opt}) {
        benchmark::DoNotOptimize(timer->elapsed(/*reset=*/true));
        benchmark::DoNotOptimize(timer->take_reported());
      }
    }
    if (iteration % 10000 == 0) {
      state.PauseTiming();
      for (EventTimer* timer : {&t->fb, &t->opt}) timer->drain();
      t = std::make_unique<Level1>();
      state.ResumeTiming();
    }
  }
  state.counters["events/iter"] = 4;
}

}  // namespace

void register_bookkeeping_benchmarks(int reads) {
  for (bool counting : {true, false}) {
    const std::string name = std::string("bookkeeping/ledger_iteration/") + (counting ? "counting" : "off");
    benchmark::RegisterBenchmark(name.c_str(), [counting, reads](benchmark::State& s) {
      ledger_iteration(s, counting, reads);
    })->Unit(benchmark::kNanosecond);
  }
  benchmark::RegisterBenchmark("bookkeeping/level1_timers", level1_timers)->Unit(benchmark::kNanosecond);
}

}  // namespace loopgate::bench
